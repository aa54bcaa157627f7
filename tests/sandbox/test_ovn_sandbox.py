"""The local OVN stack itself: processes, readiness, cleanup, seeding, SSL."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.stack import (
    CLUSTER_ROUTER,
    OvnSandbox,
    OvnSandboxError,
    SeedPod,
    seed_foreign_rows,
    seed_ovn_kubernetes,
)

from tests.support.ovn import NODES, OVN_MARKS, connect

pytestmark = OVN_MARKS


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sandbox_starts_answers_and_leaves_nothing_behind() -> None:
    sandbox = OvnSandbox(tcp=True, northd=True)
    with sandbox:
        pids = sandbox.pids
        workdir = sandbox.workdir
        assert len(pids) == 3 and all(_alive(p) for p in pids)
        assert ovsdb_rpc.list_dbs(sandbox.nb_remote) == ["OVN_Northbound", "_Server"]
        assert "OVN_Northbound" in ovsdb_rpc.list_dbs(sandbox.nb_tcp_remote)
        assert "OVN_Southbound" in ovsdb_rpc.list_dbs(sandbox.sb_remote)
        assert sandbox.nb_remote == f"unix:{workdir}/nb.sock"
        # northd is really connected: an NB switch becomes an SB datapath.
        sandbox.nbctl("ls-add", "probe")
        sandbox.wait_northd_sync()
        assert "probe" in sandbox.sbctl("--columns=external_ids", "list", "Datapath_Binding")
    assert not any(_alive(p) for p in pids)
    assert not workdir.exists()
    sandbox.stop()  # idempotent


def test_sandbox_failure_names_the_process_and_shows_its_log(tmp_path: Path) -> None:
    (tmp_path / "nb.db").write_text("this is not an OVSDB file\n")
    with pytest.raises(OvnSandboxError) as err:
        OvnSandbox(tmp_path, northd=False, timeout=5).start()
    assert "ovsdb-server (NB)" in str(err.value)
    assert str(tmp_path / "nb.log") in str(err.value)


def test_missing_schema_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OvnSandboxError, match="schema file not found: /nonexistent"):
        OvnSandbox(tmp_path, nb_schema="/nonexistent/nb.ovsschema")


def test_seed_creates_what_ovn_kubernetes_creates(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    dump = nb23.dump(["Logical_Switch", "Logical_Switch_Port", "Logical_Router"])
    lsps = {r["name"]: r for r in dump["Logical_Switch_Port"]}
    switches = {r["name"]: r for r in dump["Logical_Switch"]}
    assert set(switches) == {"node0", "node1"}
    assert switches["node1"]["other_config"] == {"subnet": "10.244.1.0/24"}
    pod = pods[1]
    row = lsps[f"shop_{pod.name}"]
    assert row["addresses"] == f"{pod.mac} {pod.ip}" == row["port_security"]
    assert row["external_ids"] == {"namespace": "shop", "pod": "true"}
    assert row["options"] == {"iface-id-ver": pod.uid, "requested-chassis": pod.node}
    assert row["_uuid"] in switches[pod.node]["ports"]
    stor = lsps["stor-node1"]
    assert stor["type"] == "router" and stor["options"] == {"router-port": "rtos-node1"}
    (router,) = dump["Logical_Router"]
    assert router["name"] == CLUSTER_ROUTER
    lrp = ovsdb_rpc.dump(nb23.nb_remote, "OVN_Northbound", ["Logical_Router_Port"])
    networks = {r["name"]: r["networks"] for r in lrp["Logical_Router_Port"]}
    assert networks == {"rtos-node0": "10.244.0.1/24", "rtos-node1": "10.244.1.1/24"}


def test_seed_foreign_rows(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    names = seed_foreign_rows(nb23.nb_remote, [f"shop_{pods[0].name}"])
    dump = nb23.dump(["Port_Group", "ACL"])
    assert {r["name"] for r in dump["Port_Group"]} == {
        names.handmade_port_group,
        names.other_instance_port_group,
        names.netpol_port_group,
    }
    netpol = next(r for r in dump["ACL"] if r["priority"] == 1001)
    assert netpol["external_ids"]["k8s.ovn.org/owner-type"] == "NetworkPolicy"


def test_raw_transact_failure_is_atomic(nb23: OvnSandbox) -> None:
    before = nb23.dump(["Logical_Switch"])
    ops = [
        {"op": "insert", "table": "Logical_Switch", "row": {"name": "ok"}},
        {"op": "insert", "table": "Logical_Switch", "row": {"nonexistent_column": 1}},
    ]
    with pytest.raises(ovsdb_rpc.OvsdbRpcError, match="nonexistent_column"):
        ovsdb_rpc.transact(nb23.nb_remote, "OVN_Northbound", ops)
    assert nb23.dump(["Logical_Switch"]) == before


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_pki(d: Path) -> dict[str, str]:
    """A throwaway CA plus server and client certificates signed by it."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    for who in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}",
                 "-keyout", f"{who}.key", "-out", f"{who}.csr", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "1", "-out", f"{who}.pem", cwd=d)  # fmt: skip
    return {
        k: str(d / k) for k in ("ca.pem", "server.key", "server.pem", "client.key", "client.pem")
    }


@pytest.mark.filterwarnings("ignore:ssl.PROTOCOL_TLS is deprecated:DeprecationWarning")
def test_ssl_remote_with_a_pki_made_by_openssl(tmp_path: Path, pods: list[SeedPod]) -> None:
    pki_dir = tmp_path / "pki"
    pki_dir.mkdir()
    pki = _make_pki(pki_dir)
    ssl = (pki["server.key"], pki["server.pem"], pki["ca.pem"])
    with OvnSandbox(tmp_path / "ovn", northd=False, ssl=ssl) as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        assert sandbox.nb_ssl_remote.startswith("ssl:127.0.0.1:")
        with connect(
            sandbox.nb_ssl_remote,
            private_key=pki["client.key"],
            certificate=pki["client.pem"],
            ca_cert=pki["ca.pem"],
        ) as nb:
            state = nb.read()
        assert len(state.pod_ports) == len(pods)
