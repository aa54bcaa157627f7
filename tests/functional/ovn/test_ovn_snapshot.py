"""``read_snapshot`` (one raw select transaction) against the IDL adapter's ``read()``.

Both read the same real ``ovsdb-server``; the snapshot must equal ``OvnNorthbound.read()``
field for field, on both NB schemas, with our rows written the real way (the adapter's
``apply`` and a whole ``reconcile``), look-alike rows of others, and seeded-random content
(strings with braces, quotes, backslashes and non-ASCII characters: the reply framing must not
be fooled by them).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from osc_gitops_sandbox.ovn.stack import (
    CLUSTER_ROUTER,
    OvnCluster,
    OvnSandbox,
    SeedPod,
    free_port,
    seed_foreign_rows,
    seed_ovn_kubernetes,
)

from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.ovn import (
    OvnConnectError,
    OvnNorthbound,
    OvnSettings,
    OvnState,
    read_snapshot,
    snapshot_operations,
)
from reconciler.adapters.ovn.rpc import Framer, Session
from reconciler.core.compiling.compile import CompileOptions
from reconciler.engine.pipeline import reconcile
from reconciler.manifests.load import load_path
from tests.support.ovn import NODES, OVN_MARKS, Change, connect, creates, ext
from tests.support.transitions import wait_groups_active

pytestmark = OVN_MARKS

from tests.support.paths import REPO  # noqa: E402

INSTANCE = "osc-gitops"
OTHER = "other-instance"
TRICKY = [
    'say "hi"',
    "{10.0.0.1, 10.0.0.2}",
    "}",
    "{",
    "back\\slash",
    'ends with \\"',
    "\\",
    "ünïcødé ✓ 防火墙",
    "tab\tnew\nline",
    "plain",
    "",
]


def assert_same(remote: str, instance: str = INSTANCE, **kwargs: Any) -> OvnState:
    """The snapshot equals the IDL adapter's read (compared piecewise for readable diffs)."""
    settings = OvnSettings(remote=remote, instance=instance, **kwargs)
    snap = read_snapshot(settings)
    with OvnNorthbound.connect(settings) as nb:
        live = nb.read()
    assert snap.capabilities == live.capabilities
    assert snap.switches == live.switches
    assert snap.routers == live.routers
    assert snap.pod_ports == live.pod_ports
    assert snap.used_ids == live.used_ids
    assert [(r.table, r.key) for r in snap.owned] == [(r.table, r.key) for r in live.owned]
    for mine, theirs in zip(snap.owned, live.owned, strict=True):
        assert mine == theirs
    assert snap == live
    return snap


# --- framing (pure) ---------------------------------------------------------------------------


def _messages() -> list[bytes]:
    rows = [{"match": s, "external_ids": ["map", [[s, s]]]} for s in TRICKY]
    return [
        json.dumps({"id": 1, "result": [{"rows": rows}], "error": None}).encode(),
        json.dumps({"id": "echo", "method": "echo", "params": ['{\\"}']}).encode(),
        json.dumps(
            {"id": 2, "result": [{"rows": rows}], "error": None}, ensure_ascii=False
        ).encode(),
    ]


def test_framer_never_misses_a_message_end() -> None:
    """Braces and quotes inside strings, escapes and multi-byte characters, split anywhere:
    at every real end the framer says "may be complete" (else a read would hang), and it
    says so rarely elsewhere (each false candidate costs one failed decode)."""
    messages = _messages()
    stream = b"".join(messages)
    ends = set()
    at = 0
    for m in messages:
        at += len(m)
        ends.add(at)
    false_candidates = 0
    for cut in range(1, len(stream)):
        framer = Framer()
        candidate = framer.feed(stream[:cut])
        if cut in ends:
            assert candidate, cut
        false_candidates += candidate and cut not in ends
        assert framer.feed(stream[cut:]) is True, cut
    assert false_candidates <= len(stream) // 50


def test_session_decodes_replies_split_anywhere_and_answers_echo() -> None:
    rng = random.Random(11)
    stream = b"".join(_messages())
    for _ in range(100):
        ours, server = socket.socketpair()
        with ours, server:
            session = Session("test", ours, time.monotonic() + 5)
            pos = 0
            while pos < len(stream):
                step = rng.randint(1, 64)
                session.receive(stream[pos : pos + step])
                pos += step
            assert sorted(session.replies) == [1, 2]
            rows = session.replies[2]["result"][0]["rows"]
            assert [r["match"] for r in rows] == TRICKY
            assert session.pending == []
            server.settimeout(1)
            echo = json.loads(server.recv(4096))
            assert echo == {"id": "echo", "result": ['{\\"}'], "error": None}


