"""Service chains (issue 21): ``vnf: [ngfw, ids]`` compiles to one Network_Function per chain,
direction and node, wired through VLAN child ports of the hops' NICs and link switches
(``reconciler.core.steering.chains``); the ACLs are a single binding's, pointing at the chain's
group. The packets are in ``tests/datapath/test_chains.py``."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import asdict
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import CompileError, CompileOptions, compile_target
from reconciler.core.model import ownership as own
from reconciler.core.model.observed import Observed
from reconciler.core.model.target import Target
from reconciler.core.planning.full import make_plan
from reconciler.core.planning.incremental import IncrementalPlanner
from reconciler.core.steering import common
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import (
    DESIRED,
    Event,
    apply_to,
    check_incremental_equals_full,
    event_st,
    live_of,
    plan_or_error,
    scenario_observed,
    step,
    with_live,
)

EXAMPLES = int(os.environ.get("OSC_HYPOTHESIS_EXAMPLES", "120"))

PODS = [
    ("shop", "pci-1", "node-1", {"app": "pci"}),
    ("shop", "pci-2", "node-2", {"app": "pci"}),
]
NF = CompileOptions(steering="network-function")


def _target(*bindings: Any, nodes: tuple[str, ...] = ("node-1", "node-2")) -> Target:
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"), vnf("av"), *bindings)
    return compile_target(want, cluster(PODS, nodes=nodes), NF)


def _rows(target: Target, kind: str, node: str | None = None) -> dict[str, dict[str, Any]]:
    return {
        r.key: {k: v for k, v in r.fields.items() if k != "external_ids"}
        for r in target
        if r.kind == kind and (node is None or r.node == node)
    }


def test_a_list_of_one_is_the_single_form_byte_for_byte() -> None:
    one = _target(binding("pci-ngfw", "pci", "ngfw", 10, redirection="both"))
    listed = _target(binding("pci-ngfw", "pci", ["ngfw"], 10, redirection="both"))
    dump = lambda t: json.dumps([asdict(r) for r in t], sort_keys=True)  # noqa: E731
    assert dump(one) == dump(listed)


def test_an_exit_chain_is_one_function_wired_through_child_ports_and_a_link() -> None:
    """exit-lport: OVN sends the packet towards the pod into the function's out port, the
    child (tagged) port of ngfw's out NIC; ngfw passes it to its in NIC, the link carries it to
    ids' out NIC, ids passes it to its in NIC, whose child port is the function's in port:
    ngfw first, then ids, each in the orientation of a single exit-lport binding."""
    target = _target(binding("pci-chain", "pci", ["ngfw", "ids"], 10))
    node1 = "nfc2_exit_ngfw_ids_node-1"
    lsps = _rows(target, "Logical_Switch_Port", "node-1")
    nf_opts = {"is-nf": "true", "receive_multicast": "false", "lsp_learn_fdb": "false"}
    assert lsps[f"{node1}_out"] == {
        "name": f"{node1}_out", "switch": "node-1", "addresses": [], "port_security": [],
        "options": {**nf_opts, "nf-linked-port": f"{node1}_in"},
        "parent_name": "nf_ngfw_node-1_out", "tag_request": 1,
    }  # fmt: skip
    assert lsps[f"{node1}_in"]["parent_name"] == "nf_ids_node-1_in"
    link = "nfl2_exit_ngfw_ids_node-1_1"
    assert _rows(target, "Logical_Switch", "node-1") == {link: {"name": link}}
    assert lsps[f"{link}a"] == {
        "name": f"{link}a", "switch": link, "addresses": ["unknown"], "port_security": [],
        "options": {"lsp_learn_fdb": "false"}, "parent_name": "nf_ngfw_node-1_in",
        "tag_request": 1,
    }  # fmt: skip
    assert lsps[f"{link}b"]["parent_name"] == "nf_ids_node-1_out"
    nfs = _rows(target, "Network_Function", "node-1")
    assert nfs["osc.chain2_exit.ngfw.ids.node_1"] == {
        "name": "osc.chain2_exit.ngfw.ids.node_1", "id": 1,
        "inport": f"{node1}_in", "outport": f"{node1}_out",
    }  # fmt: skip
    # OVN cannot probe a chain: only the hops' own functions are health-checked (their
    # health decides when the chain's steering is switched on, issue 22)
    assert set(_rows(target, "Network_Function_Health_Check")) == {
        f"osc.{hop}.{node}" for hop in ("ngfw", "ids") for node in ("node_1", "node_2")
    }
    groups = _rows(target, "Network_Function_Group", "node-1")
    # each hop's own function sits in a group of its own that no ACL names: northd reports
    # its health there (network_function_active)
    assert groups.pop("osc.ids.node_1.fail_close")["network_function"] == ["osc.ids.node_1"]
    assert groups.pop("osc.ngfw.node_1.fail_close")["network_function"] == ["osc.ngfw.node_1"]
    assert groups == {
        "osc.chain2_exit.ngfw.ids.node_1.fail_close": {
            "name": "osc.chain2_exit.ngfw.ids.node_1.fail_close", "id": 1, "mode": "inline",
            "fallback": "fail-close", "network_function": ["osc.chain2_exit.ngfw.ids.node_1"],
        }
    }  # fmt: skip
    acl = _rows(target, "ACL", "node-1")["osc.pci_chain.node_1.to"]
    assert acl["network_function_group"] == "osc.chain2_exit.ngfw.ids.node_1.fail_close"
    assert acl["match"] == (  # node traffic left out (reconciler.core.steering.node_traffic)
        "outport == @osc.pci.node_1 && (ip4.src != {10.244.1.2, 100.64.0.0/16, 100.88.0.0/16} "
        "|| ip6.src != {fd98::/64, fd97::/64}) && ip"
    )
    # every wiring row names its chain; the hops' own functions carry no traffic (only
    # OVN's probe: their health gates the chain, issue 22)
    for res in target:
        if res.key.startswith(("nfc", "nfl", "osc.chain")):
            assert res.fields["external_ids"][own.CHAIN] == "ngfw,ids"
            assert res.origin == "Binding/pci-chain"
    assert set(_rows(target, "Network_Function")) == {
        "osc.chain2_exit.ngfw.ids.node_1",
        "osc.chain2_exit.ngfw.ids.node_2",
        *(f"osc.{hop}.{node}" for hop in ("ngfw", "ids") for node in ("node_1", "node_2")),
    }


def test_both_directions_are_wired_apart_and_a_twin_lets_member_to_member_cross_once() -> None:
    """``both``: the entry wiring (ngfw in -> ngfw out -> link -> ids in -> ids out) and the
    exit one, each with its tag; between two members of one node, the twin of the to-lport
    ACL lets a packet that came out of the entry function through without the exit one."""
    target = _target(binding("pci-chain", "pci", ["ngfw", "ids"], 10, redirection="both"))
    lsps = _rows(target, "Logical_Switch_Port", "node-2")
    entry, exit_ = "nfc2_entry_ngfw_ids_node-2", "nfc2_exit_ngfw_ids_node-2"
    assert (lsps[f"{entry}_in"]["parent_name"], lsps[f"{entry}_out"]["parent_name"]) == (
        "nf_ngfw_node-2_in", "nf_ids_node-2_out"
    )  # fmt: skip
    link = "nfl2_entry_ngfw_ids_node-2_1"
    assert (lsps[f"{link}a"]["parent_name"], lsps[f"{link}b"]["parent_name"]) == (
        "nf_ngfw_node-2_out", "nf_ids_node-2_in"
    )  # fmt: skip
    tags = {lsps[f"{entry}_in"]["tag_request"], lsps[f"{exit_}_in"]["tag_request"]}
    assert tags == {1, 2}
    acls = _rows(target, "ACL", "node-2")
    assert acls["osc.pci_chain.node_2.from"]["network_function_group"] == (
        "osc.chain2_entry.ngfw.ids.node_2.fail_close"
    )
    assert acls["osc.pci_chain.node_2.to.crossed"]["match"] == (
        f'outport == @osc.pci.node_2 && inport == "{entry}_out" && ip'
    )
    assert acls["osc.pci_chain.node_2.to.crossed"]["network_function_group"] is None


def test_a_chain_steers_only_where_every_vnf_of_it_runs() -> None:
    want = desired(
        sg("pci", "app=pci"),
        vnf("ngfw"),
        vnf("ids", nodeSelector={"zone": "a"}),
        binding("pci-chain", "pci", ["ngfw", "ids"], 10),
    )
    target = compile_target(want, cluster(PODS, node_labels={"node-1": {"zone": "a"}}), NF)
    assert {r.node for r in target if r.origin == "Binding/pci-chain"} == {"node-1"}
    assert (
        "1 pod(s) of SecurityGroup pci on node node-2 are not steered by Binding pci-chain: its "
        "chain ngfw -> ids is incomplete there (VnfDeployment ids does not run there), and a "
        "chain steers only where every VNF of it runs"
    ) in target.warnings


def _health(target: Target, node: str, dead: set[str]) -> dict[str, str | None]:
    """``Observed.nf_active`` as northd would report it: every group of ours on ``node`` has
    its function active, but those of the ``dead`` VNFs' own functions, which have none."""
    active: dict[str, str | None] = {}
    for name, fields in _rows(target, "Network_Function_Group", node).items():
        (nf,) = fields["network_function"]
        active[name] = (
            None if any(nf == f"osc.{vnf}.{node.replace('-', '_')}" for vnf in dead) else nf
        )
    return active


