"""The incremental planner gives the same changes as a full ``make_plan`` after any event sequence.

The events are those of ``tests.support.simulate`` (pods labelled, created, deleted and recreated,
LSPs late or left behind, drift, a pod taking a VNF's address, our own applies, relists).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import CompileError, CompileOptions
from reconciler.core.model.observed import KubeObject, Observed
from reconciler.core.model.ownership import NODE
from reconciler.core.planning.full import make_plan
from reconciler.core.planning.incremental import IncrementalPlanner
from tests.support.builders import binding, desired, sg, vnf
from tests.support.simulate import (
    DESIRED,
    apply_to,
    check_incremental_equals_full,
    converge,
    event_st,
    live_of,
    scenario_observed,
    step,
    with_live,
)

EXAMPLES = int(os.environ.get("OSC_HYPOTHESIS_EXAMPLES", "120"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steering=st.sampled_from(["network-function", "router-policy"]),
    events=st.lists(event_st, min_size=1, max_size=14),
)
def test_incremental_plan_equals_full_plan(steering: str, events: list[tuple[Any, ...]]) -> None:
    options = CompileOptions(steering=steering)
    observed = scenario_observed(nf=steering == "network-function")
    check_incremental_equals_full(DESIRED, observed, options, events)


@pytest.mark.parametrize("steering", ["network-function", "router-policy"])
def test_a_stale_lsp_beside_the_recreated_pods_lsp_plans_like_a_full_compile(
    steering: str,
) -> None:
    """Regression (found by the property test above): pod shop/n18 is deleted on node-2 with its
    LSP left behind, then created again on node-1, so two LSPs are named ``shop_n18``. Compile
    takes the last one given (node-1's); re-planning only node-2 after an unrelated pod there was
    deleted took the stale one on node-2, and the plan put n18 in node-2's Port_Group. The planner
    now compiles everything while an LSP name (or a pod) is not unique, and follows changes again
    once it is."""
    options = CompileOptions(steering=steering)
    events = [
        ("add", 18, "node-2", True),
        ("delete", 14),  # shop/n18; an even number leaves its LSP behind
        ("add", 18, "node-1", True),
        ("delete", 18),  # shop/b on node-2
    ]
    planner = check_incremental_equals_full(
        DESIRED, scenario_observed(nf=steering == "network-function"), options, events
    )
    assert planner.last_mode == "full"
    assert planner.last_full_reason == "pod LSP names or pods are not unique"

    # Once the stale LSP is gone (shop/n18 deleted with its LSPs: an odd number), pod events are
    # followed node by node again.
    observed = scenario_observed(nf=steering == "network-function")
    for event in events:
        observed = step(observed, event, None)
    check_incremental_equals_full(DESIRED, observed, options, [("delete", 15)], planner)
    assert planner.last_mode == "full"
    assert planner.last_full_reason == "pod LSP names or pods are not unique"  # the last memo's
    observed = step(observed, ("delete", 15), None)
    check_incremental_equals_full(DESIRED, observed, options, [("label", 0, "app", "web")], planner)
    assert planner.last_mode == "incremental"


def test_nothing_changed_returns_the_same_plan_object() -> None:
    options = CompileOptions(steering="router-policy")
    observed = scenario_observed(nf=False)
    planner = IncrementalPlanner()
    first = planner.plan(DESIRED, observed, options)
    assert planner.last_mode == "full"
    observed = with_live(observed, apply_to(live_of(observed), first))
    converged = planner.plan(DESIRED, observed, options)
    assert converged.empty
    assert planner.last_mode == "full"  # our VMs and NADs appeared: Kubernetes objects changed
    again = planner.plan(DESIRED, observed, options)
    assert again is converged and planner.last_mode == "cached"


def test_one_pod_labelled_recomputes_only_its_node() -> None:
    options = CompileOptions(steering="router-policy")
    observed = scenario_observed(nf=False)
    planner = IncrementalPlanner()
    observed = with_live(
        observed, apply_to(live_of(observed), planner.plan(DESIRED, observed, options))
    )
    assert planner.plan(DESIRED, observed, options).empty
    labelled = step(observed, ("label", 3, "app", "web"), None)  # ops/d on node-1 joins web
    the_plan = planner.plan(DESIRED, labelled, options)
    assert planner.last_mode == "incremental"
    assert planner.last_dirty_nodes == {"node-1"}
    assert [(c.action, c.kind, c.key, c.changed) for c in the_plan.changes] == [
        ("update", "Port_Group", "osc.web.node_1", ("['ports']",))
    ]
    assert the_plan.changes[0].after is not None
    assert the_plan.changes[0].after["ports"] == ["ops_d", "shop_a"]


def test_new_manifests_or_nodes_compile_everything() -> None:
    options = CompileOptions(steering="router-policy")
    observed = scenario_observed(nf=False)
    planner = IncrementalPlanner()
    planner.plan(DESIRED, observed, options)
    planner.plan(desired(*DESIRED.security_groups.values()), observed, options)
    assert planner.last_mode == "full" and planner.last_full_reason == "manifests changed"
    fewer = dataclasses.replace(observed, nodes=observed.nodes[:2])
    planner.plan(desired(*DESIRED.security_groups.values()), fewer, options)
    assert planner.last_mode == "full"
    assert planner.last_full_reason == "manifests changed"  # a new Desired object again


def test_a_failing_compile_leaves_no_stale_memory() -> None:
    options = CompileOptions(steering="router-policy")
    observed = scenario_observed(nf=False)
    planner = IncrementalPlanner()
    planner.plan(DESIRED, observed, options)
    stolen = step(observed, ("steal-vnf-ip", 0), None)
    with pytest.raises(CompileError, match="already used by a pod"):
        planner.plan(DESIRED, stolen, options)
    # The same broken input fails again (never a remembered success) ...
    with pytest.raises(CompileError):
        planner.plan(DESIRED, stolen, options)
    # ... and the repaired input plans exactly like a full compile.
    assert planner.plan(DESIRED, observed, options).changes == (
        make_plan(DESIRED, observed, options).changes
    )


def test_each_full_pass_says_why() -> None:
    """``last_full_reason`` is what the loop logs for a full pass; a new planner has not
    planned yet, so its first pass is due."""
    options = CompileOptions(steering="router-policy")
    observed = scenario_observed(nf=False)
    planner = IncrementalPlanner()
    assert (planner.last_mode, planner.last_full_reason, planner.last_dirty_nodes) == (
        "full", "first pass", frozenset(),
    )  # fmt: skip
    first = planner.plan(DESIRED, observed, options)
    assert (planner.last_mode, planner.last_full_reason) == ("full", "first pass")
    applied = with_live(observed, apply_to(live_of(observed), first))
    planner.plan(DESIRED, applied, options)
    assert planner.last_full_reason == "kube objects changed"  # our VMs and NADs appeared
    planner.plan(DESIRED, applied, options, full=True)
    assert (planner.last_mode, planner.last_full_reason) == ("full", "requested")
    planner.plan(DESIRED, applied, dataclasses.replace(options, empty_grace=5.0))
    assert (planner.last_mode, planner.last_full_reason) == ("full", "options changed")


def test_an_lsp_name_seen_twice_makes_that_pass_a_full_one_and_says_so() -> None:
    options = CompileOptions(steering="router-policy")
    observed = scenario_observed(nf=False)
    events = [("add", 18, "node-2", True), ("delete", 14)]  # shop/n18's LSP is left behind
    planner = check_incremental_equals_full(DESIRED, observed, options, events)
    assert planner.last_mode == "incremental"
    for event in events:
        observed = step(observed, event, None)
    check_incremental_equals_full(
        DESIRED, observed, options, [("add", 18, "node-1", True)], planner
    )
    assert (planner.last_mode, planner.last_full_reason) == (
        "full", "pod LSP names or pods are not unique",
    )  # fmt: skip


def test_pods_coming_and_going_with_their_lsps_are_followed_node_by_node() -> None:
    """Each pod event re-plans only the node of the pod's LSP: one pass after another, the
    planner keeps its own index of LSPs and pods up to date (a stale one would look like two
    LSPs of one name and make every pass a full one)."""
    options = CompileOptions(steering="router-policy")
    observed = scenario_observed(nf=False)
    planner = IncrementalPlanner()
    planner.plan(DESIRED, observed, options)
    seen = []
    # pods by name: ops/c, ops/d, shop/a, shop/b, shop/n5, shop/n6; "delete 5" is shop/n6 with
    # its LSP (odd), "delete 4" then shop/n5 leaving its LSP behind (even)
    for event in [("add", 5, "node-2", True), ("add", 6, "node-3", True), ("delete", 5),
                  ("label", 0, "app", "web"), ("delete", 4)]:  # fmt: skip
        observed = step(observed, event, None)
        assert planner.plan(DESIRED, observed, options).changes == (
            make_plan(DESIRED, observed, options).changes
        )
        seen.append((planner.last_mode, set(planner.last_dirty_nodes)))
    assert seen == [
        ("incremental", {"node-2"}),
        ("incremental", {"node-3"}),
        ("incremental", {"node-3"}),
        ("incremental", {"node-3"}),  # ops/c
        ("incremental", {"node-2"}),
    ]


def test_lookalike_objects_are_reported_by_every_pass() -> None:
    """Objects with our labels in a namespace no VnfDeployment names are not ours: the
    planner leaves them out of what it compares (a stranger's change is no reason for a full
    pass) and still warns of them, full, incremental or cached."""
    options = CompileOptions(steering="router-policy")
    stranger = KubeObject("VirtualMachine", "tenant-a", "fw-node-1",
                          {"metadata": {"labels": {"osc.io/owner": "x"}}})  # fmt: skip
    observed = scenario_observed(nf=False)
    observed = dataclasses.replace(observed, kube_objects=(*observed.kube_objects, stranger))
    planner = IncrementalPlanner()
    modes = []
    for event in [("label", 3, "app", "web"), ("copy",), ("copy",)]:
        plan = planner.plan(DESIRED, observed, options)
        modes.append(planner.last_mode)
        codes = [(f.code, f.subject) for f in plan.findings]
        assert ("ownership", "Namespace/tenant-a") in codes, planner.last_mode
        assert plan.findings == make_plan(DESIRED, observed, options).findings
        observed = step(observed, event, None)
    assert modes == ["full", "incremental", "cached"]


def test_what_a_changed_row_of_ours_makes_the_planner_do() -> None:
    """A row someone edited is diffed again alone; a ``Port_Group`` also has its node planned
    again (a held pair is decided from its live Port_Group); a row of a table the backend reads
    back (router-policy: the VNF ports' addresses) makes a full pass, deleted or re-created."""
    options = CompileOptions(steering="router-policy")
    converged = converge(DESIRED, scenario_observed(nf=False), options)
    planner = IncrementalPlanner()
    assert planner.plan(DESIRED, converged, options).empty

    def edited(table: str, node: str, edit: Callable[[dict[str, Any]], dict[str, Any] | None]
               ) -> tuple[Observed, str]:  # fmt: skip
        rows, key = [], ""
        for row in converged.ovn_rows:
            if not key and row.table == table and row.fields["external_ids"].get(NODE) == node:
                key, fields = row.key, edit(row.fields)
                if fields is None:
                    continue
                row = dataclasses.replace(row, fields=fields)
            rows.append(row)
        return dataclasses.replace(converged, ovn_rows=tuple(rows)), key

    policy, key = edited("Logical_Router_Policy", "node-2", lambda f: {**f, "priority": 1})
    plan = planner.plan(DESIRED, policy, options)
    assert (planner.last_mode, planner.last_dirty_nodes) == ("incremental", frozenset())
    assert [(c.action, c.key) for c in plan.changes] == [("update", key)]

    group, key = edited("Port_Group", "node-2", lambda f: {**f, "ports": []})
    plan = planner.plan(DESIRED, group, options)
    assert (planner.last_mode, planner.last_dirty_nodes) == ("incremental", {"node-2"})
    assert [(c.action, c.key) for c in plan.changes] == [("update", key)]

    gone, key = edited("Logical_Switch_Port", "node-2", lambda f: None)
    plan = planner.plan(DESIRED, gone, options)
    assert planner.last_mode == "full"
    assert planner.last_full_reason == (
        f"owned Logical_Switch_Port {key} changed (the backend reads it back)"
    )
    back = with_live(gone, apply_to(live_of(gone), plan))
    assert planner.plan(DESIRED, back, options).empty
    assert planner.last_mode == "full" and planner.last_full_reason == (
        f"owned Logical_Switch_Port {key} changed (the backend reads it back)"
    )


def test_a_pod_event_on_a_node_where_no_vnf_runs() -> None:
    """Only ips is deployed, on node-1 (zone a): a pod joining web on node-2 dirties a node
    with no VNF instance and no row of ours, and plans like a full compile (nothing)."""
    only_ips = desired(sg("web", "app=web"), vnf("ips", nodeSelector={"zone": "a"}),
                       binding("web-ips", "web", "ips", 20))  # fmt: skip
    for steering in ("router-policy", "network-function"):
        options = CompileOptions(steering=steering)
        observed = converge(only_ips, scenario_observed(nf=steering == "network-function"), options)
        planner = IncrementalPlanner()
        assert planner.plan(only_ips, observed, options).empty
        joined = step(observed, ("label", 1, "app", "web"), None)  # shop/b on node-2
        assert planner.plan(only_ips, joined, options).empty, steering
        assert (planner.last_mode, planner.last_dirty_nodes) == ("incremental", {"node-2"})
