"""Creates go into the transaction as Datums the adapter validated itself (one insert command).

These pin what that fast path must keep: every value is checked against the server's schema
before anything is sent (nothing committed on a bad value), and new rows land in their parents
whether the parent is created in the same transaction or already exists.
"""

from __future__ import annotations

from typing import Any

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.stack import OvnSandbox

from reconciler.adapters.ovn import OvnApplyError
from tests.support.ovn import OVN_MARKS, connect, creates, ext

pytestmark = OVN_MARKS


def acl(key: str, pg: str, **over: Any) -> dict[str, Any]:
    return {
        "port_group": pg,
        "name": f"osc-{key}",
        "direction": "to-lport",
        "priority": 2000,
        "tier": 0,
        "match": f"outport == @{pg} && ip4",
        "action": "allow-related",
        "network_function_group": None,
        "external_ids": ext(key),
        **over,
    }


def lrp(key: str, **over: Any) -> dict[str, Any]:
    return {
        "router": "ovn_cluster_router",
        "priority": 30000,
        "match": "ip4.src == 10.244.0.5",
        "action": "reroute",
        "nexthops": ["10.244.0.9"],
        "external_ids": ext(key),
        **over,
    }


def nf_lsp(name: str, switch: str) -> dict[str, Any]:
    return {
        "name": name,
        "switch": switch,
        "addresses": [],
        "port_security": [],
        "options": {"is-nf": "true", "nf-linked-port": name + "-peer"},
        "external_ids": ext(name),
    }


def dump(remote: str) -> dict[str, list[dict[str, Any]]]:
    tables = ("Port_Group", "ACL", "Logical_Router_Policy", "Logical_Switch", "Logical_Router")
    ops = [{"op": "select", "table": t, "where": []} for t in tables]
    res = ovsdb_rpc.transact(remote, "OVN_Northbound", ops)
    return {t: r["rows"] for t, r in zip(tables, res, strict=True)}


def refs(value: Any) -> set[str]:
    plain = ovsdb_rpc.from_atom(value)
    return set(plain) if isinstance(plain, list) else {plain}


def lsp_rows(remote: str) -> list[dict[str, Any]]:
    op = {"op": "select", "table": "Logical_Switch_Port", "where": [], "columns": ["_uuid", "name"]}
    return list(ovsdb_rpc.transact(remote, "OVN_Northbound", [op])[0]["rows"])


@pytest.mark.parametrize(
    ("table", "row", "column"),
    [
        ("ACL", acl("bad", "osc_pg", action="bogus"), "ACL.action"),
        ("ACL", acl("bad", "osc_pg", direction="sideways"), "ACL.direction"),
        ("ACL", acl("bad", "osc_pg", priority=32768), "ACL.priority"),
        ("ACL", acl("bad", "osc_pg", priority="2000"), "ACL.priority"),
        ("Logical_Router_Policy", lrp("bad", priority=-1), "Logical_Router_Policy.priority"),
        ("Logical_Router_Policy", lrp("bad", action="teleport"), "Logical_Router_Policy.action"),
    ],
)
def test_a_bad_value_is_refused_before_anything_is_written(
    nb23: OvnSandbox, table: str, row: dict[str, Any], column: str
) -> None:
    pg = {"name": "osc_pg", "ports": [], "external_ids": ext("osc_pg")}
    before = dump(nb23.nb_remote)
    with connect(nb23.nb_remote) as nb, pytest.raises(OvnApplyError, match=column):
        nb.apply(creates({"Port_Group": [pg], table: [row]}))
    assert dump(nb23.nb_remote) == before


def test_new_rows_land_in_new_and_existing_parents(nb23: OvnSandbox) -> None:
    remote = nb23.nb_remote
    pg = {"name": "osc_pg", "ports": ["shop_pod-0"], "external_ids": ext("osc_pg")}
    rows = {
        "Logical_Switch_Port": [nf_lsp("nf-a-in", "node0"), nf_lsp("nf-b-in", "node1")],
        "Port_Group": [pg],
        "ACL": [acl("in", "osc_pg"), acl("out", "osc_pg", direction="from-lport")],
        "Logical_Router_Policy": [lrp("p1"), lrp("p2", priority=0, nexthops=["10.0.0.1"])],
    }
    with connect(remote) as nb:
        names = {p.name for p in nb.read().pod_ports}
        assert "shop_pod-0" in names
        nb.apply(creates(rows))
        owned = {(r.table, r.key): r.fields for r in nb.read().owned}
    expected = {
        (table, r["external_ids"]["osc.io/key"]): r for table, rs in rows.items() for r in rs
    }
    assert owned == expected
    # The server's view: each new row is held by exactly the parent the plan named.
    raw = dump(remote)
    pg_row = raw["Port_Group"][0]
    acl_uuids = {a["_uuid"][1] for a in raw["ACL"]}
    assert refs(pg_row["acls"]) == acl_uuids
    router = raw["Logical_Router"][0]
    lrp_uuids = {p["_uuid"][1] for p in raw["Logical_Router_Policy"]}
    assert refs(router["policies"]) == lrp_uuids
    switch_ports = {ls["name"]: refs(ls["ports"]) for ls in raw["Logical_Switch"]}
    lsps = {p["name"]: p["_uuid"][1] for p in lsp_rows(remote)}
    assert lsps["nf-a-in"] in switch_ports["node0"] and lsps["nf-b-in"] in switch_ports["node1"]