def _acl_groups(*bindings: Any, dead: set[str] = frozenset()) -> dict[str, str | None]:  # type: ignore[assignment]
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"), vnf("av"), *bindings)
    healthy = compile_target(want, cluster(PODS), NF)
    observed = cluster(PODS, nf_active=_health(healthy, "node-1", dead))
    target = compile_target(want, observed, NF)
    return {k: f["network_function_group"] for k, f in _rows(target, "ACL").items()}


def test_a_dead_fail_open_hop_is_left_out_on_its_node() -> None:
    """Each hop of a chain that may fail open has its own health-checked function (the one a
    single-VNF binding would have); when northd reports one not healthy on a node, the chain
    there goes on without it: with one hop left, through that hop's own group (its own
    health check and policy); none left, unsteered; other nodes keep the whole chain."""
    chain = binding("pci-chain", "pci", ["ngfw", "ids"], 10, failurePolicy="fail-open")
    target = _target(chain)
    assert {"osc.ngfw.node_1", "osc.ids.node_1"} <= set(_rows(target, "Network_Function"))
    assert {"osc.ngfw.node_1", "osc.ids.node_1"} <= set(
        _rows(target, "Network_Function_Health_Check")
    )
    assert _acl_groups(chain, dead={"ids"}) == {
        "osc.pci_chain.node_1.to": "osc.ngfw.node_1.fail_open",
        "osc.pci_chain.node_2.to": "osc.chain2_exit.ngfw.ids.node_2.fail_open",
    }
    assert _acl_groups(chain, dead={"ids", "ngfw"})["osc.pci_chain.node_1.to"] is None
    # one hop left is no chain: nothing wires it on that node
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"), vnf("av"), chain)
    ids_dead = cluster(PODS, nf_active=_health(target, "node-1", {"ids"}))
    one_hop = compile_target(want, ids_dead, NF)
    assert _rows(one_hop, "Logical_Switch", "node-1") == {}
    assert not [p for p in _rows(one_hop, "Logical_Switch_Port", "node-1") if p.startswith("nfc")]
    # a hop of its own policy: ngfw fails close, ids open
    mixed = binding("pci-chain", "pci", ["ngfw", {"name": "ids", "failurePolicy": "fail-open"}], 10)
    assert _acl_groups(mixed, dead={"ids"})["osc.pci_chain.node_1.to"] == (
        "osc.ngfw.node_1.fail_close"
    )
    # a dead fail-close hop keeps the whole chain: its traffic is dropped there
    assert _acl_groups(mixed, dead={"ngfw", "ids"})["osc.pci_chain.node_1.to"] == (
        "osc.chain2_exit.ngfw.ids.node_1.fail_close"
    )
    # a chain that fails close keeps its hops' health checks: its steering on a node is
    # switched on once every hop there is healthy (issue 22)
    closed = _target(binding("pci-chain", "pci", ["ngfw", "ids"], 10))
    assert "osc.ids.node_1" in _rows(closed, "Network_Function_Health_Check")