# --- equality with the IDL adapter ------------------------------------------------------------


def lsp(pod: SeedPod) -> str:
    return pod.lsp_name


def _raw_extras(remote: str, nf: bool) -> None:
    """Rows only a raw transaction makes: odd pod ports, a load-balancer group on node1, an
    owned ACL without osc.io/key, and (26.03) another owner's Network_Function(_Group)s."""
    ops: list[dict[str, Any]] = [
        {
            "op": "insert",
            "table": "Logical_Switch_Port",
            "uuid-name": "odd1",
            "row": {
                "name": "no-namespace-pod",
                "addresses": ["set", ["unknown", "0a:58:0a:f4:01:63 10.244.1.99 fd00::63"]],
                "external_ids": ["map", [["pod", "true"]]],
            },
        },
        {
            "op": "insert",
            "table": "Logical_Switch_Port",
            "uuid-name": "odd2",
            "row": {
                "name": "shop_not-a-pod",
                "addresses": "dynamic",
                "external_ids": ["map", [["pod", "false"], ["namespace", "shop"]]],
            },
        },
        {
            "op": "insert",
            "table": "Logical_Switch_Port",
            "uuid-name": "odd3",
            "row": {
                "name": "other_ns-pod",
                "external_ids": ["map", [["pod", "true"], ["namespace", "other"]]],
                "options": ["map", [["iface-id-ver", "uid-x"]]],
            },
        },
        {"op": "insert", "table": "Load_Balancer_Group", "uuid-name": "lbg", "row": {"name": "g"}},
        {
            "op": "mutate",
            "table": "Logical_Switch",
            "where": [["name", "==", "node1"]],
            "mutations": [
                ["ports", "insert", ["set", [["named-uuid", n] for n in ("odd1", "odd2", "odd3")]]],
                ["load_balancer_group", "insert", ["named-uuid", "lbg"]],
            ],
        },
        {
            "op": "insert",
            "table": "ACL",
            "uuid-name": "keyless",
            "row": {
                "priority": 1234,
                "direction": "from-lport",
                "match": "ip4",
                "action": "drop",
                "external_ids": ["map", [["osc.io/owner", INSTANCE]]],
            },
        },
        {
            "op": "mutate",
            "table": "Port_Group",
            "where": [["name", "==", "osc_gitops_handmade"]],
            "mutations": [["acls", "insert", ["named-uuid", "keyless"]]],
        },
    ]
    if nf:
        for i, nf_id in enumerate((3, 200)):
            for side in ("in", "out"):
                ops.append(
                    {
                        "op": "insert",
                        "table": "Logical_Switch_Port",
                        "uuid-name": f"fp{i}{side}",
                        "row": {"name": f"foreign-nf{i}-{side}"},
                    }
                )
            ops.append(
                {
                    "op": "mutate",
                    "table": "Logical_Switch",
                    "where": [["name", "==", "node1"]],
                    "mutations": [
                        [
                            "ports",
                            "insert",
                            ["set", [["named-uuid", f"fp{i}in"], ["named-uuid", f"fp{i}out"]]],
                        ]
                    ],
                }
            )
            ops.append(
                {
                    "op": "insert",
                    "table": "Network_Function",
                    "uuid-name": f"fnf{i}",
                    "row": {
                        "name": f"foreign_nf{i}",
                        "id": nf_id,
                        "inport": ["named-uuid", f"fp{i}in"],
                        "outport": ["named-uuid", f"fp{i}out"],
                    },
                }
            )
        ops.append(
            {
                "op": "insert",
                "table": "Network_Function_Group",
                "row": {
                    "name": "foreign_nfg",
                    "id": 9,
                    "mode": "inline",
                    "network_function": ["set", [["named-uuid", "fnf0"], ["named-uuid", "fnf1"]]],
                    "external_ids": ["map", [["osc.io/owner", OTHER]]],
                },
            }
        )
    ovsdb_rpc.transact(remote, "OVN_Northbound", ops)


