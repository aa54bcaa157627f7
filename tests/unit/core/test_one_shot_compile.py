"""A one-shot compile (``potential=False``: ``plan``, ``apply``) builds no row for a pair that
cannot be present, and compiles exactly the target a full compile does, while pairs appear,
are held and go."""

from __future__ import annotations

import dataclasses
import os
from functools import partial

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import Compiled, CompileOptions, compile_full
from reconciler.core.model.observed import Observed
from reconciler.core.planning.full import compile_plan
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import DESIRED, Event, event_st, plan_or_error, scenario_observed, step

NOW = 1_790_000_000.0
tick_st = st.tuples(st.just("tick"), st.floats(1, 90))


def _step(observed: Observed, event: Event, current: object) -> Observed:
    if event[0] == "tick":
        assert observed.observed_at is not None
        return dataclasses.replace(observed, observed_at=observed.observed_at + event[1])
    return step(observed, event, current)  # type: ignore[arg-type]


@settings(
    # fewer under `make mutation` (scripts/mutation.py), like the event-simulation tests
    max_examples=int(os.environ.get("OSC_HYPOTHESIS_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    steering=st.sampled_from(["network-function", "router-policy"]),
    events=st.lists(st.one_of(event_st, tick_st), min_size=1, max_size=12),
)
def test_a_one_shot_compile_has_the_same_target(steering: str, events: list[Event]) -> None:
    options = CompileOptions(steering=steering, empty_grace=30.0)
    observed = dataclasses.replace(
        scenario_observed(nf=steering == "network-function"), observed_at=NOW
    )
    current = None
    for event in events:
        observed = _step(observed, event, current)
        full = plan_or_error(partial(compile_full, DESIRED, observed, options))
        one = plan_or_error(partial(compile_full, DESIRED, observed, options, potential=False))
        if isinstance(full, str) or isinstance(one, str):
            assert one == full, f"after {event}"
            current = None
            continue
        assert one.target == full.target, f"after {event}"
        assert set(one.potential) <= set(full.potential)
        assert {r.ident for r in one.target} <= set(one.potential)
        planned = plan_or_error(partial(compile_plan, DESIRED, observed, options,
                                        potential=False))  # fmt: skip
        current = None if isinstance(planned, str) else planned.plan


def test_a_one_shot_compile_builds_no_row_for_a_pair_that_cannot_be_present() -> None:
    """``idle`` has no member and no live Port_Group anywhere; ``web`` has a member on node-1
    only: the one-shot compile builds rows for (web, node-1) and none for the others."""
    want = desired(
        sg("web", "app=web"), sg("idle", "app=none"), vnf("fw"),
        binding("web-fw", "web", "fw", 10), binding("idle-fw", "idle", "fw", 20),
    )  # fmt: skip
    observed = cluster([("shop", "web-1", "node-1", {"app": "web"})])
    full = compile_full(want, observed, CompileOptions())
    one = compile_full(want, observed, CompileOptions(), potential=False)
    assert one.target == full.target

    def pairs(compiled: Compiled) -> set[tuple[str, str]]:
        return {compiled.gates[ident] for ident in compiled.potential if ident in compiled.gates}

    assert pairs(full) == {(g, n) for g in ("web", "idle") for n in ("node-1", "node-2")}
    assert pairs(one) == {("web", "node-1")}