def test_three_hops_with_the_middle_one_dead_are_rewired_around_it() -> None:
    chain = binding("pci-chain", "pci", ["ngfw", "av", "ids"], 10, failurePolicy="fail-open")
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"), vnf("av"), chain)
    healthy = compile_target(want, cluster(PODS), NF)
    assert _rows(healthy, "Logical_Switch", "node-1").keys() == {
        "nfl3_exit_ngfw_av_ids_node-1_1", "nfl3_exit_ngfw_av_ids_node-1_2"
    }  # fmt: skip
    target = compile_target(want, cluster(PODS, nf_active=_health(healthy, "node-1", {"av"})), NF)
    assert set(_rows(target, "Logical_Switch", "node-1")) == {"nfl2_exit_ngfw_ids_node-1_1"}
    assert set(_rows(target, "Logical_Switch", "node-2")) == {
        "nfl3_exit_ngfw_av_ids_node-2_1", "nfl3_exit_ngfw_av_ids_node-2_2"
    }  # fmt: skip
    assert _rows(target, "ACL", "node-1")["osc.pci_chain.node_1.to"]["network_function_group"] == (
        "osc.chain2_exit.ngfw.ids.node_1.fail_open"
    )
    assert any("VnfDeployment av of the chain ngfw -> av -> ids is not healthy on node node-1"
               in w for w in target.warnings)  # fmt: skip


