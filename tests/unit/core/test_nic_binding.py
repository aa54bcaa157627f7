"""The node binder's matching (``reconciler.core.compiling.nic_binding``) on in-memory values:
VMs and NADs as the compiler makes them, virt-launcher pods as KubeVirt and Multus leave them,
OVS interfaces as ovs-cni v0.39.0 (no ``iface-id``) or a newer one (``iface-id`` from the NAD)
makes them."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from reconciler.core.compiling.compile import compile_target
from reconciler.core.compiling.nic_binding import (
    CONT_IFACE,
    CONT_NETNS,
    CONT_POD_UID,
    OVS_CNI_OWNER,
    BindPlan,
    is_node_vnf_port,
    parse_network_status,
    plan_bindings,
)
from reconciler.core.model.observed import KubeObject, LauncherPod, OvsInterface
from tests.support.builders import binding, cluster, desired, sg, vnf

NODE = "node-1"
IN, OUT = "nf_firewall_node-1_in", "nf_firewall_node-1_out"


def world() -> list[KubeObject]:
    """The VMs the compiler makes for one VnfDeployment on two nodes."""
    target = compile_target(
        desired(sg("web", "app=web"), vnf("firewall"), binding("b", "web", "firewall", 10)),
        cluster([("shop", "web-1", "node-1", {"app": "web"})]),
    )
    objs = [
        KubeObject(r.kind, *r.key.split("/", 1), body=r.fields)
        for r in target.resources.values()
        if r.kind == "VirtualMachine"
    ]
    return objs


def mac_of(vms: list[KubeObject], vm: str, nic: str) -> str:
    obj = next(o for o in vms if o.name == vm)
    ifaces = obj.body["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]
    return str(next(i for i in ifaces if i["name"] == nic)["macAddress"])


def launcher(
    vms: list[KubeObject], *, uid: str = "pod-1", vm: str = "firewall-node-1",
    status: Any = "auto", terminating: bool = False, macs: dict[str, str] | None = None,
) -> LauncherPod:  # fmt: skip
    """The virt-launcher pod of ``vm`` with Multus' network-status (``status``: ``"auto"``,
    ``None`` for none, or a raw string)."""
    if status == "auto":
        macs = macs or {}
        entries: list[dict[str, Any]] = [
            {"name": "ovn-kubernetes", "interface": "eth0", "default": True,
             "mac": "0a:58:0a:f4:01:09"},
        ]  # fmt: skip
        for nic, iface in (("data-in", "pod1a"), ("data-out", "pod2b")):
            side = nic.split("-")[1]
            entries.append({
                "name": f"security/firewall-node-1-{side}", "interface": iface,
                "mac": macs.get(nic, mac_of(vms, vm, nic)), "dns": {},
            })  # fmt: skip
        status = json.dumps(entries)
    return LauncherPod("security", f"virt-launcher-{vm}-abcde", uid, NODE, vm, status, terminating)


def iface(name: str, pod_uid: str, cont_iface: str, iface_id: str | None = None) -> OvsInterface:
    """An OVS interface as ovs-cni makes it."""
    return OvsInterface(
        uuid=f"uuid-{name}", name=name, iface_id=iface_id,
        port_ids={CONT_POD_UID: pod_uid, CONT_IFACE: cont_iface,
                  CONT_NETNS: f"/var/run/netns/{pod_uid}", "owner": OVS_CNI_OWNER},
    )  # fmt: skip


def pod_iface(name: str, lsp: str) -> OvsInterface:
    """A pod's interface as OVN-Kubernetes' CNI makes it (no ovs-cni Port marks)."""
    return OvsInterface(uuid=f"uuid-{name}", name=name, iface_id=lsp)


def writes(plan: BindPlan) -> dict[str, str | None]:
    return {w.name: w.iface_id for w in plan.writes}


def test_released_ovs_cni_gets_iface_id_from_the_binder() -> None:
    vms = world()
    plan = plan_bindings(NODE, vms, [launcher(vms)],
                         [iface("veth1", "pod-1", "pod1a"), iface("veth2", "pod-1", "pod2b"),
                          pod_iface("veth9", "shop_web-1")])  # fmt: skip
    assert writes(plan) == {"veth1": IN, "veth2": OUT}
    assert not plan.skipped and not plan.waiting
    assert {(b.nic.nic, b.interface.name) for b in plan.bound} == {
        ("data-in", "veth1"), ("data-out", "veth2"),
    }  # fmt: skip


def test_newer_ovs_cni_already_right_means_no_write() -> None:
    vms = world()
    ifaces = [iface("veth1", "pod-1", "pod1a", IN), iface("veth2", "pod-1", "pod2b", OUT)]
    plan = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    assert plan.writes == ()
    assert len(plan.bound) == 2


def test_other_nodes_vms_and_foreign_interfaces_are_not_looked_at() -> None:
    vms = world()
    foreign = [
        pod_iface("veth9", "shop_web-1"),
        iface("vethx", "someone-else", "net1", "their-port"),
        iface("vethy", "someone-else", "net2"),
    ]
    plan = plan_bindings(NODE, vms, [], foreign)
    assert plan.writes == () and plan.skipped == ()
    assert {n.vm for n in plan.nics} == {"firewall-node-1"}
    assert {n.nic for n in plan.waiting} == {"data-in", "data-out"}  # VM without its pod yet


def test_vm_gone_takes_the_binding_away_but_only_ours() -> None:
    vms = world()
    ifaces = [
        iface("veth1", "pod-1", "pod1a", IN),
        iface("veth2", "pod-1", "pod2b", OUT),
        iface("veth3", "pod-x", "net1", "nf_firewall_node-2_in"),  # another node's name
        pod_iface("veth9", "nf_firewall_node-1_in"),  # no ovs-cni marks: never touched
    ]
    plan = plan_bindings(NODE, [], [launcher(vms)], ifaces)
    assert writes(plan) == {"veth1": None, "veth2": None}


def test_restarted_vm_moves_the_port_from_the_old_pod_to_the_new() -> None:
    vms = world()
    old = launcher(vms, uid="pod-old", terminating=True)
    new = launcher(vms, uid="pod-new")
    ifaces = [
        iface("veth1", "pod-old", "pod1a", IN), iface("veth2", "pod-old", "pod2b", OUT),
        iface("veth3", "pod-new", "pod1a"), iface("veth4", "pod-new", "pod2b"),
    ]  # fmt: skip
    plan = plan_bindings(NODE, vms, [old, new], ifaces)
    assert writes(plan) == {"veth1": None, "veth2": None, "veth3": IN, "veth4": OUT}


def test_old_pod_loses_its_binding_even_before_the_new_one_is_plugged() -> None:
    vms = world()
    old = launcher(vms, uid="pod-old", terminating=True)
    plan = plan_bindings(NODE, vms, [old], [iface("veth1", "pod-old", "pod1a", IN)])
    assert writes(plan) == {"veth1": None}


@pytest.mark.parametrize(
    ("status", "reason"),
    [(None, "network-status-missing"), ("{not json", "network-status-malformed"),
     ('{"name": "x"}', "network-status-malformed"), ("[1]", "network-status-malformed")],
)  # fmt: skip
def test_bad_network_status_is_named_skipped_and_leaves_the_pod_alone(
    status: str | None, reason: str
) -> None:
    vms = world()
    pod = launcher(vms, status=status)
    ifaces = [iface("veth1", "pod-1", "pod1a", IN), iface("veth2", "pod-1", "pod2b")]
    plan = plan_bindings(NODE, vms, [pod], ifaces)
    assert plan.writes == ()  # neither set nor taken away
    assert [s.reason for s in plan.skipped] == [reason]
    assert "virt-launcher-firewall-node-1-abcde" in plan.skipped[0].subject


def test_no_network_status_before_the_cni_ran_is_waiting_not_skipped() -> None:
    vms = world()
    pending = dataclasses.replace(launcher(vms, status=None), running=False)
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth2", "pod-1", "pod2b")]
    plan = plan_bindings(NODE, vms, [pending], ifaces)
    assert plan.skipped == () and plan.writes == () and len(plan.waiting) == 2


def test_mac_mismatch_is_skipped() -> None:
    vms = world()
    pod = launcher(vms, macs={"data-in": "02:00:00:00:00:01"})
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth2", "pod-1", "pod2b")]
    plan = plan_bindings(NODE, vms, [pod], ifaces)
    assert writes(plan) == {"veth2": OUT}
    assert [(s.reason, s.subject) for s in plan.skipped] == [
        ("mac-mismatch", "VirtualMachine security/firewall-node-1 NIC data-in"),
    ]  # fmt: skip
    assert "02:00:00:00:00:01" in plan.skipped[0].detail


def test_mac_comparison_ignores_case() -> None:
    vms = world()
    pod = launcher(vms, macs={"data-in": mac_of(vms, "firewall-node-1", "data-in").upper()})
    plan = plan_bindings(NODE, vms, [pod], [iface("veth1", "pod-1", "pod1a")])
    assert writes(plan) == {"veth1": IN}


def test_two_nics_claiming_one_port_are_both_skipped() -> None:
    vms = world()
    # The VM names the port of data-in for data-out too (a hand-edited annotation).
    vms = [
        dataclasses.replace(v, body={**v.body, "metadata": {**v.body["metadata"], "annotations": {
            **v.body["metadata"]["annotations"], "osc.io/ports": f"in={IN},out={IN}"}}})
        if v.name == "firewall-node-1" else v
        for v in vms
    ]  # fmt: skip
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth2", "pod-1", "pod2b")]
    plan = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    assert plan.writes == ()
    assert [s.reason for s in plan.skipped] == ["port-claimed-twice", "port-claimed-twice"]


def test_two_interfaces_for_one_nic_are_skipped() -> None:
    vms = world()
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth5", "pod-1", "pod1a"),
              iface("veth2", "pod-1", "pod2b")]  # fmt: skip
    plan = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    assert writes(plan) == {"veth2": OUT}
    assert [s.reason for s in plan.skipped] == ["port-claimed-twice"]


def test_wrong_iface_id_on_the_right_interface_is_corrected() -> None:
    vms = world()
    ifaces = [iface("veth1", "pod-1", "pod1a", OUT), iface("veth2", "pod-1", "pod2b", IN)]
    plan = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    assert writes(plan) == {"veth1": IN, "veth2": OUT}


def test_vm_being_deleted_while_bound_ends_without_iface_id() -> None:
    """Pass 1 binds; the VM is deleted meanwhile (its pod still there, terminating): pass 2
    takes the binding away."""
    vms = world()
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth2", "pod-1", "pod2b")]
    first = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    done = [dataclasses.replace(i, iface_id=writes(first)[i.name]) for i in ifaces]
    second = plan_bindings(NODE, [], [launcher(vms, terminating=True)], done)
    assert writes(second) == {"veth1": None, "veth2": None}


def test_node_vnf_port_names() -> None:
    assert is_node_vnf_port("nf_firewall_node-1_in", "node-1")
    assert is_node_vnf_port("nf_fw-2_node-1_b_out", "node-1")
    assert not is_node_vnf_port("nf_firewall_node-10_in", "node-1")
    assert not is_node_vnf_port("shop_web-1", "node-1")
    assert not is_node_vnf_port("nfc2_entry_a_b_node-1_in", "node-1")


def test_parse_network_status() -> None:
    assert parse_network_status('[{"name": "a/b", "interface": "net1"}]')[0]["interface"] == "net1"
    with pytest.raises(ValueError, match="not JSON"):
        parse_network_status("[")


def test_an_interface_without_pod_uid_is_named_not_guessed() -> None:
    """Multus passes K8S_POD_UID only when the runtime gave it (containerd >= 1.5, CRI-O >=
    1.20): ovs-cni then writes an empty contPodUid, and every VNF VM's data-in is pod<hash of
    "data-in">, so the interface could be any VM's."""
    vms = world()
    ifaces = [iface("veth1", "", "pod1a"), iface("veth2", "pod-1", "pod2b")]
    plan = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    assert writes(plan) == {"veth2": OUT}
    assert [(s.reason, s.subject) for s in plan.skipped] == [
        ("pod-uid-missing", "VirtualMachine security/firewall-node-1 NIC data-in"),
    ]  # fmt: skip


