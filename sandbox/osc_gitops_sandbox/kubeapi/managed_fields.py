"""Field ownership (``metadata.managedFields``) and server-side apply, as kube-apiserver does them.

What the emulator needs of it (the reconciler applies its VirtualMachines and NADs with field
manager ``osc-gitops``; ``kubectl apply --server-side`` must keep working):

- Every write records who set which fields: a create or update (PUT, merge/JSON/strategic
  patch) under the request's manager (``?fieldManager=``, else the User-Agent's product, e.g.
  ``kubectl`` or ``OpenAPI-Generator``) with ``operation: Update``: the fields it set or
  changed become that manager's, and no longer another's.
- An apply (``PATCH`` with ``application/apply-patch+yaml``, ``?fieldManager=`` required,
  ``?force=true`` optional) states the fields the manager wants: each one another manager owns
  with a different value is a **conflict** (409, ``reason: Conflict``, one cause per field,
  ``FieldManagerConflict``) unless forced, which takes it over; a field the applier owned
  before and no longer states is **removed**, unless another manager owns it too; nothing
  else changes. The applier's ``operation: Apply`` entry is exactly what it stated. An apply
  to a missing object creates it.
- Mutating admission runs *after* the fields were attributed (kube-apiserver's create and
  patch handlers call ``FieldManager.UpdateNoErrors`` before ``mutatingAdmission.Admit``), so
  what a webhook adds (KubeVirt's ``firmware.uuid``) belongs to nobody: no apply removes it.

Simplifications, none of which the product relies on: every list is atomic (owned whole, as
kube-apiserver treats a CRD list without ``x-kubernetes-list-type``; built-in types' keyed
lists, e.g. a Pod's containers by name, are keyed there), no ``.`` entries for empty maps
beyond what a leaf needs, and a manager's ``Update`` entries of different API versions are one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from osc_gitops_sandbox.kubeapi.status import ApiError

__all__ = [
    "APPLY",
    "UPDATE",
    "FieldPath",
    "apply",
    "field_paths",
    "from_fields_v1",
    "manager_of",
    "to_fields_v1",
    "update_entries",
]

FieldPath = tuple[str, ...]
APPLY, UPDATE = "Apply", "Update"
_SERVER_FIELDS: frozenset[FieldPath] = frozenset(
    {
        ("apiVersion",),
        ("kind",),
        ("status",),
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("metadata", "uid"),
        ("metadata", "resourceVersion"),
        ("metadata", "generation"),
        ("metadata", "creationTimestamp"),
        ("metadata", "deletionTimestamp"),
        ("metadata", "managedFields"),
        ("metadata", "selfLink"),
    }
)
"""Set by the server or not tracked (kube-apiserver strips these from field sets)."""


MAX_MANAGER_BYTES = 128
"""kube-apiserver's ``FieldManagerMaxLength``."""


def manager_of(field_manager: str | None, user_agent: str | None) -> str:
    """The manager of a request: ``?fieldManager=``, else the User-Agent up to its first ``/``
    without unprintable characters, cut to :data:`MAX_MANAGER_BYTES` (kube-apiserver's
    ``managerOrUserAgent``/``prefixFromUserAgent``)."""
    if field_manager:
        return field_manager
    agent = ""
    for char in (user_agent or "").split("/")[0]:
        if not char.isprintable():
            continue
        if len((agent + char).encode()) > MAX_MANAGER_BYTES:
            break
        agent += char
    return agent.strip() or "unknown"


def check_manager(field_manager: str, options: str) -> None:
    """Refuse a ``?fieldManager=`` as kube-apiserver's ``ValidateFieldManager`` does (422):
    longer than :data:`MAX_MANAGER_BYTES`, or an unprintable character. ``options``: the
    request's kind of options (``CreateOptions``, ``UpdateOptions``, ``PatchOptions``)."""
    problems = []
    if len(field_manager.encode()) > MAX_MANAGER_BYTES:
        problems.append(f"fieldManager: Too long: may not be more than {MAX_MANAGER_BYTES} bytes")
    position = 0
    for char in field_manager:
        if not char.isprintable():
            problems.append(
                f"fieldManager: Invalid value: {json.dumps(field_manager)}: invalid character "
                f"U+{ord(char):04X} (at position {position})"
            )
        position += len(char.encode())
    if problems:
        listed = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
        raise ApiError(422, f'{options}.meta.k8s.io "" is invalid: {listed}')


def field_paths(obj: Any, prefix: FieldPath = ()) -> set[FieldPath]:
    """The leaf fields ``obj`` sets: scalars, lists (atomic) and empty maps."""
    out: set[FieldPath] = set()
    if isinstance(obj, Mapping):
        if not obj and prefix:
            out.add(prefix)
        for key, value in obj.items():
            path = (*prefix, str(key))
            if path in _SERVER_FIELDS:
                continue
            out |= field_paths(value, path)
    elif prefix:
        out.add(prefix)
    return out


_MISSING = object()


def _value(obj: Any, path: FieldPath) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set(obj: dict[str, Any], path: FieldPath, value: Any) -> None:
    for key in path[:-1]:
        nxt = obj.get(key)
        if not isinstance(nxt, dict):
            nxt = obj[key] = {}
        obj = nxt
    obj[path[-1]] = copy.deepcopy(value)


