"""Helpers for the interconnect tests: the agents' and the central owner's commands as the
README gives them, what each zone's NB holds, and what was asked of the API server."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.kubeapi.server import Faults
from osc_gitops_sandbox.ovn.zones import ZonedCluster

from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.snapshot import OvnSnapshot
from reconciler.core.model import ownership as own
from tests.support.cli import CliResult, cli
from tests.support.transitions import wait_groups_active

AGENTS_NS, CENTRAL_NS = "osc-gitops-agents", "osc-gitops"
NB_TABLES = (
    "NB_Global", "Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Port_Group", "ACL",
    "Network_Function", "Network_Function_Group", "Network_Function_Health_Check",
)  # fmt: skip
"""Every table osc-gitops reads or writes, for "nothing was written" comparisons."""


def kubeconfig(zones: ZonedCluster) -> list[str]:
    return ["--kubeconfig", zones.kubeconfig]


WAIT = ("--wait", "--wait-timeout", "30s")
"""``apply`` until its steering is switched on (the zones' VNFs answer OVN's probe at once)."""


def agent(zones: ZonedCluster, command: str, policies: Path, node: str, *args: object) -> CliResult:
    """``osc-gitops COMMAND POLICIES --node NODE --ovn-nb <its zone's NB>`` (``apply``:
    with ``--wait``)."""
    wait = WAIT if command == "apply" else ()
    return cli(command, policies, "--node", node, "--ovn-nb", zones.nb_remote(node),
               *kubeconfig(zones), *wait, *args)  # fmt: skip


def central(zones: ZonedCluster, command: str, policies: Path, *args: object) -> CliResult:
    """``osc-gitops COMMAND POLICIES --kubernetes-only`` (no NB at all)."""
    return cli(command, policies, "--kubernetes-only", *kubeconfig(zones), *args)


def run_once(zones: ZonedCluster, policies: Path, node: str | None, revision: str) -> CliResult:
    """One pass of the deployed loop (``run --once``), publishing its status Lease."""
    common = ["--revision", revision, "--lease-namespace", CENTRAL_NS, "--log-format", "text"]
    if node is None:
        return central(zones, "run", policies, "--once", *common)
    return agent(zones, "run", policies, node, "--once", *common)


def converge(zones: ZonedCluster, policies: Path, revision: str = "r1") -> None:
    """The central owner, then every agent, one pass each; all must succeed. An agent whose
    steering waited for its VNF instance to be reported healthy (the zone plays it answering
    OVN's probe) runs a second pass once its function groups are active."""
    done = run_once(zones, policies, None, revision)
    assert done.code == 0, done.err
    for node in zones.nodes:
        done = run_once(zones, policies, node, revision)
        assert done.code == 0, f"{node}: {done.err}"
        if zones.network_function:
            wait_groups_active(zones.nb_remote(node))
            done = run_once(zones, policies, node, revision)
            assert done.code == 0, f"{node}: {done.err}"


def owned(
    remote: str, instance: str = own.DEFAULT_INSTANCE
) -> dict[tuple[str, str], dict[str, Any]]:
    """The rows ``instance`` owns in one NB, in the symbolic form of
    ``reconciler.core.model.target``."""
    state = OvnSnapshot(OvnSettings(remote=remote, instance=instance)).read()
    return {(row.table, row.key): row.fields for row in state.owned}


def dump(zones: ZonedCluster, node: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the tables we read or write in ``node``'s NB, sorted (for equality;
    without ``_version``, which ovsdb-server renews when it restarts)."""
    tables = zones.zone(node).dump(NB_TABLES)
    return {
        table: sorted(({k: v for k, v in row.items() if k != "_version"} for row in rows), key=repr)
        for table, rows in tables.items()
    }


def namespaces(zones: ZonedCluster) -> None:
    zones.kube.add_objects(
        [{"kind": "Namespace", "metadata": {"name": ns}} for ns in (AGENTS_NS, CENTRAL_NS)]
    )


class Requests(Faults):
    """The emulator's fault hook sees every request first: record ``(method, path?query)``."""

    def __init__(self, zones: ZonedCluster) -> None:
        super().__init__(zones.kube.wake_watchers)
        self.seen: list[tuple[str, str]] = []
        zones.kube.faults = self

    def take_failure(self, method: str, path: str) -> dict[str, Any] | None:
        self.seen.append((method, path))
        return super().take_failure(method, path)

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.seen if m not in ("GET", "HEAD")]


class LockHolder:
    """Another agent's OVSDB session holding the instance's write lock (raw JSON-RPC), as the
    old pod of a rolling update does while it applies."""

    def __init__(self, remote: str, name: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(remote.removeprefix("unix:"))
        self.sock.sendall(json.dumps({"method": "lock", "params": [name], "id": 1}).encode())
        reply = json.loads(self.sock.recv(65536))
        assert reply["result"] == {"locked": True}, reply

    def close(self) -> None:
        self.sock.close()


def acl_keys(rows: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The ``osc.io/key`` of every ACL in a :func:`dump` (a key twice = a duplicate)."""
    return [str(r["external_ids"].get(own.KEY)) for r in rows.get("ACL", [])]