class RandomRows:
    """Seeded-random rows of every table we own, written through the adapter's ``apply``."""

    def __init__(
        self, seed: int, pods: list[SeedPod], nf: bool, tier: bool, extras: bool = False
    ) -> None:
        self.extras = extras  # the foreign/raw rows of _raw_extras and seed_foreign_rows exist
        self.rng = random.Random(seed)
        self.pods = pods
        self.nf = nf
        self.tier = tier

    def text(self) -> str:
        return self.rng.choice(TRICKY) + self.rng.choice(TRICKY)

    def extra_ext(self, key: str, node: str | None) -> dict[str, str]:
        ids = ext(key, node)
        for _ in range(self.rng.randint(0, 2)):
            ids[f"note-{self.rng.randint(0, 9)}"] = self.text()
        return ids

    def rows(self, prefix: str) -> dict[str, list[dict[str, Any]]]:
        rng = self.rng
        nf_ports: list[str] = []
        lsps = []
        for i in range(rng.randint(2, 4)):
            node = rng.choice(NODES).name
            a, b = f"nf-{prefix}{i}-in", f"nf-{prefix}{i}-out"
            for me, peer in ((a, b), (b, a)):
                lsps.append(
                    {
                        "name": me,
                        "switch": node,
                        "addresses": sorted(
                            rng.sample(["unknown", "dynamic", "router"], rng.randint(0, 2))
                        ),
                        "port_security": [],
                        "options": {"is-nf": "true", "nf-linked-port": peer, "x": self.text()},
                        "external_ids": self.extra_ext(me, node),
                    }
                )
                nf_ports.append(me)
        candidates = [lsp(p) for p in self.pods] + nf_ports + ["stor-node0"]
        if self.extras:
            candidates.append("no-namespace-pod")
        base = (ord(prefix[0]) - ord("a")) * 20
        pgs = []
        for i in range(rng.randint(2, 5)):
            name = f"osc_{prefix}_pg{i}"
            ports = sorted(rng.sample(candidates, rng.randint(0, 6)))
            pgs.append({"name": name, "ports": ports, "external_ids": self.extra_ext(name, None)})
        nfs, nfgs = [], []
        if self.nf:
            for i in range(rng.randint(1, 3)):
                nfs.append(
                    {
                        "name": f"nf_{prefix}{i}",
                        "id": 10 + base + i,
                        "inport": nf_ports[2 * i],
                        "outport": nf_ports[2 * i + 1],
                        "external_ids": self.extra_ext(f"nf_{prefix}{i}", None),
                    }
                )
            for i in range(rng.randint(1, 2)):
                nfgs.append(
                    {
                        "name": f"nfg_{prefix}{i}",
                        "id": 100 + base + i,
                        "mode": "inline",
                        "fallback": rng.choice(["fail-open", "fail-close", None]),
                        "network_function": sorted(
                            rng.sample([n["name"] for n in nfs], rng.randint(0, len(nfs)))
                        ),
                        "external_ids": self.extra_ext(f"nfg_{prefix}{i}", None),
                    }
                )
        acls = []
        for i in range(rng.randint(3, 8)):
            action = rng.choice(["allow", "allow-related", "drop", "reject"])
            nfg = None
            if nfgs and action.startswith("allow") and rng.random() < 0.6:
                nfg = rng.choice(nfgs)["name"]
            key = f"{prefix}-acl{i}"
            acls.append(
                {
                    "port_group": rng.choice(
                        [p["name"] for p in pgs] + ["osc_gitops_handmade"] * self.extras
                    ),
                    "name": rng.choice([None, f"osc-{prefix}{i}", self.text()[:60]]),
                    "direction": rng.choice(["from-lport", "to-lport"]),
                    "priority": rng.randint(0, 32767),
                    "tier": rng.randint(0, 3) if self.tier else 0,
                    "match": self.text(),
                    "action": action,
                    "network_function_group": nfg,
                    "external_ids": self.extra_ext(key, rng.choice([None, "node1"])),
                }
            )
        lrps = []
        for i in range(rng.randint(3, 8)):
            action = rng.choice(["allow", "drop", "reroute"])
            hops = sorted({f"10.244.{rng.randint(0, 1)}.{rng.randint(2, 250)}" for _ in range(3)})
            lrps.append(
                {
                    "router": CLUSTER_ROUTER,
                    "priority": rng.randint(0, 32767),
                    "match": self.text(),
                    "action": action,
                    "nexthops": hops if action == "reroute" else [],
                    "external_ids": self.extra_ext(f"{prefix}-lrp{i}", "node0"),
                }
            )
        out = {
            "Logical_Switch_Port": lsps,
            "Port_Group": pgs,
            "ACL": acls,
            "Logical_Router_Policy": lrps,
        }
        if self.nf:
            out["Network_Function"] = nfs
            out["Network_Function_Group"] = nfgs
        return out

    def mutate(self, state: OvnState) -> list[Change]:
        """Random updates and deletes of ACLs, policies and group members (the shapes a plan
        produces: ``before`` is what was read, ``after`` the new fields)."""
        rng = self.rng
        changes: list[Change] = []
        pods = [lsp(p) for p in self.pods]
        for row in state.owned:
            roll = rng.random()
            if row.table in ("ACL", "Logical_Router_Policy") and row.key.startswith("uuid:"):
                continue
            if row.table in ("ACL", "Logical_Router_Policy") and roll < 0.3:
                changes.append(Change("delete", row.table, row.key, row.fields, None))
            elif row.table in ("ACL", "Logical_Router_Policy") and roll < 0.7:
                after = {**row.fields, "match": self.text(), "priority": rng.randint(0, 32767)}
                changes.append(Change("update", row.table, row.key, row.fields, after))
            elif row.table == "Port_Group" and roll < 0.7:
                after = {**row.fields, "ports": sorted(rng.sample(pods, rng.randint(0, 5)))}
                changes.append(Change("update", row.table, row.key, row.fields, after))
        return changes


