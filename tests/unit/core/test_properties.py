"""Property-based: any desired/observed pair compiles deterministically and converges in one plan,
whatever owned state was there before (a previous, different desired state)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.compiling.diff import diff
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to

NODES = ("node-1", "node-2", "node-3")
LABELS = ("app=web", "app=api", "tier=db", "team=blue")

pods_st = st.lists(
    st.tuples(
        st.sampled_from(["shop", "ops"]),
        st.sampled_from(NODES),
        st.dictionaries(
            st.sampled_from(["app", "tier", "team"]),
            st.sampled_from(["web", "api", "db", "blue"]),
            max_size=2,
        ),
    ),
    max_size=12,
).map(lambda ps: [(ns, f"p{i}", node, labels) for i, (ns, node, labels) in enumerate(ps)])


@st.composite
def desired_st(draw):
    groups = draw(st.lists(st.sampled_from(["web", "api", "db"]), unique=True, max_size=3))
    vnfs = draw(st.lists(st.sampled_from(["fw", "ips"]), unique=True, max_size=2))
    manifests = [
        sg(g, *draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=3, unique=True)))
        for g in groups
    ]
    for v in vnfs:
        selector = draw(st.sampled_from([{}, {"zone": "a"}]))
        manifests.append(vnf(v, nodeSelector=selector))
    orders = iter(range(0, 999, 7))
    for g in groups:
        for v in vnfs:
            if draw(st.booleans()):
                manifests.append(
                    binding(
                        f"{g}-{v}",
                        g,
                        v,
                        next(orders),
                        redirection=draw(st.sampled_from(["exit-lport", "entry-lport", "both"])),
                        failurePolicy=draw(st.sampled_from(["fail-open", "fail-close"])),
                    )
                )
    return desired(*manifests)


@settings(
    # fewer under `make mutation` (scripts/mutation.py), like the event-simulation tests
    max_examples=int(os.environ.get("OSC_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    before=desired_st(),
    after=desired_st(),
    pods=pods_st,
    steering=st.sampled_from(["network-function", "router-policy"]),
)
def test_any_state_converges_in_one_plan(before, after, pods, steering):
    obs = cluster(pods, nodes=NODES, node_labels={"node-1": {"zone": "a"}})
    opts = CompileOptions(steering=steering)
    live = apply_to({}, diff(compile_target(before, obs, opts), {}))
    target = compile_target(after, obs, opts)
    assert compile_target(after, obs, opts) == target  # deterministic
    converged = apply_to(live, diff(target, live))
    assert diff(target, converged).empty
    # nothing outside the target survives, everything in it exists exactly as compiled
    assert set(converged) == set(target.resources)
