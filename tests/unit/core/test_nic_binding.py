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
    VnfNic,
    Write,
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


# --- what the binder says and leaves alone, whole --------------------------------------------

POD = "pod security/virt-launcher-firewall-node-1-abcde"
VM_IN = "VirtualMachine security/firewall-node-1 NIC data-in"
GONE = "nf_gone_node-1_in"
"""A VNF port of this node whose VM is gone: a pod's interface carrying it loses it, unless the
pod is in doubt."""


def skips(plan: BindPlan) -> list[tuple[str, str, str]]:
    return [(s.reason, s.subject, s.detail) for s in plan.skipped]


def edited(vms: list[KubeObject], vm: str, edit: Any) -> list[KubeObject]:
    """``vms`` with ``edit(body)`` applied to a copy of ``vm``'s body."""
    out = []
    for obj in vms:
        if obj.name == vm:
            body = json.loads(json.dumps(obj.body))
            edit(body)
            obj = dataclasses.replace(obj, body=body)
        out.append(obj)
    return out


def status(vms: list[KubeObject], *extra: dict[str, Any], drop: str = "") -> str:
    """Multus' network-status of firewall-node-1's pod, without ``drop`` (a NIC), plus
    ``extra`` entries."""
    entries = [e for e in json.loads(str(launcher(vms).network_status))
               if not drop or not e["name"].endswith(drop)]  # fmt: skip
    return json.dumps([*entries, *extra])


def test_the_writes_say_what_they_change_and_why() -> None:
    vms = world()
    ifaces = [
        iface("veth1", "pod-1", "pod1a", OUT),  # the wrong port on data-in's interface
        iface("veth2", "pod-1", "pod2b"),
        iface("veth3", "pod-old", "pod1a", "nf_firewall_node-1_in"),  # a replaced pod's
        iface("veth4", "pod-old", "pod9z", GONE),
    ]
    plan = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    assert plan.writes == (
        Write("uuid-veth1", "veth1", IN, OUT, f"{VM_IN} -> {IN}"),
        Write("uuid-veth2", "veth2", OUT, None,
              f"VirtualMachine security/firewall-node-1 NIC data-out -> {OUT}"),
        Write("uuid-veth3", "veth3", None, IN,
              f"OVN port {IN} belongs on veth1, this is a stale interface"),
        Write("uuid-veth4", "veth4", None, GONE, f"OVN port {GONE} has no VM any more"),
    )  # fmt: skip


def test_a_replaced_pods_interface_loses_the_port_its_vm_still_has() -> None:
    """The VM's new pod is not plugged yet (its interface is not there): the old pod's
    interface still loses the port, as a replaced pod's."""
    vms = world()
    plan = plan_bindings(NODE, vms, [launcher(vms, uid="pod-new")],
                         [iface("veth1", "pod-old", "pod1a", IN)])  # fmt: skip
    assert [(w.name, w.why) for w in plan.writes] == [
        ("veth1", f"OVN port {IN} is no longer this interface's: its pod pod-old was replaced")
    ]


def test_the_current_pods_interface_keeps_its_port_while_the_pod_is_waited_for() -> None:
    """The pod has not run its CNI yet (no network-status): its interface, which a newer
    ovs-cni already gave the port, keeps it."""
    vms = world()
    pending = dataclasses.replace(launcher(vms, status=None), running=False)
    plan = plan_bindings(NODE, vms, [pending], [iface("veth1", "pod-1", "pod1a", IN)])
    assert plan.writes == () and plan.skipped == ()
    assert [n.nic for n in plan.waiting] == ["data-in", "data-out"]


def test_nics_whose_interfaces_are_not_there_yet_are_waited_for() -> None:
    vms = world()
    plan = plan_bindings(NODE, vms, [launcher(vms)], [iface("veth1", "pod-1", "pod1a")])
    assert plan.waiting == tuple(n for n in plan.nics if n.nic == "data-out")
    assert plan.node_ports == {IN: plan.nics[0], OUT: plan.nics[1]}


def test_a_nic_says_what_it_is() -> None:
    vms = world()
    nic_in, nic_out = plan_bindings(NODE, vms, [], []).nics
    assert nic_in == VnfNic(
        namespace="security", vm="firewall-node-1", nic="data-in",
        network="security/firewall-node-1-in", mac=mac_of(vms, "firewall-node-1", "data-in"),
        port=IN, vnf="firewall", node=NODE,
    )  # fmt: skip
    assert (nic_in.side, nic_out.side, nic_out.port) == ("in", "out", OUT)


def test_the_vms_of_other_nodes_read_first_do_not_stop_the_reading() -> None:
    vms = world()  # firewall-node-1 sorts before firewall-node-2
    assert {n.port for n in plan_bindings("node-2", vms, [], []).nics} == {
        "nf_firewall_node-2_in", "nf_firewall_node-2_out",
    }  # fmt: skip


