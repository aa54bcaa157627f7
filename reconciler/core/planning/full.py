"""A full plan: compile the target, index what we own live, diff, and say how it was made.

The one place a plan is made from scratch and its facts of how it was made (``instance``,
``steering``, ``nb_schema``) are set, so the CLI's plan, the engine's pipeline and the incremental
planner's full pass cannot drift apart. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.core.compiling.compile import Compiled, CompileOptions, compile_full
from reconciler.core.compiling.diff import LiveState, diff, live_state
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Plan
from reconciler.core.model.target import Target
from reconciler.core.planning.slicing import AgentOptions, mark_agent_rows
from reconciler.core.steering import HealthIndex
from reconciler.core.transitions.hold import apply_transitions


@dataclass(frozen=True, slots=True)
class CompiledPlan:
    """A full plan with the target and live state it was diffed from (the incremental planner
    keeps both to re-diff only what changes later)."""

    compiled: Compiled
    live: LiveState
    plan: Plan
    """What may be applied now: the diff after the transitions pass
    (``reconciler.core.transitions.hold``)."""
    untransitioned: Plan | None = None
    """The diff before that pass (what the incremental planner remembers: the pass depends on
    health that changes by the second); ``None``: the same as :attr:`plan`."""
    health: HealthIndex | None = None
    """The plan's health index (what the transitions, the report beside the plan and
    ``explain`` read), made once from the observed state the plan was made from."""

    @property
    def target(self) -> Target:
        return self.compiled.target


def plan_facts(compiled: Compiled, observed: Observed, options: CompileOptions) -> dict[str, Any]:
    """How a plan was made (:class:`Plan` facts by field name); never part of its changes."""
    return {
        "instance": options.instance,
        "steering": compiled.backend.name,
        "nb_schema": observed.capabilities.schema_version,
    }


def compile_plan(
    desired: Desired, observed: Observed, options: CompileOptions, *, potential: bool = True
) -> CompiledPlan:
    """Compile everything and diff it against everything we own. A node agent's options
    (:class:`~reconciler.core.planning.slicing.AgentOptions`) mark its node's rows as the agent's.
    ``potential=False``: nothing will plan from this compile again, so the rows of pairs that
    cannot be present are not built (:func:`~reconciler.core.compiling.compile.compile_full`)."""
    compiled = compile_full(desired, observed, options, potential=potential)
    if isinstance(options, AgentOptions):
        compiled = mark_agent_rows(compiled, options.node)
    live = live_state(observed.ovn_rows, observed.kube_objects)
    raw = diff(compiled.target, live, plan_facts(compiled, observed, options))
    health = HealthIndex(observed)
    the_plan = apply_transitions(raw, desired, observed, compiled.backend, health)
    return CompiledPlan(compiled, live, the_plan, raw, health)


def make_plan(desired: Desired, observed: Observed, options: CompileOptions) -> Plan:
    """The changes that would make the live state equal the manifests."""
    return compile_plan(desired, observed, options, potential=False).plan


class FullPlanner:
    """:func:`make_plan` as a planner without memory (what one-shot commands use): every plan is
    a full compile, so ``full`` changes nothing."""

    last_mode = "full"

    def plan(
        self, desired: Desired, observed: Observed, options: CompileOptions, *, full: bool = False
    ) -> Plan:
        return make_plan(desired, observed, options)

    def reset(self) -> None:
        """Nothing to forget."""