def test_the_planner_compiles_again_only_when_a_hop_it_read_changes_health() -> None:
    chain = binding("pci-chain", "pci", ["ngfw", "ids"], 10, failurePolicy="fail-open")
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"), vnf("av"), chain)
    observed = cluster(PODS)
    planner = IncrementalPlanner()
    first = planner.plan(want, observed, NF)
    # the chain's steering waits until northd reports every hop healthy (issue 22)
    assert first.meta["held"][0]["reason"].startswith(
        "waiting for ngfw-node-1 and ids-node-1 to become healthy"
    )
    live = with_live(observed, apply_to(live_of(observed), first))
    assert planner.plan(want, live, NF).empty
    healthy = compile_target(want, live, NF)
    nf_active = {**_health(healthy, "node-1", set()), **_health(healthy, "node-2", set())}
    switch_on = planner.plan(want, dataclasses.replace(live, nf_active=nf_active), NF)
    assert {(c.action, c.kind) for c in switch_on.changes} == {("create", "ACL")}
    live = with_live(live, apply_to(live_of(live), switch_on))
    up = dataclasses.replace(live, nf_active=nf_active)
    assert planner.plan(want, up, NF).empty
    other = dataclasses.replace(up, nf_active={**up.nf_active, "osc.someone.else": None})
    assert planner.plan(want, other, NF).empty and planner.last_mode == "cached"
    down = dataclasses.replace(other, nf_active=_health(healthy, "node-1", {"ids"}))
    plan = planner.plan(want, down, NF)
    assert (planner.last_mode, planner.last_full_reason) == (
        "full", "the health of a chain's VNF changed",
    )  # fmt: skip
    assert plan.changes == make_plan(want, down, NF).changes
    assert ("update", "osc.pci_chain.node_1.to") in {(c.action, c.key) for c in plan.changes}


