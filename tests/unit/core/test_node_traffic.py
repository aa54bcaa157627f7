"""Node traffic left out of steering (issue 29): where the management-port address comes from,
what a bad or missing annotation does (a warning, never text in a match), dual stack, and
``steerNodeTraffic: true``. The packets: tests/datapath/test_node_traffic.py."""

from __future__ import annotations

from dataclasses import replace

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.observed import Node
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [("shop", "web-1", "node-1", {"app": "web"})]


def to_match(obs, *, steer_node_traffic: bool = False, options: CompileOptions | None = None):
    extra = {"steerNodeTraffic": True} if steer_node_traffic else {}
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10, **extra))
    target = compile_target(want, obs, options)
    acl = next(r for r in target if r.kind == "ACL" and r.key == "osc.web_fw.node_1.to")
    return acl.fields["match"], "\n".join(target.warnings)


def test_the_annotation_comes_first_dual_stack_both_families() -> None:
    obs = cluster(PODS)
    nodes = tuple(
        replace(n, subnets=("10.128.4.0/23", "fd00:10:244:1::/64")) if n.name == "node-1" else n
        for n in obs.nodes
    )
    match, _ = to_match(replace(obs, nodes=nodes))
    assert match == (
        "outport == @osc.web.node_1 && (ip4.src != {10.128.4.2, 100.64.0.0/16, 100.88.0.0/16} "
        "|| ip6.src != {fd00:10:244:1::2, fd98::/64, fd97::/64}) && ip"
    )


def test_no_annotation_falls_back_to_the_switch_then_warns() -> None:
    obs = cluster(PODS)  # the builder's nodes carry no node-subnets: the switch's subnet counts
    match, warnings = to_match(obs)
    assert "10.244.1.2" in match and "node-traffic" not in warnings
    bare = replace(obs, switches=tuple(replace(s, subnet="") for s in obs.switches))
    match, warnings = to_match(bare)
    assert match == (
        "outport == @osc.web.node_1 && (ip4.src != {100.64.0.0/16, 100.88.0.0/16} || "
        "ip6.src != {fd98::/64, fd97::/64}) && ip"
    )
    assert "node node-1 has no k8s.ovn.org/node-subnets and its switch no subnet" in warnings


def test_a_bad_annotation_never_reaches_a_match() -> None:
    obs = cluster(PODS)
    evil = "10.0.0.0/24} || ip4.src == {0.0.0.0/0"
    nodes = (Node("node-1", {}, (evil,)), *obs.nodes[1:])
    match, warnings = to_match(replace(obs, nodes=nodes))
    assert "0.0.0.0/0" not in match and "10.244.1.2" in match  # the switch's subnet instead
    assert "is not an IP network" in warnings


def test_steer_node_traffic_and_other_infrastructure_subnets() -> None:
    obs = cluster(PODS)
    match, _ = to_match(obs, steer_node_traffic=True)
    assert match == "outport == @osc.web.node_1 && ip"
    options = CompileOptions(join_subnets=("100.65.0.0/16",), transit_subnets=())
    match, _ = to_match(obs, options=options)
    assert (
        match
        == "outport == @osc.web.node_1 && (ip4.src != {10.244.1.2, 100.65.0.0/16} || ip6) && ip"
    )
