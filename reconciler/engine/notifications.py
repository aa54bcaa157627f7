"""The security managers' outbox: notifications sent beside the reconcile, never in its way.

A pass hands the outbox what the managers should know and goes on: :meth:`Outbox.send` queues
a ``deployed``/``removed`` event, :meth:`Outbox.members` replaces what every manager should hold
(``reconciler.core.compiling.notices``). Both only take a lock: a manager that is down, slow or
answers 500 costs the reconcile nothing. One thread per manager URL (so a slow one delays no
other) delivers, in order:

1. queued events, oldest first (a deployed VM before the members of its node);
2. member lists that differ from what the manager was last told, once ``debounce`` seconds
   passed without a newer change for that manager (at most ``debounce_max`` after the first):
   a label flapping, a rollout moving pods, a burst of new pods, all end in one message per
   (binding, VNF, node) with the state at the end. A list above ``max_members`` is split into
   parts of one sequence, never cut.

A delivery that fails (connection refused, timeout, 5xx, any error) is retried with the same
message (same ``sequence``: idempotent) after a backoff that doubles from ``backoff`` up to
``backoff_max``; meanwhile newer member lists replace the one waiting (the retry then sends the
newest state under a new sequence). An answer the manager refuses (4xx but 408 and 429: the
message will never be accepted) is dropped and counted, not retried. Every attempt is reported
(:class:`NotificationReporter`: ``osc_gitops_security_manager_*`` metrics) and the state of each
manager is in :meth:`Outbox.status` (``osc-gitops status``).

``sequence``: one counter per outbox, taken from the wall clock in microseconds and kept
strictly increasing, so a restarted sender continues above what it sent before (see
``reconciler.core.model.notices``). What was delivered lives in memory only: a new process
tells every manager everything once (``members`` of every (binding, VNF, node), empty lists
included), which a receiver that drops what it already holds (``digest``) absorbs.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from reconciler.core.compiling.notices import (
    MemberKey,
    MemberNotice,
    members_payloads,
)
from reconciler.engine.providers import Notifier
from reconciler.engine.reporting.logs import LOGGER

log = logging.getLogger(LOGGER)

__all__ = [
    "NotificationReporter",
    "NotifySettings",
    "Outbox",
    "load_told",
    "manager_label",
    "save_told",
]

DELIVERED, FAILED, REJECTED = "delivered", "failed", "rejected"


@dataclass(frozen=True)
class NotifySettings:
    """How the outbox delivers (``--notify-timeout``, ``--notify-max-members``)."""

    timeout: float = 5.0
    """Seconds one POST may take (the adapter's timeout; ``apply`` waits at most twice as long
    for every manager before it exits)."""
    max_members: int = 1000
    """Members per message: a longer list is split into parts."""
    debounce: float = 0.1
    debounce_max: float = 1.0
    backoff: float = 0.5
    backoff_max: float = 60.0


@runtime_checkable
class NotificationReporter(Protocol):
    """Where the outbox reports each attempt and each manager's backlog (Prometheus)."""

    def notification_sent(self, manager: str, event: str, result: str) -> None:
        """One POST to ``manager`` (:func:`manager_label`) ended ``delivered``, ``failed`` or
        ``rejected``."""
        ...

    def notification_backlog(self, manager: str, pending: int, up: bool | None) -> None:
        """``manager`` has ``pending`` messages to deliver; ``up``: its last attempt succeeded
        (``None``: never tried)."""
        ...


def manager_label(url: str) -> str:
    """A manager's URL without credentials, query or fragment (for metrics, logs, status)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


@dataclass
class _Item:
    """One message on its way: an event, or a part of a member list."""

    payload: dict[str, Any]
    key: MemberKey | None = None
    digest: str = ""


@dataclass
class _KeyState:
    want: MemberNotice
    told: str | None = None
    """The digest the manager holds (what was last delivered or refused), ``None``: nothing."""
    parts: list[dict[str, Any]] = field(default_factory=list)
    """The message(s) of the list being delivered (one sequence), and ``sent`` of them done."""
    sent: int = 0
    digest: str = ""
    """``want``'s digest when its delivery started."""
    vanished: bool = False
    """The key is gone from the manifests: told once with no members, then forgotten."""