def test_router_policy_refuses_a_chain() -> None:
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"),
                   binding("pci-chain", "pci", ["ngfw", "ids"], 10))  # fmt: skip
    with pytest.raises(CompileError, match="router-policy steering cannot carry a chain"):
        compile_target(want, cluster(PODS, nf=False), CompileOptions(steering="router-policy"))


def test_tags_and_ids_stay_when_another_chain_comes_first() -> None:
    """A chain that sorts before an existing one takes free tags and ids: the existing
    wiring keeps its own, so its live traffic is not rewired."""
    first = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"), vnf("av"),
                    binding("b", "pci", ["ngfw", "ids"], 10))  # fmt: skip
    observed = cluster(PODS)
    live = with_live(observed, apply_to(live_of(observed), make_plan(first, observed, NF)))
    second = desired(*first.all(), binding("a", "pci", ["av", "ids"], 5))
    plan = make_plan(second, live, NF)
    assert {c.action for c in plan.changes} == {"create"}, "nothing of the first chain changes"
    created = {c.key: c.after for c in plan.changes}
    assert created["nfc2_exit_av_ids_node-1_in"]["tag_request"] == 2
    assert created["osc.chain2_exit.av.ids.node_1"]["id"] == 9  # 8 taken: 2 chains, 6 hops


def test_the_id_budget_counts_chains_and_says_how_they_add_up() -> None:
    """A central NB holds every node's functions: 200 nodes x (a chain in two directions and
    its two hops' own functions, whose health gates it) is 800 functions, more than OVN's 255:
    refused before anything is written, saying why."""
    nodes = tuple(f"node-{i}" for i in range(1, 201))
    both = binding("pci-chain", "pci", ["ngfw", "ids"], 10, redirection="both")
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"), both)
    with pytest.raises(CompileError) as err:
        compile_target(want, cluster(PODS, nodes=nodes), NF)
    assert "Network_Function ids exhausted: OVN allows ids 1-255 per Northbound DB and " in str(
        err.value
    )
    assert (
        "this target needs 800 rows: 200 node(s) x up to 4 per node (chain ngfw -> ids (entry) "
        "x 200, chain ngfw -> ids (exit) x 200, ids x 200, ngfw x 200)"
    ) in str(err.value)
    assert "nothing was written" in str(err.value)


def test_first_match_surprises_suggest_a_chain() -> None:
    """The issue's case: pci -> ngfw (order 10, tcp 443) and pci -> ids (order 20) read as
    "through the firewall, then the IDS"; port 443 never reaches the IDS, and the plan says so.
    With the chain, nothing is lost and nothing is said."""
    ngfw = binding("pci-ngfw", "pci", "ngfw", 10, traffic={"protocol": "tcp", "ports": [443]})
    ids = binding("pci-ids", "pci", "ids", 20)
    (warning,) = [w for w in _target(ngfw, ids).warnings if "never gets" in w]
    assert warning == (
        "Binding pci-ids (VNF ids) never gets tcp 443 of SecurityGroup pci (to-lport): Binding "
        "pci-ngfw (order 10, VNF ngfw) is evaluated first and takes it, and a packet is "
        "steered by the first matching binding only, so it never crosses ids. To send it "
        "through ngfw and then ids, give Binding pci-ngfw the chain vnf: [ngfw, ids]"
    )
    chained = binding("pci-ngfw", "pci", ["ngfw", "ids"], 10,
                      traffic={"protocol": "tcp", "ports": [443]})  # fmt: skip
    assert not [w for w in _target(chained, ids).warnings if "never gets" in w]


def test_traffic_intersections() -> None:
    tcp = lambda *p: common.Traffic(protocol="tcp", ports=list(p))  # type: ignore[arg-type]  # noqa: E731
    everything = (common.Traffic(),)
    assert common.intersect(everything, (tcp(443),)) == (tcp(443),)
    assert common.describe_filters(common.intersect((tcp(80, 443),), (tcp(443, 8443),))) == [
        "tcp 443"
    ]
    assert common.intersect((tcp(80),), (common.Traffic(protocol="udp"),)) == ()  # type: ignore[arg-type]


