"""The mechanics of one watch stream: its JSON-lines events, a stop that closes the socket
(a blocked read would otherwise wait for the server's next byte), and connected/disconnected
reports without repeats. :meth:`KubeCluster.watch` drives them."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)


class StatusReporter:
    """Calls ``on_status`` on changes only (a stream that breaks ends *and* fails; an outage
    fails every retry), so the listener hears True/False alternately."""

    def __init__(self, on_status: Callable[[bool], None] | None) -> None:
        self.on_status = on_status
        self.last: bool | None = None

    def __call__(self, connected: bool) -> None:
        if self.on_status is not None and connected is not self.last:
            self.last = connected
            self.on_status(connected)


def close_on_stop(stop: threading.Event, done: threading.Event, current: list[Any]) -> None:
    """Unblock a watch read as soon as ``stop`` is set (instead of waiting for data); exits
    with the watch (``done``) so an exception in a callback leaves no thread behind."""
    while not stop.wait(0.2):
        if done.is_set():
            return
    for resp in list(current):
        try:
            resp.shutdown()
        except Exception:  # already closed or finished: nothing to interrupt
            log.debug("watch response already closed")


def watch_events(resp: Any) -> Iterator[dict[str, Any]]:
    """Newline-delimited JSON events from a chunked watch response."""
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)
