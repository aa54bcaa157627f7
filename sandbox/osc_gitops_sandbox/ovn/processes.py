"""Processes and tools of an OVN distribution, owned by the calling process.

Every daemon (``ovsdb-server``, ``ovn-northd``) is a child of the calling process, never
``--detach``: reaped by its owner's ``stop``, by an ``atexit`` hook, and (on Linux) killed by the
kernel if the parent dies (``PR_SET_PDEATHSIG``). Also here: which distribution and NB schema a
stack runs (:func:`resolve_stack`), and running one-shot tools with a clear error.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.ovn import distributions, ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import HOST, SID, Distribution, DistributionError

__all__ = [
    "NF_SCHEMA",
    "OWN_SCHEMA",
    "Daemon",
    "OvnSandboxError",
    "child_env",
    "free_port",
    "listening_ports",
    "ovn_unavailable_reason",
    "resolve_stack",
    "run_command",
    "run_tool",
    "schema_has_network_function",
    "seconds_until",
    "tail",
    "wait_until",
]

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

    def __init__(
        self, name: str, args: list[str], log: Path, ctl: Path, env: dict[str, str],
        *, pdeathsig: bool | None = None,
    ) -> None:  # fmt: skip
        self.name = name
        self.log = log
        self.ctl = ctl
        self.args = args
        # PDEATHSIG fires when the *thread* that forked exits: by default only used from the
        # main thread; ``pdeathsig=True`` when the caller's thread outlives the daemon.
        use_pdeathsig = (
            threading.current_thread() is threading.main_thread() if pdeathsig is None
            else pdeathsig
        )  # fmt: skip
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


def seconds_until(
    done: Callable[[], bool], timeout: float, late: Callable[[], Exception], *,
    check: Callable[[], None] | None = None, interval: float = 0.02,
) -> float:  # fmt: skip
    """Poll ``done()`` every ``interval`` seconds until it is true; the seconds it took.
    Between tries ``check()`` (if given) raises when waiting on is pointless (what should get
    ready has exited); past ``timeout``, raises ``late()``."""
    start = time.monotonic()
    while not done():
        if check is not None:
            check()
        if time.monotonic() - start > timeout:
            raise late()
        time.sleep(interval)
    return time.monotonic() - start


def listening_ports(log: Path) -> list[int]:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    return [int(m) for m in re.findall(r"listening on port (\d+)", text)]
