"""A Port_Group of ours deleted and re-created never reaches ovn-northd 26.03.1 in one iteration
(``reconciler.adapters.ovn.northd_sync``): that northd would delete the re-created group's
Southbound row (``docs/upstream/northd-port-group-recreated.sh``).

Real ovsdb-servers and a real northd from the sid root (26.03.1). northd is stopped
(``SIGSTOP``, by pid) across the deletion and the re-creation, the way a busy northd would take
both in one iteration; it goes on as soon as the re-creating apply says it waits for it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.stack import OvnSandbox, SeedPod, seed_ovn_kubernetes

from reconciler.adapters.ovn import OvnNorthbound, OvnOneShot, OvnSettings
from reconciler.adapters.ovn.northd_sync import affected
from tests.support.ovn import NODES, OVN_MARKS, Change, NorthdWaitSeen, ext, northd_waits_seen

pytestmark = OVN_MARKS

PG = "osc.web.node0"


def pg_row(pods: list[SeedPod]) -> dict[str, Any]:
    return {"name": PG, "ports": [f"{pods[0].namespace}_{pods[0].name}"], "external_ids": ext(PG)}


@pytest.fixture
def nb(pods: list[SeedPod]) -> Iterator[OvnSandbox]:
    """OVN 26.03.1's NB, SB and northd, seeded as OVN-Kubernetes seeds them."""
    with OvnSandbox(northd=True, distribution="sid") as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        sandbox.wait_northd_sync()
        yield sandbox


def nb_global(sandbox: OvnSandbox) -> dict[str, Any]:
    (result,) = ovsdb_rpc.transact(sandbox.nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "NB_Global", "where": [],
         "columns": ["nb_cfg", "sb_cfg", "options"]},
    ])  # fmt: skip
    (row,) = result["rows"]
    return {**row, "options": ovsdb_rpc.from_atom(row["options"])}


def sb_groups(sandbox: OvnSandbox) -> dict[str, Any]:
    """SB Port_Groups by NB name (the SB's is ``<datapath key>_<name>``) -> their ports."""
    (result,) = ovsdb_rpc.transact(sandbox.sb_remote, "OVN_Southbound", [
        {"op": "select", "table": "Port_Group", "where": [], "columns": ["name", "ports"]},
    ])  # fmt: skip
    return {r["name"].partition("_")[2]: ovsdb_rpc.from_atom(r["ports"]) for r in result["rows"]}


@pytest.fixture
def waiting() -> Iterator[NorthdWaitSeen]:
    with northd_waits_seen() as handler:
        yield handler


@pytest.mark.parametrize("adapter", ["oneshot", "idl"])
def test_a_port_group_re_created_while_northd_is_busy_keeps_its_southbound_row(
    nb: OvnSandbox, pods: list[SeedPod], waiting: NorthdWaitSeen, adapter: str
) -> None:
    settings = OvnSettings(remote=nb.nb_remote)
    writer: Any = (
        OvnOneShot.connect(settings) if adapter == "oneshot" else OvnNorthbound.connect(settings)
    )
    row = pg_row(pods)
    create = [Change("create", "Port_Group", PG, None, row)]
    delete = [Change("delete", "Port_Group", PG, row, None)]
    northd = nb.northd
    assert northd is not None
    try:
        version = nb_global(nb)["options"]["northd_internal_version"]
        assert version.startswith("26.03.1-") and affected(version)
        writer.apply(create)
        nb.wait_northd_sync()
        assert sb_groups(nb)[PG] == row["ports"][0]
        before = nb_global(nb)["nb_cfg"]

        os.kill(northd.pid, signal.SIGSTOP)  # busy: the next changes reach it together
        try:
            writer.apply(delete)  # the pod's label removed (--empty-grace 0), or its Binding
            assert nb_global(nb)["nb_cfg"] == before + 1, "the deletion asks northd to sync"
            again = threading.Thread(target=writer.apply, args=(create,), daemon=True)
            again.start()  # the label back: the same group again
            while not waiting.event.wait(0.05) and again.is_alive():
                pass
            assert waiting.event.is_set(), "the re-creation did not wait for northd"
            names = {r["name"] for r in nb.dump(["Port_Group"])["Port_Group"]}
            assert PG not in names, "created before northd handled the deletion"
        finally:
            os.kill(northd.pid, signal.SIGCONT)
        again.join(30)
        assert not again.is_alive()
        nb.wait_northd_sync()
        assert sb_groups(nb).get(PG) == row["ports"][0], "northd lost the re-created group"
    finally:
        writer.close()


def test_nothing_is_waited_for_or_incremented_without_an_affected_northd(
    pods: list[SeedPod],
) -> None:
    """No northd ever ran on this NB (no ``northd_internal_version``): a deletion leaves
    ``nb_cfg`` alone, and a re-creation right after does not wait."""
    with OvnSandbox(northd=False, distribution="sid") as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        ovsdb_rpc.transact(sandbox.nb_remote, "OVN_Northbound", [
            {"op": "insert", "table": "NB_Global", "row": {}},
        ])  # fmt: skip
        row = pg_row(pods)
        with OvnOneShot.connect(OvnSettings(remote=sandbox.nb_remote)) as writer:
            writer.apply([Change("create", "Port_Group", PG, None, row)])
            writer.apply([Change("delete", "Port_Group", PG, row, None)])
            assert nb_global(sandbox)["nb_cfg"] == 0
            writer.apply([Change("create", "Port_Group", PG, None, row)])
        assert PG in {r["name"] for r in sandbox.dump(["Port_Group"])["Port_Group"]}
