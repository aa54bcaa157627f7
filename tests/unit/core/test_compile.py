"""compile: membership, VNF instances, both steering backends, ids, warnings, determinism."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest

from reconciler.core.compiling.compile import CompileError, CompileOptions, compile_target
from reconciler.core.model.observed import NetworkPolicy, OvnRow, Pod, Switch
from reconciler.core.model.target import Target
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-2", {"tier": "frontend"}),
    ("shop", "both", "node-1", {"app": "web", "tier": "frontend"}),
    ("shop", "db-1", "node-1", {"app": "db"}),
    ("other", "web-x", "node-2", {"app": "web"}),
]


def rows(target: Target, kind: str) -> dict[str, dict]:
    return {r.key: r.fields for r in target if r.kind == kind}


def base(**bspec):
    return desired(
        sg("web", "app=web", "tier=frontend"),
        vnf("fw"),
        binding("web-fw", "web", "fw", 10, **bspec),
    )


def test_same_input_gives_byte_identical_target():
    obs = cluster(PODS)
    a = compile_target(base(), obs)
    b = compile_target(base(), cluster(list(reversed(PODS))))
    dump = lambda t: json.dumps([asdict(r) for r in t], sort_keys=True)  # noqa: E731
    assert dump(a) == dump(b)
    assert list(a.resources) == sorted(a.resources)


def test_membership_is_or_over_labels_of_different_keys_once_per_pod():
    target = compile_target(base(), cluster(PODS))
    pgs = rows(target, "Port_Group")
    assert pgs["osc.web.node_1"]["ports"] == ["shop_both", "shop_web-1"]
    assert pgs["osc.web.node_2"]["ports"] == ["other_web-x", "shop_web-2"]


def test_namespaces_filter_and_pods_without_matching_lsp_are_left_out():
    obs = cluster(PODS)
    # web-2's LSP records another UID: a recreated pod with the same name is a different pod.
    ports = tuple(
        replace(p, pod_uid="stale") if p.name == "shop_web-2" else p for p in obs.pod_ports
    )
    # a pod with no LSP at all (not wired yet)
    obs = replace(
        obs, pod_ports=ports, pods=(*obs.pods, Pod("shop", "new", "u", "node-1", {"app": "web"}))
    )
    d = desired(
        sg("web", "app=web", "tier=frontend", namespaces=["shop"]),
        vnf("fw"),
        binding("b", "web", "fw", 1),
    )
    target = compile_target(d, obs)
    pgs = rows(target, "Port_Group")
    assert pgs["osc.web.node_1"]["ports"] == ["shop_both", "shop_web-1"]
    # no member left on node-2: no Port_Group there, and no ACL on it
    assert "osc.web.node_2" not in pgs
    assert sorted(rows(target, "ACL")) == ["osc.b.node_1.to"]


def test_one_vm_per_selected_node_pinned_and_labelled():
    d = desired(
        sg("web", "app=web"),
        vnf("ips", nodeSelector={"osc.io/vnf-capable": "true"}, cpu=2, memory="2Gi"),
    )
    obs = cluster(PODS, node_labels={"node-2": {"osc.io/vnf-capable": "true"}})
    target = compile_target(d, obs)
    vms = rows(target, "VirtualMachine")
    assert list(vms) == ["security/ips-node-2"]
    vm = vms["security/ips-node-2"]
    assert vm["spec"]["runStrategy"] == "Always"
    tmpl = vm["spec"]["template"]["spec"]
    # pinned by node affinity on the node's name (tests/unit/core/test_vm_objects.py)
    assert tmpl["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-2"]  # fmt: skip
    assert tmpl["domain"]["cpu"] == {"cores": 2}
    assert tmpl["domain"]["resources"]["requests"]["memory"] == "2Gi"
    labels = vm["metadata"]["labels"]
    assert labels["osc.io/vnf"] == "ips" and labels["osc.io/node"] == "node-2"
    assert labels["app.kubernetes.io/managed-by"] == "osc-gitops"
    # the OVN port ids of the VNF are recorded on the VM and in the plan
    assert (
        vm["metadata"]["annotations"]["osc.io/ports"] == "in=nf_ips_node-2_in,out=nf_ips_node-2_out"
    )
    nads = rows(target, "NetworkAttachmentDefinition")
    cfg = json.loads(nads["security/ips-node-2-in"]["spec"]["config"])
    assert cfg["type"] == "ovs" and cfg["bridge"] == "br-int"
    assert cfg["args"]["cni"]["ovnPort"] == "nf_ips_node-2_in"


def test_vnf_ports_sit_on_the_node_switch_as_linked_nf_ports():
    lsps = rows(compile_target(base(), cluster(PODS)), "Logical_Switch_Port")
    port = lsps["nf_fw_node-1_in"]
    assert port["switch"] == "node-1"
    # no broadcast looping through a bridge VNF, no MAC learnt from what it forwards
    # (docs/datapath.md)
    assert port["options"] == {
        "is-nf": "true",
        "nf-linked-port": "nf_fw_node-1_out",
        "receive_multicast": "false",
        "lsp_learn_fdb": "false",
    }
    assert lsps["nf_fw_node-1_out"]["options"]["nf-linked-port"] == "nf_fw_node-1_in"
    assert port["addresses"] == [] and port["port_security"] == []
    ext = port["external_ids"]
    assert ext == {
        "osc.io/owner": "osc-gitops",
        "osc.io/resource": "VnfDeployment/fw",
        "osc.io/key": "nf_fw_node-1_in",
        "osc.io/node": "node-1",
    }


NOT_NODE = "{10.244.1.2, 100.64.0.0/16, 100.88.0.0/16}"
"""Node traffic left out of node-1's steering ACLs: its management port (.2 of its switch's
subnet: the builder's nodes have no node-subnets annotation), OVN-Kubernetes' join and transit
subnets (reconciler.core.steering.node_traffic)."""
FROM_NODE = f"(ip4.src != {NOT_NODE} || ip6.src != {{fd98::/64, fd97::/64}})"
TO_NODE = f"(ip4.dst != {NOT_NODE} || ip6.dst != {{fd98::/64, fd97::/64}})"


@pytest.mark.parametrize(
    ("redirection", "expected"),
    [
        ("exit-lport", {"to-lport": f"outport == @osc.web.node_1 && {FROM_NODE} && ip"}),
        ("entry-lport", {"from-lport": f"inport == @osc.web.node_1 && {TO_NODE} && ip"}),
        (
            "both",
            {
                "to-lport": f"outport == @osc.web.node_1 && {FROM_NODE} && ip",
                "from-lport": f"inport == @osc.web.node_1 && {TO_NODE} && ip",
            },
        ),
    ],
)
def test_network_function_acls_per_redirection(redirection, expected):
    target = compile_target(base(redirection=redirection), cluster(PODS))
    acls = [
        a
        for a in rows(target, "ACL").values()
        if a["port_group"] == "osc.web.node_1" and a["network_function_group"]
    ]  # the steering ACLs ("both" adds one more: test_same_vnf_twice.py)
    assert {a["direction"]: a["match"] for a in acls} == expected
    for acl in acls:
        assert acl["action"] == "allow-related"
        assert acl["network_function_group"] == "osc.fw.node_1.fail_close"
        assert acl["tier"] == 3
        assert acl["priority"] == 100 + 999 - 10


def test_failure_policy_precedence_and_traffic_filter():
    b = {
        "failurePolicy": "fail-open",
        "precedence": "before-network-policy",
        "traffic": {"protocol": "tcp", "ports": [443, {"start": 8000, "end": 8080}]},
    }
    target = compile_target(base(**b), cluster(PODS))
    nfgs = rows(target, "Network_Function_Group")
    assert nfgs["osc.fw.node_1.fail_open"]["fallback"] == "fail-open"
    assert nfgs["osc.fw.node_1.fail_open"]["mode"] == "inline"
    assert nfgs["osc.fw.node_1.fail_open"]["network_function"] == ["osc.fw.node_1"]
    acl = rows(target, "ACL")["osc.web_fw.node_1.to"]
    assert acl["tier"] == 1
    assert acl["match"] == (
        f"outport == @osc.web.node_1 && {FROM_NODE} && tcp && (tcp.dst == 443 || "
        "(tcp.dst >= 8000 && tcp.dst <= 8080))"
    )
    nf = rows(target, "Network_Function")["osc.fw.node_1"]
    assert (nf["inport"], nf["outport"]) == ("nf_fw_node-1_in", "nf_fw_node-1_out")


def test_chain_orders_become_descending_priorities():
    d = desired(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ips"),
        binding("first", "web", "ips", 5, traffic={"protocol": "tcp", "ports": [80]}),
        binding("second", "web", "fw", 20),
    )
    acls = rows(compile_target(d, cluster(PODS)), "ACL")
    assert acls["osc.first.node_1.to"]["priority"] > acls["osc.second.node_1.to"]["priority"]
    assert acls["osc.first.node_1.to"]["network_function_group"] == "osc.ips.node_1.fail_close"


def test_ids_are_stable_and_new_rows_take_the_lowest_free_id():
    obs = cluster(PODS)
    owned = OvnRow("Network_Function", "osc.fw.node_2", {"name": "osc.fw.node_2", "id": 7})
    obs = replace(obs, ovn_rows=(owned,), used_ids={"Network_Function": (1,)})
    nfs = rows(compile_target(base(), obs), "Network_Function")
    assert nfs["osc.fw.node_2"]["id"] == 7  # kept
    assert nfs["osc.fw.node_1"]["id"] == 2  # 1 is taken by a row we do not own


def test_id_exhaustion_fails_clearly():
    obs = replace(cluster(PODS), used_ids={"Network_Function": tuple(range(1, 255))})
    with pytest.raises(CompileError, match=r"Network_Function ids exhausted: OVN allows ids 1-255"):
        compile_target(base(), obs)


def test_without_nf_tables_network_function_steering_is_refused_with_advice():
    with pytest.raises(CompileError, match="--steering router-policy"):
        compile_target(base(), cluster(PODS, nf=False))


def test_router_policy_backend():
    target = compile_target(
        base(redirection="both"), cluster(PODS, nf=False), CompileOptions(steering="router-policy")
    )
    assert not rows(target, "ACL") and not rows(target, "Network_Function")
    lrps = rows(target, "Logical_Router_Policy")
    to = lrps["osc.web_fw.node_1.to"]
    assert to["router"] == "ovn_cluster_router"
    assert to["action"] == "reroute" and to["nexthops"] == ["10.244.1.254"]
    # no inport guard: ovn-controller refuses `inport !=` (nominal field), and none is needed
    # since the VNF on node-1 delivers on its own switch (never back through the router)
    assert to["match"] == "ip4.dst == $osc.web.node_1_ip4"
    # entry-lport: the group's pods (any VNF node) towards node-1's subnet go to node-1's VNF
    # (the former `eth.src != <VNF MAC>` guard at the source node looped the VNF's own packets
    # on the real data path, since eth.src is already the router's MAC there: tests/datapath).
    frm = lrps["osc.web_fw.node_1.from"]
    assert frm["match"] == (
        "ip4.dst == 10.244.1.0/24 && ip4.src == {$osc.web.node_1_ip4, $osc.web.node_2_ip4}"
    )
    mac = rows(target, "Logical_Switch_Port")["nf_fw_node-1_in"]["addresses"][0].split()[0]
    assert to["priority"] == 2000 + 999 - 10
    lsp = rows(target, "Logical_Switch_Port")["nf_fw_node-1_in"]
    assert lsp["addresses"] == [f"{mac} 10.244.1.254"]
    assert "is-nf" not in lsp["options"]


def test_router_policy_refuses_a_vnf_address_held_by_a_pod():
    obs = cluster(PODS, nf=False)
    port = replace(obs.pod_ports[0], ips=("10.244.1.254",))
    obs = replace(obs, pod_ports=(port, *obs.pod_ports[1:]))
    with pytest.raises(CompileError, match=r"10\.244\.1\.254"):
        compile_target(base(), obs, CompileOptions(steering="router-policy"))


def test_warnings_shadowing_missing_vnf_network_policy_and_load_balancers():
    d = desired(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ips", nodeSelector={"gpu": "yes"}),
        binding("all", "web", "fw", 1),
        binding("later", "web", "fw", 2),
        binding("ips", "web", "ips", 3),
    )
    obs = cluster(
        PODS,
        node_labels={"node-1": {"gpu": "yes"}},
        network_policies=(NetworkPolicy("shop", "deny", {"matchLabels": {"app": "web"}}),),
    )
    obs = replace(
        obs, switches=(Switch("node-1", "10.244.1.0/24", load_balancers=True), obs.switches[1])
    )
    warnings = "\n".join(compile_target(d, obs).warnings)
    assert "Binding later is shadowed for to-lport traffic by Binding all" in warnings
    assert "pod(s) of SecurityGroup web on node node-2 are not steered by Binding ips" in warnings
    assert "NetworkPolicy shop/deny selects 2 steered pod(s)" in warnings
    assert "switch node-1 has load balancers" in warnings
    assert "makes its VNF ports there stateless (Port_Group osc._vnf_ports.node_1" in warnings


def test_a_node_without_switch_or_with_a_hostile_name_is_skipped_with_a_warning():
    obs = cluster(PODS)
    obs = replace(obs, switches=obs.switches[:1])
    target = compile_target(base(), obs)
    assert "node node-2 has no OVN logical switch" in "\n".join(target.warnings)
    assert all(r.node != "node-2" for r in target)
    from reconciler.core.model.observed import Node

    evil = replace(cluster(PODS), nodes=(Node('x" || 1 == 1'),))
    target = compile_target(base(), evil)
    assert not rows(target, "ACL")
    assert "is not a DNS subdomain" in "\n".join(target.warnings)


def test_other_instance_gets_its_own_names_and_owner():
    target = compile_target(base(), cluster(PODS), CompileOptions(instance="team-b"))
    pg = rows(target, "Port_Group")["osc_team_b.web.node_1"]
    assert pg["external_ids"]["osc.io/owner"] == "team-b"


def test_a_steering_acl_is_written_whole() -> None:
    """The to-lport ACL of a binding on a node, every column: named for its Binding (what
    ``ovn-nbctl acl-list`` and OVN's ACL logs show), node traffic left out of its match."""
    acl = rows(compile_target(base(), cluster(PODS)), "ACL")["osc.web_fw.node_1.to"]
    assert acl == {
        "port_group": "osc.web.node_1",
        "name": "web-fw",
        "direction": "to-lport",
        "priority": 1089,
        "tier": 3,
        "match": "outport == @osc.web.node_1 && (ip4.src != {10.244.1.2, 100.64.0.0/16, "
        "100.88.0.0/16} || ip6.src != {fd98::/64, fd97::/64}) && ip",
        "action": "allow-related",
        "network_function_group": "osc.fw.node_1.fail_close",
        "external_ids": {
            "osc.io/owner": "osc-gitops",
            "osc.io/resource": "Binding/web-fw",
            "osc.io/key": "osc.web_fw.node_1.to",
            "osc.io/node": "node-1",
        },
    }
