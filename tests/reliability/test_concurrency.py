"""Two reconcilers, hand edits and look-alike rows against one NB.

Decision (documented in docs/guarantees.md): two ``osc-gitops`` processes of the same
``--instance`` serialise on the OVSDB named lock ``osc_gitops_<instance>``; one that finds the
lock held refuses to apply (exit 1, clear message, nothing written) instead of interleaving.
"""

from __future__ import annotations

import json
import socket

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from osc_gitops_sandbox.ovn.stack import seed_foreign_rows

from tests.reliability import nbstate
from tests.reliability.harness import Worker, cli, conn, record


class LockHolder:
    """Another process's OVSDB session holding a named lock (raw JSON-RPC on its own socket)."""

    def __init__(self, remote: str, name: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(remote.removeprefix("unix:"))
        self.sock.sendall(json.dumps({"method": "lock", "params": [name], "id": 1}).encode())
        reply = json.loads(self.sock.recv(65536))
        assert reply["result"] == {"locked": True}, reply

    def close(self) -> None:
        self.sock.close()


def test_second_reconciler_refuses_while_the_lock_is_held(
    nf_cluster: SandboxCluster, policy_sets
) -> None:
    a, _b = policy_sets
    before = nbstate.owned(nf_cluster.nb_remote)
    holder = LockHolder(nf_cluster.nb_remote, "osc_gitops_osc_gitops")
    try:
        refused = cli("apply", a, *conn(nf_cluster))
        assert refused.code == 1
        assert "another osc-gitops process holds the write lock" in refused.err
        assert nf_cluster.nb_remote in refused.err and "Nothing was written" in refused.err
        assert "Traceback" not in refused.err
        assert nbstate.owned(nf_cluster.nb_remote) == before  # nothing half-applied
        # a plan never needs the lock (CI can plan while the cluster applies)
        assert cli("plan", a, *conn(nf_cluster)).code == 2
    finally:
        holder.close()
    done = cli("apply", a, *conn(nf_cluster))
    assert done.code == 0, done.err
    assert nbstate.problems(nf_cluster.nb_remote) == []
    record("concurrency", faults=1, converged=True)


def test_two_reconcilers_at_once_never_duplicate(
    nf_cluster: SandboxCluster, policy_sets, tmp_path
) -> None:
    """Both start together, again and again, alternating sets: each either applies or refuses;
    the NB never holds a duplicate key or a mix."""
    a, b = policy_sets
    w1, w2 = Worker(tmp_path / "w1"), Worker(tmp_path / "w2")
    refusals = 0
    try:
        for i in range(8):
            path = a if i % 2 == 0 else b
            p1 = w1.start("apply", path, *conn(nf_cluster))
            p2 = w2.start("apply", path, *conn(nf_cluster))
            results = [w1.wait(p1), w2.wait(p2)]
            for r in results:
                assert "Traceback" not in r.err
                if r.code != 0:
                    refusals += 1
                    # OVN: the lock refuses; Kubernetes: the loser's create gets a 409
                    reasons = ("write lock", "re-run plan", "did not converge", "already exists")
                    assert any(reason in r.err for reason in reasons), r.err
            assert nbstate.problems(nf_cluster.nb_remote) == []
            # --wait: steering held until OVN reports the VNFs healthy is switched on (#22)
            waited = cli("apply", path, *conn(nf_cluster), "--wait", "--wait-timeout", "30s")
            assert waited.code == 0, waited.err
            assert cli("plan", path, *conn(nf_cluster)).code == 0
    finally:
        w1.close()
        w2.close()
    record("concurrency", scenarios=8, faults=8, converged=True)
    print(f"\n8 concurrent pairs: {refusals} refusals")


def test_manual_edits_are_reported_and_repaired(nf_cluster: SandboxCluster, policy_sets) -> None:
    a, _b = policy_sets
    assert cli("apply", a, *conn(nf_cluster), "--wait", "--wait-timeout", "30s").code == 0
    target = nbstate.owned(nf_cluster.nb_remote)
    remote = nf_cluster.nb_remote
    # an operator edits our rows by hand: ACL priority and match, a port removed, a row deleted
    ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "update", "table": "ACL", "where": [], "row": {"priority": 1234}},
        {"op": "mutate", "table": "Port_Group", "where": [["name", "==", "osc.web.node_1"]],
         "mutations": [["ports", "delete", ["set", [
             ovsdb_rpc.transact(remote, "OVN_Northbound", [
                 {"op": "select", "table": "Logical_Switch_Port",
                  "where": [["name", "==", "shop-frontend_web-1"]], "columns": ["_uuid"]}
             ])[0]["rows"][0]["_uuid"]]]]]},
        {"op": "update", "table": "Network_Function_Group", "where": [],
         "row": {"fallback": "fail-open"}},
    ])  # fmt: skip
    plan = cli("plan", a, *conn(nf_cluster), "-o", "json")
    assert plan.code == 2
    changed = {(c["resource"]["kind"], c["action"]) for c in json.loads(plan.out)["changes"]}
    assert ("ACL", "update") in changed and ("Port_Group", "update") in changed
    assert ("Network_Function_Group", "update") in changed
    assert "priority" in plan.out
    assert cli("apply", a, *conn(nf_cluster)).code == 0
    assert nbstate.owned(remote) == target
    assert cli("plan", a, *conn(nf_cluster)).code == 0
    record("drift repaired", faults=3, converged=True)


def test_foreign_look_alike_rows_are_never_touched(nf_cluster: SandboxCluster, policy_sets) -> None:
    a, b = policy_sets
    remote = nf_cluster.nb_remote
    seed_foreign_rows(remote, ["shop-frontend_web-1", "shop-backend_db-0"])
    # a hand-made row named exactly like one of ours would be, but without our owner marker
    ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "insert", "table": "ACL", "row": {
            "priority": 1099, "direction": "to-lport", "match": "outport == @osc.web.node_1",
            "action": "allow", "external_ids": ovsdb_rpc.to_datum(
                {"osc.io/key": "osc.web-fw.node-1.to", "osc.io/resource": "Binding/web-fw"})}},
    ])  # fmt: skip
    before = nbstate.foreign(remote)
    for path in (a, b, a):
        assert cli("apply", path, *conn(nf_cluster)).code == 0
    (a.parent / "nothing").mkdir(exist_ok=True)
    empty = cli("apply", a.parent / "nothing", *conn(nf_cluster), "--allow-empty")
    assert empty.code == 0, empty.err
    assert nbstate.owned_count(nbstate.owned(remote)) == 0
    changed = nbstate.foreign_changes(before, nbstate.foreign(remote))
    assert changed == 0
    record("foreign look-alike rows", faults=4, converged=True, foreign_changed=changed)
