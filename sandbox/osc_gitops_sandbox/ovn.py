"""A real, local OVN control plane for tests, the demo and benchmarks.

Why real processes: the adapter's hard parts (IDL initial sync, transaction atomicity, Raft
failover, what northd makes of our rows) only show against the real ``ovsdb-server`` and
``ovn-northd``. Everything runs in a temp dir on unix sockets / loopback, as children of the
calling process (never ``--detach``), so they are reaped by :meth:`OvnSandbox.stop`, by the
context manager, by an ``atexit`` hook, and (on Linux) killed by the kernel if the parent dies
(``PR_SET_PDEATHSIG``).

Two OVN distributions can run here (:mod:`osc_gitops_sandbox.distributions`): ``host``
(Debian bookworm's OVN 23.03, no Network Function tables) and ``sid`` (OVN 26.03 from the Debian
sid root that ``make setup`` builds). Every stack takes its tools, schemas and NB schema from one
of them. Use from any test::

    from osc_gitops_sandbox.ovn import OvnSandbox, seed_ovn_kubernetes, SeedNode, SeedPod
    with OvnSandbox(northd=False, distribution="sid") as ovn:
        seed_ovn_kubernetes(ovn.nb_remote, [SeedNode("node1", "10.244.1.0/24")], pods)

Why one long module: every stack (one NB, a 3-member Raft NB, northd) shares the same daemon
lifecycle, environment and reaping rules; the distributions' paths and the data path already
live in their own modules (``distributions``, ``datapath``, ``netns``).

This module must not import ``ovs``/``ovsdbapp``: it shells out to ``ovsdb-tool``,
``ovs-appctl`` and talks raw JSON-RPC through :mod:`osc_gitops_sandbox.ovsdb_rpc`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osc_gitops_sandbox import distributions, ovsdb_rpc
from osc_gitops_sandbox.distributions import HOST, SID, Distribution, DistributionError
from osc_gitops_sandbox.lifecycle import Lifecycle, Stoppable

__all__ = [
    "ForeignRows",
    "OvnCluster",
    "OvnSandbox",
    "OvnSandboxError",
    "SeedNode",
    "SeedPod",
    "make_pods",
    "ovn_unavailable_reason",
    "resolve_stack",
    "seed_foreign_rows",
    "seed_ovn_kubernetes",
]

CLUSTER_ROUTER = "ovn_cluster_router"
NF_SCHEMA = "26.03"
"""``nb_schema="26.03"``: the older spelling of ``distribution="sid"`` (its own NB schema)."""
OWN_SCHEMA = "installed"
"""``nb_schema="installed"``: the NB schema the chosen distribution ships."""


class OvnSandboxError(RuntimeError):
    """The local OVN stack could not be started or queried; the message says which process and
    ends with the tail of its log."""


# ---------------------------------------------------------------------------------------------
# choosing a distribution and its schema


def ovn_unavailable_reason(*, northd: bool = False, distribution: str = HOST) -> str | None:
    """Why the sandbox cannot run ``distribution`` here (a ``pytest.skip`` reason for the host
    one; a missing sid root should fail a test instead), or ``None`` if it can."""
    tools = ["ovsdb-server", "ovsdb-tool", "ovs-appctl"] + (["ovn-northd"] if northd else [])
    return _distribution(distribution).unavailable_reason(tools)


def _distribution(spec: str | Distribution) -> Distribution:
    try:
        return distributions.distribution(spec)
    except DistributionError as exc:
        raise OvnSandboxError(str(exc)) from exc


def resolve_stack(
    nb_schema: str | os.PathLike[str] = OWN_SCHEMA,
    dist: str | Distribution | None = None,
    tools: Sequence[str] = ("ovsdb-server", "ovsdb-tool", "ovs-appctl"),
) -> tuple[Distribution, Path]:
    """The distribution to run and the NB schema file to serve.

    ``nb_schema``: ``"installed"`` (the distribution's own), ``"26.03"`` (the sid distribution's
    own: real OVN 26.03 with Network Function tables) or a schema file. ``dist``: ``"host"``,
    ``"sid"`` or ``None`` (sid for ``"26.03"``, else the host's). A distribution that is not
    there raises :class:`OvnSandboxError` saying how to get it (``make setup``).
    """
    if dist is None:
        dist = SID if nb_schema == NF_SCHEMA else HOST
    chosen = _distribution(dist)
    if nb_schema == NF_SCHEMA and chosen.name != SID:
        raise OvnSandboxError(
            f'nb_schema="26.03" is OVN 26.03\'s own schema: use distribution="sid", not {dist!r}'
        )
    reason = chosen.unavailable_reason(tools)
    if reason:
        raise OvnSandboxError(reason)
    path = chosen.nb_schema if nb_schema in (OWN_SCHEMA, NF_SCHEMA) else Path(nb_schema)
    if not path.is_file():
        raise OvnSandboxError(f"OVN NB schema file not found: {path}")
    return chosen, path


def schema_has_network_function(schema: Path) -> bool:
    """Whether an NB schema file has the Network Function tables (OVN >= 26.03)."""
    return "Network_Function" in json.loads(schema.read_text())["tables"]


def free_port() -> int:
    """A currently free loopback TCP port (for Raft addresses, which must be known upfront)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_command(
    args: Sequence[str],
    *,
    timeout: float = 30.0,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    name: str | None = None,
) -> str:
    """Run a short command and return stdout; a failure names it (``name``, else the argv)
    and shows its stderr."""
    what = name or " ".join(args)
    try:
        proc = subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
            check=False,
        )  # fmt: skip
    except FileNotFoundError as exc:
        raise OvnSandboxError(f"{args[0]} not found (`make setup` installs OVN/OVS)") from exc
    except subprocess.TimeoutExpired as exc:
        raise OvnSandboxError(f"{what} timed out after {timeout}s") from exc
    if proc.returncode != 0:
        raise OvnSandboxError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def run_tool(dist: Distribution, tool: str, *args: str, timeout: float = 30.0) -> str:
    """Run an OVS/OVN tool of ``dist`` (e.g. ``ovsdb-tool create ...``) and return stdout.

    No work dir is involved: every call here passes explicit sockets and files, and the
    environment keeps tools of the sid root away from the host's run directories."""
    return run_command(
        [*dist.command(tool), *args],
        timeout=timeout,
        env=dist.env(tempfile.gettempdir()),
        name=f"{tool} ({dist.name}) {' '.join(args)}",
    )


