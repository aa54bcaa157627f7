"""The OVN adapter's table registry and the rules both NB readers share (no server needed).

The equality of the two readers on real servers is ``test_ovn_snapshot``; here the pieces they
share are checked directly: the registry agrees with ``core.target.OVN_TABLES`` and orders
references correctly, the column rule says what each column becomes, pod ports and addresses
are parsed one way, and the raw JSON-RPC helpers read remotes and leader state like OVS.
"""

from __future__ import annotations

import pytest

from reconciler.adapters.ovn.rows import parse_addresses, pod_port, switch
from reconciler.adapters.ovn.rpc import DEFAULT_PORT, host_port, leader_problem, rpc_error
from reconciler.adapters.ovn.tables import (
    CHILD_COLUMNS,
    NAMED_TABLES,
    NB_TABLES,
    OWNED_TABLES,
    REFERRERS,
    TABLE_ORDER,
    NbSchema,
    symbolic_columns,
)
from reconciler.core.model.observed import PodPort, Switch
from reconciler.core.model.target import OVN_TABLES

# --- the registry ---------------------------------------------------------------------------


def test_registry_writes_exactly_the_target_tables_in_their_order() -> None:
    assert tuple(t.name for t in OWNED_TABLES) == OVN_TABLES
    assert {t.name for t in NB_TABLES.values() if t.owned} == set(OVN_TABLES)
    assert {name: i for i, name in enumerate(OVN_TABLES)} == TABLE_ORDER


def test_every_table_we_write_comes_after_the_rows_it_names() -> None:
    """Creates run in ``OVN_TABLES`` order and deletes in reverse: a referenced or parent row
    we also write must come first, or a transaction would name a row not yet created."""
    for spec in OWNED_TABLES:
        named = [ref.table for ref in spec.refs.values()]
        if spec.parent is not None:
            named.append(spec.parent.table)
        for other in named:
            assert other in NB_TABLES, f"{spec.name} names unknown table {other}"
            if NB_TABLES[other].owned:
                assert TABLE_ORDER[other] < TABLE_ORDER[spec.name], (spec.name, other)


def test_derived_maps() -> None:
    assert CHILD_COLUMNS == {
        "Logical_Switch": (("ports", "Logical_Switch_Port"),),
        "Port_Group": (("acls", "ACL"),),
        "Logical_Router": (("policies", "Logical_Router_Policy"),),
        "Network_Function": (("health_check", "Network_Function_Health_Check"),),
    }
    assert {
        "Logical_Switch_Port": {"Port_Group", "Network_Function"},
        "Network_Function": {"Network_Function_Group"},
        "Network_Function_Group": {"ACL"},
    } == REFERRERS
    assert NAMED_TABLES[:2] == ("Logical_Switch", "Logical_Router")
    assert set(NAMED_TABLES[2:]) == {t.name for t in OWNED_TABLES if t.naming == "unique-name"}


def test_keys_of_our_rows() -> None:
    lsp, acl = NB_TABLES["Logical_Switch_Port"], NB_TABLES["ACL"]
    assert lsp.key_of("fw0", {"osc.io/key": "ignored"}, "u1") == "fw0"
    assert acl.key_of("osc-x", {"osc.io/key": "web-in"}, "u1") == "web-in"
    # a row of ours without osc.io/key (made by hand) is still seen, keyed by its UUID
    assert acl.key_of(None, {}, "u1") == "uuid:u1"


# --- the column rule both readers follow -----------------------------------------------------


def rules(table: str, present: set[str]) -> dict[str, tuple[str, object]]:
    return {col: (rule, extra) for col, rule, extra in symbolic_columns(table, present)}


def test_columns_an_older_schema_lacks_read_as_their_default() -> None:
    acl = NB_TABLES["ACL"]
    present = set(acl.columns) - {"tier", "network_function_group"}
    got = rules("ACL", present)
    assert got["tier"] == ("const", 0)
    assert got["network_function_group"] == ("const", None)
    assert got["name"] == ("opt", None)
    assert got["external_ids"] == ("map", None)
    assert got["options"] == ("map", True)  # sparse: only from-lport steering ACLs have it
    assert got["priority"] == ("plain", False)
    # every column is there, in registry order, when the schema has them all
    assert list(rules("ACL", set(acl.columns))) == list(acl.columns)
    assert rules("ACL", set(acl.columns))["network_function_group"] == (
        "ref",
        ("Network_Function_Group", "opt"),
    )


def test_child_columns_are_skipped_and_list_order_is_kept_only_where_it_means_something() -> None:
    pg = rules("Port_Group", set(NB_TABLES["Port_Group"].columns))
    assert "acls" not in pg  # the ACLs name their Port_Group
    assert pg["ports"] == ("ref", ("Logical_Switch_Port", "set"))
    lsp = rules("Logical_Switch_Port", set(NB_TABLES["Logical_Switch_Port"].columns))
    assert lsp["addresses"] == ("plain", True)
    assert lsp["port_security"] == ("plain", False)
    assert lsp["options"] == ("map", None)


