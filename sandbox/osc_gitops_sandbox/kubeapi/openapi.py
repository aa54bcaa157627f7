"""OpenAPI v3 documents of the Kubernetes API emulator, and the field validation they promise.

Why: ``kubectl apply``/``create``/``replace`` validate by default (``--validate=strict``).
kubectl 1.32 asks the OpenAPI v3 document of the object's group/version whether its PATCH
operation takes the ``fieldValidation`` query parameter (cli-runtime's
``queryParamVerifierV3``); if so it leaves validation to the server and sends
``fieldValidation=Strict``, otherwise it downloads ``/openapi/v2`` for client-side validation
and fails when there is none. So the emulator serves ``/openapi/v3`` (the index of group/versions
with their ``serverRelativeURL``) and one document per group/version, and validates as the
parameter says (:func:`unknown_fields`).

Minimal but truthful: every path and verb listed is served; each kind's schema declares
``apiVersion``, ``kind``, the full ``ObjectMeta`` and ``spec``/``status`` as objects whose
contents are not checked (``x-kubernetes-preserve-unknown-fields``), which is exactly what the
emulator validates: an unknown top-level or ``metadata`` field is refused with
``fieldValidation=Strict`` and warned about with ``Warn`` (without the parameter nothing is
checked; nothing is pruned). PATCH lists JSON patch and merge patch only: the emulator applies a
strategic merge patch as a merge patch (lists replaced whole), so it does not advertise one, and
kubectl computes the patch it sends from its own built-in types, as it does for any server whose
OpenAPI lacks it. ``/openapi/v2`` (protobuf only) is not served: kubectl 1.32 only falls back to
it when v3 does not offer server-side validation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from osc_gitops_sandbox.kubeapi.resources import ResourceType
from osc_gitops_sandbox.kubeapi.status import ApiError

__all__ = ["document", "gv_path", "index", "schema_name", "unknown_fields"]

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
OBJECT_META = f"{META}.ObjectMeta"
STRING = {"type": "string"}
OPAQUE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
SCHEMAS: dict[str, dict[str, Any]] = {
    OBJECT_META: {
        "description": "Standard object's metadata.",
        "type": "object",
        "properties": {
            **{k: STRING for k in ("name", "generateName", "namespace", "selfLink", "uid",
                                   "resourceVersion")},
            "generation": {"type": "integer", "format": "int64"},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "labels": {"type": "object", "additionalProperties": STRING},
            "annotations": {"type": "object", "additionalProperties": STRING},
            "finalizers": {"type": "array", "items": STRING},
            "ownerReferences": {"type": "array",
                                "items": {"$ref": f"#/components/schemas/{META}.OwnerReference"}},
            "managedFields": {"type": "array", "items": OPAQUE},
        },
    },
    f"{META}.OwnerReference": {
        "type": "object",
        "required": ["apiVersion", "kind", "name", "uid"],
        "properties": {
            **{k: STRING for k in ("apiVersion", "kind", "name", "uid")},
            "controller": {"type": "boolean"},
            "blockOwnerDeletion": {"type": "boolean"},
        },
    },
}  # fmt: skip
TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")


def gv_path(group: str, version: str) -> str:
    """The group/version's key in ``/openapi/v3``: ``api/v1``, ``apis/kubevirt.io/v1``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(rt: ResourceType) -> str:
    """The schema's name as the real server spells it: ``io.k8s.api.core.v1.Pod`` for built-in
    kinds, the reversed group for custom resources (``io.kubevirt.v1.VirtualMachine``)."""
    if not rt.group:
        return f"io.k8s.api.core.{rt.version}.{rt.kind}"
    if rt.group.endswith(".k8s.io"):
        return f"io.k8s.api.{rt.group.split('.')[0]}.{rt.version}.{rt.kind}"
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


def _kind_schema(rt: ResourceType) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": STRING,
            "kind": STRING,
            "metadata": {"allOf": [{"$ref": f"#/components/schemas/{OBJECT_META}"}],
                         "default": {}},
            **dict.fromkeys(rt.body, OPAQUE),
        },
        "x-kubernetes-group-version-kind": [
            {"group": rt.group, "kind": rt.kind, "version": rt.version}
        ],
    }  # fmt: skip


def _query(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
            for n in names]  # fmt: skip


