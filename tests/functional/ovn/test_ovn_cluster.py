"""Clustered NB: the same adapter object keeps reading and writing across a leader failover."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.stack import OvnCluster, make_pods, seed_ovn_kubernetes

from reconciler.adapters.ovn import OvnApplyError, OvnConnectError, OvnNorthbound
from tests.support.ovn import NODES, OVN_MARKS, connect, creates, ext

pytestmark = OVN_MARKS


@pytest.fixture
def cluster() -> Iterator[OvnCluster]:
    with OvnCluster(size=3) as c:
        yield c


def _retry(nb: OvnNorthbound, fn: str, *args: object, budget: float = 30.0) -> object:
    """Call nb.<fn> until it succeeds: right after a leader dies the IDL may need a reconnect
    and a new election, which can outlast one call's timeout. Not a timing assertion."""
    deadline = time.monotonic() + budget
    while True:
        try:
            return getattr(nb, fn)(*args)
        except (OvnConnectError, OvnApplyError):
            if time.monotonic() > deadline:
                raise


def test_cluster_members_and_leader(cluster: OvnCluster) -> None:
    assert cluster.remotes.count("tcp:127.0.0.1:") == 3
    leader = cluster.leader_index()
    assert leader is not None
    roles = [cluster.status(i) for i in range(3)]
    assert sum("Role: leader" in r for r in roles) == 1
    assert sum("Role: follower" in r for r in roles) == 2
    # A write through any member is replicated to all of them.
    ovsdb_rpc.transact(
        cluster.remote((leader + 1) % 3),
        "OVN_Northbound",
        [{"op": "insert", "table": "Logical_Switch", "row": {"name": "via-follower"}}],
    )
    for i in range(3):
        dump = ovsdb_rpc.dump(cluster.remote(i), "OVN_Northbound", ["Logical_Switch"])
        assert [r["name"] for r in dump["Logical_Switch"]] == ["via-follower"]


def test_adapter_survives_leader_failover(cluster: OvnCluster) -> None:
    pods = make_pods(NODES, 6, namespace="shop")
    seed_ovn_kubernetes(cluster.remotes, NODES, pods)
    names = [f"shop_{p.name}" for p in pods]
    pg = {"name": "osc_a", "ports": sorted(names[:2]), "external_ids": ext("osc_a")}
    with connect(cluster.remotes, timeout=10) as nb:
        nb.apply(creates({"Port_Group": [pg]}))
        assert len(nb.read().pod_ports) == 6

        old_leader = cluster.leader_index()
        assert old_leader is not None
        cluster.kill(old_leader)
        new_leader = cluster.wait_healthy()
        assert new_leader != old_leader

        pg_b = {"name": "osc_b", "ports": sorted(names[2:4]), "external_ids": ext("osc_b")}
        _retry(nb, "apply", creates({"Port_Group": [pg_b]}))
        state = _retry(nb, "read")
        owned = {r.key: r.fields["ports"] for r in state.owned}  # type: ignore[attr-defined]
        assert owned == {"osc_a": pg["ports"], "osc_b": pg_b["ports"]}

        # The old leader comes back as a follower and catches up.
        cluster.start(old_leader)
        dump = ovsdb_rpc.dump(cluster.remote(new_leader), "OVN_Northbound", ["Port_Group"])
        assert sorted(r["name"] for r in dump["Port_Group"]) == ["osc_a", "osc_b"]
