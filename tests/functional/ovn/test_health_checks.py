"""Health checks and NB_Global on a real OVN 26.03 ovsdb-server, through the adapter.

``Network_Function_Health_Check`` is not a root table: a row nobody references is collected by
the server at the end of the transaction that made it. So a check that exists after ``apply`` was
created in the transaction that also set its function's ``health_check``; and deleting the
function (or clearing the reference) is what removes it. ``NB_Global`` belongs to the cluster:
the adapter sets and deletes only the keys a change names. ``network_function_active`` (northd's)
is read for health, never as part of our rows. Both readers (IDL and snapshot) agree on all of it.
"""

from __future__ import annotations

from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.stack import OvnSandbox

from reconciler.adapters.ovn import read_snapshot
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.core.model.observed import NbGlobal, OvnRow
from tests.support.ovn import OVN_MARKS, Change, connect, creates, ext

pytestmark = OVN_MARKS

NB = "OVN_Northbound"
NF = "osc.fw.node0"
NFG = "osc.fw.node0.fail_open"
MARKER = "osc.io/svc-monitor.osc-gitops"
PROBE = {"failure_count": "2", "interval": "1", "success_count": "1", "timeout": "1"}


def port(name: str, peer: str) -> dict[str, Any]:
    return {
        "name": name,
        "switch": "node0",
        "addresses": [],
        "port_security": [],
        "options": {"is-nf": "true", "nf-linked-port": peer},
        "external_ids": ext(name, resource="VnfDeployment/fw"),
    }


def function_rows(*, check: bool = True) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {
        "Logical_Switch_Port": [port("nf_fw_in", "nf_fw_out"), port("nf_fw_out", "nf_fw_in")],
        "Network_Function": [
            {
                "name": NF,
                "id": 7,
                "inport": "nf_fw_in",
                "outport": "nf_fw_out",
                "external_ids": ext(NF, resource="VnfDeployment/fw"),
            }
        ],
    }
    if check:
        rows["Network_Function_Health_Check"] = [health_check()]
    return rows


def health_check(**options: str) -> dict[str, Any]:
    return {
        "name": NF,
        "network_function": NF,
        "options": {**PROBE, **options},
        "external_ids": ext(NF, resource="VnfDeployment/fw"),
    }


def group() -> dict[str, Any]:
    return {
        "name": NFG,
        "id": 3,
        "mode": "inline",
        "fallback": "fail-open",
        "network_function": [NF],
        "external_ids": ext(NFG, resource="VnfDeployment/fw"),
    }


def select(remote: str, table: str) -> list[dict[str, Any]]:
    return list(
        ovsdb_rpc.transact(remote, NB, [{"op": "select", "table": table, "where": []}])[0]["rows"]
    )


def plain(value: Any) -> Any:
    return ovsdb_rpc.from_atom(value)


def owned(remote: str) -> dict[tuple[str, str], OvnRow]:
    """Our rows as the IDL reader sees them, checked equal to the snapshot reader's."""
    with connect(remote) as nb:
        live = nb.read()
    snap = read_snapshot(OvnSettings(remote=remote))
    assert snap == live
    return {(r.table, r.key): r for r in live.owned}


def test_a_function_and_its_check_are_made_in_one_transaction(nb26: OvnSandbox) -> None:
    remote = nb26.nb_remote
    with connect(remote) as nb:
        nb.apply(creates(function_rows()))
    (nf,) = select(remote, "Network_Function")
    (check,) = select(remote, "Network_Function_Health_Check")
    # it survived its transaction: the function's reference was set in that same transaction
    assert plain(nf["health_check"]) == plain(check["_uuid"])
    assert plain(check["options"]) == PROBE
    rows = owned(remote)
    assert rows[("Network_Function_Health_Check", NF)].fields == health_check()
    assert "health_check" not in rows[("Network_Function", NF)].fields  # held, not a field


def test_a_check_comes_and_goes_under_an_existing_function(nb26: OvnSandbox) -> None:
    remote = nb26.nb_remote
    with connect(remote) as nb:
        nb.apply(creates(function_rows(check=False)))
        assert plain(select(remote, "Network_Function")[0]["health_check"]) == []
        nb.apply(creates({"Network_Function_Health_Check": [health_check()]}))
        (check,) = select(remote, "Network_Function_Health_Check")
        assert plain(select(remote, "Network_Function")[0]["health_check"]) == plain(check["_uuid"])
        # new settings are written key by key
        before = owned(remote)[("Network_Function_Health_Check", NF)].fields
        after = health_check(interval="5", failure_count="3")
        nb.apply([Change("update", "Network_Function_Health_Check", NF, before, after)])
        assert owned(remote)[("Network_Function_Health_Check", NF)].fields == after
        # disabled: the reference goes and the server collects the row; the function stays
        nb.apply([Change("delete", "Network_Function_Health_Check", NF, after, None)])
        assert select(remote, "Network_Function_Health_Check") == []
        assert plain(select(remote, "Network_Function")[0]["health_check"]) == []
        # deleting function and check together (a prune) leaves neither
        nb.apply(creates({"Network_Function_Health_Check": [health_check()]}))
        rows = owned(remote)
        nb.apply(
            [
                Change("delete", t, k, rows[(t, k)].fields, None)
                for t, k in rows
                if t in ("Network_Function", "Network_Function_Health_Check")
            ]
        )
    assert select(remote, "Network_Function") == []
    assert select(remote, "Network_Function_Health_Check") == []