def _operation(
    rt: ResourceType, action: str, op_id: str, *, body: Sequence[str] = (),
    params: Sequence[str] = (), list_of: bool = False,
) -> dict[str, Any]:  # fmt: skip
    ref = {"$ref": f"#/components/schemas/{schema_name(rt)}"}
    result = {"type": "object", "properties": {"items": {"type": "array", "items": ref}}}
    operation: dict[str, Any] = {
        "operationId": op_id,
        "parameters": _query(*params),
        "responses": {"200": {"description": "OK", "content": {
            "application/json": {"schema": result if list_of else ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": rt.group, "kind": rt.kind, "version": rt.version},
    }  # fmt: skip
    if body:
        schema = ref if action in ("post", "put") else {"type": "object"}
        operation["requestBody"] = {"content": {c: {"schema": schema} for c in body}}
    return operation


def _paths(rt: ResourceType) -> dict[str, dict[str, Any]]:
    prefix = "/" + gv_path(rt.group, rt.version)
    scope = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else (
        f"{prefix}/{rt.plural}")  # fmt: skip
    name = f"{rt.kind}{'Namespaced' if rt.namespaced else ''}"
    writes = ("dryRun", "fieldValidation")
    reads = ("labelSelector", "fieldSelector", "limit", "continue", "watch", "resourceVersion",
             "timeoutSeconds", "allowWatchBookmarks")  # fmt: skip
    json_body = ("application/json", "application/yaml")
    patches = ("application/json-patch+json", "application/merge-patch+json")
    path_params = [{"name": "name", "in": "path", "required": True, "schema": STRING}]
    if rt.namespaced:
        path_params.append({"name": "namespace", "in": "path", "required": True, "schema": STRING})
    paths: dict[str, dict[str, Any]] = {
        scope: {
            "get": _operation(rt, "list", f"list{name}", params=reads, list_of=True),
            "post": _operation(rt, "post", f"create{name}", body=json_body, params=writes),
            "parameters": path_params[1:],
        },
        f"{scope}/{{name}}": {
            "get": _operation(rt, "get", f"read{name}"),
            "put": _operation(rt, "put", f"replace{name}", body=json_body, params=writes),
            "patch": _operation(rt, "patch", f"patch{name}", body=patches, params=writes),
            "delete": _operation(rt, "delete", f"delete{name}", params=("dryRun",)),
            "parameters": path_params,
        },
    }
    if rt.namespaced:
        paths[f"{prefix}/{rt.plural}"] = {
            "get": _operation(rt, "list", f"list{rt.kind}ForAllNamespaces", params=reads,
                              list_of=True)}  # fmt: skip
    return paths


def document(types: Sequence[ResourceType], group: str, version: str) -> dict[str, Any] | None:
    """The OpenAPI v3 document of ``group/version`` (``None`` when no kind is served there)."""
    served = [rt for rt in types if (rt.group, rt.version) == (group, version)]
    if not served:
        return None
    paths: dict[str, Any] = {}
    schemas = dict(SCHEMAS)
    for rt in served:
        paths.update(_paths(rt))
        schemas[schema_name(rt)] = _kind_schema(rt)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (osc-gitops sandbox API emulator)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def index(types: Sequence[ResourceType]) -> dict[str, Any]:
    """``/openapi/v3``: every served group/version and where its document is."""
    paths = {}
    for group, version in dict.fromkeys((rt.group, rt.version) for rt in types):
        key = gv_path(group, version)
        doc = json.dumps(document(types, group, version), sort_keys=True).encode()
        digest = hashlib.sha512(doc).hexdigest().upper()
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def unknown_fields(obj: Mapping[str, Any], rt: ResourceType | None = None) -> list[str]:
    """The fields of ``obj`` its schema does not declare, as the real server names them
    (``metadata.labelz``): top-level fields (``rt.body``, default ``spec`` and ``status``) and
    ``metadata``'s (what is inside the body fields is not checked, see the module docstring)."""
    top = (*TOP_LEVEL[:3], *(rt.body if rt is not None else TOP_LEVEL[3:]))
    unknown = [key for key in obj if key not in top]
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        known = SCHEMAS[OBJECT_META]["properties"]
        unknown += [f"metadata.{key}" for key in meta if key not in known]
        owner_fields = SCHEMAS[f"{META}.OwnerReference"]["properties"]
        for i, ref in enumerate(meta.get("ownerReferences") or []):
            if isinstance(ref, Mapping):
                unknown += [f"metadata.ownerReferences[{i}].{k}" for k in ref
                            if k not in owner_fields]  # fmt: skip
    return unknown


def check_fields(rt: ResourceType, obj: Mapping[str, Any], directive: str | None) -> list[str]:
    """Apply ``fieldValidation`` (``Strict``, ``Warn``, ``Ignore``; absent: no check) to
    ``obj``: raise the real server's 400 for ``Strict``, return the warnings for ``Warn``."""
    if directive in (None, "", "Ignore"):
        return []
    if directive not in ("Strict", "Warn"):
        raise ApiError(
            400,
            f"fieldValidation: Invalid value: {directive!r}: fieldValidation must be one of "
            '"Ignore", "Warn", or "Strict"',
        )
    unknown = unknown_fields(obj, rt)
    if unknown and directive == "Strict":
        fields = ", ".join(f'unknown field "{f}"' for f in unknown)
        raise ApiError(
            400,
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict '
            f"decoding error: {fields}",
        )
    return [f'unknown field "{f}"' for f in unknown]
