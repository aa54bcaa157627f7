"""The post-compile pass every plan goes through: the rollouts' moment, then health gating.

``compile`` and ``diff`` say what should be; this pass says what may be written *now* so that no
protected packet is lost on the way there:

1. :func:`reconciler.core.transitions.rollout.hold_updates`: a VM whose template changed keeps it
   until the rollout selects the VM; functions of VMs being rolled on a two-instance node are
   drained from their steering groups;
2. ``SteeringBackend.hold_unready`` (``reconciler.core.steering.network_function.gating``):
   steering switched onto a function group northd has not reported active waits (per binding
   and node).

Both the full planner (``reconciler.core.planning.full.compile_plan``) and the warm loop's
incremental planner (``reconciler.core.planning.incremental``) apply it to the plan they made, the
same way, on every pass (the health it reads changes by the second, so a remembered plan is passed
through it again). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from reconciler.core.model.desired import Desired
from reconciler.core.model.facts import Hold, Pending
from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Plan
from reconciler.core.steering import HealthIndex, SteeringBackend
from reconciler.core.transitions.rollout import hold_updates, pending_of, restarts_pending

__all__ = [
    "apply_transitions",
    "held_idents",
    "held_pending",
    "only_progress",
    "with_health_of",
]


def held_pending(held: Iterable[Hold]) -> list[Pending]:
    """Steering held until a VNF instance is healthy, per binding and node: until then no ACL
    steers the binding's pods there, their traffic flows unsteered."""
    return [
        Pending("Binding", hold.binding, hold.node, f"steering held, {hold.reason}",
                "until then no ACL steers its pods there: their traffic flows unsteered")
        for hold in held
    ]  # fmt: skip


def apply_transitions(
    plan: Plan,
    desired: Desired,
    observed: Observed,
    backend: SteeringBackend,
    health: HealthIndex | None = None,
) -> Plan:
    """``plan`` as it may be applied now (see the module docstring), with ``health`` the
    plan's health index (made here when the caller has none), and what it leaves pending: the
    live state does not match the manifests until later passes write it."""
    index = health if health is not None else HealthIndex(observed)
    ready = backend.hold_unready(hold_updates(plan, desired, observed, backend), observed, index)
    unrolled = [] if observed.capabilities.network_function else restarts_pending(observed)
    pending = (*pending_of(ready.rollouts), *unrolled, *held_pending(ready.held))
    return replace(ready, pending=pending) if pending or ready.pending else ready


def held_idents(plan: Plan) -> set[tuple[str, str]]:
    """The changes ``plan`` holds back (:attr:`Plan.held`)."""
    return {ident for hold in plan.held for ident in hold.changes}


def only_progress(first: Plan, second: Plan) -> bool:
    """Whether every change of ``second`` (the plan right after ``first`` was applied) is one
    that ``first`` held back: northd reported a group active in between, so the held steering
    may now be switched on. The pipeline does not count that as a failure to converge; the next
    pass writes it."""
    held = held_idents(first)
    return bool(held) and all((c.kind, c.key) in held for c in second.changes)


def with_health_of(observed: Observed, before: Observed) -> Observed:
    """``observed`` with northd's verdicts as ``before`` had them: each function group keeps the
    ``network_function_active`` it had then, and a group created since has none yet (not
    judged). Planning from it tells whether a plan right after an apply differs only because
    northd changed a verdict meanwhile (held steering now ready, a chain rewired around a hop
    found dead): new input, which the next pass follows, not a failure to converge."""
    health = {g: before.nf_active[g] for g in observed.nf_active if g in before.nf_active}
    return replace(observed, nf_active=health)