def _nb_global(remote: str) -> dict[str, Any]:
    rows = select(remote, "NB_Global")
    assert len(rows) <= 1
    if not rows:
        return {}
    return {"options": plain(rows[0]["options"]), "external_ids": plain(rows[0]["external_ids"])}


def test_nb_global_keys_of_ours_are_set_and_removed_and_no_other(nb26: OvnSandbox) -> None:
    remote = nb26.nb_remote
    # the cluster's row, with options northd and an admin set, and another instance's marker
    ovsdb_rpc.transact(
        remote,
        NB,
        [
            {
                "op": "insert",
                "table": "NB_Global",
                "row": {
                    "options": [
                        "map",
                        [["mac_prefix", "1a:c2:50"], ["svc_monitor_ip", "10.9.9.9"]],
                    ],
                    "external_ids": ["map", [["osc.io/svc-monitor.other", "svc_monitor_ip"]]],
                },
            }
        ],
    )
    foreign = _nb_global(remote)
    mine = {
        "options": {"svc_monitor_ip_dst": "169.254.254.2"},
        "external_ids": {MARKER: "svc_monitor_ip_dst"},
    }
    with connect(remote) as nb:
        nb.apply([Change("create", "NB_Global", "options", None, mine)])
        assert nb.read().nb_global == NbGlobal(
            options={"svc_monitor_ip": "10.9.9.9", "svc_monitor_ip_dst": "169.254.254.2"},
            external_ids={
                "osc.io/svc-monitor.other": "svc_monitor_ip",
                MARKER: "svc_monitor_ip_dst",
            },
        )
    now = _nb_global(remote)
    assert now["options"] == {**foreign["options"], "svc_monitor_ip_dst": "169.254.254.2"}
    assert now["external_ids"] == {**foreign["external_ids"], MARKER: "svc_monitor_ip_dst"}
    # read back: only our key and our marker are our row (never the other instance's)
    live = owned(remote)[("NB_Global", "options")]
    assert live.fields == mine
    with connect(remote) as nb:
        nb.apply([Change("delete", "NB_Global", "options", live.fields, None)])
    assert _nb_global(remote) == foreign
    assert ("NB_Global", "options") not in owned(remote)


def test_nb_global_is_created_when_the_nb_has_none(nb26: OvnSandbox) -> None:
    remote = nb26.nb_remote
    assert select(remote, "NB_Global") == []  # no northd, no ovn-nbctl init
    mine = {
        "options": {"svc_monitor_ip": "169.254.254.1", "svc_monitor_ip_dst": "169.254.254.2"},
        "external_ids": {MARKER: "svc_monitor_ip,svc_monitor_ip_dst"},
    }
    with connect(remote) as nb:
        nb.apply([*creates(function_rows()), Change("create", "NB_Global", "options", None, mine)])
    assert _nb_global(remote) == mine
    assert owned(remote)[("NB_Global", "options")].fields == mine


def test_northds_active_function_is_health_never_drift(nb26: OvnSandbox) -> None:
    remote = nb26.nb_remote
    with connect(remote) as nb:
        nb.apply(creates({**function_rows(), "Network_Function_Group": [group()]}))
        first = nb.read()
        assert first.nf_active == {NFG: None}
        (nf,) = select(remote, "Network_Function")
        (nfg,) = select(remote, "Network_Function_Group")
        where = [["_uuid", "==", nfg["_uuid"]]]

        def set_active(value: Any) -> None:  # what northd does as its probes succeed or fail
            row = {"network_function_active": value}
            op = {"op": "update", "table": "Network_Function_Group", "where": where, "row": row}
            ovsdb_rpc.transact(remote, NB, [op])

        set_active(nf["_uuid"])
        healthy = _wait_for(nb, lambda s: s.nf_active == {NFG: NF})
        # our rows are the very same objects: nothing to re-plan, no drift
        assert healthy.owned is first.owned
        assert "network_function_active" not in {k for r in healthy.owned for k in r.fields}
        assert read_snapshot(OvnSettings(remote=remote)) == healthy
        set_active(["set", []])
        dead = _wait_for(nb, lambda s: s.nf_active == {NFG: None})
        assert dead.owned is first.owned


def _wait_for(nb: Any, condition: Any, timeout: float = 5.0) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while True:
        state = nb.read()
        if condition(state) or time.monotonic() > deadline:
            assert condition(state)
            return state
        time.sleep(0.01)
