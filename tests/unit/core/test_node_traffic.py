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


def with_subnets(obs, node_subnets=None, switch_subnet=None):  # type: ignore[no-untyped-def]
    """``obs`` with node-1's ``k8s.ovn.org/node-subnets`` and its switch's subnet replaced."""
    nodes = tuple(replace(n, subnets=node_subnets) if n.name == "node-1" and node_subnets
                  is not None else n for n in obs.nodes)  # fmt: skip
    switches = tuple(replace(s, subnet=switch_subnet) if s.name == "node-1" and switch_subnet
                     is not None else s for s in obs.switches)  # fmt: skip
    return replace(obs, nodes=nodes, switches=switches)


def test_what_cannot_be_left_out_is_said_whole() -> None:
    obs = cluster(PODS)
    options = CompileOptions(join_subnets=("100.64.0.0/16", "bad"), transit_subnets=("x/99",))
    _, warnings = to_match(with_subnets(obs, ("nope",), ""), options=options)
    assert warnings.splitlines() == sorted([
        "join subnet 'bad' is not an IP network: it is not left out of steering",
        "transit subnet 'x/99' is not an IP network: it is not left out of steering",
        "node node-1: k8s.ovn.org/node-subnets 'nope' is not an IP network: it is not left out "
        "of steering",
        "node node-1 has no k8s.ovn.org/node-subnets and its switch no subnet: its "
        "management-port address is unknown, so kubelet probes of its protected pods are "
        "steered like their traffic (a fail-close VNF outage fails their liveness probes)",
    ])  # fmt: skip


def test_a_subnet_too_small_for_a_management_port_is_named_with_where_it_came_from() -> None:
    obs = cluster(PODS)
    match, warnings = to_match(with_subnets(obs, ("10.9.0.0/31", "10.9.1.0/30")))
    assert (
        "node node-1: subnet 10.9.0.0/31 from k8s.ovn.org/node-subnets has no management "
        "port" in warnings.splitlines()
    )
    assert "ip4.src != {10.9.1.2, 100.64.0.0/16" in match  # a /30 has a .2
    match, warnings = to_match(with_subnets(obs, (), "10.244.1.0/31"))
    assert warnings.splitlines() == [
        "node node-1: subnet 10.244.1.0/31 from its logical switch's other_config:subnet "
        "(10.244.1.0/31) has no management port"
    ]


def test_each_address_and_subnet_is_left_out_once() -> None:
    obs = with_subnets(cluster(PODS), (" 10.9.0.0/24", "10.9.0.0/25"))  # one .2, spaces ignored
    options = CompileOptions(join_subnets=("100.64.0.0/16",), transit_subnets=("100.64.0.0/16",))
    match, warnings = to_match(obs, options=options)
    assert "(ip4.src != {10.9.0.2, 100.64.0.0/16} || ip6) && ip" in match and not warnings


def test_traffic_from_the_pods_leaves_out_the_node_as_its_destination() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, redirection="entry-lport"))  # fmt: skip
    target = compile_target(want, cluster(PODS))
    (acl,) = [r for r in target if r.kind == "ACL" and r.key == "osc.web_fw.node_1.from"]
    assert (
        "(ip4.dst != {10.244.1.2, 100.64.0.0/16, 100.88.0.0/16} || ip6.dst != "
        in (acl.fields["match"])
    )


def test_nothing_to_leave_out_adds_no_term_and_host_bits_are_tolerated() -> None:
    obs = cluster(PODS)
    none = CompileOptions(join_subnets=(), transit_subnets=())
    match, _ = to_match(with_subnets(obs, (), ""), options=none)
    assert match == "outport == @osc.web.node_1 && ip"
    match, warnings = to_match(with_subnets(obs, ("10.9.0.5/24",)), options=none)
    assert match == "outport == @osc.web.node_1 && (ip4.src != {10.9.0.2} || ip6) && ip"
    assert not warnings


def test_a_switch_subnet_that_does_not_parse_is_named() -> None:
    _, warnings = to_match(with_subnets(cluster(PODS), (), "garbage"))
    assert (
        "switch node-1: subnet 'garbage' is not an IP network: it is not left out of "
        "steering" in warnings.splitlines()
    )


def test_a_node_without_a_management_address_is_a_finding_of_that_node() -> None:
    obs = cluster(PODS)
    bare = replace(obs, switches=tuple(replace(s, subnet="") for s in obs.switches))
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    target = compile_target(want, bare)
    found = [(f.code, f.subject, f.node) for f in target.findings if f.code == "node-traffic"]
    assert found == [("node-traffic", f"Node/{n}", n) for n in ("node-1", "node-2")]  # once each
