"""``osc-gitops bind`` against a real Open_vSwitch database and the API emulator with
KubeVirt: what it binds, what it leaves alone, bad input and faults.

The node's CNI is played on the database (:class:`~osc_gitops_sandbox.ovn.node_cni.NodeCni`):
ovs-cni v0.39.0 (no ``iface-id``) unless a test says otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from osc_gitops_sandbox.kubeapi.kubevirt import NETWORK_STATUS
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.vswitch_db import VswitchDb

from reconciler.adapters.kube.client import KubeSettings
from reconciler.adapters.kube.node_vms import NodeVms
from reconciler.adapters.kube.status_lease import StatusLease
from reconciler.adapters.ovn.vswitch import OvsDb
from reconciler.engine.binder import Binder, BinderConfig, binder_lease_name
from reconciler.engine.reporting.metrics import Metrics
from tests.fixtures.binder import NEWER, NODE, PORTS, NodeWorld, pod_port

IN, OUT = PORTS["data-in"], PORTS["data-out"]


def test_released_ovs_cni_ports_are_bound_and_nothing_else_changes(node_world: NodeWorld):
    w = node_world
    w.apply()
    w.cni.sync()
    pod_port(w.ovs, "vethpod1", "shop_web-a")
    before = w.interfaces()
    assert {before[i]["external_ids"].get("iface-id") for i in w.nic_ifaces().values()} == {None}
    result = w.bind()
    assert result.code == 0, result.err
    after = w.interfaces()
    for port, iface in w.nic_ifaces().items():
        assert after[iface]["external_ids"] == {"iface-id": port}
        # nothing but that key: every other column as ovs-cni left it
        assert {k: v for k, v in after[iface].items() if k not in ("external_ids", "_version")} == {
            k: v for k, v in before[iface].items() if k not in ("external_ids", "_version")
        }
    assert after["vethpod1"] == before["vethpod1"], "a pod's interface is never touched"
    # A second pass finds everything right and writes nothing.
    again = w.interfaces()
    assert w.bind().code == 0
    assert w.interfaces() == again


def test_newer_ovs_cni_sets_iface_id_itself_and_the_binder_does_nothing(node_world: NodeWorld):
    w = node_world
    w.cni.version = NEWER
    w.apply()
    w.cni.sync()
    before = w.interfaces()
    assert {before[i]["external_ids"]["iface-id"] for i in w.nic_ifaces().values()} == {IN, OUT}
    assert w.bind().code == 0
    assert w.interfaces() == before


def test_unreachable_db_is_named_exit_1_and_nothing_is_written(node_world: NodeWorld, tmp_path):
    w = node_world
    w.apply()
    missing = tmp_path / "nowhere" / "db.sock"
    result = w.bind("--ovs-db", f"unix:{missing}")
    assert result.code == 1
    assert f"unix:{missing}" in result.err and "no socket" in result.err
    assert "Traceback" not in result.err


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_a_db_we_may_not_write_is_named_exit_1(node_world: NodeWorld):
    """As a user without write permission on the socket (ovsdb-server makes it 0750, its own
    user's: root on a node), in a directory that user may enter."""
    w = node_world
    w.apply()
    public = Path(tempfile.mkdtemp(prefix="osc-perm-"))
    try:
        public.chmod(0o755)
        with VswitchDb(public / "ovs") as ovs:
            (public / "ovs").chmod(0o755)
            assert ovs.socket.stat().st_mode & 0o777 == 0o750
            before = ovsdb_rpc.dump(ovs.remote, "Open_vSwitch", ["Interface", "Port"])
            kubeconfig = public / "kubeconfig"
            kubeconfig.write_text(Path(w.kubeconfig).read_text())
            kubeconfig.chmod(0o644)
            code = "import sys; from reconciler.cli.app import main; sys.exit(main(sys.argv[1:]))"
            proc = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                 "-c", code, "bind", "--once", "--node", NODE, "--ovs-db", ovs.remote,
                 "--kubeconfig", str(kubeconfig), "--no-publish", "--log-format", "text"],
                capture_output=True, text=True, env={**os.environ, "HOME": str(public)},
                timeout=60, check=False,
            )  # fmt: skip
            assert proc.returncode == 1, proc.stderr
            last = proc.stderr.strip().splitlines()[-1]
            assert last.startswith(f"error: Open_vSwitch DB at {ovs.remote}: "), last
            assert "Permission denied" in last and "run as the socket's owner" in last
            assert ovsdb_rpc.dump(ovs.remote, "Open_vSwitch", ["Interface", "Port"]) == before
    finally:
        shutil.rmtree(public, ignore_errors=True)


