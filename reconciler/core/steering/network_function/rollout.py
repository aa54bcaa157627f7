"""A rolling update's drain, in Network Function rows: a VM being rolled on a two-instance node
is taken out of its node's steering groups first, so northd moves the traffic to the other,
healthy member before anything is restarted (``reconciler.core.transitions.rollout``).
Pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Change
from reconciler.core.model.target import Resource
from reconciler.core.steering.base import Drain, Drained
from reconciler.core.steering.network_function.health import NFG

__all__ = ["drain"]


def drain(changes: Sequence[Change], drained: Drained, observed: Observed) -> Drain:
    """The steering groups that hold a drained function (``(vnf, node)`` -> functions), and
    what each should be: the planned or live group without them (a probe group keeps its one
    function; a group is never left empty), or its planned delete."""
    planned = {c.key: c for c in changes if c.kind == NFG}
    live = {r.key: r for r in observed.ovn_rows if r.table == NFG}
    touched = _touched(planned, live, drained)
    kept: list[Change] = []
    rows: list[tuple[Resource, Any]] = []
    for key in sorted(touched):
        change = planned.get(key)
        if change is not None and change.action == "delete":
            kept.append(change)
            continue
        fields = (
            dict(change.after) if change is not None and change.after else dict(live[key].fields)
        )
        gone = _drained_of(fields, drained)
        members = [nf for nf in fields.get("network_function") or () if nf not in gone]
        if members:
            fields["network_function"] = members
        ext = fields.get("external_ids") or {}
        node = ext.get(own.NODE)
        origin = str(ext.get(own.RESOURCE, change.origin if change else ""))
        rows.append((Resource(NFG, key, origin, node, fields), live.get(key)))
    return Drain(frozenset((NFG, key) for key in touched), tuple(kept), tuple(rows))


def _drained_of(fields: Mapping[str, Any], drained: Mapping[tuple[str, str], set[str]]) -> set[str]:
    members = {str(nf) for nf in fields.get("network_function") or ()}
    return {nf for nfs in drained.values() for nf in nfs if nf in members}


def _touched(
    planned: Mapping[str, Change],
    live: Mapping[str, Any],
    drained: Mapping[tuple[str, str], set[str]],
) -> set[str]:
    """Steering groups (not probe groups) that hold a drained function, planned or live."""
    out: set[str] = set()
    for key in planned.keys() | live.keys():
        if naming.is_probe_group(key):
            continue
        change = planned.get(key)
        fields = (
            change.after
            if change is not None and change.after
            else (live[key].fields if key in live else None)
        )
        if fields and _drained_of(fields, drained):
            out.add(key)
    return out
