"""The data path on OVN 26.03 (sid): OVS 4.0's userspace datapath + ovn-controller 26.03 carry
real packets through a bridging VNF guest plugged on Network Function ports.

The NF rows are written with ``ovn-nbctl`` and the VirtualMachine/NADs are added to the API
emulator by hand, as the reconciler would: this checks the harness, not the product (but for
the node binder, which binds the VM's NICs as in every packet test)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.datapath.network import (
    DATAPATH_TOOLS,
    Datapath,
    datapath_unavailable_reason,
)
from osc_gitops_sandbox.ovn import distributions
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

pytestmark = [pytest.mark.datapath, pytest.mark.ovn]

NODES = {"node-1": "10.244.1.0/24", "node-2": "10.244.2.0/24"}
PODS = {"web": "node-1", "peer": "node-1", "client": "node-2"}
VM_NAMESPACE = "vnfs"
VM = "fw-node-1"
NF_IN, NF_OUT = "nf-fw-in", "nf-fw-out"


def _node(name: str, subnet: str) -> dict[str, Any]:
    subnets = json.dumps({"default": [subnet]})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                     "annotations": {"k8s.ovn.org/node-subnets": subnets}},
        "spec": {"podCIDR": subnet},
    }  # fmt: skip


def _nad(name: str, port: str) -> dict[str, Any]:
    config = {"cniVersion": "0.4.0", "name": name, "type": "ovs", "bridge": "br-int",
              "args": {"cni": {"ovnPort": port}}}  # fmt: skip
    return {
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": VM_NAMESPACE},
        "spec": {"config": json.dumps(config)},
    }  # fmt: skip


def _vm() -> dict[str, Any]:
    """A VirtualMachine shaped like the reconciler's (two bridge NICs on multus NADs)."""
    return {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": VM, "namespace": VM_NAMESPACE,
                     # the reconciler's labels: the node binder binds the VMs of an instance
                     "labels": {"app.kubernetes.io/managed-by": "osc-gitops",
                                "osc.io/owner": "osc-gitops", "osc.io/vnf": "fw",
                                "osc.io/node": "node-1"},
                     "annotations": {"osc.io/ports": f"in={NF_IN},out={NF_OUT}"}},
        "spec": {"runStrategy": "Always", "template": {"spec": {
            "nodeSelector": {"kubernetes.io/hostname": "node-1"},
            "domain": {"devices": {"interfaces": [
                {"name": "data-in", "bridge": {}, "macAddress": "0a:00:00:00:00:01"},
                {"name": "data-out", "bridge": {}, "macAddress": "0a:00:00:00:00:02"},
            ]}},
            "networks": [
                {"name": "data-in", "multus": {"networkName": "fw-in"}},
                {"name": "data-out", "multus": {"networkName": "fw-out"}},
            ],
        }}},
    }  # fmt: skip


@pytest.fixture(scope="module")
def steered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Datapath]:
    """Pod ``web`` on node-1 steered both ways through VM ``fw-node-1`` (fail-close: no health
    check, so the NF always counts as healthy)."""
    if os.geteuid() != 0:
        pytest.skip("the data path needs root (network namespaces, veths, ovs-vswitchd)")
    distributions.sid().require(DATAPATH_TOOLS)  # missing sid root: fail, saying `make setup`
    assert datapath_unavailable_reason(distributions.SID) is None
    root = tmp_path_factory.mktemp("dp")
    with SandboxCluster(root / "sb", distribution="sid") as cluster:
        namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                      for n in ("shop", VM_NAMESPACE)]  # fmt: skip
        cluster.seed([_node(n, s) for n, s in NODES.items()], [], namespaces)
        for pod, node in PODS.items():
            cluster.add_pod("shop", pod, node)
        nf = ["is-nf=true", "receive_multicast=false", "lsp_learn_fdb=false"]
        cluster.ovn.nbctl(
            "lsp-add", "node-1", NF_IN, "--", "lsp-add", "node-1", NF_OUT, "--",
            "lsp-set-options", NF_IN, *nf, f"nf-linked-port={NF_OUT}", "--",
            "lsp-set-options", NF_OUT, *nf, f"nf-linked-port={NF_IN}",
        )  # fmt: skip
        cluster.ovn.nbctl("nf-add", "fw", "1", NF_IN, NF_OUT)
        cluster.ovn.nbctl("nfg-add", "fwg", "1", "inline", "fw")
        cluster.ovn.nbctl("pg-add", "web", "shop_web")
        cluster.ovn.nbctl("acl-add", "web", "to-lport", "1001", "outport == @web && ip4",
                          "allow-related", "fwg")  # fmt: skip
        cluster.ovn.nbctl("acl-add", "web", "from-lport", "1001", "inport == @web && ip4",
                          "allow-related", "fwg")  # fmt: skip
        cluster.kube.add_objects([_nad("fw-in", NF_IN), _nad("fw-out", NF_OUT), _vm()])
        with Datapath(cluster, root / "dp") as dp:
            dp.plug_pods()
            dp.sync_vnfs()
            dp.wait_hv()
            yield dp