def test_a_node_name_too_long_for_a_label_is_matched_by_its_annotation() -> None:
    """Node names may have 253 characters, label values 63: the compiler shortens the VM's
    ``osc.io/node`` label and writes the full name in ``osc.io/node-name``. The binder of that
    node must find its VMs by the full name (and another node sharing the label's first
    characters must not)."""
    long_node = ".".join(["node-1", "a" * 63, "b" * 63, "c" * 60])
    twin = long_node[:-1] + "d"  # the same first 52 characters, so the same label head
    target = compile_target(
        desired(sg("web", "app=web"), vnf("firewall"), binding("b", "web", "firewall", 10)),
        cluster([("shop", "web-1", long_node, {"app": "web"})], nodes=(long_node, twin)),
    )
    vms = [
        KubeObject(r.kind, *r.key.split("/", 1), body=r.fields)
        for r in target.resources.values()
        if r.kind == "VirtualMachine"
    ]
    (vm,) = [
        v for v in vms if v.body["metadata"]["annotations"].get("osc.io/node-name") == long_node
    ]
    assert vm.body["metadata"]["labels"]["osc.io/node"] != long_node  # shortened
    spec = vm.body["spec"]["template"]["spec"]
    nads = {n["name"]: n["multus"]["networkName"] for n in spec["networks"] if "multus" in n}
    entries = [{"name": f"security/{nads[nic]}" if "/" not in nads[nic] else nads[nic],
                "interface": iface_name, "mac": mac_of(vms, vm.name, nic)}
               for nic, iface_name in (("data-in", "pod1a"), ("data-out", "pod2b"))]  # fmt: skip
    pod = LauncherPod("security", f"virt-launcher-{vm.name[:40]}-abcde", "pod-1", long_node,
                      vm.name, json.dumps(entries))  # fmt: skip
    ports = dict(
        p.split("=") for p in vm.body["metadata"]["annotations"]["osc.io/ports"].split(",")
    )
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth2", "pod-1", "pod2b")]
    plan = plan_bindings(long_node, vms, [pod], ifaces)
    assert writes(plan) == {"veth1": ports["in"], "veth2": ports["out"]}
    assert not plan.skipped and {n.node for n in plan.nics} == {long_node}
    assert plan_bindings(twin, [vm], [], []).nics == ()
