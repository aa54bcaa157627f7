"""VNF "VMs" behave like VMs (OVN 26.03, default flags): a guest boots before it forwards, and
KubeVirt's restart really takes it down and brings a new one up, booting again.

What the product's health-gated steering and rolling upgrades (issue 22) build on:

- ``virtctl restart`` (KubeVirt's ``restart`` subresource) replaces the VMI; the data path's
  virt-handler takes the old guest down (its OVN ports go down), plugs a new one, and the new
  guest forwards only after its boot delay (the VM's ``sandbox.osc.io/boot-delay``). Meanwhile
  a fail-close binding drops the pod's traffic; once OVN's health check sees the guest, it is
  steered through the new guest.
- ``kubectl delete vmi`` does the same for a ``runStrategy: Always`` VM, with the data path's
  default boot delay.
- KubeVirt's view follows: the VMI is ``Running`` as soon as the guest is plugged, its
  ``AgentConnected`` condition only once the guest booted.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from osc_gitops_sandbox.datapath.chassis import CONTROLLER_CRASHES
from osc_gitops_sandbox.datapath.netns import NETNS_DIR, DatapathError
from osc_gitops_sandbox.datapath.world import VNF_NAMESPACE, World
from osc_gitops_sandbox.kubeapi.kubevirt import AGENT_CONNECTED, BOOT_DELAY_ANNOTATION

pytestmark = pytest.mark.datapath

FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
BOOT = 1.0


@pytest.fixture
def steered(nf_world: World) -> Iterator[World]:
    """web-a (node-1) protected ``both``, fail-close; the data path's default boot delay
    restored after the test."""
    w = nf_world
    w.reset()
    w.label("web-a", "web")
    w.apply()
    try:
        yield w
    finally:
        w.dp.boot_delay = 0.0


def wait_for(what: str, check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.01)
    return result


def vmi_conditions(w: World, name: str) -> dict[str, str]:
    vmi = w.cluster.kube.get_object("VirtualMachineInstance", VNF_NAMESPACE, name)
    assert vmi is not None
    return {c["type"]: c["status"] for c in vmi["status"].get("conditions", [])}


def test_restart_takes_the_guest_down_and_it_forwards_after_booting(steered: World) -> None:
    w, dp = steered, steered.dp
    web, client = w.pod("web-a"), w.pod("client-c")
    old = dp.vnfs[FW1]
    assert old.booted and vmi_conditions(w, old.vm)[AGENT_CONNECTED] == "True"
    assert dp.probe(client, web).through == [FW1]
    w.cluster.annotate_vm(VNF_NAMESPACE, old.vm, {BOOT_DELAY_ANNOTATION: str(BOOT)})

    start = time.monotonic()
    w.restart_vm("node-1")  # PUT .../virtualmachines/firewall-node-1/restart
    new = wait_for("a new guest", lambda: (v := dp.vnfs.get(FW1)) and v is not old and v)
    assert new.vmi_uid != old.vmi_uid and new.vm_uid == old.vm_uid, "same VM, new instance"
    assert not (NETNS_DIR / old.endpoint.netns).exists(), "the old guest is gone"
    assert not new.booted
    assert vmi_conditions(w, new.vm).get(AGENT_CONNECTED) != "True"
    during = dp.probe(client, web, count=2, timeout=0.2)
    assert during.replies == 0, "fail-close: nothing passes while the VNF boots"

    took = dp.wait_steered(client, web, new, timeout=15)
    print(f"restart -> steered through the new guest: {time.monotonic() - start:.2f} s "
          f"(boot delay {BOOT} s; probe {took:.2f} s)")  # fmt: skip
    assert time.monotonic() - start >= BOOT
    assert new.booted and vmi_conditions(w, new.vm)[AGENT_CONNECTED] == "True"
    vm = w.cluster.kube.get_object("VirtualMachine", VNF_NAMESPACE, new.vm)
    assert vm is not None and vm["status"]["printableStatus"] == "Running"
    assert dp.probe(client, web).forwarded[FW1] == 6


def test_a_deleted_instance_comes_back_with_the_default_boot_delay(steered: World) -> None:
    w, dp = steered, steered.dp
    web, client = w.pod("web-a"), w.pod("client-c")
    dp.boot_delay = BOOT
    old = dp.vnfs["osc-vnfs/firewall-node-2"]
    start = time.monotonic()
    w.cluster.delete_vmi(VNF_NAMESPACE, old.vm)  # kubectl delete vmi firewall-node-2
    new = wait_for("a new guest", lambda: (v := dp.vnfs.get(f"{VNF_NAMESPACE}/{old.vm}"))
                   and v is not old and v)  # fmt: skip
    assert not new.booted
    # web-a's traffic is steered at web-a's node: node-2's reboot does not touch it
    assert dp.probe(client, web).through == [FW1]
    dp.wait_booted()
    assert time.monotonic() - start >= BOOT
    assert vmi_conditions(w, new.vm)[AGENT_CONNECTED] == "True"


def test_the_boot_delay_must_be_a_number(steered: World) -> None:
    w = steered
    name = "firewall-node-2"
    w.cluster.annotate_vm(VNF_NAMESPACE, name, {BOOT_DELAY_ANNOTATION: "soon"})
    try:
        w.restart_vm("node-2")
        with pytest.raises(DatapathError, match=r"boot-delay='soon' is not a number of seconds"):
            w.dp.sync_vnfs()
    finally:
        w.cluster.annotate_vm(VNF_NAMESPACE, name, {BOOT_DELAY_ANNOTATION: None})
    w.dp.sync_vnfs()
    assert f"{VNF_NAMESPACE}/{name}" in w.dp.vnfs


def test_a_crashed_ovn_controller_is_restarted_as_kubelet_would_and_recorded(
    steered: World,
) -> None:
    """sid's ovn-controller 26.03.1 once crashed (SIGSEGV) in a full run: on a node, kubelet
    restarts OVN-Kubernetes' ovn-controller container, so the sandbox does too, records the
    crash (the session's summary prints it) and the same steering comes back."""
    w, dp = steered, steered.dp
    web, client = w.pod("web-a"), w.pod("client-c")
    assert dp.probe(client, web).through == [FW1]
    chassis = dp.chassis_of("node-1")
    crashed = chassis.controller
    assert crashed is not None
    before = len(CONTROLLER_CRASHES)
    os.kill(crashed.pid, signal.SIGSEGV)
    crashed.proc.wait(10)

    dp.check_alive()
    assert chassis.controller is not crashed and chassis.controller is not None
    assert chassis.controller.alive()
    assert len(CONTROLLER_CRASHES) == before + 1
    assert "crashed (exit code -11)" in CONTROLLER_CRASHES[-1]
    del CONTROLLER_CRASHES[-1]  # ours on purpose: the summary lists upstream crashes only
    dp.wait_steered(client, web, dp.vnfs[FW1], timeout=15)
    assert dp.probe(client, web).through == [FW1]