def _variety(sandbox: OvnSandbox, pods: list[SeedPod], seed: int) -> None:
    remote = sandbox.nb_remote
    schema = ovsdb_rpc.get_schema(remote, "OVN_Northbound")
    nf = "Network_Function" in schema["tables"]
    tier = "tier" in schema["tables"]["ACL"]["columns"]
    seed_foreign_rows(remote, [lsp(pods[0]), "stor-node1"])
    _raw_extras(remote, nf)
    gen = RandomRows(seed, pods, nf, tier, extras=True)
    with connect(remote) as nb:
        nb.apply(creates(gen.rows("a")), revision="0123abc")
    with connect(remote, instance=OTHER) as other:
        other.apply(creates(gen.rows("b")))
    state = assert_same(remote)
    tables = {r.table for r in state.owned}
    assert {"Logical_Switch_Port", "Port_Group", "ACL", "Logical_Router_Policy"} <= tables
    assert any(r.key.startswith("uuid:") for r in state.owned)  # the key-less ACL
    assert any(r.fields.get("port_group") == "osc_gitops_handmade" for r in state.owned)
    assert len(state.pod_ports) == len(pods) + 2
    assert [s.load_balancers for s in state.switches] == [False, True]
    if nf:
        assert {"Network_Function", "Network_Function_Group"} <= tables
        assert {3, 200} <= set(state.used_ids["Network_Function"])
        assert 9 in state.used_ids["Network_Function_Group"]
        # another instance's ids are foreign to us
        assert set(state.used_ids["Network_Function"]) - {3, 200}
    other_state = assert_same(remote, instance=OTHER)
    assert other_state.owned and not {r.key for r in other_state.owned} & {
        r.key for r in state.owned
    }
    # a second round: updates and deletes through the adapter, then compare again
    with connect(remote) as nb:
        changes = gen.mutate(state)
        assert changes
        nb.apply(changes)
    assert assert_same(remote) != state


@pytest.mark.parametrize("seed", [1, 2])
def test_snapshot_equals_read_installed_schema(
    nb23: OvnSandbox, pods: list[SeedPod], seed: int
) -> None:
    _variety(nb23, pods, seed)


@pytest.mark.parametrize("seed", [3, 4])
def test_snapshot_equals_read_nf_schema(nb26: OvnSandbox, pods: list[SeedPod], seed: int) -> None:
    _variety(nb26, pods, seed)


def test_empty_nb_and_no_owned_rows(pods: list[SeedPod]) -> None:
    with OvnSandbox(northd=False) as sandbox:
        empty = assert_same(sandbox.nb_remote)
        assert empty.switches == () and empty.owned == () and empty.routers == ()
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        seed_foreign_rows(sandbox.nb_remote, [lsp(pods[1])])
        state = assert_same(sandbox.nb_remote)
        assert state.owned == () and len(state.pod_ports) == len(pods)