def test_a_namespaced_network_name_and_a_mac_written_otherwise_still_match() -> None:
    """KubeVirt takes ``<namespace>/<nad>`` as a Multus network name too; MACs are compared
    in lower case with colons, however they are written."""

    def namespaced(body: dict[str, Any]) -> None:
        for net in body["spec"]["template"]["spec"]["networks"]:
            if "multus" in net:
                net["multus"]["networkName"] = "security/" + net["multus"]["networkName"]
        for nic in body["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]:
            if "macAddress" in nic:
                nic["macAddress"] = nic["macAddress"].upper()

    vms = world()
    dashed = mac_of(vms, "firewall-node-1", "data-in").upper().replace(":", "-")
    pod = launcher(vms, macs={"data-in": dashed})
    vms = edited(vms, "firewall-node-1", namespaced)
    plan = plan_bindings(NODE, vms, [pod], [iface("veth1", "pod-1", "pod1a")])
    assert writes(plan) == {"veth1": IN}
    assert plan.nics[0].mac == mac_of(world(), "firewall-node-1", "data-in")  # lower case


def test_only_data_nics_on_a_multus_network_with_a_port_are_read() -> None:
    def odd(body: dict[str, Any]) -> None:
        spec = body["spec"]["template"]["spec"]
        # data-out on the pod network, side not a data NIC, data-pod without a port
        body["metadata"]["annotations"]["osc.io/ports"] = f"in={IN},out={OUT},side=nf_x_node-1_in"
        spec["domain"]["devices"]["interfaces"] += [{"name": "side"}, {"name": "data-pod"}]
        spec["networks"] = [n for n in spec["networks"] if n["name"] != "data-out"] + [
            {"name": "data-out", "pod": {}},
            {"name": "side", "multus": {"networkName": "side-net"}},
            {"name": "data-pod", "multus": {"networkName": "pod-net"}},
        ]

    vms = edited(world(), "firewall-node-1", odd)
    assert [n.nic for n in plan_bindings(NODE, vms, [], []).nics] == ["data-in"]


@pytest.mark.parametrize(
    ("annotation", "shown"), [(None, "''"), ("in=,out=", "'in=,out='"), ("", "''")]
)
def test_a_vm_without_its_ports_is_named_and_the_next_vm_still_read(
    annotation: str | None, shown: str
) -> None:
    def without(body: dict[str, Any]) -> None:
        annotations = body["metadata"]["annotations"]
        if annotation is None:
            del annotations["osc.io/ports"]
        else:
            annotations["osc.io/ports"] = annotation

    two_vnfs = desired(sg("web", "app=web"), vnf("av"), vnf("firewall"),
                       binding("b", "web", "firewall", 10))  # fmt: skip
    target = compile_target(two_vnfs, cluster([("shop", "web-1", "node-1", {"app": "web"})]))
    vms = [KubeObject(r.kind, *r.key.split("/", 1), body=r.fields)
           for r in target.resources.values() if r.kind == "VirtualMachine"]  # fmt: skip
    plan = plan_bindings(NODE, edited(vms, "av-node-1", without), [], [])
    assert skips(plan) == [(
        "vm-unreadable", "VirtualMachine security/av-node-1",
        f"its osc.io/ports annotation ({shown}) names no OVN port",
    )]  # fmt: skip
    assert {n.vm for n in plan.nics} == {"firewall-node-1"}


def test_two_nics_claiming_one_port_are_named_each_with_both() -> None:
    vms = edited(world(), "firewall-node-1", lambda body: body["metadata"]["annotations"].update(
        {"osc.io/ports": f"in={IN},out={IN}"}))  # fmt: skip
    both = f"{VM_IN}, VirtualMachine security/firewall-node-1 NIC data-out"
    assert skips(plan_bindings(NODE, vms, [], [])) == [
        ("port-claimed-twice", VM_IN, f"OVN port {IN} is claimed by {both}"),
        ("port-claimed-twice", "VirtualMachine security/firewall-node-1 NIC data-out",
         f"OVN port {IN} is claimed by {both}"),
    ]  # fmt: skip


def _in_doubt(vms: list[KubeObject]) -> list[tuple[LauncherPod, tuple[str, str, str]]]:
    """Pods the binder cannot be sure of, and what it says of each."""
    mac = mac_of(vms, "firewall-node-1", "data-in")
    twice = {"name": "security/firewall-node-1-in", "interface": "pod3c", "mac": mac}
    return [
        (launcher(vms, status=None),
         ("network-status-missing", POD, "has no k8s.v1.cni.cncf.io/network-status annotation")),
        (launcher(vms, status="{not json"),
         ("network-status-malformed", POD, "its k8s.v1.cni.cncf.io/network-status annotation "
          "is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
          "(char 1))")),
        (launcher(vms, status='{"name": "x"}'),
         ("network-status-malformed", POD,
          "its k8s.v1.cni.cncf.io/network-status annotation is a JSON dict, not a list")),
        (launcher(vms, status='[{"name": "x"}, 1]'),
         ("network-status-malformed", POD,
          "its k8s.v1.cni.cncf.io/network-status annotation is entry 1 is not an object with "
          "a name")),
        (launcher(vms, status=status(vms, drop="-in")),
         ("network-status-missing", VM_IN, f"{POD}'s k8s.v1.cni.cncf.io/network-status has no "
          "entry for security/firewall-node-1-in")),
        (launcher(vms, status=status(vms, twice)),
         ("port-claimed-twice", VM_IN, f"{POD} has 2 interfaces (pod1a, pod3c) on "
          f"security/firewall-node-1-in, for one OVN port {IN}")),
        (launcher(vms, macs={"data-in": "02:00:00:00:00:01"}),
         ("mac-mismatch", VM_IN,
          f"{POD} reports MAC 02:00:00:00:00:01 on pod1a, the VM says {mac}")),
        (launcher(vms, macs={"data-in": ""}),
         ("mac-mismatch", VM_IN, f"{POD} reports MAC (none) on pod1a, the VM says {mac}")),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(8))
def test_a_pod_in_doubt_is_named_and_nothing_of_it_is_written(case: int) -> None:
    """Whatever makes the binder doubt a pod, it says so whole (reason, subject, detail) and
    writes none of the pod's interfaces, not even one carrying a VM's port that is gone."""
    vms = world()
    pod, said = _in_doubt(vms)[case]
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth7", "pod-1", "pod9z", GONE)]
    plan = plan_bindings(NODE, vms, [pod], ifaces)
    assert skips(plan) == [said]
    assert plan.writes == ()


def test_two_interfaces_of_one_nic_are_named_and_the_pod_left_alone() -> None:
    vms = world()
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth5", "pod-1", "pod1a"),
              iface("veth7", "pod-1", "pod9z", GONE)]  # fmt: skip
    plan = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    assert skips(plan) == [
        ("port-claimed-twice", VM_IN, f"2 OVS interfaces (veth1, veth5) are {POD}'s pod1a")
    ]
    assert plan.writes == ()


