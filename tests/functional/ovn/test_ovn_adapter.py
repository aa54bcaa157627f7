"""The NB adapter against real ovsdb-server (and ovn-northd where it can judge our rows)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from osc_gitops_sandbox.ovn.stack import (
    OvnSandbox,
    SeedPod,
    free_port,
    seed_foreign_rows,
    seed_ovn_kubernetes,
)

from reconciler.adapters.ovn import (
    OvnApplyError,
    OvnCapabilityError,
    OvnChange,
    OvnConnectError,
    OvnNorthbound,
)
from reconciler.core.model.observed import OvnRow
from tests.support.ovn import NODES, OVN_MARKS, Change, connect, creates, ext

pytestmark = OVN_MARKS

ALL_TABLES = [
    "Logical_Switch",
    "Logical_Switch_Port",
    "Logical_Router",
    "Port_Group",
    "ACL",
]
NF_TABLES = [*ALL_TABLES, "Network_Function", "Network_Function_Group"]


def lsp(pod: SeedPod) -> str:
    return f"{pod.namespace}_{pod.name}"


def pg_row(name: str, ports: list[str]) -> dict[str, Any]:
    return {"name": name, "ports": sorted(ports), "external_ids": ext(name)}


def acl_row(key: str, pg: str, nfg: str | None = None, tier: int = 0) -> dict[str, Any]:
    return {
        "port_group": pg,
        "name": f"osc-{key}",
        "direction": "to-lport",
        "priority": 2000,
        "tier": tier,
        "match": f"outport == @{pg} && ip4",
        "action": "allow-related",
        "network_function_group": nfg,
        "external_ids": ext(key),
    }


def nf_port(name: str, peer: str, switch: str = "node0") -> dict[str, Any]:
    return {
        "name": name,
        "switch": switch,
        "addresses": [],
        "port_security": [],
        "options": {"is-nf": "true", "nf-linked-port": peer},
        "external_ids": ext(name),
    }


def with_revision(row: dict[str, Any], revision: str | None) -> dict[str, Any]:
    if revision is None:
        return row
    return {**row, "external_ids": {**row["external_ids"], "osc.io/revision": revision}}


def owned_as_dict(nb: OvnNorthbound) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r.table, r.key): r.fields for r in nb.read().owned}


# --- reading ----------------------------------------------------------------------------------


def test_capabilities_installed_schema(nb23: OvnSandbox) -> None:
    with connect(nb23.nb_remote) as nb:
        caps = nb.capabilities
        assert caps.network_function is False
        assert caps.schema_version.startswith("7.0")
        assert nb.read().capabilities == caps


def test_capabilities_nf_schema(nb26: OvnSandbox) -> None:
    with connect(nb26.nb_remote) as nb:
        assert nb.capabilities.network_function is True
        assert nb.capabilities.schema_version == "7.18.0"


def test_read_pod_ports_switches_and_routers(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    seed_foreign_rows(nb23.nb_remote, [lsp(pods[0])])
    with connect(nb23.nb_remote) as nb:
        state = nb.read()
    assert [s.name for s in state.switches] == ["node0", "node1"]
    assert state.switches[1].subnet == "10.244.1.0/24"
    assert not any(s.load_balancers for s in state.switches)
    assert state.routers == ("ovn_cluster_router",)
    # stor-* ports are not pods; every seeded pod is, with its identity parsed.
    assert len(state.pod_ports) == len(pods)
    port = next(p for p in state.pod_ports if p.pod == pods[3].name)
    assert (port.name, port.namespace, port.switch) == (lsp(pods[3]), "shop", pods[3].node)
    assert (port.pod_uid, port.mac, port.ips) == (pods[3].uid, pods[3].mac, (pods[3].ip,))
    # Hand-made, other-instance and NetworkPolicy rows are not ours.
    assert state.owned == ()


def test_connect_returns_after_the_initial_sync(pods: list[SeedPod]) -> None:
    """A read right after connect sees every row: the cache is never half-loaded."""
    from osc_gitops_sandbox.ovn.stack import make_pods

    many = make_pods(NODES, 3000, namespace="bulk")
    with OvnSandbox(northd=False) as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, many)
        with connect(sandbox.nb_remote) as nb:
            assert len(nb.read().pod_ports) == 3000


# --- writing on the installed (23.03) schema, judged by northd --------------------------------


def test_port_group_and_acl_become_logical_flows(pods: list[SeedPod]) -> None:
    with OvnSandbox(northd=True) as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        with connect(sandbox.nb_remote) as nb:
            pg = pg_row("osc_web", [lsp(pods[0]), lsp(pods[1])])
            acl = acl_row("web-allow", "osc_web")
            nb.apply(creates({"Port_Group": [pg], "ACL": [acl]}))
            owned = owned_as_dict(nb)
        assert owned[("Port_Group", "osc_web")]["ports"] == pg["ports"]
        assert owned[("ACL", "web-allow")] == acl
        sandbox.wait_northd_sync()
        flows = sandbox.sbctl("lflow-list")
        acl_flows = [
            line
            for line in flows.splitlines()
            if "ls_out_acl" in line and "outport == @osc_web && ip4" in line
        ]
        assert acl_flows, "northd made no ACL-stage flow for our port group"
        # allow-related at priority 2000 lands at 1000 + 2000 in the ACL stage.
        assert all(re.search(r"priority=3000\b", line) for line in acl_flows)
        # Both pods really are in the SB port group northd derived from ours.
        sb_pgs = sandbox.sbctl("--columns=name,ports", "list", "Port_Group")
        assert lsp(pods[0]) in sb_pgs and lsp(pods[1]) in sb_pgs


def test_same_transaction_port_group_and_acls(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    """Trap: ovsdbapp's pg_acl_add fails on a group created in the same txn unless it was
    created with ``acls=[]``; the adapter creates a group and two ACLs in one apply."""
    pg = pg_row("osc_api", [lsp(pods[2])])
    acls = [acl_row("api-in", "osc_api"), {**acl_row("api-out", "osc_api"), "priority": 2001}]
    with connect(nb23.nb_remote) as nb:
        nb.apply(creates({"Port_Group": [pg], "ACL": acls}))
        owned = owned_as_dict(nb)
    assert owned[("ACL", "api-in")]["port_group"] == "osc_api"
    assert owned[("ACL", "api-out")]["port_group"] == "osc_api"
    dump = nb23.dump(["Port_Group", "ACL"])
    (group,) = dump["Port_Group"]
    assert sorted(group["acls"]) == sorted(r["_uuid"] for r in dump["ACL"])


def test_port_names_are_resolved_to_uuids_or_refused(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    """Trap: pg_add_ports (IDL addvalue) silently drops a port *name*; the adapter resolves
    names to rows itself and refuses unknown ones instead of writing an empty group."""
    names = [lsp(pods[0]), lsp(pods[4])]
    with connect(nb23.nb_remote) as nb:
        nb.apply(creates({"Port_Group": [pg_row("osc_db", names)]}))
        dump = nb23.dump(["Port_Group", "Logical_Switch_Port"])
        uuid_of = {r["name"]: r["_uuid"] for r in dump["Logical_Switch_Port"]}
        (group,) = dump["Port_Group"]
        assert sorted(group["ports"]) == sorted(uuid_of[n] for n in names)

        bad = pg_row("osc_bad", [lsp(pods[1]), "shop_no-such-pod"])
        with pytest.raises(OvnApplyError, match=r"shop_no-such-pod.*does not exist") as err:
            nb.apply(creates({"Port_Group": [bad]}))
        assert nb23.nb_remote in str(err.value)
        assert [g["name"] for g in nb23.dump(["Port_Group"])["Port_Group"]] == ["osc_db"]


def test_invalid_value_is_refused_not_silently_dropped(
    nb23: OvnSandbox, pods: list[SeedPod]
) -> None:
    """The Python IDL logs and drops a value outside the column type (the ACL would commit with
    priority 0); the adapter refuses the whole apply instead."""
    before = nb23.dump(ALL_TABLES)
    good = pg_row("osc_good", [lsp(pods[0])])
    broken = {**acl_row("bad-prio", "osc_good"), "priority": 99999}  # schema max is 32767
    with connect(nb23.nb_remote) as nb, pytest.raises(OvnApplyError, match=r"ACL\.priority"):
        nb.apply(creates({"Port_Group": [good], "ACL": [broken]}))
    assert nb23.dump(ALL_TABLES) == before


def test_failed_transaction_commits_nothing(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    """A server-side failure (unique index on Port_Group.name, violated by the last row of the
    transaction) rolls back every other row of it."""
    foreign = seed_foreign_rows(nb23.nb_remote)
    before = nb23.dump(ALL_TABLES)
    good = pg_row("osc_good", [lsp(pods[0])])
    clash = pg_row(foreign.handmade_port_group, [lsp(pods[1])])
    with connect(nb23.nb_remote) as nb:
        with pytest.raises(OvnApplyError, match="nothing was committed") as err:
            nb.apply(creates({"Port_Group": [good, clash], "ACL": [acl_row("a", "osc_good")]}))
        assert nb23.nb_remote in str(err.value)
        assert nb.read().owned == ()
    assert nb23.dump(ALL_TABLES) == before


def test_capability_errors_on_the_installed_schema(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    with connect(nb23.nb_remote) as nb:
        pg = pg_row("osc_t", [lsp(pods[0])])
        with pytest.raises(OvnCapabilityError, match=r"ACL\.tier"):
            nb.apply(creates({"Port_Group": [pg], "ACL": [acl_row("t", "osc_t", tier=2)]}))
        nf = {"name": "nf1", "id": 1, "inport": "a", "outport": "b", "external_ids": ext("nf1")}
        with pytest.raises(OvnCapabilityError, match="Network_Function"):
            nb.apply(creates({"Network_Function": [nf]}))
        assert nb.read().owned == ()


def test_bulk_lsp_delete_fast_path(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    """Trap: ovsdbapp's per-port lsp_del is cubic (800 ports > 300 s); the adapter removes all
    our ports from a switch with one db_remove. 2000 ports on one switch go in one apply."""
    ports = [nf_port(f"nf-bulk-{i:04d}", f"nf-bulk-{i:04d}") for i in range(2000)]
    with connect(nb23.nb_remote, timeout=60) as nb:
        nb.apply([Change("create", "Logical_Switch_Port", p["name"], None, p) for p in ports])
        assert len(nb.read().owned) == 2000
        nb.apply([Change("delete", "Logical_Switch_Port", p["name"], p, None) for p in ports])
        state = nb.read()
    assert state.owned == ()
    assert len(state.pod_ports) == len(pods)
    dump = nb23.dump(["Logical_Switch", "Logical_Switch_Port"])
    assert len(dump["Logical_Switch_Port"]) == len(pods) + len(NODES)  # pods + stor-*
    node0 = next(s for s in dump["Logical_Switch"] if s["name"] == "node0")
    assert len(node0["ports"]) == sum(p.node == "node0" for p in pods) + 1


# --- Network Function rows on the 26.03 schema ------------------------------------------------


def _nf_rows(pods: list[SeedPod]) -> dict[str, list[dict[str, Any]]]:
    on_node0 = [lsp(p) for p in pods if p.node == "node0"][:2]
    return {
        "Logical_Switch_Port": [
            nf_port("nf-fw-node0-in", "nf-fw-node0-out"),
            nf_port("nf-fw-node0-out", "nf-fw-node0-in"),
        ],
        "Port_Group": [pg_row("osc_web_node0", on_node0)],
        "Network_Function": [
            {
                "name": "nf_fw_node0",
                "id": 1,
                "inport": "nf-fw-node0-in",
                "outport": "nf-fw-node0-out",
                "external_ids": ext("nf_fw_node0"),
            }
        ],
        "Network_Function_Group": [
            {
                "name": "nfg_fw",
                "id": 7,
                "mode": "inline",
                "fallback": "fail-close",
                "network_function": ["nf_fw_node0"],
                "external_ids": ext("nfg_fw"),
            }
        ],
        "ACL": [acl_row("web-fw", "osc_web_node0", nfg="nfg_fw", tier=3)],
    }


def _changed_rows(
    before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]
) -> dict[str, set[str]]:
    """Per table: uuid -> names of the columns that differ (``_version`` ignored)."""
    out: dict[str, set[str]] = {}
    for table in before:
        old = {r["_uuid"]: r for r in before[table]}
        new = {r["_uuid"]: r for r in after[table]}
        for u in old.keys() | new.keys():
            if u not in old or u not in new:
                out.setdefault(table, set()).add("<row added/removed>")
                continue
            cols = {c for c in old[u] if c != "_version" and old[u][c] != new[u].get(c)}
            if cols:
                out.setdefault(table, set()).update(cols)
    return out


def test_network_function_roundtrip_update_and_delete(
    nb26: OvnSandbox, pods: list[SeedPod]
) -> None:
    foreign = seed_foreign_rows(nb26.nb_remote, [lsp(pods[0])])
    rows = _nf_rows(pods)
    with connect(nb26.nb_remote) as nb:
        # 1. everything in ONE apply, read back equal in symbolic form
        nb.apply(creates(rows), revision="c0ffee")
        owned = owned_as_dict(nb)
        expected = {
            (table, r["external_ids"]["osc.io/key"]): with_revision(r, "c0ffee")
            for table, rs in rows.items()
            for r in rs
        }
        assert owned == expected
        assert all(isinstance(r, OvnRow) for r in nb.read().owned)

        # 2. a minimal update: one more pod in the group is ONE mutation of Port_Group.ports
        before_dump = nb26.dump(NF_TABLES)
        old_pg = owned[("Port_Group", "osc_web_node0")]
        extra = next(lsp(p) for p in pods if p.node == "node0" and lsp(p) not in old_pg["ports"])
        new_pg = {**old_pg, "ports": sorted([*old_pg["ports"], extra])}
        nb.apply([Change("update", "Port_Group", "osc_web_node0", old_pg, new_pg)])
        after_dump = nb26.dump(NF_TABLES)
        assert _changed_rows(before_dump, after_dump) == {"Port_Group": {"ports"}}
        assert owned_as_dict(nb)[("Port_Group", "osc_web_node0")]["ports"] == new_pg["ports"]

        # 3. an in-place column change plus a map key change touch only those columns
        acl = owned[("ACL", "web-fw")]
        new_acl = {**acl, "priority": 2100}
        before_dump = after_dump
        nb.apply([Change("update", "ACL", "web-fw", acl, new_acl)])
        assert _changed_rows(before_dump, nb26.dump(NF_TABLES)) == {"ACL": {"priority"}}

        # 4. delete everything we own; foreign rows and pods are untouched
        foreign_before = {
            t: [r for r in rs if r.get("external_ids", {}).get("osc.io/owner") != "osc-gitops"]
            for t, rs in nb26.dump(NF_TABLES).items()
        }
        current = owned_as_dict(nb)
        deletes: list[OvnChange] = [
            Change("delete", table, key, fields, None) for (table, key), fields in current.items()
        ]
        nb.apply(deletes)
        assert nb.read().owned == ()
        final = nb26.dump(NF_TABLES)
    # Switch rows lose only our NF ports, so compare them without the ports column.
    strip = {"Logical_Switch"}
    for table, rows_before in foreign_before.items():
        want = [{k: v for k, v in r.items() if not (table in strip and k in ("ports", "_version"))}
                for r in rows_before]  # fmt: skip
        got = [{k: v for k, v in r.items() if not (table in strip and k in ("ports", "_version"))}
               for r in final[table]]  # fmt: skip
        assert got == want, table
    assert {g["name"] for g in final["Port_Group"]} == {
        foreign.handmade_port_group,
        foreign.other_instance_port_group,
        foreign.netpol_port_group,
    }


def test_update_switch_membership_and_map_keys(nb26: OvnSandbox, pods: list[SeedPod]) -> None:
    port = nf_port("nf-move", "nf-move")
    with connect(nb26.nb_remote) as nb:
        nb.apply(creates({"Logical_Switch_Port": [port]}))
        moved = {**port, "switch": "node1", "options": {"is-nf": "true", "nf-linked-port": "x"}}
        nb.apply([Change("update", "Logical_Switch_Port", "nf-move", port, moved)])
        assert owned_as_dict(nb)[("Logical_Switch_Port", "nf-move")] == moved
    dump = nb26.dump(["Logical_Switch", "Logical_Switch_Port"])
    u = next(r["_uuid"] for r in dump["Logical_Switch_Port"] if r["name"] == "nf-move")
    holders = [s["name"] for s in dump["Logical_Switch"] if u in s["ports"]]
    assert holders == ["node1"]


def test_stale_plan_is_refused(nb26: OvnSandbox) -> None:
    with connect(nb26.nb_remote) as nb, pytest.raises(OvnApplyError, match="no longer"):
        nb.apply([Change("delete", "Port_Group", "osc_ghost", {"name": "osc_ghost"}, None)])


# --- connection errors ------------------------------------------------------------------------


def test_connect_error_unreachable_tcp_port() -> None:
    remote = f"tcp:127.0.0.1:{free_port()}"
    with pytest.raises(OvnConnectError, match=re.escape(f"cannot connect to OVN NB at {remote}")):
        connect(remote, timeout=2)


def test_connect_error_missing_unix_socket(tmp_path: Any) -> None:
    remote = f"unix:{tmp_path}/nope.sock"
    with pytest.raises(OvnConnectError, match=re.escape(remote)):
        connect(remote, timeout=2)


def test_connect_error_ssl_without_files() -> None:
    with pytest.raises(OvnConnectError, match="private_key, certificate and ca_cert"):
        connect("ssl:127.0.0.1:6641", timeout=1)
