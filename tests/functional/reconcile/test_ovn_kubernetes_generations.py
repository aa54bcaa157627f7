"""Never break OVN-Kubernetes (issue 29): a real ovsdb-server holding the rows each
OVN-Kubernetes generation writes (``osc_gitops_sandbox.ovn.netpol.seed_generation``), and the
CLI on it. Before v1.1.0 its start-up sync fails on, or deletes, another writer's Port_Groups
and ACLs: ``plan`` and ``apply`` refuse (exit 1, one line naming the version needed, no
traceback) and nothing is written; later generations are planned and applied as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from osc_gitops_sandbox.ovn.netpol import seed_generation
from osc_gitops_sandbox.ovn.seed import seed_foreign_rows

from tests.support.cli import cli, conn
from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import CLUSTER


@pytest.fixture
def cluster_of(tmp_path: Path) -> Iterator[object]:
    """A factory: (NB schema "26.03" or "installed" (23.03)) -> a seeded cluster."""
    require_ovn_or_fail(northd=False)
    opened: list[SandboxCluster] = []

    def make(schema: str = "26.03") -> SandboxCluster:
        cluster = SandboxCluster(tmp_path / f"sb{len(opened)}", nb_schema=schema, northd=False)
        cluster.__enter__()
        opened.append(cluster)
        cluster.seed_dir(CLUSTER)
        return cluster

    try:
        yield make
    finally:
        for cluster in opened:
            cluster.__exit__(None, None, None)


def ours(cluster: SandboxCluster) -> int:
    """Rows of ours anywhere in the NB (any table that has external_ids)."""
    tables = ("Port_Group", "ACL", "Logical_Switch_Port", "Logical_Router_Policy")
    results = ovsdb_rpc.transact(cluster.nb_remote, "OVN_Northbound", [
        {"op": "select", "table": t,
         "where": [["external_ids", "includes", ["map", [["osc.io/owner", "osc-gitops"]]]]],
         "columns": ["_uuid"]} for t in tables
    ])  # fmt: skip
    return sum(len(r["rows"]) for r in results)


@pytest.mark.parametrize(
    ("generation", "why"),
    [
        ("pre-1.0", "OVN-Kubernetes older than v1.0 (Port_Groups keyed by external_ids:name"),
        ("1.0", "OVN-Kubernetes v1.0.x (EgressIP's priority-102 router policies"),
    ],
)
def test_an_ovn_kubernetes_before_v1_1_is_refused_and_nothing_written(
    cluster_of, policies, generation: str, why: str
) -> None:
    cluster = cluster_of()
    seed_generation(cluster.nb_remote, generation)
    for command in ("plan", "apply"):
        result = cli(command, policies, *conn(cluster))
        assert result.code == 1, result.out
        assert why in result.err
        assert "Upgrade OVN-Kubernetes to v1.1.0 or later" in result.err
        assert "nothing was written" in result.err
        assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    assert ours(cluster) == 0


@pytest.mark.parametrize("generation", ["1.1", "main"])
def test_later_generations_are_applied(cluster_of, policies, generation: str) -> None:
    cluster = cluster_of()
    seed_generation(cluster.nb_remote, generation)
    assert cli("apply", policies, *conn(cluster), "--wait").code == 0  # steering health-gated
    assert ours(cluster) > 0
    assert cli("plan", policies, *conn(cluster)).code == 0


def test_owner_keyed_rows_on_an_ovn_older_than_25_03_are_refused(cluster_of, policies) -> None:
    """v1.0.x without EgressIP's policies: its rows look like v1.1's, but the OVN under them
    (24.03 in its image; here the host's 23.03) is older than anything v1.1.0 ships."""
    cluster = cluster_of("installed")
    seed_generation(cluster.nb_remote, "1.1")
    result = cli("apply", policies, *conn(cluster), "--steering", "router-policy")
    assert result.code == 1
    assert "OVN-Kubernetes v1.0.x or older (its owner-keyed rows on NB schema" in result.err
    assert ours(cluster) == 0


def test_a_plain_ovn_or_foreign_rows_are_not_mistaken_for_ovn_kubernetes(
    cluster_of, policies
) -> None:
    """The sandbox's usual rows (switches, a router, pods' ports, a hand-made Port_Group with
    other keys) on the host's OVN 23.03: no OVN-Kubernetes generation to judge."""
    cluster = cluster_of("installed")
    seed_foreign_rows(cluster.nb_remote)
    assert cli("apply", policies, *conn(cluster), "--steering", "router-policy").code == 0