def test_incremental_equals_full_with_a_chain() -> None:
    """The planner's event scenario with a chain among the bindings."""
    chain = binding("db-chain", "db", ["fw", "ips"], 30, redirection="both")
    want = desired(*DESIRED.all(), chain)
    events = [
        ("label", 3, "tier", "db"), ("apply",), ("add", 7, "node-1", True), ("apply",),
        ("delete", 7), ("drift", 5, "delete"), ("copy",), ("label", 0, "app", None),
    ]  # fmt: skip
    observed = scenario_observed(nf=True)
    check_incremental_equals_full(want, observed, NF, events)


health_st = st.tuples(st.just("health"), st.integers(0, 40), st.booleans())


def _step_health(observed: Observed, event: Event, current: Any) -> Observed:
    """``("health", i, up)``: northd judges the i-th group of ours (by name) healthy or not;
    anything else is the planner scenario's event."""
    if event[0] != "health":
        return step(observed, event, current)
    groups = sorted(
        (r.key, r.fields["network_function"]) for r in observed.ovn_rows
        if r.table == "Network_Function_Group"
    )  # fmt: skip
    if not groups:
        return observed
    name, functions = groups[event[1] % len(groups)]
    active = functions[0] if event[2] and functions else None
    return dataclasses.replace(observed, nf_active={**observed.nf_active, name: active})


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(st.one_of(event_st, health_st), min_size=1, max_size=14))
def test_incremental_equals_full_while_hops_die_and_come_back(events: list[Event]) -> None:
    """The planner's event scenario plus northd flipping groups' health, with a fail-open
    chain: after every event the incremental plan equals a full compile's."""
    chain = binding("web-chain", "web", ["fw", "ips"], 30, redirection="both",
                    failurePolicy="fail-open")  # fmt: skip
    want = desired(*DESIRED.all(), chain)
    observed = scenario_observed(nf=True)
    planner = IncrementalPlanner()
    current = None
    for event in events:
        observed = _step_health(observed, event, current)
        full = plan_or_error(partial(make_plan, want, observed, NF))
        mine = plan_or_error(partial(planner.plan, want, observed, NF))
        if isinstance(full, str) or isinstance(mine, str):
            assert mine == full, f"after {event}"
            current = None
            continue
        assert mine.changes == full.changes, f"after {event} ({planner.last_mode})"
        current = full