def test_operations_select_only_our_rows_of_owned_tables(nb26: OvnSandbox) -> None:
    schema = ovsdb_rpc.get_schema(nb26.nb_remote, "OVN_Northbound")
    ops = snapshot_operations(schema, "me")
    owner = ["external_ids", "includes", ["map", [["osc.io/owner", "me"]]]]
    by_table: dict[str, list[dict[str, Any]]] = {}
    for op in ops:
        by_table.setdefault(op["table"], []).append(op)
    for table in ("Port_Group", "ACL", "Logical_Router_Policy"):
        assert owner in by_table[table][0]["where"]
    # every other LSP and Port_Group is read as names (and ACL lists) only
    assert [o["columns"] for o in by_table["Logical_Switch_Port"]][1] == ["_uuid", "name"]
    assert by_table["Port_Group"][1]["columns"] == ["_uuid", "name", "acls"]
    # the same ops run as one transaction by a second, independent client
    results = ovsdb_rpc.transact(nb26.nb_remote, "OVN_Northbound", ops)
    assert len(results) == len(ops) and all("rows" in r for r in results)


# --- a whole reconcile, both backends --------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "steering"), [("installed", "router-policy"), ("26.03", "network-function")]
)
def test_snapshot_after_reconcile(tmp_path: Path, schema: str, steering: str) -> None:
    with SandboxCluster(tmp_path / "sb", nb_schema=schema, northd=False) as cluster:
        cluster.seed_dir(REPO / "examples" / "cluster")
        seed_foreign_rows(cluster.nb_remote)
        kube = KubeCluster(KubeSettings(kubeconfig=cluster.kubeconfig))
        try:
            with OvnNorthbound.connect(OvnSettings(remote=cluster.nb_remote)) as nb:
                for _ in range(2):  # steering is switched on once its VNFs are reported healthy
                    reconcile(
                        load_path(REPO / "examples" / "policies"),
                        kube,
                        nb,
                        CompileOptions(steering=steering),
                    )
                    if steering == "network-function":
                        wait_groups_active(cluster.nb_remote)
        finally:
            kube.close()
        state = assert_same(cluster.nb_remote)
        tables = {r.table for r in state.owned}
        if steering == "router-policy":
            assert "Logical_Router_Policy" in tables
        else:
            assert {"Network_Function", "Network_Function_Group", "ACL"} <= tables
            # the health checks and our part of NB_Global are read alike by both readers
            assert {"Network_Function_Health_Check", "NB_Global"} <= tables
            assert state.nb_global.options and set(state.nf_active) == {
                r.key for r in state.owned if r.table == "Network_Function_Group"
            }


# --- errors ------------------------------------------------------------------------------------


def test_unreachable_endpoint_is_a_connect_error_naming_it(tmp_path: Path) -> None:
    for remote in (f"tcp:127.0.0.1:{free_port()}", f"unix:{tmp_path}/nope.sock"):
        with pytest.raises(OvnConnectError, match=f"cannot connect to OVN NB at {remote}"):
            read_snapshot(OvnSettings(remote=remote, timeout=2))


def test_bad_remotes_are_connect_errors() -> None:
    with pytest.raises(OvnConnectError, match="no remote given"):
        read_snapshot(OvnSettings(remote=" , "))
    with pytest.raises(OvnConnectError, match="unsupported remote"):
        read_snapshot(OvnSettings(remote="udp:1.2.3.4:5"))
    with pytest.raises(OvnConnectError, match="private_key, certificate and ca_cert"):
        read_snapshot(OvnSettings(remote="ssl:127.0.0.1:6641", timeout=1))


def test_wrong_database_is_refused() -> None:
    """The Southbound server answers, but it does not serve OVN_Northbound."""
    with OvnSandbox(northd=False) as sandbox:
        with pytest.raises(OvnConnectError, match="unknown database") as err:
            read_snapshot(OvnSettings(remote=sandbox.sb_remote, timeout=5))
        assert sandbox.sb_remote in str(err.value)


