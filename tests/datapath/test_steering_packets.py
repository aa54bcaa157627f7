"""Router-policy steering on the host's OVN 23.03, proved with real packets: a labelled pod's
routed traffic crosses the VNF, and only then.

Each test drives the reconciler only through ``osc-gitops apply`` (the ``rp_fresh``/``rp_world``
fixtures); OVN-Kubernetes (pod ports) and KubeVirt (VNF guests) are played by the sandbox.
Evidence is the VNF guest's ``IpForwDatagrams`` counter, whether the echo reply comes back, and
the reply's TTL (each router hop and each forwarding VNF takes one off: 64 - 1 = 63 direct
between nodes, 62 through one VNF).
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest
from osc_gitops_sandbox.datapath.network import Datapath, DatapathError, sweep_stale_namespaces
from osc_gitops_sandbox.datapath.world import (
    NAMESPACE,
    ROUTED_TTL,
    ROUTER_VNF_TTL,
    VNF_NAMESPACE,
    World,
    node_object,
)
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

pytestmark = pytest.mark.datapath


def test_a_pod_labelled_later_is_steered_through_the_vnf_and_fails_closed(rp_fresh: World):
    web, client = rp_fresh.pod("web-a"), rp_fresh.pod("client-c")
    vnf1, vnf2 = rp_fresh.vnf("node-1"), rp_fresh.vnf("node-2")

    before = rp_fresh.dp.probe(client, web)
    assert before.replies == 3 and before.ttl == ROUTED_TTL
    assert before.through == [], "nobody is labelled yet: no packet may cross a VNF"

    rp_fresh.label("web-a", "web")  # kubectl label pod web-a app=web
    rp_fresh.apply()

    # exit-lport: towards web-a (node-1), rerouted to node-1's firewall, which delivers it;
    # the reply is entry-lport traffic from web-a to node-2, through node-2's firewall.
    towards = rp_fresh.dp.probe(client, web)
    assert towards.replies == 3
    assert towards.forwarded[f"{VNF_NAMESPACE}/{vnf1.vm}"] >= 3
    assert towards.forwarded[f"{VNF_NAMESPACE}/{vnf2.vm}"] >= 3
    assert towards.ttl == ROUTER_VNF_TTL
    # entry-lport initiated by the labelled pod: its requests cross node-2's firewall
    outwards = rp_fresh.dp.probe(web, client)
    assert outwards.replies == 3 and outwards.ttl == ROUTER_VNF_TTL
    assert outwards.forwarded[f"{VNF_NAMESPACE}/{vnf2.vm}"] >= 3

    # a dead VNF (forwarding off) swallows the group's traffic: fail-close, no bypass
    rp_fresh.dp.set_forwarding(vnf1, False)
    dead = rp_fresh.dp.probe(client, web, count=2, timeout=0.3)
    assert dead.replies == 0
    assert rp_fresh.dp.probe(web, client, count=2, timeout=0.3).replies == 0  # replies need vnf1
    rp_fresh.dp.set_forwarding(vnf1, True)
    back = rp_fresh.dp.probe(client, web)
    assert back.replies == 3 and back.ttl == ROUTER_VNF_TTL
    assert rp_fresh.dp.controller_errors() == [], "ovn-controller rejected a logical flow"


def test_removing_the_label_bypasses_the_vnf(rp_fresh: World):
    web, client = rp_fresh.pod("web-a"), rp_fresh.pod("client-c")
    rp_fresh.label("web-a", "web")
    rp_fresh.apply()
    assert rp_fresh.dp.probe(client, web).ttl == ROUTER_VNF_TTL

    rp_fresh.label("web-a", None)  # kubectl label pod web-a app-
    rp_fresh.apply()
    after = rp_fresh.dp.probe(client, web)
    assert after.replies == 3 and after.ttl == ROUTED_TTL
    assert after.through == [], f"unlabelled pod still steered via {after.through}"
    # proof of bypass, not just of a quiet VNF: with both firewalls dead, traffic still flows
    for vnf in rp_fresh.dp.vnfs.values():
        rp_fresh.dp.set_forwarding(vnf, False)
    assert rp_fresh.dp.probe(client, web).replies == 3
    assert rp_fresh.dp.probe(web, client).replies == 3


def test_deleting_the_binding_from_git_bypasses_the_vnf(rp_fresh: World):
    web, client = rp_fresh.pod("web-a"), rp_fresh.pod("client-c")
    rp_fresh.label("web-a", "web")
    rp_fresh.apply()
    assert rp_fresh.dp.probe(client, web).ttl == ROUTER_VNF_TTL

    rp_fresh.write_manifests(binding=False)  # the commit that deletes bindings.yaml
    rp_fresh.apply()
    assert "web-firewall" in rp_fresh.outputs[-1], "apply should report pruning the binding"
    assert set(rp_fresh.dp.vnfs) == {f"{VNF_NAMESPACE}/firewall-node-1",
                                  f"{VNF_NAMESPACE}/firewall-node-2"}  # fmt: skip
    for vnf in rp_fresh.dp.vnfs.values():
        rp_fresh.dp.set_forwarding(vnf, False)
    after = rp_fresh.dp.probe(client, web)
    assert after.replies == 3 and after.ttl == ROUTED_TTL and after.through == []
    policies = rp_fresh.cluster.ovn.nbctl("lr-policy-list", "ovn_cluster_router")
    assert "reroute" not in policies


def test_a_deleted_vnf_vm_is_redeployed_and_steering_restored(rp_fresh: World):
    web, client = rp_fresh.pod("web-a"), rp_fresh.pod("client-c")
    rp_fresh.label("web-a", "web")
    rp_fresh.apply()
    old = rp_fresh.vnf("node-1")
    assert rp_fresh.dp.probe(client, web).forwarded[f"{VNF_NAMESPACE}/{old.vm}"] >= 3

    rp_fresh.cluster.delete_vm(VNF_NAMESPACE, old.vm)  # kubectl delete vm firewall-node-1
    rp_fresh.dp.sync_vnfs()  # KubeVirt stops the guest
    assert f"{VNF_NAMESPACE}/{old.vm}" not in rp_fresh.dp.vnfs
    gone = rp_fresh.dp.probe(client, web, count=2, timeout=0.3)
    assert gone.replies == 0, "steering rows stay while the VM is gone: fail-close"

    rp_fresh.apply()  # the next reconcile recreates the VM; KubeVirt starts a new guest
    new = rp_fresh.vnf("node-1")
    assert new.vm == old.vm and new.vm_uid != old.vm_uid
    restored = rp_fresh.dp.probe(client, web)
    assert restored.replies == 3 and restored.ttl == ROUTER_VNF_TTL
    assert restored.forwarded[f"{VNF_NAMESPACE}/{new.vm}"] >= 3


def test_traffic_of_pods_outside_the_group_never_crosses_the_vnf(rp_fresh: World):
    rp_fresh.label("web-a", "web")
    rp_fresh.apply()
    other, c, d = rp_fresh.pod("other-b"), rp_fresh.pod("client-c"), rp_fresh.pod("client-d")
    web = rp_fresh.pod("web-a")
    for src, dst in ((other, c), (c, other), (d, other), (other, d)):
        probe = rp_fresh.dp.probe(src, dst)
        assert probe.replies == 3 and probe.ttl == ROUTED_TTL, (src.lsp, dst.lsp, probe)
        assert probe.through == [], f"{src.lsp} -> {dst.lsp} crossed {probe.through}"
    # same-node traffic never reaches the router: not steered even for the group (documented)
    same = rp_fresh.dp.probe(web, other)
    assert same.replies == 3 and same.ttl == 64 and same.through == []
    # while the group's routed traffic is steered at the same moment
    assert rp_fresh.dp.probe(c, web).ttl == ROUTER_VNF_TTL
    # and with both firewalls dead, outsiders still talk across nodes
    for vnf in rp_fresh.dp.vnfs.values():
        rp_fresh.dp.set_forwarding(vnf, False)
    assert rp_fresh.dp.probe(other, d).replies == 3
    assert rp_fresh.dp.probe(c, web, count=1, timeout=0.3).replies == 0


def test_teardown_leaves_no_process_or_namespace(rp_world: World):
    """A second, independent sandbox + data path (beside the module's, which must survive it),
    torn down by an exception inside ``with``: every process and namespace is gone."""
    seen: dict[str, list[Any]] = {}
    with pytest.raises(RuntimeError, match="boom"), SandboxCluster(nb_schema="installed") as c:
        c.seed([node_object("node-9", "10.244.9.0/24")], [],
               [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}])  # fmt: skip
        c.add_pod("x", "lonely", "node-9")
        with Datapath(c) as dp:
            dp.plug_pods()
            seen["pids"] = dp.pids + c.ovn.pids
            seen["netns"] = dp.namespaces
            assert len(dp.pids) == 3 and len(seen["netns"]) == 2  # vswitchd's host + the pod
            raise RuntimeError("boom")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in seen["netns"] if n in listed]
    for pid in seen["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # the module's own data path is untouched by the second one going away
    assert rp_world.dp.probe(rp_world.pod("other-b"), rp_world.pod("client-c")).replies == 3


def test_datapath_errors_name_the_pod_vm_and_port(rp_world: World):
    with pytest.raises(DatapathError, match="pod shop/ghost not found"):
        rp_world.dp.plug_pods([(NAMESPACE, "ghost")])
    # a VM whose OVN port does not exist (e.g. created by hand): the guest cannot be plugged
    rp_world.cluster.kube.add_objects([{
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "stray", "namespace": VNF_NAMESPACE,
                     "annotations": {"osc.io/ports": "in=nf_stray_node-1_in,out=x"}},
        "spec": {"runStrategy": "Always", "template": {"spec": {
            "nodeSelector": {"kubernetes.io/hostname": "node-1"},
            "domain": {"devices": {"interfaces": [
                {"name": "data-in", "bridge": {}, "macAddress": "0a:00:00:00:00:01"}]}},
            "networks": [{"name": "data-in", "multus": {"networkName": "none"}}]}}},
    }])  # fmt: skip
    try:
        with pytest.raises(DatapathError, match=r"VirtualMachine osc-vnfs/stray: OVN port "
                           r"nf_stray_node-1_in does not exist"):  # fmt: skip
            rp_world.dp.sync_vnfs()
    finally:
        rp_world.cluster.delete_vm(VNF_NAMESPACE, "stray")
    assert "osc-vnfs/stray" not in rp_world.dp.vnfs


def test_namespaces_of_a_killed_run_are_swept(rp_world: World):
    """A run SIGKILLed before its atexit hooks leaves ``osc-dp-<pid>-…`` namespaces behind;
    the next data path removes those whose pid is dead (and never a live run's)."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"osc-dp-{dead.pid}-dead00-1-shop_x"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        removed = sweep_stale_namespaces()
        assert stale in removed
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert stale not in listed
        assert all(ns in listed for ns in rp_world.dp.namespaces), "a live run's were removed"
    finally:
        subprocess.run(["ip", "netns", "delete", stale], capture_output=True)