def test_explain_shows_a_chain_hop_by_hop() -> None:
    """A pod steered through a chain: the binding lists its hops in order, each with its VM on
    the pod's node and its own health as OVN reports it (the chain's function has none), and
    the rows along the path: the ACLs, the chain's group and function, its child ports and its
    link switch. On a node where a hop does not run, the binding does not steer the pod, and
    says which hop is missing."""
    from reconciler.core.planning.full import compile_plan
    from reconciler.core.views.explain import explain_pod
    from reconciler.render.explain import explain_json, render_explain_text

    chain = binding("pci-chain", "pci", ["ngfw", {"name": "ids", "failurePolicy": "fail-open"}],
                    10, redirection="both")  # fmt: skip
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids", nodeSelector={"zone": "a"}),
                   chain)  # fmt: skip
    observed = cluster(PODS, node_labels={"node-1": {"zone": "a"}})
    live = with_live(observed, apply_to(live_of(observed), make_plan(want, observed, NF)))
    nf_active = {"osc.ngfw.node_1.fail_close": "osc.ngfw.node_1",
                 "osc.ids.node_1.fail_open": "osc.ids.node_1"}  # fmt: skip
    live = dataclasses.replace(live, nf_active=nf_active)
    # the chain's ACLs were held until northd reported both hops healthy (issue 22)
    live = with_live(live, apply_to(live_of(live), compile_plan(want, live, NF).plan))
    e = explain_pod(want, live, compile_plan(want, live, NF), "shop", "pci-1")
    assert e.status == "steered"
    (view,) = e.bindings
    assert view.vnf == ["ngfw", "ids"] and view.instance is None
    # the chain as a whole: its worst VM state, and no health of its own (OVN has none)
    assert (view.vm_state, view.health) == ("ok", "unknown")
    assert view.health_detail.startswith("a chain's function has no health check")
    # a hop OVN reports unhealthy: the chain's traffic is dropped there, whatever its policy
    sick = dataclasses.replace(live, nf_active={**nf_active, "osc.ids.node_1.fail_open": None})
    warned = explain_pod(want, sick, compile_plan(want, sick, NF), "shop", "pci-1").warnings
    assert [w for w in warned if "healthy" in w] == [
        "VNF ids of the chain of Binding pci-chain is not healthy as OVN reports it on node "
        "node-1: the chain's traffic is dropped there (OVN cannot probe the chain itself, so its "
        "failure policy cannot act)"
    ]
    assert not [w for w in e.warnings if "healthy" in w]
    # a later hop's VM gone (someone deleted it): the chain's state is that hop's
    no_ids = dataclasses.replace(
        live,
        kube_objects=tuple(
            o for o in live.kube_objects if (o.kind, o.name) != ("VirtualMachine", "ids-node-1")
        ),
    )
    (gone,) = explain_pod(want, no_ids, compile_plan(want, no_ids, NF), "shop", "pci-1").bindings
    assert (gone.vm_state, [h.vm_state for h in gone.hops]) == ("missing", ["ok", "missing"])
    assert [(h.vnf, h.instance, h.health) for h in view.hops] == [
        ("ngfw", "security/ngfw-node-1", "healthy"),
        ("ids", "security/ids-node-1", "healthy"),
    ]
    rows = {(r.table, r.name) for r in e.ovn}
    assert {
        ("Network_Function_Group", "osc.chain2_exit.ngfw.ids.node_1.fail_close"),
        ("Network_Function", "osc.chain2_entry.ngfw.ids.node_1"),
        ("Logical_Switch_Port", "nfc2_exit_ngfw_ids_node-1_out"),
        ("Logical_Switch", "nfl2_entry_ngfw_ids_node-1_1"),
    } <= rows
    text = render_explain_text(e)
    assert "chain ngfw -> ids on node-1, hop by hop:" in text
    assert "1. VNF ngfw: VirtualMachine security/ngfw-node-1, healthy" in text
    data = explain_json(e)["bindings"][0]
    assert data["vnf"] == ["ngfw", "ids"] and [h["vnf"] for h in data["hops"]] == ["ngfw", "ids"]

    other = explain_pod(want, live, compile_plan(want, live, NF), "shop", "pci-2")
    (view,) = other.bindings
    assert other.status == "not-steered" and not view.steers
    assert view.reason.startswith("its chain ngfw -> ids is incomplete there: VnfDeployment ids")


def test_three_hops_are_wired_in_list_order_in_both_directions() -> None:
    """Entry (from the pod): in at ngfw's in NIC, ngfw out -> av in, av out -> ids in, out at
    ids' out NIC. Exit (to the pod, sent into the function's out port): out at ngfw's out NIC,
    ngfw in -> av out, av in -> ids out, in at ids' in NIC. A request crosses ngfw first,
    then av, then ids, either way."""
    target = _target(binding("pci-chain", "pci", ["ngfw", "av", "ids"], 10, redirection="both"))
    lsps = _rows(target, "Logical_Switch_Port", "node-1")

    def parents(direction: str) -> dict[str, str]:
        stem = f"3_{direction}_ngfw_av_ids_node-1"
        names = {
            "in": f"nfc{stem}_in", "out": f"nfc{stem}_out",
            "1a": f"nfl{stem}_1a", "1b": f"nfl{stem}_1b",
            "2a": f"nfl{stem}_2a", "2b": f"nfl{stem}_2b",
        }  # fmt: skip
        return {part: lsps[name]["parent_name"] for part, name in names.items()}

    assert parents("entry") == {
        "in": "nf_ngfw_node-1_in", "1a": "nf_ngfw_node-1_out", "1b": "nf_av_node-1_in",
        "2a": "nf_av_node-1_out", "2b": "nf_ids_node-1_in", "out": "nf_ids_node-1_out",
    }  # fmt: skip
    assert parents("exit") == {
        "out": "nf_ngfw_node-1_out", "1a": "nf_ngfw_node-1_in", "1b": "nf_av_node-1_out",
        "2a": "nf_av_node-1_in", "2b": "nf_ids_node-1_out", "in": "nf_ids_node-1_in",
    }  # fmt: skip


