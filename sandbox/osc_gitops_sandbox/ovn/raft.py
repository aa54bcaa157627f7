"""A clustered (Raft) OVN Northbound database of real ``ovsdb-server`` members on loopback
TCP, for the reconciler's leader-following and failover tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

from osc_gitops_sandbox.lifecycle import Stoppable
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import Distribution
from osc_gitops_sandbox.ovn.processes import (
    OWN_SCHEMA,
    Daemon,
    OvnSandboxError,
    child_env,
    free_port,
    resolve_stack,
    run_tool,
    wait_until,
)

__all__ = ["OvnCluster"]


class OvnCluster(Stoppable):
    """A 3-member (``size``) clustered OVN_Northbound on loopback TCP.

    Every member keeps its ports across :meth:`kill`/:meth:`start`, so :attr:`remotes` stays a
    valid client connection string while members come and go (as in a real deployment).
    ``nb_schema`` and ``distribution`` as for :class:`OvnSandbox`.
    """

    DB = "OVN_Northbound"

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        size: int = 3,
        nb_schema: str | os.PathLike[str] = OWN_SCHEMA,
        distribution: str | Distribution | None = None,
        timeout: float = 20.0,
    ) -> None:
        self.distribution, self.schema = resolve_stack(nb_schema, distribution)
        self.workdir = self._own_workdir(workdir, "ovnc-")
        self.size = size
        self.timeout = timeout
        self.raft_ports = [free_port() for _ in range(size)]
        self.client_ports = [free_port() for _ in range(size)]
        self.members: list[Daemon | None] = [None] * size

    @property
    def remotes(self) -> str:
        """Comma-separated client remotes of all members (``tcp:127.0.0.1:P,...``)."""
        return ",".join(self.remote(i) for i in range(self.size))

    def remote(self, i: int) -> str:
        return f"tcp:127.0.0.1:{self.client_ports[i]}"

    def _db(self, i: int) -> Path:
        return self.workdir / f"nb{i}.db"

    def _ctl(self, i: int) -> Path:
        return self.workdir / f"nb{i}.ctl"

    def start_all(self) -> OvnCluster:
        """Create the cluster's databases and start every member (stopped again on failure)."""
        self._start_or_stop(self._start_all)
        return self

    def _start_all(self) -> None:
        raft = [f"tcp:127.0.0.1:{p}" for p in self.raft_ports]
        dist = self.distribution
        run_tool(dist, "ovsdb-tool", "create-cluster", str(self._db(0)), str(self.schema),
                 raft[0])  # fmt: skip
        for i in range(1, self.size):
            run_tool(dist, "ovsdb-tool", "join-cluster", str(self._db(i)), self.DB, raft[i],
                     raft[0])  # fmt: skip
        for i in range(self.size):
            self.start(i, wait=False)
        self.wait_healthy()

    def _enter(self) -> OvnCluster:
        return self.start_all()

    def start(self, i: int, *, wait: bool = True) -> None:
        """(Re)start member ``i`` with its original ports and database file."""
        member = self.members[i]
        if member is not None and member.alive():
            return
        log = self.workdir / f"nb{i}.log"
        self.members[i] = Daemon(
            f"ovsdb-server (NB cluster member {i})",
            [
                *self.distribution.command("ovsdb-server"),
                "--no-chdir",
                f"--remote=ptcp:{self.client_ports[i]}:127.0.0.1",
                f"--unixctl={self._ctl(i)}",
                f"--log-file={log}",
                "-vconsole:off",
                "-vfile:info",
                str(self._db(i)),
            ],
            log,
            self._ctl(i),
            child_env(self.workdir, self.distribution),
        )
        if wait:
            self.wait_healthy()

    def kill(self, i: int) -> None:
        """Stop member ``i`` abruptly (SIGKILL), as a crashed node would."""
        member = self.members[i]
        if member is not None:
            member.stop(sig=signal.SIGKILL)

    def status(self, i: int) -> str:
        return run_tool(
            self.distribution, "ovs-appctl", "-t", str(self._ctl(i)), "cluster/status", self.DB,
            timeout=5,
        )  # fmt: skip

    def leader_index(self) -> int | None:
        """Index of the member that reports ``Role: leader`` (``None`` during an election)."""
        for i, member in enumerate(self.members):
            if member is None or not member.alive():
                continue
            with contextlib.suppress(OvnSandboxError):
                if re.search(r"^Role: leader$", self.status(i), re.M):
                    return i
        return None

    def joined(self, i: int) -> bool:
        """Whether member ``i`` has completed joining the cluster (``Status: cluster member``).

        Until then it accepts client connections but answers every transaction with "database
        not available ... has not completed joining its cluster"."""
        return bool(re.search(r"^Status: cluster member$", self.status(i), re.M))

    def wait_healthy(self) -> int:
        """Wait until every live member serves clients and has joined the cluster, and a leader
        is elected; return the leader's index."""
        deadline = time.monotonic() + self.timeout
        for i, member in enumerate(self.members):
            if member is None or not member.alive():
                continue
            remote = self.remote(i)
            wait_until(
                lambda remote=remote: ovsdb_rpc.list_dbs(remote, 1.0),
                member,
                "client port",
                max(0.1, deadline - time.monotonic()),
            )
            wait_until(
                lambda i=i: self.joined(i),
                member,
                "Status: cluster member",
                max(0.1, deadline - time.monotonic()),
            )
        while True:
            leader = self.leader_index()
            if leader is not None:
                return leader
            if time.monotonic() > deadline:
                raise OvnSandboxError(f"no Raft leader elected within {self.timeout}s")
            time.sleep(0.05)

    @property
    def pids(self) -> list[int]:
        return [m.pid for m in self.members if m is not None and m.alive()]

    def _stop(self) -> None:
        for member in self.members:
            if member is not None:
                member.stop()
