"""The patch formats the Kubernetes API emulator accepts: JSON merge patch (RFC 7386), JSON
patch (RFC 6902) and strategic merge patch, applied as a merge patch (lists replaced whole:
the emulator serves no patch strategies, and osc-gitops never relies on list merge keys)."""

from __future__ import annotations

import copy
from typing import Any

from osc_gitops_sandbox.kubeapi.status import ApiError

__all__ = ["json_patch", "merge_patch", "strip_directives"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value, never mutates ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strip_directives(patch: Any) -> Any:
    """Drop strategic-merge directives (``$setElementOrder/...``, ``$patch``, ``$retainKeys``,
    ``$deleteFromPrimitiveList/...``) that ``kubectl apply`` sends: we apply strategic merge
    patches as plain merge patches (lists replaced whole), which is enough for our kinds."""
    if isinstance(patch, dict):
        return {k: strip_directives(v) for k, v in patch.items() if not k.startswith("$")}
    if isinstance(patch, list):
        return [strip_directives(v) for v in patch]
    return patch


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test) on a deep copy of ``doc``."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations")
    doc = copy.deepcopy(doc)

    def parent(path: str) -> tuple[Any, str]:
        parts = _pointer(path)
        if not parts:
            raise ApiError(422, "cannot operate on the document root")
        cur = doc
        for part in parts[:-1]:
            try:
                cur = cur[int(part)] if isinstance(cur, list) else cur[part]
            except (KeyError, IndexError, ValueError) as exc:
                raise ApiError(422, f"path {path!r} does not exist") from exc
        return cur, parts[-1]

    def get(path: str) -> Any:
        cont, key = parent(path)
        try:
            return cont[int(key)] if isinstance(cont, list) else cont[key]
        except (KeyError, IndexError, ValueError) as exc:
            raise ApiError(422, f"path {path!r} does not exist") from exc

    def remove(path: str) -> Any:
        cont, key = parent(path)
        try:
            return cont.pop(int(key)) if isinstance(cont, list) else cont.pop(key)
        except (KeyError, IndexError, ValueError) as exc:
            raise ApiError(422, f"unable to remove nonexistent key {path!r}") from exc

    def add(path: str, value: Any) -> None:
        cont, key = parent(path)
        if isinstance(cont, list):
            if key == "-":
                cont.append(value)
            else:
                cont.insert(int(key), value)
        elif isinstance(cont, dict):
            cont[key] = value
        else:
            raise ApiError(422, f"path {path!r} does not exist")

    for op in ops:
        kind = op.get("op")
        path = op.get("path", "")
        if kind == "add":
            add(path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            remove(path)
        elif kind == "replace":
            remove(path)
            add(path, copy.deepcopy(op.get("value")))
        elif kind == "move":
            add(path, remove(op["from"]))
        elif kind == "copy":
            add(path, copy.deepcopy(get(op["from"])))
        elif kind == "test":
            if get(path) != op.get("value"):
                raise ApiError(422, f"the server rejected our request: test failed at {path!r}")
        else:
            raise ApiError(400, f"unknown json patch operation {kind!r}")
    return doc