def _wire(*hops: str) -> Any:
    from reconciler.core.steering.chains import Wire

    return Wire(tuple(hops), "exit", "node-1", ())


def test_a_wiring_keeps_its_live_tag_and_the_new_ones_after_it_take_free_tags() -> None:
    from reconciler.core.model.observed import OvnRow
    from reconciler.core.steering.chains import allocate_tags

    kept, new = _wire("a", "b"), _wire("c", "d")
    port = kept.port("in")
    live = Observed(ovn_rows=(
        OvnRow("Logical_Switch_Port", port, {"name": port, "tag_request": 7,
                                             "external_ids": {own.CHAIN: "a,b"}}),
        # a port of no chain's (no osc.io/chain), and a row of another table, hold no tag
        OvnRow("Logical_Switch_Port", "x", {"tag_request": 1, "external_ids": {}}),
    ))  # fmt: skip
    assert allocate_tags([kept.key, new.key], [kept, new], live) == {kept.key: 7, new.key: 1}


def test_vlan_tags_run_out_after_4094_chain_wirings() -> None:
    from reconciler.core.steering.chains import MAX_TAG, allocate_tags

    keys = [(("a", f"h{i:04d}"), "exit") for i in range(MAX_TAG + 1)]
    tags = allocate_tags(keys[:MAX_TAG], [], Observed())
    assert sorted(tags.values()) == list(range(1, 4095))
    with pytest.raises(CompileError) as refused:
        allocate_tags(keys, [], Observed())
    assert str(refused.value) == (
        "VLAN tags for service chains exhausted: 4095 chain wirings need one each and 802.1Q "
        "has 4094; use fewer distinct chains"
    )


def test_a_chain_that_loses_hops_says_which_and_what_its_traffic_crosses_meanwhile() -> None:
    chain = binding("pci-chain", "pci", ["ngfw", "av", "ids"], 10, failurePolicy="fail-open")
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"), vnf("av"), chain)
    healthy = compile_target(want, cluster(PODS), NF)

    def finding(dead: set[str]) -> Any:
        observed = cluster(PODS, nf_active=_health(healthy, "node-1", dead))
        target = compile_target(want, observed, NF)
        (found,) = [f for f in target.findings if f.code == "health-check"]
        return found

    one = finding({"av"})
    assert (one.subject, one.node, one.text) == (
        "Binding/pci-chain", "node-1",
        "Binding pci-chain: VnfDeployment av of the chain ngfw -> av -> ids is not healthy on "
        "node node-1 as OVN reports it and may fail open: the chain's traffic there crosses "
        "ngfw -> ids until it is healthy again",
    )  # fmt: skip
    assert finding({"ngfw", "av", "ids"}).text == (
        "Binding pci-chain: VnfDeployment ngfw, av, ids of the chain ngfw -> av -> ids is not "
        "healthy on node node-1 as OVN reports it and may fail open: the chain's traffic there "
        "crosses no VNF at all until it is healthy again"
    )


def test_the_chain_as_a_whole_takes_the_bindings_policy_whatever_its_first_hops_own() -> None:
    """A chain's own group falls back by the Binding's failurePolicy; a hop's own policy
    only decides whether that hop may be left out."""
    chain = binding("pci-chain", "pci", [{"name": "ngfw", "failurePolicy": "fail-close"}, "ids"],
                    10, failurePolicy="fail-open")  # fmt: skip
    assert _acl_groups(chain)["osc.pci_chain.node_1.to"] == (
        "osc.chain2_exit.ngfw.ids.node_1.fail_open"
    )