def _remove(obj: dict[str, Any], path: FieldPath, keep: set[FieldPath]) -> None:
    """Remove ``path``; then every parent map left empty that nobody owns (``keep``)."""
    chain: list[dict[str, Any]] = [obj]
    for key in path[:-1]:
        nxt = chain[-1].get(key)
        if not isinstance(nxt, dict):
            return
        chain.append(nxt)
    chain[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        parent = path[:depth]
        if chain[depth] or parent in keep or parent in _SERVER_FIELDS:
            break
        chain[depth - 1].pop(path[depth - 1], None)


def to_fields_v1(paths: Iterable[FieldPath]) -> dict[str, Any]:
    """``fieldsV1``: ``{"f:spec": {"f:runStrategy": {}}}``."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return root


def from_fields_v1(fields: Mapping[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    out: set[FieldPath] = set()
    for key, child in fields.items():
        if key == ".":
            out.add(prefix)
            continue
        if not key.startswith("f:"):
            continue  # k:{...} / v:... (keyed list items): every list is atomic here
        path = (*prefix, key[2:])
        if isinstance(child, Mapping) and child:
            out |= from_fields_v1(child, path)
        else:
            out.add(path)
    return out


def _entries(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(e) for e in (obj.get("metadata") or {}).get("managedFields") or ()]


def _owned(entry: Mapping[str, Any]) -> set[FieldPath]:
    return from_fields_v1(entry.get("fieldsV1") or {})


def _covers(owned: set[FieldPath], path: FieldPath) -> bool:
    """Whether ``owned`` holds ``path`` or a field above or below it (an atomic list owns what
    is inside it; a map's child is part of the map)."""
    if path in owned:
        return True
    return any(o[: len(path)] == path or path[: len(o)] == o for o in owned)


def _entry(manager: str, operation: str, api_version: str, time: str,
           paths: set[FieldPath]) -> dict[str, Any]:  # fmt: skip
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(paths),
    }


def update_entries(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], manager: str, time: str
) -> list[dict[str, Any]]:
    """The ``managedFields`` after a non-apply write by ``manager`` turned ``old`` (``None``:
    a create) into ``new``: the fields it set or changed are its own (``Update``) and no
    longer anyone else's; fields it removed are nobody's."""
    before = field_paths(old) if old is not None else set()
    after = field_paths(new)
    changed = {p for p in after if old is None or _value(old, p) != _value(new, p)}
    gone = before - after
    entries = _entries(old) if old is not None else []
    out: list[dict[str, Any]] = []
    mine: set[FieldPath] = set(changed)
    for entry in entries:
        owned = {p for p in _owned(entry) if p not in gone and not _covers(changed, p)}
        if entry["manager"] == manager and entry.get("operation") == UPDATE:
            mine |= owned
            continue
        if owned:
            out.append({**entry, "fieldsV1": to_fields_v1(owned)})
    mine = {p for p in mine if _value(new, p) is not _MISSING}
    if mine:
        out.append(_entry(manager, UPDATE, str(new.get("apiVersion", "")), time, mine))
    return out


def apply(
    live: Mapping[str, Any] | None,
    applied: Mapping[str, Any],
    manager: str,
    *,
    force: bool,
    time: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Server-side apply of ``applied`` by ``manager`` on ``live`` (``None``: create): the new
    object (server fields of ``live`` kept) and its ``managedFields``. Raises the 409 conflict
    kube-apiserver answers."""
    stated = field_paths(applied)
    entries = _entries(live) if live is not None else []
    current: Mapping[str, Any] = live or {}
    conflicts: list[tuple[FieldPath, str]] = []
    for entry in entries:
        if entry["manager"] == manager and entry.get("operation") == APPLY:
            continue
        owned = _owned(entry)
        for path in stated:
            if _covers(owned, path) and _value(current, path) != _value(applied, path):
                conflicts.append((path, str(entry["manager"])))
    if conflicts and not force:
        raise _conflict(sorted(set(conflicts)), str(applied.get("apiVersion", "")))
    previous: set[FieldPath] = set()
    others: list[dict[str, Any]] = []
    for entry in entries:
        if entry["manager"] == manager and entry.get("operation") == APPLY:
            previous = _owned(entry)
            continue
        owned = _owned(entry)
        if force:  # what it lost in a conflict is the applier's now
            owned = {p for p in owned if not any(_covers({p}, c) for c, _ in conflicts)}
        if owned:
            others.append({**entry, "fieldsV1": to_fields_v1(owned)})
    obj = copy.deepcopy(dict(current))
    for path in sorted(stated):
        _set(obj, path, _value(applied, path))
    still_owned = set().union(*(_owned(e) for e in others)) if others else set()
    for path in sorted(previous - stated, key=len, reverse=True):
        if not _covers(still_owned, path) and not _covers(stated, path):
            _remove(obj, path, still_owned | stated)
    api_version = str(applied.get("apiVersion") or current.get("apiVersion", ""))
    mine = _entry(manager, APPLY, api_version, time, stated) if stated else None
    return obj, [*others, *([mine] if mine else [])]


def _dotted(path: FieldPath) -> str:
    return "." + ".".join(path)


def _conflict(conflicts: list[tuple[FieldPath, str]], api_version: str) -> ApiError:
    lines = [f'conflict with "{who}" using {api_version}: {_dotted(p)}' for p, who in conflicts]
    message = f"Apply failed with {len(conflicts)} conflict(s): " + "\n".join(lines)
    causes = [
        {"reason": "FieldManagerConflict", "message": line, "field": _dotted(path)}
        for line, (path, _) in zip(lines, conflicts, strict=True)
    ]
    return ApiError(409, message, reason="Conflict", details={"causes": causes})