def test_bad_input_is_named_skipped_and_counted(node_world: NodeWorld):
    w = node_world
    w.apply()
    # node-1: Multus reports a MAC that is not the VM's on data-in.
    w.cni.mac_of = lambda network, mac: "02:00:00:00:00:99" if network == "data-in" else mac
    w.cni.sync()
    result = w.bind()
    assert result.code == 0
    ids = w.iface_ids()
    nics = w.nic_ifaces()
    assert ids[nics[IN]] is None, "a MAC mismatch is not bound"
    assert ids[nics[OUT]] == OUT, "the other NIC is"
    assert "mac-mismatch" in result.err and "02:00:00:00:00:99" in result.err
    # A malformed network-status: the pod's NICs are left as they are (OUT stays bound).
    pod = w.launcher()
    w.server.patch(w.server.resource_type("Pod"), pod["metadata"]["namespace"],
                   pod["metadata"]["name"], "application/merge-patch+json",
                   {"metadata": {"annotations": {NETWORK_STATUS: "{oops"}}})  # fmt: skip
    result = w.bind()
    assert "network-status-malformed" in result.err
    assert w.iface_ids()[nics[OUT]] == OUT


def test_missing_network_status_is_skipped(node_world: NodeWorld):
    w = node_world
    w.cni.multus_status = False
    w.apply()
    w.cni.sync()
    result = w.bind()
    assert result.code == 0
    assert "network-status-missing" in result.err
    assert set(w.iface_ids().values()) == {None}


def test_two_nics_claiming_one_port_are_skipped(node_world: NodeWorld):
    w = node_world
    w.apply()
    vm = w.server.get_object("VirtualMachine", "osc-vnfs", "firewall-node-1")
    assert vm is not None
    ports = {"metadata": {"annotations": {"osc.io/ports": f"in={IN},out={IN}"}}}
    w.server.patch(w.server.resource_type("VirtualMachine"), "osc-vnfs", "firewall-node-1",
                   "application/merge-patch+json", ports)  # fmt: skip
    w.cni.sync()
    result = w.bind()
    assert result.err.count("port-claimed-twice") >= 2
    assert set(w.iface_ids().values()) == {None}


def test_vm_deleted_while_bound_leaves_no_iface_id(node_world: NodeWorld):
    """The VM is deleted after the binder bound its NICs, and ovs-cni's DEL has not run yet:
    the next pass takes the binding away (so a new VM's NIC can take the port)."""
    w = node_world
    w.apply()
    w.cni.sync()
    assert w.bind().code == 0
    nics = w.nic_ifaces()
    assert w.iface_ids()[nics[IN]] == IN
    w.cni.keep_deleted = True
    w.server.delete(w.server.resource_type("VirtualMachine"), "osc-vnfs", "firewall-node-1")
    w.kubevirt.wait_settled()
    w.cni.sync()
    assert w.bind().code == 0
    assert w.iface_ids()[nics[IN]] is None and w.iface_ids()[nics[OUT]] is None