def schema_of(tables: dict[str, list[str]], version: str = "7.0.0") -> NbSchema:
    """A server schema with these tables and columns (types do not matter here)."""
    return NbSchema(
        {
            "name": "OVN_Northbound",
            "version": version,
            "tables": {
                table: {"columns": {c: {"type": "string"} for c in columns}}
                for table, columns in tables.items()
            },
        }
    )


def test_schema_capabilities_and_present_columns() -> None:
    acl = ["name", "priority", "match", "action", "external_ids", "direction", "label"]
    older = schema_of({"ACL": acl}, "7.0.0")
    assert older.capabilities().schema_version == "7.0.0"
    assert older.capabilities().network_function is False
    # registry order, only what the server has (the server's extra columns, e.g. label, are
    # not read)
    assert older.present("ACL") == ("name", "direction", "priority", "match", "action",
                                    "external_ids")  # fmt: skip
    assert older.present("ACL", ["external_ids", "tier"]) == ("external_ids",)
    assert not older.has_column("ACL", "tier") and not older.has_table("Network_Function")
    nf_tables = {"Network_Function": ["name"], "Network_Function_Group": ["name"]}
    without_acl_column = schema_of({"ACL": acl, **nf_tables})
    assert without_acl_column.capabilities().network_function is False
    newer = schema_of({"ACL": [*acl, "network_function_group"], **nf_tables}, "7.12.0")
    assert newer.capabilities().network_function is True


# --- rows we only read --------------------------------------------------------------------


def test_addresses_mac_and_ips() -> None:
    addresses = ["unknown", "0a:58:0a:f4:01:05 10.244.1.5 fd00::5", "0a:58:00:00:00:01"]
    assert parse_addresses(addresses) == ("0a:58:0a:f4:01:05", ("10.244.1.5", "fd00::5"))
    assert parse_addresses(["router", "dynamic"]) == (None, ())


def test_pod_port() -> None:
    ext = {"pod": "true", "namespace": "shop"}
    port = pod_port("shop_web-1", "node0", ext, ["0a:58:0a:f4:00:07 10.244.0.7"], {})
    assert port == PodPort(
        name="shop_web-1",
        switch="node0",
        namespace="shop",
        pod="web-1",
        pod_uid=None,
        mac="0a:58:0a:f4:00:07",
        ips=("10.244.0.7",),
    )
    uid = {"iface-id-ver": "1234"}
    assert pod_port("odd", "node0", {"pod": "true"}, [], uid) == PodPort(
        name="odd", switch="node0", namespace="", pod="odd", pod_uid="1234", mac=None
    )
    assert pod_port("shop_web-1", "node0", {"namespace": "shop"}, [], {}) is None


def test_switch_subnet() -> None:
    assert switch("node0", {"subnet": "10.244.0.0/24"}, True) == Switch(
        "node0", "10.244.0.0/24", True
    )
    assert switch("join", {}, False) == Switch("join")


# --- raw JSON-RPC helpers -------------------------------------------------------------------


def test_remotes() -> None:
    assert host_port("tcp:[::1]:6641", "[::1]:6641") == ("::1", 6641)
    assert host_port("ssl:[::1]", "[::1]") == ("::1", DEFAULT_PORT)
    assert host_port("tcp:10.0.0.1:6641", "10.0.0.1:6641") == ("10.0.0.1", 6641)
    assert host_port("tcp:nb.example", "nb.example") == ("nb.example", DEFAULT_PORT)
    with pytest.raises(ValueError, match="invalid port 'x'"):
        host_port("tcp:h:x", "h:x")


def test_leader_checks_like_the_idl() -> None:
    def reply(**db: object) -> dict[str, object]:
        return {"result": [{"rows": [db]}], "error": None}

    assert leader_problem({"error": {"error": "unknown database"}}) is None
    assert leader_problem({"result": [{"rows": []}], "error": None}) is None
    assert leader_problem(reply(model="standalone")) is None
    clustered = {"model": "clustered", "schema": "{}", "connected": True}
    assert leader_problem(reply(**clustered, leader=True)) is None
    assert leader_problem(reply(**clustered, leader=False)) == "not the Raft leader"
    assert leader_problem(reply(**{**clustered, "connected": False}, leader=True)) == (
        "not connected to the Raft cluster"
    )
    assert leader_problem(reply(**{**clustered, "schema": ""}, leader=True)) == (
        "the database's schema was deleted"
    )


def test_rpc_errors() -> None:
    assert rpc_error({"result": [], "error": None}) is None
    assert rpc_error({"error": {"error": "not allowed", "details": "lock"}}) == "not allowed: lock"
    assert rpc_error({"error": "unknown method"}) == "unknown method"
