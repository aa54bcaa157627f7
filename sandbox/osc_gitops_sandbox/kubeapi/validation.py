"""What the Kubernetes API emulator validates in an object it stores: its name and labels.

No admission and no defaulting beyond metadata (see :mod:`osc_gitops_sandbox.kubeapi.server`).
"""

from __future__ import annotations

from typing import Any

from osc_gitops_sandbox.kubeapi.resources import ResourceType
from osc_gitops_sandbox.kubeapi.selectors import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    label_value_errors,
)
from osc_gitops_sandbox.kubeapi.status import ApiError

__all__ = ["validate_metadata"]


def validate_metadata(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Check ``metadata.name`` and ``metadata.labels`` as the real server does (422 with
    ``causes`` otherwise)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes: list[dict[str, str]] = []
    if not name:
        causes.append(
            {
                "reason": "FieldValueRequired",
                "message": "Required value: name or generateName is required",
                "field": "metadata.name",
            }
        )
    else:
        errs = (
            dns1123_label_errors(name)
            if rt.kind == "Namespace"
            else (dns1123_subdomain_errors(name))
        )
        causes += [
            {
                "reason": "FieldValueInvalid",
                "message": f"Invalid value: {name!r}: {e}",
                "field": "metadata.name",
            }
            for e in errs
        ]
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "message": "labels must be a map",
                "field": "metadata.labels",
            }
        )
        labels = {}
    for key, value in labels.items():
        for e in label_key_errors(str(key)):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {key!r}: {e}",
                    "field": "metadata.labels",
                }
            )
        if not isinstance(value, str):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {value!r}: must be a string",
                    "field": f"metadata.labels[{key}]",
                }
            )
            continue
        for e in label_value_errors(value):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {value!r}: {e}",
                    "field": f"metadata.labels[{key}]",
                }
            )
    if causes:
        summary = "; ".join(f"{c['field']}: {c['message']}" for c in causes)
        raise ApiError(
            422,
            f'{rt.kind} "{name}" is invalid: {summary}',
            details={"name": name, "group": rt.group, "kind": rt.kind, "causes": causes},
        )