def test_silent_server_times_out_with_a_clear_error() -> None:
    """A peer that accepts the connection but never answers: bounded by the timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        remote = f"tcp:127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(OvnConnectError, match=r"no answer before the timeout") as err:
            read_snapshot(OvnSettings(remote=remote, timeout=0.5))
        assert remote in str(err.value)


def test_dead_member_first_then_a_live_one(nb23: OvnSandbox) -> None:
    dead = f"tcp:127.0.0.1:{free_port()}"
    state = read_snapshot(OvnSettings(remote=f"{dead},{nb23.nb_remote}", timeout=5))
    assert state == assert_same(nb23.nb_remote)


# --- Raft cluster and TLS ------------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[OvnCluster]:
    with OvnCluster() as nb_cluster:
        yield nb_cluster


def test_raft_cluster_reads_the_leader_only(cluster: OvnCluster, pods: list[SeedPod]) -> None:
    leader = cluster.wait_healthy()
    seed_ovn_kubernetes(cluster.remote(leader), NODES, pods)
    gen = RandomRows(5, pods, nf=False, tier=False)
    rows = gen.rows("c")
    with connect(cluster.remotes, timeout=20) as nb:
        nb.apply(creates(rows))
    followers = [cluster.remote(i) for i in range(cluster.size) if i != leader]
    # followers first: they are skipped, the leader is read
    remote = ",".join([*followers, cluster.remote(leader)])
    state = assert_same(remote, timeout=20)
    assert len(state.owned) == sum(len(v) for v in rows.values())
    # a follower that has joined (not only "not yet available") is refused as not the leader
    follower = next(i for i in range(cluster.size) if i != leader)
    deadline = time.monotonic() + 20
    while not re.search(r"^Role: follower$", cluster.status(follower), re.M):
        assert time.monotonic() < deadline, cluster.status(follower)
        time.sleep(0.05)
    with pytest.raises(OvnConnectError, match="not the Raft leader") as err:
        read_snapshot(OvnSettings(remote=cluster.remote(follower), timeout=5))
    assert cluster.remote(follower) in str(err.value)


def _pki(d: Path, name: str) -> dict[str, str]:
    d.mkdir(parents=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", f"/CN={name}-ca", "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    for who in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}-{who}",
                "-keyout", f"{who}.key", "-out", f"{who}.csr")  # fmt: skip
        openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "1", "-out", f"{who}.pem")  # fmt: skip
    return {p: str(d / p) for p in ("ca.pem", "server.key", "server.pem", "client.key",
                                    "client.pem")}  # fmt: skip


@pytest.mark.filterwarnings("ignore:ssl.PROTOCOL_TLS is deprecated:DeprecationWarning")
def test_tls_snapshot_and_unknown_ca(tmp_path: Path, pods: list[SeedPod]) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    good, rogue = _pki(tmp_path / "good", "good"), _pki(tmp_path / "rogue", "rogue")
    server = (good["server.key"], good["server.pem"], good["ca.pem"])
    with OvnSandbox(tmp_path / "ovn", northd=False, ssl=server) as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        with connect(sandbox.nb_remote) as nb:
            nb.apply(creates(RandomRows(6, pods, nf=False, tier=False).rows("t")))
        files = {"private_key": good["client.key"], "certificate": good["client.pem"]}
        state = assert_same(sandbox.nb_ssl_remote, ca_cert=good["ca.pem"], **files)
        assert state.owned
        with pytest.raises(OvnConnectError, match="TLS handshake failed") as err:
            read_snapshot(OvnSettings(remote=sandbox.nb_ssl_remote, ca_cert=rogue["ca.pem"],
                                      timeout=5, **files))  # fmt: skip
        assert sandbox.nb_ssl_remote in str(err.value)


def test_read_only_provider_reads_and_refuses_writes(nb23: OvnSandbox, pods: list[SeedPod]) -> None:
    from reconciler.adapters.ovn import OvnError, OvnSnapshot

    with OvnSnapshot(OvnSettings(remote=nb23.nb_remote)) as provider:
        assert provider.read() == assert_same(nb23.nb_remote)
        provider.apply([])  # an empty plan is fine
        with pytest.raises(OvnError, match="read-only snapshot") as err:
            provider.apply(creates({"Port_Group": [{"name": "osc_x", "ports": [],
                                                   "external_ids": ext("osc_x")}]}))  # fmt: skip
        assert nb23.nb_remote in str(err.value)
    assert nb23.dump(["Port_Group"])["Port_Group"] == []
