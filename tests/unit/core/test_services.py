"""Load balancers on a steered switch (Kubernetes Services): the VNF ports there are made
stateless (``reconciler.core.steering.services``), nothing changes where there are none, the
warm loop's pod path stays incremental, and the plan and ``explain`` word it from one source."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.observed import Observed, Switch
from reconciler.core.model.target import Target
from reconciler.core.planning.full import compile_plan, make_plan
from reconciler.core.planning.incremental import IncrementalPlanner
from reconciler.core.planning.slicing import NodeScope
from reconciler.core.steering import services
from reconciler.core.views.explain import explain_pod
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import (
    DESIRED,
    apply_to,
    check_incremental_equals_full,
    converge,
    event_st,
    live_of,
    scenario_observed,
    with_live,
)

PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
    ("shop", "db-1", "node-1", {"app": "db"}),
]
STATELESS = {"osc._vnf_ports.node_1", "osc._vnf_ports.node_1.from", "osc._vnf_ports.node_1.to"}


def want(redirection: str = "both", **spec: Any):
    return desired(
        sg("web", "app=web"),
        vnf("fw"),
        binding("web-fw", "web", "fw", 10, redirection=redirection, **spec),
    )


def with_lbs(obs: Observed, *nodes: str) -> Observed:
    return replace(
        obs,
        switches=tuple(replace(s, load_balancers=s.name in nodes) for s in obs.switches),
    )


def dump(target: Target, leave_out: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    return json.dumps([asdict(r) for r in target if r.key not in leave_out], sort_keys=True)


def test_no_load_balancer_no_new_row_and_the_others_unchanged_beside_them() -> None:
    plain = compile_target(want(), cluster(PODS))
    assert not [r for r in plain if "_vnf_ports" in r.key]
    beside = compile_target(want(), with_lbs(cluster(PODS), "node-1"))
    assert {r.key for r in beside} - {r.key for r in plain} == STATELESS
    assert dump(beside, STATELESS) == dump(plain)  # every other row byte-identical


def test_the_ports_of_every_function_on_the_node_are_stateless_both_ways() -> None:
    target = compile_target(want("entry-lport"), with_lbs(cluster(PODS), "node-1"))
    rows = {(r.kind, r.key): r for r in target}
    pg = rows[("Port_Group", "osc._vnf_ports.node_1")]
    assert pg.fields["ports"] == ["nf_fw_node-1_in", "nf_fw_node-1_out"]
    assert pg.fields["name"] == "osc._vnf_ports.node_1"
    assert pg.node == "node-1" and pg.origin == ""
    assert "osc.io/presence" not in pg.fields["external_ids"]  # not a group's: never gated
    for direction, side in (("from", "inport"), ("to", "outport")):
        row = rows[("ACL", f"osc._vnf_ports.node_1.{direction}")]
        assert (row.node, row.origin) == ("node-1", "")  # the node's, of no manifest
        acl = row.fields
        assert acl["direction"] == f"{direction}-lport"
        assert acl["match"] == f"{side} == @osc._vnf_ports.node_1 && ip"
        assert acl["action"] == "allow-stateless" and acl["network_function_group"] is None
        assert (acl["tier"], acl["priority"], acl["name"]) == (0, 100, "osc-vnf-ports")
        assert acl["port_group"] == "osc._vnf_ports.node_1"
    assert ("Port_Group", "osc._vnf_ports.node_2") not in rows  # node-2 has no load balancer


def test_a_chains_function_ports_are_stateless_too() -> None:
    chain = binding("web-chain", "web", ["fw", "ids"], 10, redirection="entry-lport")
    d = desired(sg("web", "app=web"), vnf("fw"), vnf("ids"), chain)
    target = compile_target(d, with_lbs(cluster(PODS), "node-1", "node-2"))
    ports = {r.key: r.fields["ports"] for r in target if r.kind == "Port_Group"}
    child = [p for p in ports["osc._vnf_ports.node_1"] if p.startswith("nfc")]
    functions = {r.fields["inport"] for r in target if r.kind == "Network_Function"} | {
        r.fields["outport"] for r in target if r.kind == "Network_Function"
    }
    assert child and set(child) <= functions
    assert set(ports["osc._vnf_ports.node_1"]) == {p for p in functions if "node-1" in p}


def test_the_plan_says_it_once_naming_switches_and_bindings() -> None:
    d = desired(sg("web", "app=web"), vnf("fw"),
                binding("web-fw", "web", "fw", 10, redirection="both"),
                binding("web-in", "web", "fw", 20, redirection="entry-lport"))  # fmt: skip
    target = compile_target(d, with_lbs(cluster(PODS), "node-1", "node-2"))
    notes = [w for w in target.warnings if "load balancers" in w]
    assert len(notes) == 1, notes
    assert [(f.code, f.text) for f in target.findings if f.code == "load-balancer"] == [
        ("load-balancer", notes[0])
    ]
    (note,) = notes
    assert note.startswith("switches node-1, node-2 have load balancers (OVN-Kubernetes' Services)")
    assert "Port_Group osc._vnf_ports.node_1 per node, two allow-stateless ACLs" in note
    assert "Binding web-fw, web-in's pods are steered exactly as direct ones, both ways" in note
    assert "docs/upstream/nf-from-lport-lb-reply-dropped.sh" in note
    assert note.endswith(
        "Not solved: a pod steered entry-lport or both through fw cannot connect through a "
        "Service to a pod the same VNF instance steers exit-lport or both on its own node "
        f"(node-1, node-2): {services.SAME_VNF_LIMIT}"
    )
    (exit_only,) = [
        w
        for w in compile_target(want("exit-lport"), with_lbs(cluster(PODS), "node-1")).warnings
        if "load balancers" in w
    ]
    assert "Not solved" not in exit_only  # no VNF is entered from-lport: no such case
    one = compile_target(want(), with_lbs(cluster(PODS), "node-2")).warnings
    assert [w for w in one if w.startswith("switch node-2 has load balancers")]
    assert not [w for w in compile_target(want(), cluster(PODS)).warnings if "load bal" in w]


def test_a_node_agent_writes_its_own_nodes_rows_only() -> None:
    obs = with_lbs(cluster(PODS), "node-1", "node-2")
    scope = NodeScope("node-2")
    view = scope.view(obs)
    planned = compile_plan(want(), view.observed, scope.options(CompileOptions()))
    plan = scope.restrict(planned.plan, view)
    keys = {c.key for c in plan.changes if "_vnf_ports" in c.key}
    assert keys == {"osc._vnf_ports.node_2", "osc._vnf_ports.node_2.from",
                    "osc._vnf_ports.node_2.to"}  # fmt: skip
    pg = next(c for c in plan.changes if c.key == "osc._vnf_ports.node_2")
    assert pg.after is not None and pg.after["external_ids"]["osc.io/agent"] == "node-2"


def test_a_pod_label_stays_incremental_beside_load_balancers() -> None:
    """The stateless rows depend on no pod: a label event re-plans only the pod's node, and
    the plan equals a full one (the warm loop's path is untouched)."""
    d = want()
    obs = with_lbs(cluster(PODS), "node-1", "node-2")
    options = CompileOptions()
    obs = with_live(obs, apply_to(live_of(obs), make_plan(d, obs, options)))
    planner = IncrementalPlanner()
    assert not planner.plan(d, obs, options).changes
    pods = tuple(replace(p, labels={"app": "web"}) if p.name == "db-1" else p for p in obs.pods)
    relabelled = replace(obs, pods=pods)
    plan = planner.plan(d, relabelled, options)
    assert planner.last_mode == "incremental"
    assert plan.changes == make_plan(d, relabelled, options).changes
    assert [(c.kind, c.key) for c in plan.changes] == [("Port_Group", "osc.web.node_1")]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(event_st, min_size=1, max_size=10))
