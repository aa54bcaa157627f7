"""The incremental ``read()`` of the NB adapter against real ovsdb-server.

``OvnNorthbound.read()`` keeps what it derived from the IDL cache and redoes only the rows the
IDL reports as changed. These tests prove the warm adapter always answers what a FRESH adapter
(connect, full initial sync, read) answers, after random external writes of every kind the
cache has to follow (owned and foreign rows, pods, renames, membership, ownership changes,
moves between parents), after a server restart with changes made while it was down, and that
unchanged results are reused as the same objects.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.stack import Daemon, OvnSandbox, child_env, run_command

from reconciler.adapters.ovn import OvnNorthbound, OvnState
from tests.support.ovn import OVN_MARKS, Change, connect, creates, ext

pytestmark = OVN_MARKS

DB = "OVN_Northbound"
ROUTER = "ovn_cluster_router"


def rpc(remote: str, *ops: dict[str, Any]) -> list[dict[str, Any]]:
    return ovsdb_rpc.transact(remote, DB, list(ops))


def by_name(name: str) -> list[Any]:
    return [["name", "==", name]]


def by_key(key: str) -> list[Any]:
    return [["external_ids", "includes", ["map", [["osc.io/key", key]]]]]


def uuids(remote: str, table: str, column: str = "name") -> dict[str, str]:
    rows = rpc(remote, {"op": "select", "table": table, "where": [], "columns": ["_uuid", column]})
    return {r[column]: r["_uuid"][1] for r in rows[0]["rows"]}


def settle(warm: OvnNorthbound, remote: str, timeout: float = 10.0) -> OvnState:
    """Wait until the warm adapter's read equals a fresh adapter's; return it."""
    with connect(remote) as fresh_nb:
        fresh = fresh_nb.read()
    deadline = time.monotonic() + timeout
    while True:
        state = warm.read()
        if state == fresh:
            return state
        if time.monotonic() > deadline:
            diff = {
                f: (getattr(state, f), getattr(fresh, f))
                for f in ("switches", "routers", "pod_ports", "used_ids")
                if getattr(state, f) != getattr(fresh, f)
            }
            raise AssertionError(
                f"warm read differs from a fresh one: {diff}; owned only in the warm read: "
                f"{[r for r in state.owned if r not in fresh.owned]}, only in the fresh one: "
                f"{[r for r in fresh.owned if r not in state.owned]}"
            )
        time.sleep(0.01)


class World:
    """Random external writes (raw JSON-RPC), with a model of what exists to pick from."""

    def __init__(self, remote: str, rnd: random.Random) -> None:
        self.remote = remote
        self.rnd = rnd
        self.n = 0
        self.switches = ["node0", "node1"]
        self.pods: dict[str, str] = {}  # pod LSP name -> switch
        self.nf_ports: dict[str, str] = {}  # owned LSP name -> switch
        self.pgs: dict[str, bool] = {}  # Port_Group name -> ours
        self.acls: dict[str, str] = {}  # owned ACL key -> Port_Group
        self.lrps: list[str] = []  # owned Logical_Router_Policy keys
        self.router = ROUTER
        for lsp, _u in uuids(remote, "Logical_Switch_Port").items():
            if lsp.startswith("shop_"):
                self.pods[lsp] = "node0"  # which switch does not matter to the model

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def pick_ports(self, k: int) -> list[list[str]]:
        lsps = uuids(self.remote, "Logical_Switch_Port")
        names = sorted(self.pods) + sorted(self.nf_ports)
        chosen = self.rnd.sample(names, min(k, len(names)))
        return [["uuid", lsps[n]] for n in chosen if n in lsps]

    # -- operations ----------------------------------------------------------------------------
    def pg_create(self) -> None:
        ours = self.rnd.random() < 0.8
        name = self.fresh("pg_")
        ids = ext(name) if ours else {"owner": "someone-else"}
        rpc(
            self.remote,
            {
                "op": "insert",
                "table": "Port_Group",
                "row": {
                    "name": name,
                    "ports": ["set", self.pick_ports(self.rnd.randint(0, 4))],
                    "external_ids": ovsdb_rpc.to_datum(ids),
                },
            },
        )
        self.pgs[name] = ours

    def pg_delete(self) -> None:
        if not self.pgs:
            return self.pg_create()
        name = self.rnd.choice(sorted(self.pgs))
        rpc(self.remote, {"op": "delete", "table": "Port_Group", "where": by_name(name)})
        del self.pgs[name]
        self.acls = {k: pg for k, pg in self.acls.items() if pg != name}

    def pg_members(self) -> None:
        if not self.pgs:
            return self.pg_create()
        name = self.rnd.choice(sorted(self.pgs))
        mutation = self.rnd.choice(["insert", "delete"])
        ports = self.pick_ports(2)
        rpc(
            self.remote,
            {
                "op": "mutate",
                "table": "Port_Group",
                "where": by_name(name),
                "mutations": [["ports", mutation, ["set", ports]]],
            },
        )

    def pg_rename(self) -> None:
        if not self.pgs:
            return self.pg_create()
        old = self.rnd.choice(sorted(self.pgs))
        new = self.fresh("pg_")
        row: dict[str, Any] = {"name": new}
        if self.pgs[old]:
            row["external_ids"] = ovsdb_rpc.to_datum(ext(new))
        rpc(self.remote, {"op": "update", "table": "Port_Group", "where": by_name(old),
                          "row": row})  # fmt: skip
        self.pgs[new] = self.pgs.pop(old)
        self.acls = {k: (new if pg == old else pg) for k, pg in self.acls.items()}

    def pg_owner_flip(self) -> None:
        if not self.pgs:
            return self.pg_create()
        name = self.rnd.choice(sorted(self.pgs))
        ours = not self.pgs[name]
        ids = ext(name) if ours else {**ext(name), "osc.io/owner": "other-instance"}
        rpc(
            self.remote,
            {
                "op": "update",
                "table": "Port_Group",
                "where": by_name(name),
                "row": {"external_ids": ovsdb_rpc.to_datum(ids)},
            },
        )
        self.pgs[name] = ours

    def acl_create(self) -> None:
        if not self.pgs:
            return self.pg_create()
        pg = self.rnd.choice(sorted(self.pgs))
        key = self.fresh("acl-")
        rpc(
            self.remote,
            {
                "op": "insert",
                "table": "ACL",
                "uuid-name": "a",
                "row": {
                    "name": f"osc-{key}",
                    "direction": "to-lport",
                    "priority": self.rnd.randint(1000, 3000),
                    "match": f"outport == @{pg} && ip4",
                    "action": "allow-related",
                    "external_ids": ovsdb_rpc.to_datum(ext(key)),
                },
            },
            {
                "op": "mutate",
                "table": "Port_Group",
                "where": by_name(pg),
                "mutations": [["acls", "insert", ["set", [["named-uuid", "a"]]]]],
            },
        )
        self.acls[key] = pg

    def acl_update(self) -> None:
        if not self.acls:
            return self.acl_create()
        key = self.rnd.choice(sorted(self.acls))
        row: dict[str, Any] = {"priority": self.rnd.randint(1000, 3000)}
        if self.rnd.random() < 0.3:  # a new osc.io/key: the row's identity changes
            new = self.fresh("acl-")
            row["external_ids"] = ovsdb_rpc.to_datum(ext(new))
            self.acls[new] = self.acls.pop(key)
        rpc(self.remote, {"op": "update", "table": "ACL", "where": by_key(key), "row": row})

    def acl_delete(self) -> None:
        if not self.acls:
            return self.acl_create()
        key = self.rnd.choice(sorted(self.acls))
        sel = rpc(self.remote, {"op": "select", "table": "ACL", "where": by_key(key),
                                "columns": ["_uuid"]})  # fmt: skip
        acl = sel[0]["rows"][0]["_uuid"]
        rpc(
            self.remote,
            {
                "op": "mutate",
                "table": "Port_Group",
                "where": by_name(self.acls.pop(key)),
                "mutations": [["acls", "delete", ["set", [acl]]]],
            },
        )

    def acl_move(self) -> None:
        """Move an ACL to another Port_Group in one transaction (its parent changes)."""
        if not self.acls or len(self.pgs) < 2:
            return self.acl_create()
        key = self.rnd.choice(sorted(self.acls))
        old = self.acls[key]
        new = self.rnd.choice(sorted(set(self.pgs) - {old}))
        sel = rpc(self.remote, {"op": "select", "table": "ACL", "where": by_key(key),
                                "columns": ["_uuid"]})  # fmt: skip
        acl = sel[0]["rows"][0]["_uuid"]
        rpc(
            self.remote,
            {"op": "mutate", "table": "Port_Group", "where": by_name(new),
             "mutations": [["acls", "insert", ["set", [acl]]]]},
            {"op": "mutate", "table": "Port_Group", "where": by_name(old),
             "mutations": [["acls", "delete", ["set", [acl]]]]},
        )  # fmt: skip
        self.acls[key] = new

    def _lsp_insert(self, name: str, switch: str, row: dict[str, Any]) -> None:
        rpc(
            self.remote,
            {"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "p",
             "row": {"name": name, **row}},
            {"op": "mutate", "table": "Logical_Switch", "where": by_name(switch),
             "mutations": [["ports", "insert", ["set", [["named-uuid", "p"]]]]]},
        )  # fmt: skip

    def pod_add(self) -> None:
        pod = self.fresh("web-")
        name = f"shop_{pod}"
        switch = self.rnd.choice(self.switches)
        mac = f"0a:58:0a:00:{self.n // 256:02x}:{self.n % 256:02x}"
        self._lsp_insert(
            name,
            switch,
            {
                "addresses": f"{mac} 10.0.{self.n // 256}.{self.n % 256}",
                "external_ids": ovsdb_rpc.to_datum({"namespace": "shop", "pod": "true"}),
                "options": ovsdb_rpc.to_datum({"iface-id-ver": str(uuid.uuid4())}),
            },
        )
        self.pods[name] = switch

    def _lsp_remove(self, name: str) -> None:
        lsp = uuids(self.remote, "Logical_Switch_Port")[name]
        rpc(
            self.remote,
            {
                "op": "mutate",
                "table": "Logical_Switch",
                "where": [],
                "mutations": [["ports", "delete", ["set", [["uuid", lsp]]]]],
            },
        )

    def pod_delete(self) -> None:
        if not self.pods:
            return self.pod_add()
        name = self.rnd.choice(sorted(self.pods))
        self._lsp_remove(name)
        del self.pods[name]

    def lsp_rename(self) -> None:
        pool = sorted(self.pods) + sorted(self.nf_ports)
        if not pool:
            return self.pod_add()
        old = self.rnd.choice(pool)
        if old in self.pods:
            new = f"shop_{self.fresh('web-')}"
            self.pods[new] = self.pods.pop(old)
            row: dict[str, Any] = {"name": new}
        else:
            new = self.fresh("nf-")
            self.nf_ports[new] = self.nf_ports.pop(old)
            row = {"name": new, "external_ids": ovsdb_rpc.to_datum(ext(new))}
        rpc(self.remote, {"op": "update", "table": "Logical_Switch_Port",
                          "where": by_name(old), "row": row})  # fmt: skip

    def pod_update(self) -> None:
        if not self.pods:
            return self.pod_add()
        name = self.rnd.choice(sorted(self.pods))
        row = {"options": ovsdb_rpc.to_datum({"iface-id-ver": str(uuid.uuid4())})}
        if self.rnd.random() < 0.5:
            row["addresses"] = f"0a:58:0a:01:00:{self.rnd.randint(0, 255):02x} 10.1.0.7"
        if self.rnd.random() < 0.2:  # no longer a pod port
            row["external_ids"] = ovsdb_rpc.to_datum({"namespace": "shop"})
        rpc(self.remote, {"op": "update", "table": "Logical_Switch_Port",
                          "where": by_name(name), "row": row})  # fmt: skip

    def nf_port_create(self) -> None:
        name = self.fresh("nf-")
        switch = self.rnd.choice(self.switches)
        self._lsp_insert(
            name,
            switch,
            {
                "options": ovsdb_rpc.to_datum({"is-nf": "true", "nf-linked-port": "x"}),
                "external_ids": ovsdb_rpc.to_datum(ext(name)),
            },
        )
        self.nf_ports[name] = switch

    def nf_port_move(self) -> None:
        """Move an owned LSP to another switch in one transaction."""
        if not self.nf_ports:
            return self.nf_port_create()
        name = self.rnd.choice(sorted(self.nf_ports))
        lsp = uuids(self.remote, "Logical_Switch_Port")[name]
        new = self.rnd.choice(self.switches)
        rpc(
            self.remote,
            {"op": "mutate", "table": "Logical_Switch", "where": [],
             "mutations": [["ports", "delete", ["set", [["uuid", lsp]]]]]},
            {"op": "mutate", "table": "Logical_Switch", "where": by_name(new),
             "mutations": [["ports", "insert", ["set", [["uuid", lsp]]]]]},
        )  # fmt: skip
        self.nf_ports[name] = new

    def nf_port_delete(self) -> None:
        if not self.nf_ports:
            return self.nf_port_create()
        name = self.rnd.choice(sorted(self.nf_ports))
        self._lsp_remove(name)
        del self.nf_ports[name]

    def switch_rename(self) -> None:
        i = self.rnd.randrange(len(self.switches))
        old, new = self.switches[i], self.fresh("node-")
        rpc(self.remote, {"op": "update", "table": "Logical_Switch", "where": by_name(old),
                          "row": {"name": new}})  # fmt: skip
        self.switches[i] = new

    def lrp_create(self) -> None:
        key = self.fresh("lrp-")
        rpc(
            self.remote,
            {
                "op": "insert",
                "table": "Logical_Router_Policy",
                "uuid-name": "r",
                "row": {
                    "priority": self.rnd.randint(1, 30000),
                    "match": f"ip4.src == $pg{self.n}_ip4",
                    "action": "reroute",
                    "nexthops": ["set", ["10.0.0.9"]],
                    "external_ids": ovsdb_rpc.to_datum(ext(key)),
                },
            },
            {
                "op": "mutate",
                "table": "Logical_Router",
                "where": by_name(self.router),
                "mutations": [["policies", "insert", ["set", [["named-uuid", "r"]]]]],
            },
        )
        self.lrps.append(key)

    def lrp_update_or_delete(self) -> None:
        if not self.lrps:
            return self.lrp_create()
        key = self.rnd.choice(self.lrps)
        if self.rnd.random() < 0.5:
            rpc(self.remote, {"op": "update", "table": "Logical_Router_Policy",
                              "where": by_key(key), "row": {"priority": 7}})  # fmt: skip
            return
        sel = rpc(self.remote, {"op": "select", "table": "Logical_Router_Policy",
                                "where": by_key(key), "columns": ["_uuid"]})  # fmt: skip
        rpc(
            self.remote,
            {
                "op": "mutate",
                "table": "Logical_Router",
                "where": [],
                "mutations": [["policies", "delete", ["set", [sel[0]["rows"][0]["_uuid"]]]]],
            },
        )
        self.lrps.remove(key)

    def router_rename(self) -> None:
        new = self.fresh("router-")
        rpc(self.remote, {"op": "update", "table": "Logical_Router",
                          "where": by_name(self.router), "row": {"name": new}})  # fmt: skip
        self.router = new

    def ops(self) -> list[Callable[[], None]]:
        return [
            self.pg_create, self.pg_create, self.pg_delete, self.pg_members, self.pg_members,
            self.pg_rename, self.pg_owner_flip, self.acl_create, self.acl_create,
            self.acl_update, self.acl_delete, self.acl_move, self.pod_add, self.pod_add,
            self.pod_delete, self.lsp_rename, self.pod_update, self.nf_port_create,
            self.nf_port_move, self.nf_port_delete, self.switch_rename, self.lrp_create,
            self.lrp_update_or_delete, self.router_rename,
        ]  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_warm_read_equals_a_fresh_read_after_random_writes(nb23: OvnSandbox, seed: int) -> None:
    rnd = random.Random(seed)
    world = World(nb23.nb_remote, rnd)
    ops = world.ops()
    with connect(nb23.nb_remote) as warm:
        settle(warm, nb23.nb_remote)
        for _step in range(45):
            # Sometimes several writes between two reads (changes pile up in the log).
            for _ in range(rnd.choice([1, 1, 1, 2, 4])):
                rnd.choice(ops)()
            state = settle(warm, nb23.nb_remote)
            # Nothing written since: the same snapshot object comes back.
            assert warm.read() is state
        assert any(r.table == "ACL" for r in state.owned) or world.acls == {}


def test_unchanged_results_are_the_same_objects(nb23: OvnSandbox) -> None:
    remote = nb23.nb_remote
    pods = sorted(n for n in uuids(remote, "Logical_Switch_Port") if n.startswith("shop_"))
    with connect(remote) as nb:
        rows = {
            "Port_Group": [
                {"name": f"pg{i}", "ports": [pods[i]], "external_ids": ext(f"pg{i}")}
                for i in range(3)
            ]
        }
        nb.apply(creates(rows))
        before = settle(nb, remote)
        assert nb.read() is before
        # One Port_Group's membership changes (what a labelled pod does).
        after_fields = {**rows["Port_Group"][1], "ports": sorted([pods[1], pods[5]])}
        nb.apply([Change("update", "Port_Group", "pg1", rows["Port_Group"][1], after_fields)])
        assert nb.last_commit is not None and nb.last_commit <= time.perf_counter()
        after = settle(nb, remote)
        assert after is not before
        old = {r.key: r for r in before.owned}
        new = {r.key: r for r in after.owned}
        assert new["pg1"].fields["ports"] == sorted([pods[1], pods[5]])
        assert new["pg0"] is old["pg0"] and new["pg2"] is old["pg2"]
        assert after.pod_ports is before.pod_ports
        assert after.switches is before.switches and after.routers is before.routers
        # A write to a column we do not read notifies nothing that changes our view.
        enable = {"enabled": ["set", [True]]}
        rpc(remote, {"op": "update", "table": "Logical_Switch_Port", "where": by_name(pods[0]),
                     "row": enable})  # fmt: skip
        assert settle(nb, remote) is after


def test_reads_stay_correct_across_a_server_restart(nb23: OvnSandbox) -> None:
    """The NB restarts with rows changed while it was down: the IDL reloads everything, and
    the cache must not keep anything from before."""
    remote = nb23.nb_remote
    world = World(remote, random.Random(7))
    for op in (world.pg_create, world.pg_create, world.acl_create, world.nf_port_create,
               world.lrp_create, world.pod_add):  # fmt: skip
        op()
    with connect(remote, timeout=20) as warm:
        before = settle(warm, remote)
        assert before.owned
        daemon = nb23.nb
        assert daemon is not None
        daemon.stop(timeout=5)
        # Offline edits of the database file: the restarted server has no history in common
        # with what the adapter saw, so the IDL clears and reloads its tables.
        pg = sorted(n for n, ours in world.pgs.items() if ours)[0]
        offline = [
            DB,
            {"op": "delete", "table": "Port_Group", "where": by_name(pg)},
            {"op": "update", "table": "Logical_Switch", "where": by_name("node1"),
             "row": {"name": "node1-renamed"}},
        ]  # fmt: skip
        run_command(["ovsdb-tool", "transact", str(nb23.workdir / "nb.db"), json.dumps(offline)])
        nb23.nb = Daemon(daemon.name, daemon.args, daemon.log, daemon.ctl, child_env(nb23.workdir))
        deadline = time.monotonic() + 10
        while True:
            try:
                ovsdb_rpc.list_dbs(remote, 1.0)
                break
            except (OSError, ovsdb_rpc.OvsdbRpcError):
                assert time.monotonic() < deadline, "NB did not come back"
                time.sleep(0.05)
        world.pgs.pop(pg)
        world.switches = [("node1-renamed" if s == "node1" else s) for s in world.switches]
        after = settle(warm, remote, timeout=30)
        assert pg not in {r.key for r in after.owned}
        assert "node1-renamed" in {s.name for s in after.switches}
        # And it keeps following changes made after the restart.
        for op in (world.pg_members, world.acl_create, world.pod_add, world.switch_rename):
            op()
            settle(warm, remote, timeout=30)
