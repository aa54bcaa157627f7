"""router-policy gives each VNF on a node an address of its own (from the top of the node
subnet down), and a VNF keeps the one it has while other VNFs come and go. (Every VNF on a node
used to get the highest host: with a firewall and an IPS on one node, traffic rerouted to the
firewall could reach the IPS.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.core.compiling.compile import CompileError, CompileOptions, compile_full
from reconciler.core.planning.full import make_plan
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to, live_of, with_live

PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]
RP = CompileOptions(steering="router-policy")


def _addresses(want, observed):  # type: ignore[no-untyped-def]
    compiled = compile_full(want, observed, RP)
    return {key: inst.ip for key, inst in compiled.instances.items()}


def test_two_vnfs_on_a_node_get_two_addresses() -> None:
    fw, ips = binding("web-fw", "web", "firewall", 10), binding("web-ips", "web", "ips", 5)
    want = desired(sg("web", "app=web"), vnf("firewall"), vnf("ips"), fw, ips)
    assert _addresses(want, cluster(PODS, nf=False)) == {
        ("firewall", "node-1"): "10.244.1.254",
        ("firewall", "node-2"): "10.244.2.254",
        ("ips", "node-1"): "10.244.1.253",
        ("ips", "node-2"): "10.244.2.253",
    }
    policies = {
        r.key: r.fields["nexthops"]
        for r in compile_full(want, cluster(PODS, nf=False), RP).target
        if r.kind == "Logical_Router_Policy"
    }
    assert policies["osc.web_fw.node_1.to"] == ["10.244.1.254"]
    assert policies["osc.web_ips.node_1.to"] == ["10.244.1.253"]


def test_a_vnf_keeps_its_address_when_another_comes_first() -> None:
    """``av`` sorts before ``firewall``: added later, it takes a free address and the firewall
    keeps .254 (its VM, its port and the policies towards it do not change)."""
    one = desired(sg("web", "app=web"), vnf("firewall"), binding("web-fw", "web", "firewall", 10))
    observed = cluster(PODS, nf=False)
    live = with_live(observed, apply_to(live_of(observed), make_plan(one, observed, RP)))
    two = desired(*one.all(), vnf("av"), binding("web-av", "web", "av", 5))
    assert _addresses(two, live)[("firewall", "node-1")] == "10.244.1.254"
    assert _addresses(two, live)[("av", "node-1")] == "10.244.1.253"
    plan = make_plan(two, live, RP)
    assert not [c for c in plan.changes if c.action != "create"]


def test_an_address_a_pod_holds_is_still_refused() -> None:
    want = desired(sg("web", "app=web"), vnf("firewall"), vnf("ips"),
                   binding("web-fw", "web", "firewall", 10))  # fmt: skip
    obs = cluster(PODS, nf=False)
    port = replace(obs.pod_ports[0], ips=("10.244.1.253",))
    obs = replace(obs, pod_ports=(port, *obs.pod_ports[1:]))
    with pytest.raises(CompileError) as refused:
        compile_full(want, obs, RP)
    # .253, not the highest host: the firewall sorts first and took .254
    assert str(refused.value) == (
        "router-policy: the address reserved for VNF ips on node node-1 (10.244.1.253 of "
        "10.244.1.0/24, VNF addresses are taken from the top of the subnet down) is already used "
        "by a pod"
    )