class _Manager:
    """One manager URL: its queue, its member lists, its thread. Every operation on it is
    O(1) in the number of member lists (a dirty set, not a scan): 200 bindings on 100 nodes
    are 20,000 lists, and a pod event changes one or two."""

    def __init__(self, outbox: Outbox, url: str) -> None:
        self.outbox = outbox
        self.url = url
        self.label = manager_label(url)
        self.events: deque[_Item] = deque()
        self.keys: dict[MemberKey, _KeyState] = {}
        self.dirty: dict[MemberKey, None] = {}
        """Keys whose list the manager may not hold, in the order they changed (a set)."""
        self.current: MemberKey | None = None
        """The key whose parts are being delivered."""
        self.first_change: float | None = None
        self.last_change = 0.0
        self.retry_at = 0.0
        self.backoff = outbox.settings.backoff
        self.busy = False
        self.up: bool | None = None
        self.failing_since: float | None = None
        self.last_error = ""
        self.last_delivered: float | None = None
        self.counts = {DELIVERED: 0, FAILED: 0, REJECTED: 0}
        self.failed_at: float | None = None
        """When the last attempt failed (the outbox's clock)."""
        self.thread = threading.Thread(
            target=self._supervised, name=f"notify-{self.label}", daemon=True
        )

    # -- under the outbox's lock ---------------------------------------------------------
    def pending(self) -> int:
        extra = 0
        if self.current is not None and (state := self.keys.get(self.current)) is not None:
            extra = max(0, len(state.parts) - state.sent - 1)
        return len(self.events) + len(self.dirty) + extra

    def mark(self, key: MemberKey, now: float) -> None:
        """``key``'s wanted list changed (or is new, or vanished)."""
        self.dirty[key] = None
        self.last_change = now
        if self.first_change is None:
            self.first_change = now

    def _due_key(self, now: float) -> tuple[_KeyState | None, float | None]:
        """The member list to deliver next, or how long until one is due."""
        if self.current is not None:  # finish the list under way first
            return self.keys[self.current], None
        if not self.dirty:
            self.first_change = None
            return None, None
        settings = self.outbox.settings
        if not self.outbox.flushing:
            due = self.last_change + settings.debounce
            if self.first_change is not None:
                due = min(due, self.first_change + settings.debounce_max)
            if now < due:
                return None, due - now
        while self.dirty:
            key = next(iter(self.dirty))
            state = self.keys.get(key)
            if state is None:
                del self.dirty[key]
                continue
            digest = state.want.digest
            if digest == state.told:  # changed and changed back: the manager holds it
                self._settle(key, state)
                continue
            self.current = key
            state.digest, state.sent = digest, 0
            state.parts = members_payloads(
                state.want, self.outbox.next_sequence(), self.outbox.settings.max_members
            )
            return state, None
        self.first_change = None
        return None, None

    def _settle(self, key: MemberKey, state: _KeyState) -> None:
        """The manager holds ``key``'s list: not dirty; a vanished key is forgotten."""
        self.dirty.pop(key, None)
        if self.current == key:
            self.current = None
        state.parts, state.sent = [], 0
        if state.vanished:
            del self.keys[key]

    def supersede(self, key: MemberKey, state: _KeyState) -> None:
        """A newer list replaces the one whose parts are under way: a new sequence later."""
        if self.current == key:
            self.current = None
        state.parts, state.sent = [], 0

    def next_item(self, now: float) -> tuple[_Item | None, float | None]:
        if now < self.retry_at:
            return None, self.retry_at - now
        if self.events:
            return self.events[0], None
        state, wait = self._due_key(now)
        if state is None:
            return None, wait
        return _Item(state.parts[state.sent], state.want.key, state.digest), None

    def done(self, item: _Item, result: str, error: str, now: float, wall: float) -> None:
        self.counts[result] += 1
        if result == FAILED:
            self.up = False
            self.failed_at = now
            self.failing_since = self.failing_since or wall
            self.last_error = error
            self.retry_at = now + self.backoff
            self.backoff = min(self.backoff * 2, self.outbox.settings.backoff_max)
            return
        self.backoff = self.outbox.settings.backoff
        self.retry_at = 0.0
        if result == DELIVERED:
            self.up, self.failing_since = True, None
            self.last_delivered = wall
        else:
            self.up = True  # it answered: reachable, but it refused this message
            self.last_error = error
        if item.key is None:
            self.events.popleft()
            return
        state = self.keys.get(item.key)
        if state is None or self.current != item.key or state.digest != item.digest:
            return  # superseded meanwhile: the newer list goes under a new sequence
        state.sent += 1
        if result == REJECTED or state.sent >= len(state.parts):
            state.told = state.digest
            if state.want.digest == state.told:
                self._settle(item.key, state)
            else:  # changed while its parts went out: deliver the newer list
                self.current = None
                state.parts, state.sent = [], 0

    # -- the thread ----------------------------------------------------------------------
    def _supervised(self) -> None:
        """:meth:`_run`, whose end before the outbox closes is a death (a bug of ours: every
        delivery error is caught): told to :attr:`Outbox.on_thread` (the loop's ``/healthz``
        and ``osc_gitops_worker_up``), else logged."""
        name = self.thread.name
        self.outbox.thread_event(name, True, None)
        try:
            self._run()
        except BaseException as exc:
            self.outbox.thread_event(name, False, exc)
            return
        if not self.outbox.closed:
            self.outbox.thread_event(name, False, None)

    def _run(self) -> None:
        outbox = self.outbox
        while True:
            with outbox.cond:
                while True:
                    if outbox.closed:
                        return
                    item, wait = self.next_item(outbox.clock())
                    if item is not None:
                        break
                    outbox.cond.wait(wait)
                self.busy = True
            result, error = DELIVERED, ""
            try:
                outbox.post(self.url, item.payload)
            except Exception as exc:  # any failure of the transport is the manager's state
                error = str(exc) or type(exc).__name__
                result = FAILED if getattr(exc, "retryable", True) else REJECTED
            with outbox.cond:
                self.busy = False
                self.done(item, result, error, outbox.clock(), outbox.wall())
                pending, up = self.pending(), self.up
                outbox.cond.notify_all()
            outbox.report(self.label, str(item.payload.get("event")), result, pending, up)
            if result != DELIVERED:
                log.warning(
                    "security manager notification not delivered",
                    extra={"manager": self.label, "event": item.payload.get("event"),
                           "result": result, "error": error},
                )  # fmt: skip

    def status(self, now: float) -> dict[str, Any]:
        return {
            "manager": self.label,
            "pending": self.pending(),
            "up": self.up,
            "delivered": self.counts[DELIVERED],
            "failed": self.counts[FAILED],
            "rejected": self.counts[REJECTED],
            "failing_since": _iso(self.failing_since),
            "last_error": self.last_error,
            "last_delivered_at": _iso(self.last_delivered),
            "retry_in": round(self.retry_at - now, 3) if self.retry_at > now else None,
        }