def test_two_live_launcher_pods_of_one_vm_are_named_and_both_left_alone() -> None:
    vms = world()
    one, two = launcher(vms, uid="pod-1"), launcher(vms, uid="pod-2")
    two = dataclasses.replace(two, name="virt-launcher-firewall-node-1-fghij")
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth7", "pod-2", "pod9z", GONE)]
    plan = plan_bindings(NODE, vms, [one, two], ifaces)
    assert skips(plan) == [(
        "launcher-pods-ambiguous", "VirtualMachine security/firewall-node-1",
        "2 live virt-launcher pods on node-1: security/virt-launcher-firewall-node-1-abcde, "
        "security/virt-launcher-firewall-node-1-fghij",
    )]  # fmt: skip
    assert plan.writes == ()


def test_an_interface_without_pod_uid_is_named_whole() -> None:
    vms = world()
    ifaces = [iface("veth1", "", "pod1a"), iface("veth6", "", "pod1a")]
    assert skips(plan_bindings(NODE, vms, [launcher(vms)], ifaces)) == [(
        "pod-uid-missing", VM_IN,
        "OVS interface(s) veth1, veth6 carry contIface=pod1a but an empty contPodUid: the "
        "container runtime passed no K8S_POD_UID to the CNI (containerd < 1.5, CRI-O < 1.20), "
        "so they cannot be told apart",
    )]  # fmt: skip


def test_the_pods_own_interface_wins_over_one_without_pod_uid() -> None:
    vms = world()
    ifaces = [iface("veth1", "pod-1", "pod1a"), iface("veth6", "", "pod1a")]
    plan = plan_bindings(NODE, vms, [launcher(vms)], ifaces)
    assert writes(plan) == {"veth1": IN} and plan.skipped == ()


def test_a_missing_entry_of_a_pod_not_running_yet_is_waited_for() -> None:
    vms = world()
    pending = dataclasses.replace(launcher(vms, status=status(vms, drop="-in")), running=False)
    plan = plan_bindings(NODE, vms, [pending], [iface("veth2", "pod-1", "pod2b")])
    assert plan.skipped == () and writes(plan) == {"veth2": OUT}
    assert [n.nic for n in plan.waiting] == ["data-in"]


def test_network_status_errors_say_what_is_wrong() -> None:
    for raw, error in (
        ("{}", "a JSON dict, not a list"),
        ("[{}]", "entry 0 is not an object with a name"),
        ('[{"name": 1}]', "entry 0 is not an object with a name"),
    ):
        with pytest.raises(ValueError) as wrong:
            parse_network_status(raw)
        assert str(wrong.value) == error  # fmt: skip
