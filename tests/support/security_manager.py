"""A security manager for the tests: an HTTP endpoint that records what osc-gitops tells it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def event_receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(its events URL, every event POSTed to it so far)``: answers 204 to each, on a free
    loopback port, stopped afterwards."""
    events: list[dict[str, Any]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            events.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/events", events
    finally:
        server.shutdown()
        server.server_close()
