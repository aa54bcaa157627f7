"""Transitions through the README's commands on the sandbox (OVN 26.03 with ovn-northd, the
Kubernetes API emulator with KubeVirt played behind it): ``apply --wait``, held steering in
``plan``/``explain``/``status``, and a rolling image upgrade through KubeVirt's restart.

No chassis runs here: the sandbox plays VNFs that answer OVN's health probe
(``osc_gitops_sandbox.ovn.vnf_health``); stopping that makes every VNF look dead to northd.
"""

from __future__ import annotations

import json
from pathlib import Path

from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.support.cli import cli, conn

FAST_PROBE = (
    "healthCheck:\n    interval: 1\n    timeout: 1\n    successCount: 1\n    failureCount: 1"
)


def test_apply_wait_switches_steering_on_once_ovn_reports_health(
    nf_northd_cluster: SandboxCluster, policies: Path, tmp_path: Path
) -> None:
    cluster = nf_northd_cluster
    cache = ["--cache-dir", str(tmp_path / "cache")]
    done = cli("apply", policies, *conn(cluster), "--wait", "--wait-timeout", "30s", *cache)
    assert done.code == 0, done.err
    assert "Ready after" in done.err
    assert cli("plan", policies, *conn(cluster)).code == 0  # nothing held, nothing to do
    shown = cli("status", *cache)
    assert shown.code == 0 and "held" not in shown.out.lower()


def test_without_healthy_vnfs_the_wait_times_out_naming_each_instance_and_why(
    nf_northd_cluster: SandboxCluster, policies: Path, tmp_path: Path
) -> None:
    cluster = nf_northd_cluster
    assert cluster.forwarding_vnfs is not None
    cluster.forwarding_vnfs.stop()  # no VNF answers OVN's probe
    cache = ["--cache-dir", str(tmp_path / "cache")]
    waited = cli("apply", policies, *conn(cluster), "--wait", "--wait-timeout", "2s", *cache)
    assert waited.code == 1
    report = waited.err.split("error: not ready after 2 s (--wait-timeout):\n", 1)[1]
    assert "firewall-node-1: probe failing" in report
    assert "ips-node-1: probe failing" in report
    # held is not the failure policy acting: nothing steers yet, the pods talk unsteered
    assert "the failure policy acts" not in report
    assert "no traffic is steered to it yet (its steering is held" in report
    assert "next: check that the guest forwards between its two data NICs" in report
    assert (
        "Binding/db-firewall held on node-1, node-2: steered once firewall-node-1 and "
        "firewall-node-2 are healthy; shop-backend/db-0 and db-1 are NOT protected meanwhile "
        "(their traffic flows unsteered)"
    ) in report
    # the plan says so: nothing to write, but held steering is pending, not converged (exit 2)
    planned = cli("plan", policies, *conn(cluster))
    assert planned.code == 2, planned.out
    assert "No changes to write now, but the live state does not match the manifests yet: " \
           "8 pending (below)." in planned.out  # fmt: skip
    assert "No changes. The live state matches the manifests." not in planned.out
    assert "\nPending: 8 (not written by this plan; not converged until they are).\n" in planned.out
    assert (
        "~ held: Binding/web-firewall on node-2: waiting for firewall-node-2 to become healthy"
        in planned.out
    )
    data = json.loads(cli("plan", policies, *conn(cluster), "-o", "json").out)
    hold = next(
        h for h in data["meta"]["held"] if (h["binding"], h["node"]) == ("web-ips", "node-1")
    )
    assert hold["waiting_for"] == ["ips-node-1"] and hold["vnfs"] == ["ips"]
    assert ["ACL", "osc.web_ips.node_1.to"] in hold["changes"]
    # explain: exit 3, with the reason
    explained = cli("explain", "shop-frontend/web-1", policies, *conn(cluster))
    assert explained.code == 3
    assert "its steering is held until OVN reports the VNF instance healthy" in explained.out
    assert "~ held: waiting for ips-node-1 to become healthy" in explained.out
    # status: the held bindings, with how long and the pods NOT protected; not converged
    shown = cli("status", *cache, "--kubeconfig", cluster.kubeconfig)
    # no VNF answers here, so OVN has not bound their ports either (the sandbox plays a VNF
    # that does not forward with its ports down): unbound is a failure (1), held is pending
    assert shown.code == 1, shown.out
    assert "\n  unbound: osc-vnfs/firewall-node-1 in port nf_firewall_node-1_in" in shown.out
    assert "~ held: Binding/web-firewall on node-1: waiting for firewall-node-1" in shown.out
    assert "no ACL steers these pods: their traffic flows unsteered" in shown.out
    assert "      NOT protected: shop-backend/db-0\n" in shown.out
    assert "\n  Binding/db-firewall on node-1 held (waiting for firewall-node-1" in shown.out


