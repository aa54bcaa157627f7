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


def _steering(want, observed):  # type: ignore[no-untyped-def]
    target = compile_full(want, observed, RP).target
    policies = {r.key: r.fields for r in target if r.kind == "Logical_Router_Policy"}
    return policies, target.findings


def test_a_node_without_an_ipv4_subnet_is_not_steered_and_the_plan_says_so() -> None:
    from reconciler.core.model.facts import Finding
    from reconciler.core.model.observed import Switch

    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    for subnet in (None, "fd00:10:244:1::/64"):
        observed = cluster(PODS, nf=False)
        observed = replace(observed, switches=(Switch("node-1", subnet), observed.switches[1]))
        policies, findings = _steering(want, observed)
        assert set(policies) == {"osc.web_fw.node_2.to"}, "the other nodes are still steered"
        assert Finding(
            "unsteered", "Binding/web-fw", "node-1",
            "router-policy: switch node-1 has no IPv4 other_config:subnet, so VNF fw has no "
            "address there: Binding web-fw is not steered on node-1",
        ) in findings  # fmt: skip


def test_a_subnet_written_with_host_bits_is_read_as_its_network() -> None:
    from reconciler.core.model.observed import Switch

    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, redirection="both"))  # fmt: skip
    observed = cluster(PODS, nf=False)
    hosts = replace(observed, switches=(Switch("node-1", "10.244.1.1/24"),
                                        Switch("node-2", "10.244.2.1/24")))  # fmt: skip
    policies, _ = _steering(want, hosts)
    assert policies == _steering(want, observed)[0]
    assert policies["osc.web_fw.node_1.from"]["match"].startswith("ip4.dst == 10.244.1.0/24 && ")


def test_a_fail_open_binding_is_warned_that_router_policies_cannot_fail_open() -> None:
    from reconciler.core.model.facts import Finding

    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, failurePolicy="fail-open"))  # fmt: skip
    _, findings = _steering(want, cluster(PODS, nf=False))
    assert Finding(
        "backend", "Binding/web-fw", None,
        "Binding web-fw: router-policy cannot fail open (no health check); a VNF that stops "
        "forwarding blackholes the traffic",
    ) in findings  # fmt: skip
    closed = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    assert not any("fail open" in f.text for f in _steering(closed, cluster(PODS, nf=False))[1])


def test_only_a_reroute_policy_steers_and_an_unknown_next_hop_names_no_vnf() -> None:
    from reconciler.core.steering import backend_for
    from reconciler.core.steering.base import OwnedRows, Steered

    backend = backend_for("router-policy")
    rows = OwnedRows({"Logical_Switch_Port": {"nf_fw_node-1_in": {
        "addresses": ["0a:58:00:00:00:01 10.244.1.254"],
        "external_ids": {"osc.io/resource": "VnfDeployment/fw"},
    }}})  # fmt: skip
    policy = {"action": "reroute", "match": "ip4.dst == $osc.web.node_1_ip4",
              "nexthops": ["10.244.1.254"]}  # fmt: skip
    assert backend.steered_by("Logical_Router_Policy", policy, rows) == Steered(
        ("fw",), ["osc.web.node_1_ip4"], "exit", None
    )
    assert backend.steered_by("Logical_Router_Policy", {**policy, "action": "allow"}, rows) is None
    assert backend.steered_by("ACL", policy, rows) is None
    elsewhere = {**policy, "nexthops": ["10.244.9.9"]}
    assert backend.steered_by("Logical_Router_Policy", elsewhere, rows) == Steered(
        (), ["osc.web.node_1_ip4"], "exit", None
    )


def test_without_the_cluster_router_nothing_is_steered_and_the_plan_says_so() -> None:
    from reconciler.core.model.facts import Finding

    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    policies, findings = _steering(want, replace(cluster(PODS, nf=False), routers=()))
    assert policies == {}
    assert Finding(
        "backend", "", None,
        "router-policy: logical router ovn_cluster_router not found: no binding is steered",
    ) in findings  # fmt: skip


def test_a_chain_is_refused_naming_every_chained_binding() -> None:
    want = desired(sg("pci", "app=pci"), vnf("ngfw"), vnf("ids"),
                   binding("b-chain", "pci", ["ngfw", "ids"], 10),
                   binding("a-chain", "pci", ["ids", "ngfw"], 20))  # fmt: skip
    with pytest.raises(CompileError) as refused:
        compile_full(want, cluster(PODS, nf=False), RP)
    assert str(refused.value) == (
        "router-policy steering cannot carry a chain of VNFs (Binding a-chain, b-chain): a "
        "rerouted packet goes to one VNF's address; service chains need Network Function "
        "insertion (OVN >= 26.03, the default steering)"
    )


def test_a_binding_whose_vnf_runs_nowhere_does_not_stop_the_next_one() -> None:
    want = desired(
        sg("web", "app=web"),
        vnf("ghost", nodeSelector={"none": "such"}),
        vnf("fw"),
        binding("web-ghost", "web", "ghost", 5),
        binding("web-fw", "web", "fw", 10),
    )
    policies, _ = _steering(want, cluster(PODS, nf=False))
    assert set(policies) == {"osc.web_fw.node_1.to", "osc.web_fw.node_2.to"}


def test_the_vnf_s_in_port_answers_at_its_address_with_its_data_in_nic_s_mac() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    target = compile_full(want, cluster(PODS, nf=False), RP).target
    lsps = {r.key: r.fields for r in target if r.kind == "Logical_Switch_Port"}
    vm = next(r.fields for r in target if r.kind == "VirtualMachine" and r.node == "node-1")
    nics = vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]
    macs = {nic["name"]: nic.get("macAddress") for nic in nics}
    assert lsps["nf_fw_node-1_in"]["addresses"] == [f"{macs['data-in']} 10.244.1.254"]
    assert lsps["nf_fw_node-1_out"]["addresses"] == []
    assert macs["data-in"] != macs["data-out"]


def test_a_vnf_address_is_a_free_host_from_the_top_of_the_subnet_down() -> None:
    from reconciler.core.steering import backend_for

    def address(subnet: str | None, live: str | None = None, *taken: str) -> str | None:
        return backend_for("router-policy").vnf_address("fw", "node-1", subnet, live,
                                                        frozenset(taken))  # fmt: skip

    assert address("10.0.0.0/30") == "10.0.0.2"
    assert address("10.0.0.0/30", None, "10.0.0.2") == "10.0.0.1"
    assert address("10.0.0.0/30", None, "10.0.0.2", "10.0.0.1") is None, "no free host"
    assert address("fd00:10:244:1::/64") == "fd00:10:244:1:ffff:ffff:ffff:fffe"
    assert address(None) is None and address("") is None
    # the live address is kept while it is a free host of the subnet
    assert address("10.0.0.0/24", "10.0.0.7") == "10.0.0.7"
    assert address("10.0.0.0/24", "10.0.0.7", "10.0.0.7") == "10.0.0.254", "another VNF's"
    assert address("10.0.0.0/24", "10.0.0.7", "10.0.0.254") == "10.0.0.7"
