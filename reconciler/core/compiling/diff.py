"""diff(target, owned live state) -> Plan.

Only rows and objects we own (``osc.io/owner`` = this instance) are ever passed in as live
state, so only they can be updated or deleted. Comparison rules, chosen to be minimal and to
never fight other writers over fields we do not manage:

- OVN rows: every managed column is compared whole, except ``external_ids``, where only our
  ``osc.io/*`` keys count and ``osc.io/revision`` is ignored (a new commit alone rewrites nothing);
  the keys of ``ownership.WRITE_ONLY`` are written with a row that changes, but their absence
  alone changes nothing.
- Kubernetes objects: the live body is *projected* onto the shape of the target body (keys we do
  not set are dropped, recursively), like ``kubectl apply``: fields the API server or a webhook
  defaults (KubeVirt adds several to a VM spec) are not drift.

deepdiff supplies the readable list of changed paths shown in the plan.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from reconciler.core.model import ownership as own
from reconciler.core.model.observed import KubeObject, OvnRow
from reconciler.core.model.plan import Change, Plan
from reconciler.core.model.target import Target

LiveState = Mapping[tuple[str, str], dict[str, Any]]


def live_state(ovn_rows: Iterable[OvnRow], kube_objects: Iterable[KubeObject]) -> LiveState:
    """Index owned live state by ``(kind, key)``, the identity target resources use."""
    live: dict[tuple[str, str], dict[str, Any]] = {}
    for row in ovn_rows:
        live[(row.table, row.key)] = row.fields
    for obj in kube_objects:
        live[(obj.kind, f"{obj.namespace}/{obj.name}")] = obj.body
    return live


def _ours(ids: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in ids.items() if k.startswith(own.PREFIX) and k != own.REVISION}


def _comparable(fields: dict[str, Any]) -> dict[str, Any]:
    """OVN fields without the keys that are never a reason to write a row
    (``ownership.WRITE_ONLY``)."""
    ids = fields.get("external_ids")
    # Not mutated (equivalent): only a shortcut; without a write-only key the copy below equals
    # ``fields``
    if not ids or not own.WRITE_ONLY & ids.keys():  # pragma: no mutate
        return fields
    return {**fields, "external_ids": {k: v for k, v in ids.items() if k not in own.WRITE_ONLY}}


def _normalise_ovn(fields: Mapping[str, Any], shape: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: fields.get(k) for k in shape}
    if "external_ids" in out:
        out["external_ids"] = _ours(out["external_ids"] or {})
    return out


def project(live: Any, shape: Any) -> Any:
    """Keep only the parts of ``live`` that ``shape`` (the target) specifies."""
    if isinstance(shape, Mapping) and isinstance(live, Mapping):
        return {k: project(live[k], v) for k, v in shape.items() if k in live}
    if isinstance(shape, list) and isinstance(live, list) and len(shape) == len(live):
        # Not mutated (equivalent): the lengths are equal here, so ``strict`` is moot
        return [project(lv, sv) for lv, sv in zip(live, shape, strict=True)]  # pragma: no mutate
    return live


def _normalise_kube(body: Mapping[str, Any], shape: Mapping[str, Any]) -> dict[str, Any]:
    projected = project(body, shape)
    # Not mutated (equivalent): no target body has ``osc.io/revision`` (the engine adds it when
    # it writes), so the projection onto the target's shape has already dropped the live one;
    # the filter below only guards that, and a changed look-up here cannot change a plan
    meta = projected.get("metadata", {})  # pragma: no mutate
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != own.REVISION}
    return projected


def _strip_revision(resource_fields: Mapping[str, Any], is_ovn: bool) -> dict[str, Any]:
    fields = dict(resource_fields)
    # Not mutated (equivalent): a target row's external_ids hold only ``osc.io/`` keys and never
    # the revision, so ``_ours`` keeps them all; the guard cannot change a plan
    if is_ovn and "external_ids" in fields:  # pragma: no mutate
        fields["external_ids"] = _ours(fields["external_ids"])
    return fields


def warm_up() -> None:
    """Import deepdiff now: a long-running loop should not pay its import on its first update
    (one-shot commands import it lazily, only when a plan has an update)."""
    import deepdiff  # noqa: F401


_LIST_INDEX = re.compile(r"(\[\d+\])+$")


def changed_paths(before: Any, after: Any) -> tuple[str, ...]:
    """Changed paths like ``['ports']`` or ``['options']['is-nf']``; list element positions are
    folded into the list (a pod joining is a change of ``ports``, not of ``ports[3]``)."""
    found: set[str] = set()
    if _plain_paths(before, after, "", found):
        return tuple(sorted(found))
    from deepdiff import DeepDiff  # imported on first use: a cold start pays for it otherwise

    paths = DeepDiff(before, after).affected_paths
    return tuple(sorted({_LIST_INDEX.sub("", p.removeprefix("root")) for p in paths}))


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.:/@=+\-]+")
_SCALARS = (str, int, bool, type(None))
_PLAIN = (*_SCALARS, dict, list, tuple)


@cache
def _deeper() -> float:
    """DeepDiff's default ``threshold_to_diff_deeper`` (since 8.0; 0: the older versions
    always look into a dict)."""
    from deepdiff import DeepDiff

    param = inspect.signature(DeepDiff.__init__).parameters.get("threshold_to_diff_deeper")
    return float(param.default or 0) if param is not None else 0.0


def _plain_paths(before: Any, after: Any, path: str, found: set[str]) -> bool:
    """:func:`changed_paths` the way DeepDiff finds them, for the values OVN rows hold (dicts
    with plain string keys, lists of strings, strings, integers, booleans, ``None``), adding
    them to ``found``; ``False`` (and ``found`` is to be dropped) for anything else, which is
    left to DeepDiff, which is much slower for the one Port_Group a pod event updates (the
    label -> commit path); ``tests/unit/core/test_diff.py`` checks the two agree."""
    if type(before) is not type(after):
        if type(before) not in _PLAIN or type(after) not in _PLAIN:
            return False
        found.add(path)  # DeepDiff: a type change at this path, not looked into
        return True
    if type(before) is dict:
        keys = before.keys() | after.keys()
        if len(keys) > 1 and len(before.keys() & after.keys()) / len(keys) < _deeper():
            found.add(path)  # DeepDiff: too few keys in common, the dict changed as a whole
            return True
        for key in keys:
            if type(key) is not str or not _PLAIN_KEY.fullmatch(key):
                return False
            sub = f"{path}['{key}']"
            if key not in before or key not in after:
                found.add(sub)
            elif not _plain_paths(before[key], after[key], sub, found):
                return False
        return True
    if type(before) is list or type(before) is tuple:
        if not all(type(x) is str for x in before) or not all(type(x) is str for x in after):
            return False
        if before != after:
            found.add(path)  # DeepDiff names the items that differ: folded into the list
        return True
    if type(before) in _SCALARS:
        if before != after:
            found.add(path)
        return True
    return False


def diff(target: Target, live: LiveState, facts: Mapping[str, Any] | None = None) -> Plan:
    """The changes that make ``live`` equal ``target``, with the target's findings and
    ``facts`` (:class:`Plan` fields by name: how the plan was made)."""
    changes: list[Change] = []
    for ident, res in target.resources.items():
        after = _strip_revision(res.fields, res.is_ovn)
        current = live.get(ident)
        if current is None:
            changes.append(Change("create", res.kind, res.key, res.origin, res.node, None, after))
            continue
        before = _normalise_ovn(current, after) if res.is_ovn else _normalise_kube(current, after)
        if before != after and (not res.is_ovn or _comparable(before) != _comparable(after)):
            changes.append(
                Change(
                    "update",
                    res.kind,
                    res.key,
                    res.origin,
                    res.node,
                    before,
                    after,
                    changed_paths(before, after),
                )
            )
    for (kind, key), current in live.items():
        if (kind, key) in target.resources:
            continue
        ids = current.get("external_ids") or current.get("metadata", {}).get("annotations", {})
        labels = current.get("metadata", {}).get("labels", {})
        origin = ids.get(own.RESOURCE, "")
        annotations = current.get("metadata", {}).get("annotations", {})
        node = ids.get(own.NODE) or own.node_of(labels, annotations)
        changes.append(Change("delete", kind, key, origin, node, dict(current), None))
    changes.sort(key=lambda c: c.sort_key)
    return Plan(tuple(changes), target.findings, **(facts or {}))
