"""A real, local OVN control plane for tests, the demo and benchmarks.

Why real processes: the adapter's hard parts (IDL initial sync, transaction atomicity, Raft
failover, what northd makes of our rows) only show against the real ``ovsdb-server`` and
``ovn-northd``. Everything runs in a temp dir on unix sockets / loopback, as children of the
calling process (never ``--detach``), so they are reaped by :meth:`OvnSandbox.stop`, by the
context manager, by an ``atexit`` hook, and (on Linux) killed by the kernel if the parent dies
(``PR_SET_PDEATHSIG``).

Use from any test::

    from osc_gitops_sandbox.ovn import OvnSandbox, seed_ovn_kubernetes, SeedNode, SeedPod
    with OvnSandbox(northd=False) as ovn:
        seed_ovn_kubernetes(ovn.nb_remote, [SeedNode("node1", "10.244.1.0/24")], pods)

This module must not import ``ovs``/``ovsdbapp``: it shells out to ``ovsdb-tool``,
``ovs-appctl`` and talks raw JSON-RPC through :mod:`osc_gitops_sandbox.ovsdb_rpc`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import reconciler
from osc_gitops_sandbox import ovsdb_rpc

__all__ = [
    "INSTALLED_NB_SCHEMA",
    "INSTALLED_SB_SCHEMA",
    "ForeignRows",
    "OvnCluster",
    "OvnSandbox",
    "OvnSandboxError",
    "SeedNode",
    "SeedPod",
    "make_pods",
    "nf_schema_path",
    "ovn_unavailable_reason",
    "seed_foreign_rows",
    "seed_ovn_kubernetes",
]

INSTALLED_NB_SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")
INSTALLED_SB_SCHEMA = Path("/usr/share/ovn/ovn-sb.ovsschema")
NF_SCHEMA_ENV = "OSC_OVN_NB_SCHEMA_26"
NF_SCHEMA_FILE = "ovn-nb-26.03.2.ovsschema"
CLUSTER_ROUTER = "ovn_cluster_router"


class OvnSandboxError(RuntimeError):
    """The local OVN stack could not be started or queried; the message says which process and
    ends with the tail of its log."""


# ---------------------------------------------------------------------------------------------
# locating tools and schemas


def ovn_unavailable_reason(*, northd: bool = False) -> str | None:
    """Why the sandbox cannot run here (a ``pytest.skip`` reason), or ``None`` if it can."""
    tools = ["ovsdb-server", "ovsdb-tool", "ovs-appctl"] + (["ovn-northd"] if northd else [])
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not on PATH (install Debian's ovn-central)"
    if not INSTALLED_NB_SCHEMA.exists():
        return f"{INSTALLED_NB_SCHEMA} missing (install Debian's ovn-common)"
    return None


def nf_schema_path() -> Path | None:
    """The OVN 26.03 NB schema (Network Function tables), or ``None`` when it is not available.

    Looked up in ``$OSC_OVN_NB_SCHEMA_26``, then ``<repo>/../shared/ovn/`` relative to the
    installed package, then ``../shared/ovn/`` relative to the working directory.
    """
    env = os.environ.get(NF_SCHEMA_ENV)
    if env:
        return Path(env) if Path(env).is_file() else None
    candidates = [
        Path(reconciler.__file__).resolve().parents[2] / "shared" / "ovn" / NF_SCHEMA_FILE,
        Path.cwd().resolve().parent / "shared" / "ovn" / NF_SCHEMA_FILE,
    ]
    return next((p for p in candidates if p.is_file()), None)


def resolve_nb_schema(spec: str | os.PathLike[str]) -> Path:
    """``"installed"`` (23.03 here), ``"26.03"`` (see :func:`nf_schema_path`) or a path."""
    if spec == "installed":
        path: Path | None = INSTALLED_NB_SCHEMA
    elif spec == "26.03":
        path = nf_schema_path()
        if path is None:
            raise OvnSandboxError(
                f"OVN 26.03 NB schema not found: set ${NF_SCHEMA_ENV} or provide "
                f"../shared/ovn/{NF_SCHEMA_FILE}"
            )
    else:
        path = Path(spec)
    assert path is not None
    if not path.is_file():
        raise OvnSandboxError(f"OVN NB schema file not found: {path}")
    return path


def free_port() -> int:
    """A currently free loopback TCP port (for Raft addresses, which must be known upfront)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: Sequence[str], *, timeout: float = 30.0, cwd: Path | None = None) -> str:
    """Run a short OVS/OVN tool and return stdout; a failure names the command and its stderr."""
    try:
        proc = subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
        )
    except FileNotFoundError as exc:
        raise OvnSandboxError(f"{args[0]} not found: install Debian's ovn-central") from exc
    except subprocess.TimeoutExpired as exc:
        raise OvnSandboxError(f"{' '.join(args)} timed out after {timeout}s") from exc
    if proc.returncode != 0:
        raise OvnSandboxError(
            f"{' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
    return proc.stdout


# ---------------------------------------------------------------------------------------------
# owned child processes

_LIVE: set[_Daemon] = set()
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


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) or "(empty log)"


