"""A hostile OVSDB server (issue 31, item 8): a small socket server in the test that speaks
just enough JSON-RPC.

On main a server that never stops sending grew the reconciler to 1.87 GB of RSS within
``--ovn-timeout 5`` (673 MB for ``plan``, 1.19 GB for ``apply`` here), and JSON nested 200,000
levels deep ended in an uncaught ``RecursionError`` traceback at start-up. Now each is one
``error:`` line naming the endpoint, with memory bounded by ``--ovn-max-reply-mib``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.stack import OvnSandbox

from tests.security.hostile import EXE, policies

Reply = Callable[[socket.socket, dict], bool]
"""Answers one request on the socket; False: stop serving this connection."""


class HostileNb:
    """Accepts connections and answers each JSON-RPC request with ``reply``."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.server = socket.create_server(("127.0.0.1", 0))
        self.remote = f"tcp:127.0.0.1:{self.server.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder, buffer = json.JSONDecoder(), ""
        try:
            while not self.stop.is_set():
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data.decode()
                while buffer.strip():
                    try:
                        request, end = decoder.raw_decode(buffer.lstrip())
                    except ValueError:
                        break
                    buffer = buffer.lstrip()[end:]
                    if not self.reply(conn, request):
                        return
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.server.close()


def _send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode())


def _flood(conn: socket.socket, request: dict) -> bool:
    """An answer that never ends: a string of endless ``a``."""
    conn.sendall(b'{"id":%d,"error":null,"result":{"name":"OVN_Northbound","x":"' %
                 request["id"])  # fmt: skip
    chunk = b"a" * (1 << 20)
    while True:
        conn.sendall(chunk)


def _nested(conn: socket.socket, request: dict) -> bool:
    depth = 200_000
    conn.sendall(b'{"id":%d,"error":null,"result":' % request["id"] + b"[" * depth
                 + b"]" * depth + b"}")  # fmt: skip
    return True


def _shapeless(conn: socket.socket, request: dict) -> bool:
    _send(conn, {"id": request["id"]})  # no result, no error
    return True


def _nb_monitor_id(data: bytes) -> object:
    """The id of a request to monitor ``OVN_Northbound`` among the messages of ``data``."""
    text, decoder, pos = data.decode(errors="replace"), json.JSONDecoder(), 0
    while pos < len(text):
        try:
            message, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        method, params = message.get("method") or "", message.get("params") or [None]
        if method.startswith("monitor") and params[0] == "OVN_Northbound":
            return message["id"]
    return None


class FloodingProxy:
    """A real NB behind a proxy that passes everything on until the client asks to monitor
    ``OVN_Northbound`` (what python-ovs' IDL does once it has the schema and the ``_Server``
    rows), then answers that with a message that never ends."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("unix:")
        self.server = socket.create_server(("127.0.0.1", 0))
        self.remote = f"tcp:127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            nb = socket.socket(socket.AF_UNIX)
            nb.connect(self.upstream)
            flooding = threading.Event()
            threading.Thread(target=self._up, args=(client, nb, flooding), daemon=True).start()
            threading.Thread(target=self._down, args=(nb, client, flooding), daemon=True).start()

    def _up(self, client: socket.socket, nb: socket.socket, flooding: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                rid = _nb_monitor_id(data)
                if rid is not None:
                    flooding.set()
                    client.sendall(b'{"id":%s,"error":null,"result":{"Logical_Switch":{"x":'
                                   b'{"new":{"name":"' % json.dumps(rid).encode())  # fmt: skip
                    while True:
                        client.sendall(b"a" * (1 << 20))
                nb.sendall(data)

    def _down(self, nb: socket.socket, client: socket.socket, flooding: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while (data := nb.recv(65536)) and not flooding.is_set():
                client.sendall(data)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]\n'
        "users: [{name: u, user: {token: x}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    return path


@pytest.fixture
def nb() -> Iterator[Callable[[Reply], HostileNb]]:
    servers: list[HostileNb] = []

    def start(reply: Reply) -> HostileNb:
        servers.append(HostileNb(reply))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


_LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs the command as the child of a fresh, small process and writes its peak RSS. Measured
from the test process itself, ``ru_maxrss`` would start at the test process's own peak:
subprocess starts children with ``vfork``, and the kernel carries the borrowed memory's high
water mark across ``exec`` (in a full suite, the number was pytest's size, not ours)."""


