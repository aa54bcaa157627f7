"""HTTP between pods of the data path: a tiny web server in a pod, and a client in another.

What an inspecting VNF (Suricata, :mod:`osc_gitops_sandbox.datapath.suricata`) looks at is HTTP,
so the packet tests and the demo need a request to carry: :func:`serve_http` answers every GET
with ``200`` and a short body (the path echoed), :func:`http_get` sends one request and says what
came back. A request an IPS drops never gets an answer: the client sees a timeout (Suricata
drops the request's segment and every later one of the flow; the handshake had passed).

In-process, like every probe here: the sockets are opened in the pod's network namespace
(:func:`~osc_gitops_sandbox.datapath.netns.in_netns`), no curl or Python child process.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from osc_gitops_sandbox.datapath.netns import Endpoint, in_netns

__all__ = ["ATTACK_PATH", "BENIGN_PATH", "HttpResult", "WebServer", "http_get", "serve_http"]

ATTACK_PATH = "/cgi-bin/status?host=web%3Bcat%20/etc/passwd"
"""A shell-command injection (``;cat /etc/passwd`` in a query, URL-encoded): what the Suricata
guest's default rules drop when it is aimed at a protected pod."""
BENIGN_PATH = "/cgi-bin/status?host=web"
"""The same request without the injection: passes."""


@dataclass(frozen=True)
class HttpResult:
    """One request: the status line's code (``None``: no answer), or why there was none."""

    status: int | None
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == 200


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    disable_nagle_algorithm = True
    timeout = 2.0  # a request an IPS dropped never arrives: give up on it

    def do_GET(self) -> None:
        body = f"osc-gitops sandbox web server: {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock.getsockname(), _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a request an IPS cut off mid-way: nothing to tell


class WebServer:
    """A web server on ``port`` of a pod (see :func:`serve_http`); stop it with ``with``."""

    def __init__(self, endpoint: Endpoint, port: int) -> None:
        def listen() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((endpoint.ip, port))
            sock.listen(64)
            return sock

        self.server = _Server(in_netns(endpoint.netns, listen))
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"http-{endpoint.lsp}:{port}", daemon=True,
        )  # fmt: skip
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self._thread.join(timeout=5)
        self.server.server_close()

    def __enter__(self) -> WebServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_http(endpoint: Endpoint, port: int = 80) -> WebServer:
    """A web server on ``endpoint``'s address and ``port``, answering every GET with 200."""
    return WebServer(endpoint, port)


def http_get(
    endpoint: Endpoint, dst: str, path: str, port: int = 80, timeout: float = 1.0
) -> HttpResult:
    """``GET path`` from ``endpoint`` to ``dst:port`` on a new connection: the status code, or
    ``None`` and why (a dropped request times out)."""
    sock = in_netns(endpoint.netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    started = time.monotonic()
    with sock:
        sock.settimeout(timeout)
        try:
            sock.connect((dst, port))
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nHost: {dst}\r\nUser-Agent: osc-gitops-sandbox\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            return HttpResult(None, str(exc) or type(exc).__name__, time.monotonic() - started)
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
    took = time.monotonic() - started
    line = data.split(b"\r\n", 1)[0].split()
    if len(line) >= 2 and line[1].isdigit():
        return HttpResult(int(line[1]), "", took)
    return HttpResult(None, f"no HTTP answer ({data[:40]!r})", took)