class _Daemon:
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
        stderr = _tail(self.log.with_suffix(".stderr"), 5)
        return OvnSandboxError(
            f"{self.name} {what} (exit code {self.proc.poll()}); log {self.log}:\n"
            f"{_tail(self.log)}\n{stderr if stderr != '(empty log)' else ''}".rstrip()
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


def _child_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVN_RUNDIR", "OVN_LOGDIR", "OVN_DBDIR"):
        env[var] = str(workdir)
    return env


def _wait_until(
    check: Any, daemon: _Daemon, what: str, timeout: float, interval: float = 0.02
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
                f"log {daemon.log}:\n{_tail(daemon.log)}"
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


class OvnSandbox:
    """NB and SB ``ovsdb-server`` processes plus (optionally) ``ovn-northd``, in a temp dir.

    ``nb_schema``: ``"installed"`` (Debian's 23.03), ``"26.03"`` (the Network Function schema,
    see :func:`nf_schema_path`) or a path. northd 23.03 runs against the 26.03 NB but ignores the
    NF columns, so with that schema ``northd`` is still allowed but proves nothing about NF.

    ``tcp=True`` adds a ``ptcp`` remote on an ephemeral loopback port (``nb_tcp_remote``);
    ``ssl=(key, cert, ca)`` adds a ``pssl`` remote (``nb_ssl_remote``) with those files.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        northd: bool = True,
        tcp: bool = False,
        nb_schema: str | os.PathLike[str] = "installed",
        ssl: tuple[str, str, str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._own_tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            # Short prefix: unix socket paths are limited to ~107 bytes.
            self._own_tmp = tempfile.TemporaryDirectory(prefix="ovn-")
            workdir = self._own_tmp.name
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.northd_enabled = northd
        self.tcp = tcp
        self.ssl = ssl
        self.timeout = timeout
        self.nb_schema_path = resolve_nb_schema(nb_schema)
        self.nb: _Daemon | None = None
        self.sb: _Daemon | None = None
        self.northd: _Daemon | None = None
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

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> OvnSandbox:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        env = _child_env(self.workdir)
        for name, schema in (("nb", self.nb_schema_path), ("sb", INSTALLED_SB_SCHEMA)):
            db = self.workdir / f"{name}.db"
            if not db.exists():
                _run(["ovsdb-tool", "create", str(db), str(schema)])
        self.nb = self._start_server("nb", env, tcp=self.tcp, ssl=self.ssl)
        self.sb = self._start_server("sb", env, tcp=False, ssl=None)
        nb_sock, sb_sock = self.nb_remote, self.sb_remote
        _wait_until(lambda: ovsdb_rpc.list_dbs(nb_sock, 1.0), self.nb, "NB socket", self.timeout)
        _wait_until(lambda: ovsdb_rpc.list_dbs(sb_sock, 1.0), self.sb, "SB socket", self.timeout)
        if self.tcp:
            nb = self.nb
            ports = _wait_until(
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
    ) -> _Daemon:
        log = self.workdir / f"{name}.log"
        args = [
            "ovsdb-server",
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
        return _Daemon(
            f"ovsdb-server ({name.upper()})", args, log, self.workdir / f"{name}.ctl", env
        )

    def _start_northd(self, env: dict[str, str]) -> None:
        ctl = self.workdir / "northd.ctl"
        log = self.workdir / "northd.log"
        self.northd = _Daemon(
            "ovn-northd",
            [
                "ovn-northd",
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
        _wait_until(
            lambda: "active" in _run(["ovs-appctl", "-t", str(ctl), "status"], timeout=2.0),
            northd,
            "northd status active",
            self.timeout,
        )

    def stop(self) -> None:
        """Terminate and reap every child; idempotent; removes the temp dir if we made it."""
        for daemon in (self.northd, self.sb, self.nb):
            if daemon is not None:
                daemon.stop()
        if self._own_tmp is not None:
            self._own_tmp.cleanup()
            self._own_tmp = None

    def __enter__(self) -> OvnSandbox:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- conveniences ------------------------------------------------------------------------
    def nbctl(self, *args: str, timeout: float = 30.0) -> str:
        """Run ``ovn-nbctl --db=<nb>`` (one process; fine for a handful of objects)."""
        return _run(["ovn-nbctl", f"--db={self.nb_remote}", *args], timeout=timeout)

    def sbctl(self, *args: str, timeout: float = 30.0) -> str:
        return _run(["ovn-sbctl", f"--db={self.sb_remote}", *args], timeout=timeout)

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


class OvnCluster:
    """A 3-member (``size``) clustered OVN_Northbound on loopback TCP.

    Every member keeps its ports across :meth:`kill`/:meth:`start`, so :attr:`remotes` stays a
    valid client connection string while members come and go (as in a real deployment).
    """

    DB = "OVN_Northbound"

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        size: int = 3,
        nb_schema: str | os.PathLike[str] = "installed",
        timeout: float = 20.0,
    ) -> None:
        self._own_tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._own_tmp = tempfile.TemporaryDirectory(prefix="ovnc-")
            workdir = self._own_tmp.name
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.size = size
        self.timeout = timeout
        self.schema = resolve_nb_schema(nb_schema)
        self.raft_ports = [free_port() for _ in range(size)]
        self.client_ports = [free_port() for _ in range(size)]
        self.members: list[_Daemon | None] = [None] * size

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
        try:
            raft = [f"tcp:127.0.0.1:{p}" for p in self.raft_ports]
            _run(["ovsdb-tool", "create-cluster", str(self._db(0)), str(self.schema), raft[0]])
            for i in range(1, self.size):
                _run(["ovsdb-tool", "join-cluster", str(self._db(i)), self.DB, raft[i], raft[0]])
            for i in range(self.size):
                self.start(i, wait=False)
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def start(self, i: int, *, wait: bool = True) -> None:
        """(Re)start member ``i`` with its original ports and database file."""
        member = self.members[i]
        if member is not None and member.alive():
            return
        log = self.workdir / f"nb{i}.log"
        self.members[i] = _Daemon(
            f"ovsdb-server (NB cluster member {i})",
            [
                "ovsdb-server",
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
            _child_env(self.workdir),
        )
        if wait:
            self.wait_healthy()

    def kill(self, i: int) -> None:
        """Stop member ``i`` abruptly (SIGKILL), as a crashed node would."""
        member = self.members[i]
        if member is not None:
            member.stop(sig=signal.SIGKILL)

    def status(self, i: int) -> str:
        return _run(["ovs-appctl", "-t", str(self._ctl(i)), "cluster/status", self.DB], timeout=5)

    def leader_index(self) -> int | None:
        """Index of the member that reports ``Role: leader`` (``None`` during an election)."""
        for i, member in enumerate(self.members):
            if member is None or not member.alive():
                continue
            with contextlib.suppress(OvnSandboxError):
                if re.search(r"^Role: leader$", self.status(i), re.M):
                    return i
        return None

    def wait_healthy(self) -> int:
        """Wait until every live member serves clients and a leader is elected; return it."""
        deadline = time.monotonic() + self.timeout
        for i, member in enumerate(self.members):
            if member is None or not member.alive():
                continue
            remote = self.remote(i)
            _wait_until(
                lambda remote=remote: ovsdb_rpc.list_dbs(remote, 1.0),
                member,
                "client port",
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

    def stop(self) -> None:
        for member in self.members:
            if member is not None:
                member.stop()
        if self._own_tmp is not None:
            self._own_tmp.cleanup()
            self._own_tmp = None

    def __enter__(self) -> OvnCluster:
        return self.start_all()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


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