def _run(*args: object, timeout: float = 60) -> tuple[int, str, int]:
    """Exit code, stderr and the command's own peak RSS in MiB (see :data:`_LAUNCH`)."""
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".maxrss") as rss:
        proc = subprocess.Popen([sys.executable, "-c", _LAUNCH, rss.name, str(EXE),
                                 *map(str, args)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
        timer = threading.Timer(timeout, os.killpg, (proc.pid, 9))
        timer.start()
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        proc.wait()
        timer.cancel()
        return proc.returncode, err, int(rss.read() or 0) // 1024


@pytest.mark.parametrize("command", ["plan", "apply", "run"])
def test_a_server_that_never_stops_sending_is_cut_off_at_the_limit(
    nb: Callable[[Reply], HostileNb], kubeconfig: Path, tmp_path: Path, command: str
) -> None:
    server = nb(_flood)
    extra = ["--metrics-addr", "off"] if command == "run" else []
    code, err, peak = _run(command, policies(tmp_path / "p"), "--ovn-nb", server.remote,
                           "--kubeconfig", kubeconfig, "--ovn-timeout", "20",
                           "--ovn-max-reply-mib", "32", *extra)  # fmt: skip
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"error: cannot connect to OVN NB at {server.remote}: sent a message larger than 32 MiB "
        "(the limit --ovn-max-reply-mib sets; is this an OVN Northbound server?)"
    )
    assert peak < 250, f"peak RSS {peak} MiB"  # main: grew until the timeout (1.87 GB in 5 s)


@pytest.mark.parametrize("reply", [_nested, _shapeless], ids=["nested", "shapeless"])
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_deep_or_shapeless_json_is_a_clear_error_not_a_traceback(
    nb: Callable[[Reply], HostileNb], kubeconfig: Path, tmp_path: Path, reply: Reply,
    command: str,
) -> None:  # fmt: skip
    server = nb(reply)
    code, err, _ = _run(command, policies(tmp_path / "p"), "--ovn-nb", server.remote,
                        "--kubeconfig", kubeconfig, "--ovn-timeout", "10")  # fmt: skip
    assert code == 1 and "Traceback" not in err and "RecursionError" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: cannot connect to OVN NB at {server.remote}: "), last
    if reply is _nested:
        assert "sent JSON nested deeper than it can be decoded" in last
    else:
        assert "garbled reply (KeyError: 'result')" in last


@pytest.mark.ovn
def test_the_idl_of_run_is_bounded_too(kubeconfig: Path, tmp_path: Path) -> None:
    """``run`` mirrors the NB through python-ovs' IDL, which reads a message whole: a monitor
    reply that never ends is cut at the same limit."""
    with OvnSandbox(tmp_path / "ovn", northd=False, nb_schema="26.03") as ovn:
        proxy = FloodingProxy(ovn.nb_remote)
        try:
            code, err, peak = _run(
                "run", policies(tmp_path / "p"), "--ovn-nb", proxy.remote, "--kubeconfig",
                kubeconfig, "--ovn-timeout", "10", "--ovn-max-reply-mib", "16",
                "--metrics-addr", "off",
            )  # fmt: skip
        finally:
            proxy.close()
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"error: cannot connect to OVN NB at {proxy.remote}: sent a message larger than 16 MiB "
        "(the limit --ovn-max-reply-mib sets; is this an OVN Northbound server?)"
    )
    assert peak < 400, f"peak RSS {peak} MiB"


def test_the_limit_is_a_checked_flag(kubeconfig: Path, tmp_path: Path) -> None:
    code, err, _ = _run("plan", policies(tmp_path / "p"), "--ovn-nb", "tcp:127.0.0.1:9",
                        "--kubeconfig", kubeconfig, "--ovn-max-reply-mib", "0")  # fmt: skip
    assert (
        code == 1 and err.strip() == "error: --ovn-max-reply-mib 0 must be a size in MiB, 1 or more"
    )