def test_an_image_change_rolls_out_node_by_node_through_kubevirt_restarts(
    nf_northd_cluster: SandboxCluster, policies: Path
) -> None:
    cluster = nf_northd_cluster
    vnfs = policies / "vnfs.yaml"
    text = vnfs.read_text()
    head, _, tail = text.partition("  healthCheck:")
    tail = tail.split("---", 1)[1]
    vnfs.write_text(f"{head}  {FAST_PROBE}\n---{tail}")
    assert cli("apply", policies, *conn(cluster), "--wait", "--wait-timeout", "30s").code == 0
    uids = {o["metadata"]["name"]: o["metadata"]["uid"]
            for o in cluster.kube.objects("VirtualMachineInstance")}  # fmt: skip

    vnfs.write_text(vnfs.read_text().replace("vnf-firewall:1.4.2", "vnf-firewall:1.5.0"))
    planned = cli("plan", policies, *conn(cluster))
    assert "VnfDeployment/firewall: 0 of 2 nodes updated" in planned.out
    assert "VirtualMachine" not in planned.out.split("Warnings:")[0]  # no VM changes at once
    # an image bump is no "No changes": each VM's new image is pending, rolled node by node
    assert planned.code == 2, planned.out
    for node in ("node-1", "node-2"):
        assert (
            f"  ~ VirtualMachine osc-vnfs/firewall-{node}: image "
            "quay.io/example/vnf-firewall:1.4.2 → quay.io/example/vnf-firewall:1.5.0, rolled "
            "node by node"
        ) in planned.out
    data = json.loads(cli("plan", policies, *conn(cluster), "-o", "json").out)
    assert data["summary"] == {"create": 0, "update": 0, "delete": 0, "pending": 2}
    assert data["meta"]["pending"][0]["change"] == (
        "image quay.io/example/vnf-firewall:1.4.2 → quay.io/example/vnf-firewall:1.5.0, "
        "rolled node by node"
    )
    rolled = cli("apply", policies, *conn(cluster), "--wait", "--wait-timeout", "60s")
    assert rolled.code == 0, rolled.err
    vms = {o["metadata"]["name"]: o for o in cluster.kube.objects("VirtualMachine")}
    after = {o["metadata"]["name"]: o["metadata"]["uid"]
             for o in cluster.kube.objects("VirtualMachineInstance")}  # fmt: skip
    for name in ("firewall-node-1", "firewall-node-2"):
        spec = vms[name]["spec"]["template"]["spec"]
        assert spec["volumes"][0]["containerDisk"]["image"].endswith(":1.5.0")
        assert after[name] != uids[name], f"{name} was not restarted"
        status = vms[name]["status"]
        assert status["observedGeneration"] == status["desiredGeneration"]  # runs the new one
        annotations = vms[name]["metadata"].get("annotations") or {}
        assert not [k for k in annotations if k.startswith("rollout.osc.io/")]
    assert after["ips-node-1"] == uids["ips-node-1"]  # the IPS did not change: not restarted
    assert cli("plan", policies, *conn(cluster)).code == 0


def test_without_rollouts_a_vm_on_an_older_template_is_pending_until_restarted(
    rp_cluster: SandboxCluster, policies: Path
) -> None:
    """Router-policy steering has no health checks, so no rollout: the new template is written
    at once and KubeVirt applies it at the next start. Until then the VM runs an older
    template than the manifests say: pending, plan exits 2 (issue 33), and says what to do."""
    cluster = rp_cluster
    rp = ("--steering", "router-policy")
    assert cli("apply", policies, *conn(cluster), *rp).code == 0
    assert cli("plan", policies, *conn(cluster), *rp).code == 0
    vnfs = policies / "vnfs.yaml"
    vnfs.write_text(vnfs.read_text().replace("vnf-firewall:1.4.2", "vnf-firewall:1.5.0"))
    applied = cli("apply", policies, *conn(cluster), *rp)
    assert applied.code == 0, applied.err
    assert "Not converged yet: 2 pending" in applied.err
    planned = cli("plan", policies, *conn(cluster), *rp)
    assert planned.code == 2, planned.out
    assert (
        "  ~ VirtualMachine osc-vnfs/firewall-node-1: runs an older template than its spec: "
        "restart it (virtctl restart), one node at a time"
    ) in planned.out
    for node in ("node-1", "node-2"):
        cluster.restart_vm("osc-vnfs", f"firewall-{node}")
    assert cli("plan", policies, *conn(cluster), *rp).code == 0
