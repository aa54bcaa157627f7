"""Which (security group, node) pairs have rows: the pairs with members, and the ones held.

A steering backend emits the rows of every pair where a bound VNF runs and marks each row that
belongs to a pair (``TargetBuilder.ovn(..., gate=(group, node))``). Such a row exists only
while its pair is **present** (:func:`pair_state`):

- the group has a member pod on the node: present;
- it has none, but its ``Port_Group`` (the pair's *anchor*) is still live: **held** for
  ``CompileOptions.empty_grace`` seconds after it became empty, with the moment it did recorded
  on the anchor (``external_ids:osc.io/empty-since``), then absent;
- otherwise absent.

Why a grace period (hysteresis, not a delay): a pair appears at once with its first member, so
a newly labelled pod is steered in one transaction; it disappears only after staying empty for
a while, so a pod that bounces on a node (a crash loop, a flapping label, a rolling update onto
the same node) reuses the held rows instead of deleting and re-creating a Port_Group and its
ACLs each time, each of which costs a northd recompute and a flow change on every chassis.
Why the moment lives in OVN: every process that plans (a one-shot ``plan``, a restarted loop, a
node agent) then decides alike, and a plan is empty while a pair is held.

The clock comes in as data (``Observed.observed_at``, epoch seconds): ``None`` means there is
no clock, and an emptied pair goes at once. A live anchor that is empty and has no marker
goes at once too, unless it carries ``osc.io/presence=members``: without that key it was written
before this rule (or by hand), and deleting it is the upgrade from the old row shape, a plan that
deletes the empty Port_Groups and their rows and touches nothing else; with it, OVN itself
emptied it (the last member's LSP was deleted and ``Port_Group.ports`` holds weak references),
and it is held like one we emptied.

Pure, no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.core.model import ownership as own
from reconciler.core.model.target import Resource
from reconciler.core.steering.base import Pair
from reconciler.errors import InternalError

__all__ = [
    "ABSENT",
    "PRESENT",
    "Pair",
    "PairState",
    "check_gates",
    "format_since",
    "gate_rows",
    "pair_state",
    "pair_states",
    "parse_since",
]

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True, slots=True)
class PairState:
    """Whether a pair's rows exist, and what that depends on."""

    present: bool
    since: str | None = None
    """Held: the ``osc.io/empty-since`` its anchor carries (the live one, or now)."""
    expires: float | None = None
    """Held with a live marker: the moment it becomes absent (the planner's next deadline)."""
    clock: bool = False
    """Held since *now* (just emptied, the marker not live yet): the state changes with every
    new clock value until the marker is written."""

    @property
    def held(self) -> bool:
        return self.present and self.since is not None


PRESENT = PairState(True)
ABSENT = PairState(False)


def format_since(now: float) -> str:
    """``now`` (epoch seconds) as the marker's text, to the second."""
    return datetime.fromtimestamp(int(now), UTC).strftime(_FORMAT)


def parse_since(text: object) -> float | None:
    """The marker's moment, or ``None`` when it is not one this module wrote."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, _FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def pair_state(
    members: int, anchor: Mapping[str, Any] | None, now: float | None, grace: float
) -> PairState:
    """The state of a pair with ``members`` member pods on its node, whose anchor
    (``Port_Group``) is live as ``anchor`` (``None``: not live), at ``now`` (the module
    docstring has the rule)."""
    if members:
        return PRESENT
    if anchor is None or now is None or grace <= 0:
        return ABSENT
    ids = anchor.get("external_ids") or {}
    marker = ids.get(own.EMPTY_SINCE)
    if marker is None:
        # It had members until now (ours to empty, or OVN emptied it when the last member's
        # LSP went): held from now on. Empty and never written under this rule: the old shape.
        if anchor.get("ports") or ids.get(own.PRESENCE) == "members":
            return PairState(True, since=format_since(now), clock=True)
        return ABSENT
    since = parse_since(marker)
    if since is None or now >= since + grace:
        return ABSENT
    return PairState(True, since=str(marker), expires=since + grace)


def pair_states(
    anchors: Mapping[Pair, Resource],
    members: Callable[[Pair], int],
    live: Callable[[str], Mapping[str, Any] | None],
    now: float | None,
    grace: float,
) -> dict[Pair, PairState]:
    """The state of each pair in ``anchors`` (pair -> its Port_Group): ``members(pair)`` is its
    member count on its node, ``live(name)`` the live fields of a Port_Group of ours."""
    return {
        pair: pair_state(members(pair), live(anchor.key), now, grace)
        for pair, anchor in anchors.items()
    }


def gate_rows(
    resources: Iterable[Resource],
    gates: Mapping[tuple[str, str], Pair],
    states: Mapping[Pair, PairState],
) -> list[Resource]:
    """``resources`` without the gated rows of absent pairs; a held pair's anchor gets its
    marker (a new resource: the given ones are not changed)."""
    out: list[Resource] = []
    for res in resources:
        pair = gates.get(res.ident)
        if pair is None:
            out.append(res)
            continue
        state = states[pair]
        if not state.present:
            continue
        if state.since is not None and res.kind == "Port_Group":
            ids = {**res.fields["external_ids"], own.EMPTY_SINCE: state.since}
            res = Resource(
                res.kind, res.key, res.origin, res.node, {**res.fields, "external_ids": ids}
            )
        out.append(res)
    return out


def check_gates(
    resources: Iterable[Resource], gates: Mapping[tuple[str, str], Pair]
) -> dict[Pair, Resource]:
    """Each gated pair's anchor, after checking what a backend declared: every gated row
    belongs to its pair's node (the planner recomputes pairs node by node), and every pair has
    exactly one gated ``Port_Group`` of ``SecurityGroup/<group>`` (whose live row holds the
    marker). Raises :class:`InternalError` otherwise: a backend bug, never a user error."""
    anchors: dict[Pair, Resource] = {}
    for res in resources:
        pair = gates.get(res.ident)
        if pair is None:
            continue
        if res.node != pair[1]:
            raise InternalError(
                f"{res.kind} {res.key} of node {res.node} is gated by the pair {pair}: a row "
                "can only depend on the members of its own node"
            )
        if res.kind == "Port_Group":
            if pair in anchors or res.origin != f"SecurityGroup/{pair[0]}":
                raise InternalError(f"pair {pair} has no single Port_Group of its group")
            anchors[pair] = res
    missing = set(gates.values()) - anchors.keys()
    if missing:
        raise InternalError(f"gated pairs without a Port_Group: {sorted(missing)[:3]}")
    return anchors
