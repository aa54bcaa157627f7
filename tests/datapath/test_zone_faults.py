"""One zone's NB dies, with real packets (issue 23, interconnect only).

node-1's zone NB is SIGKILLed while both zones steer: the data plane of both zones keeps
steering (ovn-controller keeps the flows it has; only zone node-1's control plane is gone),
zone node-2's agent keeps converging a new label, zone node-1's agent fails naming its NB and
``status --all-nodes`` names node-1; once the NB is back on its database file, node-1's agent
converges the label that arrived meanwhile, nothing of node-1 was lost and nothing of node-2
was touched. The agents run as deployed: ``osc-gitops run --once --node N`` beside the central
``--kubernetes-only`` owner, publishing their status Leases.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from osc_gitops_sandbox.datapath.world import VNF_NAMESPACE, World, ZoneApply
from osc_gitops_sandbox.ovn import ovsdb_rpc

pytestmark = pytest.mark.datapath

FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
FW2 = f"{VNF_NAMESPACE}/firewall-node-2"
OWNED_TABLES = ("Port_Group", "ACL", "Network_Function", "Network_Function_Group",
                "Logical_Switch_Port")  # fmt: skip


def rows(w: World, node: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the tables the agents write, in ``node``'s NB (without ``_version``)."""
    dump = ovsdb_rpc.dump(w.dp.stack_of(node).nb_remote, "OVN_Northbound", OWNED_TABLES)
    return {
        table: sorted(({k: v for k, v in r.items() if k != "_version"} for r in found), key=repr)
        for table, found in dump.items()
    }


def members(w: World, node: str) -> set[str]:
    """The pods in ``node``'s steered port group (by LSP name)."""
    names, groups = ovsdb_rpc.transact(w.dp.stack_of(node).nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Logical_Switch_Port", "where": [], "columns": ["_uuid", "name"]},
        {"op": "select", "table": "Port_Group", "where": [], "columns": ["name", "ports"]},
    ])  # fmt: skip
    by_uuid = {ovsdb_rpc.from_atom(r["_uuid"]): r["name"] for r in names["rows"]}
    found: set[str] = set()
    for group in groups["rows"]:
        if group["name"].startswith("osc.web."):
            ports = ovsdb_rpc.from_atom(group["ports"])
            found |= {by_uuid[p] for p in ([ports] if isinstance(ports, str) else ports)}
    return found


@pytest.mark.parametrize("mc_world", ["zones"], indirect=True)
def test_a_dead_zone_nb_stops_only_that_zone(mc: World) -> None:
    w, dp = mc, mc.dp
    agents = w.applier
    assert isinstance(agents, ZoneApply)
    w.label("web-a", "web")
    w.label("client-c", "web")
    for node in (None, "node-1", "node-2"):
        code, _, err = agents.run_once(w.manifests, node, "r1")
        assert code == 0, err
    dp.sync_vnfs()
    w.wait_all_active()
    dp.wait_hv()
    assert agents.status()[0] == 0
    web, other, client, peer = (w.pod(p) for p in ("web-a", "other-b", "client-c", "client-d"))
    assert dp.probe(client, web).forwarded == {FW1: 6, FW2: 6}
    assert dp.probe(web, peer).forwarded == {FW1: 6, FW2: 0}, "client-d is not protected yet"
    zone_1 = rows(w, "node-1")

    nb = dp.stack_of("node-1").nb
    assert nb is not None
    nb.stop(sig=signal.SIGKILL)  # node-1's nb-ovsdb container dies
    try:
        # the data plane of both zones keeps steering
        assert dp.probe(client, web).forwarded == {FW1: 6, FW2: 6}
        assert dp.probe(peer, client).forwarded == {FW1: 0, FW2: 6}
        # node-2's agent keeps converging: a pod labelled on node-2 is steered
        w.label("client-d", "web")
        for node in (None, "node-2"):  # the central owner needs no NB
            code, _, err = agents.run_once(w.manifests, node, "r2")
            assert code == 0, err
        dp.stack_of("node-2").nbctl("--wait=hv", "--timeout=15", "sync")
        dp.chassis_of("node-2").purge(5)
        assert dp.probe(web, peer).forwarded == {FW1: 6, FW2: 6}, "client-d is protected now"
        zone_2 = rows(w, "node-2")
        # node-1's agent fails, naming its NB; status --all-nodes names node-1
        w.label("other-b", "web")  # waits for node-1's agent
        code, _, err = agents.run_once(w.manifests, "node-1", "r2")
        assert code == 1 and dp.stack_of("node-1").nb_remote in err, err
        code, report = agents.status()
        assert code == 1, report
        states = {line["node"]: line["state"] for line in report["nodes"]}
        assert states == {"node-1": "failed", "node-2": "ok"}, report
    finally:
        if not dp.stack_of("node-1").nb_running:
            w.cluster.start_nb("node-1")
    started = time.monotonic()
    code, _, err = agents.run_once(w.manifests, "node-1", "r2")
    assert code == 0, err
    print(f"node-1's agent converged {time.monotonic() - started:.2f} s after its NB returned")
    assert agents.status()[0] == 0
    assert members(w, "node-1") == {"shop_web-a", "shop_other-b"}, "nothing lost, one added"
    assert rows(w, "node-2") == zone_2, "nothing of node-2 was touched"
    assert rows(w, "node-1") != zone_1
    w.wait_all_active()
    dp.wait_hv()
    assert dp.probe(client, other).forwarded == {FW1: 6, FW2: 6}
    assert dp.probe(client, web).forwarded == {FW1: 6, FW2: 6}
