"""A unix-socket proxy in front of an NB that acts at the exact moment a write transaction
passes: the only way to fault the server *while it holds our transaction*, every time.

osc-gitops' write transaction is the only request that asserts the write lock
(``{"op": "assert", "lock": ...}``), so the proxy recognises it in the client's bytes. On the
first one (:attr:`NbProxy.hit`) it does what the test asked:

- ``forward``: call ``on_hit`` (e.g. SIGSTOP the server), then pass the request on: the
  server holds it, unexecuted, while the fault lasts;
- ``withhold``: never forward it and close that connection (the server never sees it: the
  client's reply is lost and nothing can have committed);
- ``drop-reply``: forward it, call ``on_hit`` (e.g. SIGKILL the server: it may or may not have
  executed the request), and close that connection as soon as the server sends anything: the
  client never gets the reply.

Every other byte, and every later connection, is passed through unchanged.

A server that is down refuses connections; a proxy accepts them anyway (and closes them when
it cannot reach the server), which a client sees as "connected, then dropped": not the same
thing. So a test that kills the server also calls :meth:`NbProxy.refuse` (connections fail
like a dead server's, ``ECONNREFUSED``) and :meth:`NbProxy.accept_again` once it restarted.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["NbProxy"]

_WRITE = re.compile(rb'"op"\s*:\s*"assert"')


class NbProxy:
    def __init__(
        self,
        upstream: str,
        listen: Path,
        mode: str = "forward",
        on_hit: Callable[[], None] | None = None,
    ) -> None:
        assert mode in ("forward", "withhold", "drop-reply")
        self.upstream = upstream.removeprefix("unix:")
        self.listen = listen
        self.mode = mode
        self.on_hit = on_hit
        self.hit = threading.Event()
        self._armed = threading.Lock()
        self._fired = False
        self._closing = False
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._listen()

    def _listen(self) -> None:
        self.listen.unlink(missing_ok=True)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.listen))
        self._server.listen(64)
        server = self._server
        self._accept = threading.Thread(target=self._accept_loop, args=(server,), daemon=True)
        self._accept.start()

    def refuse(self) -> None:
        """Stop listening (the socket file stays): new connections are refused, as a killed
        server's are. Connections already made are left alone."""
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()

    def accept_again(self) -> None:
        """Listen again on the same path (after :meth:`refuse`, once the server is back)."""
        self._listen()

    @property
    def remote(self) -> str:
        return f"unix:{self.listen}"

    def close(self) -> None:
        self._closing = True
        self.refuse()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> NbProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------------
    def _accept_loop(self, server: socket.socket) -> None:
        while not self._closing:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.upstream)
            except OSError:
                client.close()  # the server is down: so is the proxied endpoint
                upstream.close()
                continue
            self._sockets += [client, upstream]
            thread = threading.Thread(target=self._pump, args=(client, upstream), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _first_write(self, data: bytes, tail: bytes) -> bool:
        if not _WRITE.search(tail + data):
            return False
        with self._armed:
            if self._fired:
                return False
            self._fired = True
        return True

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        tail = b""
        answered_after: float | None = None
        try:
            while not self._closing:
                ready, _, _ = select.select([client, upstream], [], [], 0.2)
                if upstream in ready:
                    data = upstream.recv(1 << 20)
                    if not data:
                        return
                    if answered_after is not None:
                        return  # the server answered the write: drop it, and the connection
                    client.sendall(data)
                if client in ready:
                    data = client.recv(1 << 20)
                    if not data:
                        return
                    if self._first_write(data, tail):
                        self.hit.set()
                        if self.mode == "withhold":
                            return
                        if self.mode == "forward" and self.on_hit is not None:
                            self.on_hit()  # before the server can see the request
                        upstream.sendall(data)
                        if self.mode == "drop-reply":
                            answered_after = time.monotonic()
                            if self.on_hit is not None:
                                self.on_hit()  # the server may or may not have executed it
                        continue
                    tail = data[-64:]
                    upstream.sendall(data)
        except OSError:
            return
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
