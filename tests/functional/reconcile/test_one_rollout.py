"""One rollout at a time (issue 33 item 3), with two real processes on the sandbox: an ``apply
--wait`` rolling a new firewall image owns its rollout; a second ``apply --wait`` with a newer
image restarts none of its VMs, waits and, when its time is up, names the owner (instance, host,
pid, since); when the owner stops, its name leaves the VMs (another process may go on at once).

OVN 26.03 with ovn-northd and KubeVirt played behind the API emulator; the VNFs' answers to
OVN's probe are played (``osc_gitops_sandbox.ovn.vnf_health``) and the annotation
``sandbox.osc.io/forwarding: "false"`` keeps node-1's firewall from ever passing it, so the first
rollout stays at node-1 for as long as the test needs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.support.cli import cli, conn

OWNER = "rollout.osc.io/owner"
NODE1 = "firewall-node-1"


def vm(cluster: SandboxCluster, name: str) -> dict[str, Any]:
    return next(o for o in cluster.kube.objects("VirtualMachine") if o["metadata"]["name"] == name)


def vmi_uid(cluster: SandboxCluster, name: str) -> str:
    vmis = cluster.kube.objects("VirtualMachineInstance")
    return str(next(o for o in vmis if o["metadata"]["name"] == name)["metadata"]["uid"])


def until(what: str, check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_second_apply_wait_restarts_no_vm_of_a_rollout_it_does_not_own(
    nf_northd_cluster: SandboxCluster, policies: Path, tmp_path: Path
) -> None:
    cluster = nf_northd_cluster
    assert cli("apply", policies, *conn(cluster), "--wait", "--wait-timeout", "30s").code == 0
    # node-1's firewall never answers OVN's probe from now on
    cluster.annotate_vm("osc-vnfs", NODE1, {"sandbox.osc.io/forwarding": "false"})
    newer = tmp_path / "newer"
    shutil.copytree(policies, newer)
    for folder, image in ((policies, "1.5.0"), (newer, "1.6.0")):
        vnfs = folder / "vnfs.yaml"
        vnfs.write_text(vnfs.read_text().replace("vnf-firewall:1.4.2", f"vnf-firewall:{image}"))
    before = vmi_uid(cluster, NODE1)
    exe = Path(sys.executable).with_name("osc-gitops")
    log = (tmp_path / "first.err").open("w")
    first = subprocess.Popen(
        [str(exe), "apply", str(policies), *conn(cluster), "--wait", "--wait-timeout", "120s",
         "--cache-dir", str(tmp_path / "a")],
        stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        until("node-1 restarted by the first apply", lambda: vmi_uid(cluster, NODE1) != before)
        restarted = vmi_uid(cluster, NODE1)
        owner = f"osc-gitops on {socket.gethostname()} (pid {first.pid})"
        annotations = vm(cluster, NODE1)["metadata"]["annotations"]
        assert annotations[OWNER] == owner
        since = annotations["rollout.osc.io/owner-since"]

        second = cli("apply", newer, *conn(cluster), "--auto-approve", "--wait",
                     "--wait-timeout", "4s", "--cache-dir", tmp_path / "b")  # fmt: skip
        assert second.code == 1
        assert (
            f"VnfDeployment/firewall: its rolling update is owned by {owner} since {since}: "
            "this process restarts none of its VMs"
        ) in second.err, second.err
        assert vmi_uid(cluster, NODE1) == restarted  # not restarted again
        image = vm(cluster, NODE1)["spec"]["template"]["spec"]["volumes"][0]["containerDisk"]
        assert image["image"].endswith(":1.5.0")  # nor given the second one's template
        assert vm(cluster, "firewall-node-2")["spec"]["template"]["spec"]["volumes"][0][
            "containerDisk"]["image"].endswith(":1.4.2")  # fmt: skip
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGINT)  # Ctrl-C: the owner lets go of its rollout
        first.wait(timeout=30)
        log.close()
    annotations = vm(cluster, NODE1)["metadata"]["annotations"]
    assert OWNER not in annotations, (tmp_path / "first.err").read_text()
    assert annotations["rollout.osc.io/phase"] == "booting"  # where it is, for the next one

    # status reads the interrupted rollout from the cluster, not from the file the second
    # apply wrote: nodes on two images, node-1 booting; not converged (node-1's firewall is
    # played not forwarding: its ports down, so also unbound, a failure: exit 1)
    shown = cli("status", "--cache-dir", tmp_path / "b", "--kubeconfig", cluster.kubeconfig)
    assert shown.code == 1, shown.out
    assert "\n  mid-rollout: VnfDeployment/firewall (live): " in shown.out
    assert (
        "VnfDeployment/firewall (live): 0 of 2 nodes done, rolling to "
        "quay.io/example/vnf-firewall:1.5.0; firewall-node-1 booting since "
    ) in shown.out
    assert (
        "images: quay.io/example/vnf-firewall:1.4.2 on node-2; "
        "quay.io/example/vnf-firewall:1.5.0 on node-1"
    ) in shown.out
    data = json.loads(cli("status", "--cache-dir", tmp_path / "b", "--kubeconfig",
                          cluster.kubeconfig, "-o", "json").out)  # fmt: skip
    assert data["rollouts_from"] == "cluster" and data["pending"][0].startswith("mid-rollout: ")
    (live,) = [r for r in data["live_rollouts"] if r["vnf"] == "firewall"]
    assert live["in_progress"] and live["images"] == {
        "quay.io/example/vnf-firewall:1.4.2": ["node-2"],
        "quay.io/example/vnf-firewall:1.5.0": ["node-1"],
    }