def test_runs_ovs_and_ovn_controller_of_the_sid_distribution(steered: Datapath) -> None:
    sid = distributions.sid()
    assert steered.distribution == sid
    for pid in steered.pids:
        assert Path(os.readlink(f"/proc/{pid}/exe")).is_relative_to(sid.root.resolve())
    (vnf,) = steered.vnfs.values()
    assert vnf.bridge and [e.lsp for e in vnf.endpoints] == [NF_IN, NF_OUT]


def test_routed_and_same_switch_traffic_crosses_the_bridging_vnf_once_each_way(
    steered: Datapath,
) -> None:
    web, peer, client = (steered.pods[f"shop_{p}"] for p in ("web", "peer", "client"))
    vnf = f"{VM_NAMESPACE}/{VM}"
    routed = steered.probe(client, web)
    assert routed.replies == 3 and routed.forwarded == {vnf: 6}  # 3 requests + 3 replies
    assert routed.ttl == 63  # one router hop; a bridge does not touch the TTL
    same_switch = steered.probe(peer, web)
    assert same_switch.replies == 3 and same_switch.forwarded == {vnf: 6}
    assert same_switch.ttl == 64
    unsteered = steered.probe(client, peer)
    assert unsteered.replies == 3 and unsteered.through == []


def test_tcp_connects_through_the_vnf(steered: Datapath) -> None:
    """Needs TX checksum offload off on the veths (else conntrack drops the SYN as invalid)."""
    web, client = steered.pods["shop_web"], steered.pods["shop_client"]
    (vnf,) = steered.vnfs.values()
    with web.listen_tcp(8080):
        before = vnf.forwarded
        assert client.tcp_connect(web.ip, 8080, timeout=2.0)
        assert vnf.forwarded > before


def test_a_dead_vnf_drops_steered_traffic_and_a_revived_one_passes_it(steered: Datapath) -> None:
    web, client = steered.pods["shop_web"], steered.pods["shop_client"]
    (vnf,) = steered.vnfs.values()
    steered.set_forwarding(vnf, False)
    try:
        dead = steered.probe(client, web, timeout=0.5)
        assert dead.replies == 0 and dead.through == []
    finally:
        steered.set_forwarding(vnf, True)
    assert steered.probe(client, web).replies == 3


def _wait(condition: Callable[[], bool], timeout: float) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.01)
    return time.monotonic() - start


def test_the_bridging_guest_passes_ovns_health_probe_and_fail_open_bypasses_it_dead(
    steered: Datapath,
) -> None:
    """OVN's probe is an ICMP echo from ``svc_monitor_ip`` sent out of the NF inport and
    expected back on the outport: a bump-in-the-wire guest passes it. Restores the group."""
    ovn = steered.cluster.ovn
    web, client = steered.pods["shop_web"], steered.pods["shop_client"]
    (vnf,) = steered.vnfs.values()
    nf = ovn.nbctl("--bare", "--columns=_uuid", "find", "Network_Function", "name=fw").strip()
    group = ovn.nbctl("--bare", "--columns=_uuid", "find", "Network_Function_Group", "name=fwg")
    group = group.strip()

    def active() -> bool:
        column = "--columns=network_function_active"
        return ovn.nbctl("--bare", column, "list", "Network_Function_Group", group).strip() == nf

    ovn.nbctl(
        "--", "--id=@hc", "create", "Network_Function_Health_Check", "name=fw",
        "options:interval=1", "options:timeout=1", "options:success_count=1",
        "options:failure_count=2", "--",
        "set", "Network_Function", nf, "health_check=@hc", "--",
        "set", "Network_Function_Group", group, "fallback=fail-open", "--",
        "set", "NB_Global", ".", "options:svc_monitor_ip=169.254.100.1",
        "options:svc_monitor_ip_dst=169.254.100.2",
    )  # fmt: skip
    try:
        key = f"{VM_NAMESPACE}/{VM}"
        _wait(active, 10)
        steered.wait_hv()
        # >=: the health probes cross the guest too (one per interval).
        assert steered.probe(client, web).forwarded[key] >= 6
        steered.set_forwarding(vnf, False)
        _wait(lambda: client.ping(web.ip, 0.1).ok, 15)  # fail-open: bypassed once offline
        assert not active()
        steered.set_forwarding(vnf, True)
        _wait(active, 15)
        steered.wait_hv()
        back = steered.probe(client, web)
        assert back.replies == 3 and back.forwarded[key] >= 6
    finally:
        steered.set_forwarding(vnf, True)
        ovn.nbctl(
            "clear", "Network_Function", nf, "health_check", "--",
            "clear", "Network_Function_Group", group, "fallback", "--",
            "remove", "NB_Global", ".", "options", "svc_monitor_ip", "--",
            "remove", "NB_Global", ".", "options", "svc_monitor_ip_dst",
        )  # fmt: skip
        steered.wait_hv()