# ---------------------------------------------------------------------------------------------
# owned child processes

_LIVE: set[Daemon] = set()
_LIVE_LOCK = threading.Lock()


def _kill_all_live() -> None:
    """atexit: no ovsdb-server/northd outlives the Python process, even after a crashed test."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for daemon in live:
        daemon.stop(timeout=2.0)


atexit.register(_kill_all_live)


def _pdeathsig() -> None:  # pragma: no cover - runs in the child
    """Ask the kernel to SIGTERM the child when its parent dies (e.g. pytest SIGKILLed)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) or "(empty log)"


class Daemon:
    """One owned child process (ovsdb-server or ovn-northd) with its log and control socket."""

    def __init__(self, name: str, args: list[str], log: Path, ctl: Path, env: dict[str, str]):
        self.name = name
        self.log = log
        self.ctl = ctl
        self.args = args
        # PDEATHSIG fires when the *thread* that forked exits: only safe from the main thread.
        use_pdeathsig = threading.current_thread() is threading.main_thread()
        with open(log.with_suffix(".stderr"), "ab") as err:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                env=env,
                preexec_fn=_pdeathsig if use_pdeathsig else None,
            )
        with _LIVE_LOCK:
            _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def failure(self, what: str) -> OvnSandboxError:
        stderr = tail(self.log.with_suffix(".stderr"), 5)
        return OvnSandboxError(
            f"{self.name} {what} (exit code {self.proc.poll()}); log {self.log}:\n"
            f"{tail(self.log)}\n{stderr if stderr != '(empty log)' else ''}".rstrip()
        )

    def stop(self, timeout: float = 5.0, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        with _LIVE_LOCK:
            _LIVE.discard(self)


def child_env(workdir: Path, dist: Distribution | None = None) -> dict[str, str]:
    """Environment of a daemon of ``dist`` (default: the host's) working in ``workdir``."""
    return (dist or distributions.host()).env(workdir)


def wait_until(
    check: Any, daemon: Daemon, what: str, timeout: float, interval: float = 0.02
) -> Any:
    """Poll ``check()`` until it returns a truthy value; fail fast if the daemon died."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        if not daemon.alive():
            raise daemon.failure(f"exited while waiting for {what}")
        try:
            result = check()
            if result:
                return result
        except (OSError, ovsdb_rpc.OvsdbRpcError, OvnSandboxError) as exc:
            last_error = exc
        if time.monotonic() > deadline:
            raise OvnSandboxError(
                f"{daemon.name} not ready ({what}) after {timeout}s: {last_error}; "
                f"log {daemon.log}:\n{tail(daemon.log)}"
            )
        time.sleep(interval)


def _listening_ports(log: Path) -> list[int]:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    return [int(m) for m in re.findall(r"listening on port (\d+)", text)]


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
    stack, which is what makes a hundred zone NBs (:mod:`osc_gitops_sandbox.zones`) cheap.
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
                lambda: [p for p in _listening_ports(nb.log) if p != self._nb_ssl_port],
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


# ---------------------------------------------------------------------------------------------
# seeding what OVN-Kubernetes would have written


@dataclass(frozen=True)
class SeedNode:
    name: str
    subnet: str
    """Pod subnet of the node, e.g. ``10.244.1.0/24`` (``other_config:subnet``)."""


@dataclass(frozen=True)
class SeedPod:
    namespace: str
    name: str
    uid: str
    node: str
    mac: str
    ip: str

    @property
    def lsp_name(self) -> str:
        return f"{self.namespace}_{self.name}"


def make_pods(
    nodes: Sequence[SeedNode], count: int, namespace: str = "default", prefix: str = "pod"
) -> list[SeedPod]:
    """``count`` pods spread round-robin over ``nodes`` with unique MACs/IPs (for benchmarks)."""
    pods: list[SeedPod] = []
    per_node: dict[str, int] = {}
    for n in range(count):
        node = nodes[n % len(nodes)]
        k = per_node.get(node.name, 0)
        per_node[node.name] = k + 1
        net = ipaddress.ip_network(node.subnet)
        ip = net.network_address + 3 + k
        mac = "0a:58:" + ":".join(f"{b:02x}" for b in ip.packed[-4:])
        pods.append(
            SeedPod(namespace, f"{prefix}-{n}", f"uid-{namespace}-{n:06d}", node.name, mac, str(ip))
        )
    return pods


def _named(prefix: str, i: int) -> str:
    return f"{prefix}{i}"


def seed_ovn_kubernetes(
    nb_remote: str,
    nodes: Sequence[SeedNode],
    pods: Sequence[SeedPod] = (),
    *,
    router: bool = True,
) -> None:
    """Create what OVN-Kubernetes creates for ``nodes`` and ``pods`` in ONE raw transaction.

    Per node: switch ``<node>`` (``other_config:subnet``), router port ``rtos-<node>`` on
    ``ovn_cluster_router`` (subnet's ``.1``) and switch port ``stor-<node>``. Per pod: LSP
    ``<ns>_<pod>`` with ``addresses``/``port_security`` ``"<mac> <ip>"``,
    ``external_ids={namespace, pod: "true"}``, ``options:iface-id-ver=<uid>`` and
    ``options:requested-chassis=<node>``. Nodes must be new; pods must sit on given nodes.
    """
    index = {n.name: i for i, n in enumerate(nodes)}
    ports_of: dict[str, list[list[str]]] = {n.name: [] for n in nodes}
    ops: list[dict[str, Any]] = []
    for j, pod in enumerate(pods):
        if pod.node not in index:
            raise ValueError(f"pod {pod.namespace}/{pod.name} is on unknown node {pod.node!r}")
        addr = f"{pod.mac} {pod.ip}"
        ops.append(
            {
                "op": "insert",
                "table": "Logical_Switch_Port",
                "uuid-name": _named("p", j),
                "row": {
                    "name": pod.lsp_name,
                    "addresses": addr,
                    "port_security": addr,
                    "external_ids": ovsdb_rpc.to_datum({"namespace": pod.namespace, "pod": "true"}),
                    "options": ovsdb_rpc.to_datum(
                        {"iface-id-ver": pod.uid, "requested-chassis": pod.node}
                    ),
                },
            }
        )
        ports_of[pod.node].append(["named-uuid", _named("p", j)])
    lrps: list[list[str]] = []
    for i, node in enumerate(nodes):
        net = ipaddress.ip_network(node.subnet)
        gw = net.network_address + 1
        if router:
            mac = "0a:58:" + ":".join(f"{b:02x}" for b in gw.packed[-4:])
            ops.append(
                {
                    "op": "insert",
                    "table": "Logical_Router_Port",
                    "uuid-name": _named("rp", i),
                    "row": {
                        "name": f"rtos-{node.name}",
                        "mac": mac,
                        "networks": f"{gw}/{net.prefixlen}",
                    },
                }
            )
            lrps.append(["named-uuid", _named("rp", i)])
            ops.append(
                {
                    "op": "insert",
                    "table": "Logical_Switch_Port",
                    "uuid-name": _named("sp", i),
                    "row": {
                        "name": f"stor-{node.name}",
                        "type": "router",
                        "addresses": "router",
                        "options": ovsdb_rpc.to_datum({"router-port": f"rtos-{node.name}"}),
                    },
                }
            )
            ports_of[node.name].append(["named-uuid", _named("sp", i)])
        ops.append(
            {
                "op": "insert",
                "table": "Logical_Switch",
                "uuid-name": _named("s", i),
                "row": {
                    "name": node.name,
                    "ports": ["set", ports_of[node.name]],
                    "other_config": ovsdb_rpc.to_datum({"subnet": node.subnet}),
                },
            }
        )
    if router and nodes:
        existing = ovsdb_rpc.transact(
            nb_remote,
            "OVN_Northbound",
            [
                {
                    "op": "select",
                    "table": "Logical_Router",
                    "where": [["name", "==", CLUSTER_ROUTER]],
                    "columns": ["_uuid"],
                }
            ],
        )[0]["rows"]
        if existing:
            ops.append(
                {
                    "op": "mutate",
                    "table": "Logical_Router",
                    "where": [["name", "==", CLUSTER_ROUTER]],
                    "mutations": [["ports", "insert", ["set", lrps]]],
                }
            )
        else:
            ops.append(
                {
                    "op": "insert",
                    "table": "Logical_Router",
                    "row": {"name": CLUSTER_ROUTER, "ports": ["set", lrps]},
                }
            )
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)


@dataclass(frozen=True)
class ForeignRows:
    """Names of the rows :func:`seed_foreign_rows` made (none of them is ours to touch)."""

    handmade_port_group: str = "osc_gitops_handmade"
    other_instance_port_group: str = "osc_gitops_other"
    netpol_port_group: str = "a13757631697825269621"
    acl_names: tuple[str, ...] = field(
        default=("osc-gitops-handmade", "osc-gitops-other", "NP:default:deny-web:Ingress:0")
    )


def seed_foreign_rows(
    nb_remote: str, ports: Sequence[str] = (), *, tier: bool | None = None
) -> ForeignRows:
    """Rows that look like ours but are not, for ownership tests (one raw transaction).

    - a hand-made Port_Group + ACL with an ``osc``-like name and no owner marker;
    - a Port_Group + ACL marked ``osc.io/owner=other-instance`` (another reconciler's rows);
    - an OVN-Kubernetes NetworkPolicy Port_Group + ACL (``k8s.ovn.org/*`` external_ids,
      priority 1001, tier 2 when the schema has ``ACL.tier``).

    ``ports``: LSP names to put in every foreign Port_Group (must exist).
    """
    names = ForeignRows()
    if tier is None:
        schema = ovsdb_rpc.get_schema(nb_remote, "OVN_Northbound")
        tier = "tier" in schema["tables"]["ACL"]["columns"]
    port_uuids: list[list[str]] = []
    if ports:
        rows = ovsdb_rpc.transact(
            nb_remote,
            "OVN_Northbound",
            [
                {
                    "op": "select",
                    "table": "Logical_Switch_Port",
                    "where": [["name", "==", p]],
                    "columns": ["_uuid"],
                }
                for p in ports
            ],
        )
        for name, res in zip(ports, rows, strict=True):
            if not res["rows"]:
                raise ValueError(f"seed_foreign_rows: no Logical_Switch_Port named {name!r}")
            port_uuids.append(res["rows"][0]["_uuid"])
    specs = [
        (
            names.handmade_port_group,
            names.acl_names[0],
            {"owner": "a human"},
            {"priority": 2000, "direction": "to-lport", "action": "allow-related"},
        ),
        (
            names.other_instance_port_group,
            names.acl_names[1],
            {"osc.io/owner": "other-instance", "osc.io/key": "other"},
            {"priority": 2001, "direction": "from-lport", "action": "allow"},
        ),
        (
            names.netpol_port_group,
            names.acl_names[2],
            {
                "k8s.ovn.org/owner-type": "NetworkPolicy",
                "k8s.ovn.org/name": "default:deny-web",
                "k8s.ovn.org/id": "default-network-controller:NetworkPolicy:default:deny-web",
            },
            {
                "priority": 1001,
                "direction": "to-lport",
                "action": "allow-related",
                **({"tier": 2} if tier else {}),
            },
        ),
    ]
    ops: list[dict[str, Any]] = []
    for i, (pg, acl, ext, cols) in enumerate(specs):
        pg_match = "@" + pg
        direction = cols["direction"]
        side = "outport" if direction == "to-lport" else "inport"
        ops.append(
            {
                "op": "insert",
                "table": "ACL",
                "uuid-name": _named("acl", i),
                "row": {
                    "name": acl,
                    "match": f"{side} == {pg_match} && ip4",
                    "external_ids": ovsdb_rpc.to_datum(ext),
                    **cols,
                },
            }
        )
        ops.append(
            {
                "op": "insert",
                "table": "Port_Group",
                "row": {
                    "name": pg,
                    "ports": ["set", port_uuids],
                    "acls": ["named-uuid", _named("acl", i)],
                    "external_ids": ovsdb_rpc.to_datum(ext),
                },
            }
        )
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)
    return names


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[OvnSandbox]:
    """``with running(northd=False) as ovn:`` — shorthand for ``with OvnSandbox(**kwargs)``."""
    with OvnSandbox(**kwargs) as sandbox:
        yield sandbox
