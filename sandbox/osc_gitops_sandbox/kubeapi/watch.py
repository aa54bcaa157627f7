"""Watches of the Kubernetes API emulator: the chunked stream of one resource's events.

A watch starts at a resourceVersion (or, without one, with synthetic ADDED events for the
current state), reads the store's event history under the store's lock and writes outside it,
sends BOOKMARKs when asked, answers ``410 Expired`` for a resourceVersion older than the last
compaction (and ends a watch that fell behind the memory bound the same way), and drops when a
fault says so (:meth:`~osc_gitops_sandbox.kubeapi.faults.Faults.drop_watches`).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from typing import NamedTuple

from osc_gitops_sandbox.kubeapi.resources import ResourceType
from osc_gitops_sandbox.kubeapi.selectors import FieldSelector, LabelSelector
from osc_gitops_sandbox.kubeapi.status import ApiError
from osc_gitops_sandbox.kubeapi.store import ObjectStore, Stored, dumps

__all__ = ["WatchRequest", "watch_events"]


class WatchRequest(NamedTuple):
    """What a watch asks for: a kind, a namespace (``None``: all), the selectors, where to
    start (``None``, ``""`` or ``"0"``: the current state first), how long, and bookmarks."""

    rt: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    resource_version: str | None
    timeout: float
    bookmarks: bool


def watch_events(store: ObjectStore, request: WatchRequest) -> Iterator[bytes]:
    """Yield watch event lines until ``timeout``, a dropped-stream fault or the server stops.

    Argument errors raise :class:`ApiError` here, before any header is sent; a dropped
    stream raises :class:`ConnectionAbortedError` from the generator so the handler closes
    the socket without the terminating chunk.
    """
    if request.resource_version not in (None, "", "0"):
        try:
            int(str(request.resource_version))
        except ValueError:
            version = request.resource_version
            raise ApiError(400, f"invalid resourceVersion {version!r}") from None
    return _stream(store, request)


def _stream(store: ObjectStore, request: WatchRequest) -> Iterator[bytes]:
    rt, namespace, labels, fields, resource_version, timeout, bookmarks = request
    deadline = time.monotonic() + timeout
    drop_gen = store.faults.drop_generation

    def wanted(stored: Stored) -> bool:
        if namespace is not None and stored.obj["metadata"].get("namespace") != namespace:
            return False
        if not labels.empty and not labels.matches(stored.labels):
            return False
        return not (fields.requirements and not fields.matches(stored.obj))

    def line(type_: str, raw: bytes) -> bytes:
        return b'{"type":"' + type_.encode() + b'","object":' + raw + b"}\n"

    with store._lock:
        gone: ApiError | None = None
        initial: list[bytes] = []
        if resource_version in (None, "", "0"):
            # No resourceVersion: synthetic ADDED for the current state, then changes.
            initial = [
                line("ADDED", s.raw) for _, s in sorted(store._store[rt.kind].items()) if wanted(s)
            ]
            last = store._rv
        else:
            last = int(str(resource_version))
            if last < store._compacted_rv:
                gone = ApiError(
                    410,
                    f"too old resource version: {last} ({store._compacted_rv + 1})",
                    reason="Expired",
                )
        if gone is None:
            store.watches_started += 1
            token = object()
            store._watch_pos[id(token)] = last
    if gone is not None:
        yield line("ERROR", dumps(gone.status()))
        return
    try:
        yield from initial
        last_bookmark = time.monotonic()
        while True:
            batch: list[bytes] = []
            end = False
            with store._lock:
                while True:
                    if store._stopping:
                        return
                    if store.faults.drop_generation != drop_gen:
                        raise ConnectionAbortedError("watch dropped by fault injection")
                    if last < store._lost_rv:
                        gone = ApiError(410, f"too old resource version: {last}", reason="Expired")
                        batch.append(line("ERROR", dumps(gone.status())))
                        end = True
                        break
                    idx = bisect.bisect_right(store._events, last, key=lambda e: e.rv)
                    if idx < len(store._events):
                        for ev in store._events[idx:]:
                            if ev.rt is rt and wanted(ev.stored):
                                batch.append(line(ev.type, ev.stored.raw))
                        last = store._events[-1].rv
                        store._watch_pos[id(token)] = last
                        if batch:
                            break
                    now = time.monotonic()
                    if now >= deadline:
                        return
                    if bookmarks and now - last_bookmark >= store.bookmark_interval:
                        last = max(last, store._rv)
                        store._watch_pos[id(token)] = last
                        mark = {
                            "kind": rt.kind,
                            "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(last)},
                        }
                        batch.append(line("BOOKMARK", dumps(mark)))
                        last_bookmark = now
                        break
                    wait = deadline - now
                    if bookmarks:
                        wait = min(wait, store.bookmark_interval - (now - last_bookmark))
                    store._lock.wait(timeout=max(0.01, min(wait, 0.25)))
            yield b"".join(batch)  # outside the lock: a slow client blocks nobody
            if end:
                return
    finally:
        with store._lock:
            store._watch_pos.pop(id(token), None)
