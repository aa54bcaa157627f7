"""A real, local OVN control plane for tests, the demo and benchmarks.

Why real processes: the adapter's hard parts (IDL initial sync, transaction atomicity, Raft
failover, what northd makes of our rows) only show against the real ``ovsdb-server`` and
``ovn-northd``. Everything runs in a temp dir on unix sockets / loopback, as children of the
calling process (never ``--detach``), so they are reaped by :meth:`OvnSandbox.stop`, by the
context manager, by an ``atexit`` hook, and (on Linux) killed by the kernel if the parent dies
(``PR_SET_PDEATHSIG``).

Two OVN distributions can run here (:mod:`osc_gitops_sandbox.ovn.distributions`): ``host``
(Debian bookworm's OVN 23.03, no Network Function tables) and ``sid`` (OVN 26.03 from the Debian
sid root that ``make setup`` builds). Every stack takes its tools, schemas and NB schema from one
of them. Use from any test::

    from osc_gitops_sandbox.ovn.stack import OvnSandbox, seed_ovn_kubernetes, SeedNode, SeedPod
    with OvnSandbox(northd=False, distribution="sid") as ovn:
        seed_ovn_kubernetes(ovn.nb_remote, [SeedNode("node1", "10.244.1.0/24")], pods)

Where the parts live: the daemons' lifecycle, environment and reaping rules, and the choice of
distribution and schema in :mod:`~osc_gitops_sandbox.ovn.processes`; a 3-member Raft NB in
:mod:`~osc_gitops_sandbox.ovn.raft`; what OVN-Kubernetes writes (switches, router, pods,
foreign rows) in :mod:`~osc_gitops_sandbox.ovn.seed`. This module is one stack (NB, SB,
northd) and re-exports the names of the others, which tests import from here. The
distributions' paths and the data path live in ``distributions``, ``datapath``, ``netns``.

These modules must not import ``ovs``/``ovsdbapp``: it shells out to ``ovsdb-tool``,
``ovs-appctl`` and talks raw JSON-RPC through :mod:`osc_gitops_sandbox.ovn.ovsdb_rpc`.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.lifecycle import Lifecycle
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import Distribution
from osc_gitops_sandbox.ovn.processes import (
    NF_SCHEMA,
    OWN_SCHEMA,
    Daemon,
    OvnSandboxError,
    child_env,
    free_port,
    listening_ports,
    ovn_unavailable_reason,
    resolve_stack,
    run_command,
    run_tool,
    schema_has_network_function,
    tail,
    wait_until,
)
from osc_gitops_sandbox.ovn.raft import OvnCluster
from osc_gitops_sandbox.ovn.seed import (
    CLUSTER_ROUTER,
    ForeignRows,
    SeedNode,
    SeedPod,
    make_pods,
    seed_foreign_rows,
    seed_ovn_kubernetes,
)

__all__ = [
    "CLUSTER_ROUTER",
    "NF_SCHEMA",
    "OWN_SCHEMA",
    "Daemon",
    "ForeignRows",
    "OvnCluster",
    "OvnSandbox",
    "OvnSandboxError",
    "SeedNode",
    "SeedPod",
    "child_env",
    "free_port",
    "make_pods",
    "ovn_unavailable_reason",
    "resolve_stack",
    "run_command",
    "run_tool",
    "running",
    "schema_has_network_function",
    "seed_foreign_rows",
    "seed_ovn_kubernetes",
    "tail",
    "wait_until",
]


# ---------------------------------------------------------------------------------------------
# standalone NB + SB (+ northd)


class OvnSandbox(Lifecycle):
    """NB and SB ``ovsdb-server`` processes plus (optionally) ``ovn-northd``, in a temp dir.

    ``distribution``: ``"host"`` (Debian bookworm's OVN 23.03) or ``"sid"`` (OVN 26.03 with
    Network Function insertion, from the root ``make setup`` builds); every daemon and tool comes
    from it. ``nb_schema``: ``"installed"`` (the distribution's own), ``"26.03"`` (the older
    spelling of ``distribution="sid"``) or a schema file. See :func:`resolve_stack`.

    ``tcp=True`` adds a ``ptcp`` remote on an ephemeral loopback port (``nb_tcp_remote``);
    ``ssl=(key, cert, ca)`` adds a ``pssl`` remote (``nb_ssl_remote``) with those files.
    ``southbound=False`` (only without northd) runs the NB server alone: one process per
    stack, which is what makes a hundred zone NBs (:mod:`osc_gitops_sandbox.ovn.zones`) cheap.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        northd: bool = True,
        tcp: bool = False,
        nb_schema: str | os.PathLike[str] = OWN_SCHEMA,
        distribution: str | Distribution | None = None,
        ssl: tuple[str, str, str] | None = None,
        timeout: float = 10.0,
        southbound: bool = True,
    ) -> None:
        if northd and not southbound:
            raise OvnSandboxError("northd needs a Southbound DB: southbound=False only without it")
        tools = ["ovsdb-server", "ovsdb-tool", "ovs-appctl"]
        tools += ["ovn-northd", "ovn-nbctl", "ovn-sbctl"] if northd else []
        self.distribution, self.nb_schema_path = resolve_stack(nb_schema, distribution, tools)
        self.workdir = self._own_workdir(workdir, "ovn-")
        self.northd_enabled = northd
        self.southbound_enabled = southbound
        self.tcp = tcp
        self.ssl = ssl
        self.timeout = timeout
        self.nb: Daemon | None = None
        self.sb: Daemon | None = None
        self.northd: Daemon | None = None
        self._nb_tcp_port: int | None = None
        self._nb_ssl_port: int | None = None

    # -- addresses ---------------------------------------------------------------------------
    @property
    def nb_socket(self) -> Path:
        return self.workdir / "nb.sock"

    @property
    def nb_remote(self) -> str:
        return f"unix:{self.nb_socket}"

    @property
    def sb_remote(self) -> str:
        return f"unix:{self.workdir / 'sb.sock'}"

    @property
    def nb_tcp_remote(self) -> str:
        if self._nb_tcp_port is None:
            raise OvnSandboxError("OvnSandbox was started without tcp=True")
        return f"tcp:127.0.0.1:{self._nb_tcp_port}"

    @property
    def nb_ssl_remote(self) -> str:
        if self._nb_ssl_port is None:
            raise OvnSandboxError("OvnSandbox was started without ssl=(key, cert, ca)")
        return f"ssl:127.0.0.1:{self._nb_ssl_port}"

    @property
    def nb_ctl(self) -> Path:
        return self.workdir / "nb.ctl"

    @property
    def pids(self) -> list[int]:
        """pids of the live children (tests check they are gone after :meth:`stop`)."""
        return [d.pid for d in (self.nb, self.sb, self.northd) if d is not None]

    # -- lifecycle (start, stop, ``with``: see osc_gitops_sandbox.lifecycle) ------------------
    def _start(self) -> None:
        dist = self.distribution
        env = child_env(self.workdir, dist)
        databases = [("nb", self.nb_schema_path)]
        databases += [("sb", dist.sb_schema)] if self.southbound_enabled else []
        for name, schema in databases:
            db = self.workdir / f"{name}.db"
            if not db.exists():
                run_tool(dist, "ovsdb-tool", "create", str(db), str(schema))
        self.nb = self._start_server("nb", env, tcp=self.tcp, ssl=self.ssl)
        if self.southbound_enabled:
            self.sb = self._start_server("sb", env, tcp=False, ssl=None)
        nb_sock, sb_sock = self.nb_remote, self.sb_remote
        wait_until(lambda: ovsdb_rpc.list_dbs(nb_sock, 1.0), self.nb, "NB socket", self.timeout)
        if self.sb is not None:
            sb = self.sb
            wait_until(lambda: ovsdb_rpc.list_dbs(sb_sock, 1.0), sb, "SB socket", self.timeout)
        if self.tcp:
            nb = self.nb
            ports = wait_until(
                lambda: [p for p in listening_ports(nb.log) if p != self._nb_ssl_port],
                nb,
                "ptcp listener",
                self.timeout,
            )
            self._nb_tcp_port = ports[0]
        if self.northd_enabled:
            self._start_northd(env)

    def _start_server(
        self, name: str, env: dict[str, str], *, tcp: bool, ssl: tuple[str, str, str] | None
    ) -> Daemon:
        log = self.workdir / f"{name}.log"
        args = [
            *self.distribution.command("ovsdb-server"),
            "--no-chdir",
            f"--remote=punix:{self.workdir / (name + '.sock')}",
            f"--unixctl={self.workdir / (name + '.ctl')}",
            f"--log-file={log}",
            "-vconsole:off",
            "-vfile:info",
        ]
        if tcp:
            args.append("--remote=ptcp:0:127.0.0.1")
        if ssl is not None:
            key, cert, ca = ssl
            self._nb_ssl_port = free_port()
            args += [
                f"--remote=pssl:{self._nb_ssl_port}:127.0.0.1",
                f"--private-key={key}",
                f"--certificate={cert}",
                f"--ca-cert={ca}",
            ]
        args.append(str(self.workdir / f"{name}.db"))
        return Daemon(
            f"ovsdb-server ({name.upper()})", args, log, self.workdir / f"{name}.ctl", env
        )

    def _start_northd(self, env: dict[str, str]) -> None:
        ctl = self.workdir / "northd.ctl"
        log = self.workdir / "northd.log"
        self.northd = Daemon(
            "ovn-northd",
            [
                *self.distribution.command("ovn-northd"),
                "--no-chdir",
                f"--ovnnb-db={self.nb_remote}",
                f"--ovnsb-db={self.sb_remote}",
                f"--unixctl={ctl}",
                f"--log-file={log}",
                "-vconsole:off",
                "-vfile:info",
            ],
            log,
            ctl,
            env,
        )
        northd = self.northd
        wait_until(
            lambda: "active" in self.appctl(ctl, "status", timeout=2.0),
            northd,
            "northd status active",
            self.timeout,
        )

    def stop_nb(self) -> None:
        """Stop only the NB server, as when a zone's ``nb-ovsdb`` container dies; its database
        file stays, so :meth:`start_nb` brings the same contents back."""
        if self.nb is not None:
            self.nb.stop()

    def start_nb(self) -> None:
        """(Re)start the NB server on its database file and unix socket (northd reconnects by
        itself). Only the unix socket keeps its address; tcp/ssl ports are chosen anew."""
        if self.nb is not None and self.nb.alive():
            return
        log = self.workdir / "nb.log"
        logged = len(log.read_text(errors="replace")) if log.exists() else 0
        nb = self.nb = self._start_server(
            "nb", child_env(self.workdir, self.distribution), tcp=self.tcp, ssl=self.ssl
        )
        remote = self.nb_remote
        wait_until(lambda: ovsdb_rpc.list_dbs(remote, 1.0), nb, "NB socket", self.timeout)
        if self.tcp:  # the port this run logged, not the previous run's
            ports = wait_until(
                lambda: [
                    int(m)
                    for m in re.findall(
                        r"listening on port (\d+)", log.read_text(errors="replace")[logged:]
                    )
                    if int(m) != self._nb_ssl_port
                ],
                nb,
                "ptcp listener",
                self.timeout,
            )
            self._nb_tcp_port = ports[0]

    @property
    def nb_running(self) -> bool:
        """Whether the NB server is up (false between :meth:`stop_nb` and :meth:`start_nb`)."""
        return self.nb is not None and self.nb.alive()

    def _stop(self) -> None:
        """Terminate and reap every child (the temp dir, if ours, goes after)."""
        for daemon in (self.northd, self.sb, self.nb):
            if daemon is not None:
                daemon.stop()

    # -- conveniences ------------------------------------------------------------------------
    def nbctl(self, *args: str, timeout: float = 30.0) -> str:
        """Run ``ovn-nbctl --db=<nb>`` (one process; fine for a handful of objects)."""
        return run_tool(
            self.distribution, "ovn-nbctl", f"--db={self.nb_remote}", *args, timeout=timeout
        )

    def sbctl(self, *args: str, timeout: float = 30.0) -> str:
        return run_tool(
            self.distribution, "ovn-sbctl", f"--db={self.sb_remote}", *args, timeout=timeout
        )

    def appctl(self, target: Path, *args: str, timeout: float = 5.0) -> str:
        """``ovs-appctl -t <control socket> ...`` for one of this sandbox's daemons."""
        return run_tool(self.distribution, "ovs-appctl", "-t", str(target), *args, timeout=timeout)

    @property
    def network_function(self) -> bool:
        """Whether the NB served here has the Network Function tables (OVN >= 26.03)."""
        return schema_has_network_function(self.nb_schema_path)

    def wait_northd_sync(self, timeout: float = 10.0) -> None:
        """Block until northd has processed the current NB contents into the SB.

        ``ovn-nbctl --wait=sb sync`` bumps ``NB_Global.nb_cfg`` and waits for northd to copy it
        to ``SB_Global``: afterwards ``lflow-list`` reflects every NB change made before.
        """
        if self.northd is None:
            raise OvnSandboxError("northd is not running in this sandbox (northd=False)")
        self.nbctl(f"--timeout={int(max(timeout, 1))}", "--wait=sb", "sync", timeout=timeout + 5)

    def dump(self, tables: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        return ovsdb_rpc.dump(self.nb_remote, "OVN_Northbound", tables)


# ---------------------------------------------------------------------------------------------
# Raft cluster


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[OvnSandbox]:
    """``with running(northd=False) as ovn:`` — shorthand for ``with OvnSandbox(**kwargs)``."""
    with OvnSandbox(**kwargs) as sandbox:
        yield sandbox