def test_incremental_plan_equals_full_plan_beside_load_balancers(events: list[Any]) -> None:
    observed = scenario_observed(nf=True)
    observed = dataclasses.replace(
        observed,
        switches=tuple(Switch(s.name, s.subnet, load_balancers=True) for s in observed.switches),
    )
    check_incremental_equals_full(DESIRED, observed, CompileOptions(), events)


def test_explain_words_it_from_the_same_source_and_lists_the_rows() -> None:
    d = want()
    obs = with_lbs(cluster(PODS), "node-1")
    planned = compile_plan(d, obs, CompileOptions())
    e = explain_pod(d, obs, planned, "shop", "web-1")
    assert services.pod_note("osc-gitops", "node-1", ["web-fw"], twice=True) in e.warnings
    assert {("Port_Group", "osc._vnf_ports.node_1"), ("ACL", "osc._vnf_ports.node_1.from"),
            ("ACL", "osc._vnf_ports.node_1.to")} <= {(r.table, r.name) for r in e.ovn}  # fmt: skip
    assert e.status == "pending"  # nothing applied yet: the stateless rows are missing too
    live = converge(d, obs, CompileOptions())  # steering switched on once healthy (issue 22)
    e = explain_pod(d, live, compile_plan(d, live, CompileOptions()), "shop", "web-1")
    assert e.status == "steered"