def test_restarted_vm_moves_its_ports_to_the_new_pod(node_world: NodeWorld):
    w = node_world
    w.apply()
    w.cni.sync()
    assert w.bind().code == 0
    old = dict(w.nic_ifaces())
    w.cni.keep_deleted = True  # the old pod's ports linger
    w.server.delete(w.server.resource_type("VirtualMachineInstance"), "osc-vnfs",
                    "firewall-node-1")  # fmt: skip
    w.kubevirt.wait_settled()
    w.cni.sync()
    assert w.bind().code == 0
    ids = w.iface_ids()
    new = {p: i for p, i in w.nic_ifaces().items()}
    assert {ids[old[IN]], ids[old[OUT]]} == {None}
    current = [pl for pl in w.cni.plugged.values() if pl.pod_uid == w.launcher()["metadata"]["uid"]]
    assert {ids[i] for i in current[0].interfaces.values()} == {IN, OUT}
    assert new  # both pods' NICs were seen


def test_the_running_binder_follows_events_and_a_db_restart(node_world: NodeWorld):
    """The loop: binds a VM created after it started (events, not a resync), goes on after the
    OVS database restarted, and publishes its state in its Lease."""
    w = node_world
    settings = KubeSettings(kubeconfig=w.kubeconfig)
    metrics = Metrics({"node": NODE})
    binder = Binder(
        BinderConfig(node=NODE, instance="osc-gitops", resync=300, stats_interval=0.5,
                     backoff_max=0.5),
        NodeVms(settings, NODE, "osc-gitops"), OvsDb(w.ovs.remote, timeout=2),
        reporter=metrics.binder(),
        publisher=StatusLease.for_settings(settings, "osc-gitops-agents", binder_lease_name(NODE),
                                           identity="t", duration=30, owner_node=NODE),
    )  # fmt: skip
    stop = threading.Event()
    thread = threading.Thread(target=binder.run, args=(stop,), daemon=True)
    thread.start()
    try:
        w.apply()
        w.cni.sync()
        _until(lambda: set(w.iface_ids().values()) == {IN, OUT})
        w.ovs.restart()
        # The binding survives the restart (it is in the database); a NIC that lost it is
        # bound again once the binder reconnected.
        iface = w.nic_ifaces()[IN]
        ovsdb_rpc.transact(w.ovs.remote, "Open_vSwitch", [
            {"op": "mutate", "table": "Interface", "where": [["name", "==", iface]],
             "mutations": [["external_ids", "delete", ["set", ["iface-id"]]]]},
        ])  # fmt: skip
        _until(lambda: w.iface_ids()[iface] == IN)
        lease = w.server.get_object("Lease", "osc-gitops-agents", binder_lease_name(NODE))
        assert lease is not None
        record = json.loads(lease["metadata"]["annotations"]["osc.io/agent-status"])
        assert record["role"] == "binder" and record["node"] == NODE
        assert sorted(b["port"] for b in record["bound"]) == [IN, OUT]
        text = metrics.exposition().decode()
        assert 'osc_gitops_binder_bound_nics{node="node-1"} 2.0' in text
        assert 'osc_gitops_binder_writes_total{action="set",node="node-1"}' in text
    finally:
        stop.set()
        thread.join(10)


def _until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("not reached in time")
        time.sleep(0.02)


def test_a_binder_killed_mid_pass_and_started_again_converges(node_world: NodeWorld):
    """SIGKILL while the NICs appear (before, during or after its one transaction), then
    `bind --once`: every NIC bound, nothing else touched."""
    w = node_world
    w.apply()
    before = w.interfaces()
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli", "bind", "--node", NODE, "--ovs-db",
         w.ovs.remote, "--kubeconfig", w.kubeconfig, "--no-publish", "--metrics-addr", "off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(1.0)  # connected and watching
        w.cni.sync()
        time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait(10)
    assert w.bind().code == 0
    after = w.interfaces()
    nics = w.nic_ifaces()
    assert {after[i]["external_ids"].get("iface-id") for i in nics.values()} == {IN, OUT}
    assert {n: r for n, r in after.items() if n not in nics.values()} == {
        n: r for n, r in before.items() if n not in nics.values()
    }
