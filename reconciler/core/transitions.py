"""The post-compile pass every plan goes through: the rollouts' moment, then health gating.

``compile`` and ``diff`` say what should be; this pass says what may be written *now* so that no
protected packet is lost on the way there:

1. :func:`reconciler.core.rollout.hold_updates`: a VM whose template changed keeps it until the
   rollout selects the VM; functions of VMs being rolled on a two-instance node are drained from
   their steering groups;
2. :func:`reconciler.core.gating.gate`: steering switched onto a function group northd has not
   reported active waits (per binding and node).

Both the full planner (``reconciler.core.planning.compile_plan``) and the warm loop's
incremental planner (``reconciler.core.incremental``) apply it to the plan they made, the same
way, on every pass (the health it reads changes by the second, so a remembered plan is passed
through it again). Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

from reconciler.core.gating import HELD_META, gate, held_idents
from reconciler.core.model import Desired
from reconciler.core.observed import Observed
from reconciler.core.plan import Plan
from reconciler.core.rollout import ROLLOUT_META, hold_updates

__all__ = [
    "apply_transitions",
    "health_changed",
    "in_transition",
    "only_progress",
    "transitions_meta",
]


def apply_transitions(plan: Plan, desired: Desired, observed: Observed) -> Plan:
    """``plan`` as it may be applied now (see the module docstring)."""
    return gate(hold_updates(plan, desired, observed), observed)


def only_progress(first: Plan, second: Plan) -> bool:
    """Whether every change of ``second`` (the plan right after ``first`` was applied) is one
    that ``first`` held back: northd reported a group active in between, so the held steering
    may now be switched on. The pipeline does not count that as a failure to converge; the next
    pass writes it."""
    held = held_idents(first)
    return bool(held) and all((c.kind, c.key) in held for c in second.changes)


def health_changed(before: Observed, after: Observed) -> bool:
    """Whether northd changed its verdict on a function group of ``before`` by the time of
    ``after`` (``network_function_active``; groups created in between do not count). A plan
    that depends on health (held steering, a chain rewired around a dead ``fail-open`` hop)
    may then differ right after an apply: new input, which the next pass follows, not a
    failure to converge."""
    return any(
        group in after.nf_active and after.nf_active[group] != active
        for group, active in before.nf_active.items()
    )


def in_transition(plan: Plan) -> bool:
    """Something is held or a rollout is under way: a later pass has work to do even when the
    plan is empty."""
    return bool(plan.meta.get(HELD_META) or plan.meta.get(ROLLOUT_META))


def transitions_meta(plan: Plan) -> dict[str, Any]:
    """The plan's ``held`` and ``rollout`` entries (for status and reports)."""
    return {k: plan.meta[k] for k in (HELD_META, ROLLOUT_META) if plan.meta.get(k)}