class Outbox:
    """Notifications to the security managers, delivered beside the reconcile (see the module
    docstring). ``post(url, payload)`` is the transport (``reconciler.adapters.notify``); it
    raises on failure, with ``retryable = False`` on the exception when the manager refused."""

    def __init__(
        self,
        post: Notifier,
        settings: NotifySettings | None = None,
        *,
        reporter: NotificationReporter | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.post = post
        self.settings = settings or NotifySettings()
        self.reporter = reporter
        self.clock = clock
        self.wall = wall
        self.cond = threading.Condition()
        self.closed = False
        self.flushing = False
        self._managers: dict[str, _Manager] = {}
        self._sequence = 0
        self.on_thread: Callable[[str, bool, BaseException | None], None] | None = None
        """Told ``(thread name, True, None)`` when a manager's thread starts and ``(name, False,
        why)`` when it ends before :meth:`close` (the loop: a dead worker, ``/healthz`` fails);
        without it such a death is logged."""
        self._seed: dict[MemberKey, tuple[str, str]] = {}

    # -- what a pass hands over (never blocks) -------------------------------------------
    def next_sequence(self) -> int:
        """Strictly increasing, from the wall clock in microseconds (under the lock)."""
        self._sequence = max(self._sequence + 1, int(self.wall() * 1_000_000))
        return self._sequence

    def _manager(self, url: str) -> _Manager:
        manager = self._managers.get(url)
        if manager is None:
            manager = self._managers[url] = _Manager(self, url)
            manager.thread.start()
        return manager

    def send(self, url: str, payload: dict[str, Any]) -> None:
        """Queue an event (``deployed``, ``removed``) for ``url``; it gets its ``sequence`` now.
        A :data:`reconciler.engine.providers.Notifier`: what ``apply_plan`` calls."""
        with self.cond:
            if self.closed:
                return
            self._manager(url).events.append(_Item({**payload, "sequence": self.next_sequence()}))
            self.cond.notify_all()
        self._report_backlog(url)

    def members(self, notices: Mapping[MemberKey, MemberNotice]) -> None:
        """What every manager should hold now: every key this sender is responsible for. A key
        known before and missing now is told once with no members, then forgotten."""
        with self.cond:
            if self.closed or (not notices and not self._managers and not self._seed):
                return
            now = self.clock()
            touched: set[str] = set()
            seed, self._seed = self._seed, {}
            for key, (group, digest) in seed.items():
                if key not in notices:  # told before, gone since: to be emptied below
                    url, binding, vnf, node = key
                    self._manager(url).keys[key] = _KeyState(
                        MemberNotice(url, binding, group, vnf, node), told=digest
                    )
            for key, notice in notices.items():
                manager = self._manager(notice.url)
                state = manager.keys.get(key)
                if state is None:
                    told = seed[key][1] if key in seed else None
                    manager.keys[key] = _KeyState(notice, told=told)
                    if told is not None and told == notice.digest:
                        continue
                elif state.want == notice and not state.vanished:
                    continue
                else:
                    state.want, state.vanished = notice, False
                    if state.parts:
                        manager.supersede(key, state)
                manager.mark(key, now)
                touched.add(notice.url)
            for manager in self._managers.values():
                if len(manager.keys) == sum(1 for k in manager.keys if k in notices):
                    continue
                for key, state in list(manager.keys.items()):
                    if key in notices or state.vanished:
                        continue
                    state.want, state.vanished = state.want.emptied(), True
                    if state.parts:
                        manager.supersede(key, state)
                    manager.mark(key, now)
                    touched.add(manager.url)
            if touched:
                self.cond.notify_all()
        for url in touched:
            self._report_backlog(url)

    # -- waiting, state ------------------------------------------------------------------
    def idle(self) -> bool:
        """Nothing left to deliver (under the lock)."""
        return all(m.pending() == 0 and not m.busy for m in self._managers.values())

    def flush(self, timeout: float, *, retry: bool = True) -> bool:
        """Deliver everything now (no debounce) and wait until done or ``timeout`` seconds
        passed; whether all was delivered. ``retry=False`` (a one-shot ``apply``, ``run
        --once``): stop waiting for a manager once an attempt to it failed (one round: the
        next run tells it again), so an unreachable manager costs one failed attempt."""
        started = self.clock()
        deadline = started + timeout

        def settled(m: _Manager) -> bool:
            if m.busy:
                return False
            return m.pending() == 0 or (
                not retry and m.failed_at is not None and m.failed_at >= started
            )

        with self.cond:
            self.flushing = True
            self.cond.notify_all()
            try:
                while not all(settled(m) for m in self._managers.values()):
                    left = deadline - self.clock()
                    if left <= 0:
                        break
                    self.cond.wait(min(left, 0.05))
                return self.idle()
            finally:
                self.flushing = False

    # -- what a one-shot run remembers between runs ---------------------------------------
    def told(self) -> list[list[str]]:
        """``[url, binding, vnf, node, group, digest]`` of every member list the managers
        hold as far as this outbox knows (delivered, or refused by them): what a next one-shot
        run need not send again (:meth:`remember`)."""
        with self.cond:
            return sorted(
                [*key, state.want.group, state.told]
                for manager in self._managers.values()
                for key, state in manager.keys.items()
                if state.told is not None and not state.vanished and key not in manager.dirty
            )  # fmt: skip

    def remember(self, entries: list[list[str]]) -> None:
        """Start from what an earlier run told the managers (:meth:`told`, read back): the
        first :meth:`members` sends only what differs, and empties what is gone."""
        with self.cond:
            self._seed = {
                (e[0], e[1], e[2], e[3]): (e[4], e[5])
                for e in entries if isinstance(e, list) and len(e) == 6
            }  # fmt: skip

    def status(self) -> list[dict[str, Any]]:
        """Each manager: ``manager`` (its URL without credentials), ``pending``, ``up`` (the
        last attempt succeeded; ``None``: none yet), counts ``delivered``/``failed``/
        ``rejected``, ``failing_since``, ``last_error``, ``last_delivered_at`` (UTC ISO 8601),
        ``retry_in`` (seconds until the next attempt while backing off)."""
        with self.cond:
            now = self.clock()
            return [m.status(now) for _, m in sorted(self._managers.items())]

    def close(self) -> None:
        """Stop every thread (what is not delivered is dropped: a new process tells it)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
            threads = [m.thread for m in self._managers.values()]
        for thread in threads:
            thread.join(timeout=self.settings.timeout + 1)

    # -- reporting -----------------------------------------------------------------------
    def thread_event(self, name: str, alive: bool, exc: BaseException | None) -> None:
        """A manager's thread started (``alive``) or died (see :attr:`on_thread`)."""
        if self.on_thread is not None:
            self.on_thread(name, alive, exc)
        elif not alive:
            reason = repr(exc) if exc is not None else "returned"
            log.error("security manager thread died; its notifications stop",
                      extra={"worker": name, "reason": reason})  # fmt: skip

    def report(self, label: str, event: str, result: str, pending: int, up: bool | None) -> None:
        if self.reporter is not None:
            self.reporter.notification_sent(label, event, result)
            self.reporter.notification_backlog(label, pending, up)

    def _report_backlog(self, url: str) -> None:
        if self.reporter is None:
            return
        with self.cond:
            manager = self._managers.get(url)
            if manager is None:
                return
            label, pending, up = manager.label, manager.pending(), manager.up
        self.reporter.notification_backlog(label, pending, up)


def load_told(path: Path) -> list[list[str]]:
    """What an earlier one-shot run told the managers (:meth:`Outbox.told`), or nothing when
    the file is missing or unreadable (then everything is told again: idempotent)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    told = data.get("told") if isinstance(data, dict) else None
    return [e for e in told if isinstance(e, list)] if isinstance(told, list) else []


def save_told(path: Path, entries: list[list[str]]) -> None:
    """Write :meth:`Outbox.told` atomically; a failure is the caller's to warn about."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".told-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"version": 1, "told": entries}, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
