"""Waiting for a transaction's reply, and what to say when it never comes.

Why it looks like this: a fixed client-side timeout cannot tell a server that is busy with our
transaction (committing tens of thousands of rows takes the single-threaded ovsdb-server
seconds) from one that is gone, and giving up does not cancel anything: the server commits a
transaction it has received whether or not anyone still waits for the reply. So:

- the reply is waited for as long as the server is alive (:func:`await_reply`): every few
  seconds an ``echo`` goes to the same server on a connection of its own
  (:class:`EchoProbe`); the wait ends only when the transaction's connection drops
  (:class:`ServerLost`) or no probe has been answered for ``--ovn-timeout`` seconds
  (:class:`ServerSilent`). A busy server answers the probe as soon as it has committed.
- when the reply is lost, the writer (:mod:`~reconciler.adapters.ovn.writer`) *finds out*
  before it says anything: it reconnects, takes the write lock again (granted only once the
  server has dropped the old session, and a server executes every request it fully received
  before it notices the drop: so from then on the old transaction can no longer commit), reads
  our rows, and compares them with the changes (:func:`outcome`). Committed: the apply
  succeeded. Not committed: it is sent once more. No answer within ``--ovn-timeout``: it says
  exactly that it does not know (:func:`unknown`).
"""

from __future__ import annotations

import contextlib
import ssl
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any, Protocol

from reconciler.adapters.ovn.errors import OvnApplyError, OvnLockedError
from reconciler.adapters.ovn.rpc import Session, rpc_error, ssl_context
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.tables import NB_TABLES
from reconciler.adapters.ovn.transaction import BuiltTransaction, OvnChange
from reconciler.core.model import ownership

__all__ = [
    "LOST",
    "EchoProbe",
    "Outcome",
    "Probe",
    "ServerLost",
    "ServerSilent",
    "await_reply",
    "check_reply",
    "close_quietly",
    "lost_lock",
    "lost_twice",
    "mixed",
    "outcome",
    "probe_interval",
    "silence",
    "unknown",
    "verdict_error",
]


class ServerLost(Exception):
    """The transaction's connection dropped before its reply arrived."""


class ServerSilent(Exception):
    """The server answered no liveness probe for the whole budget while it had the
    transaction (stopped, hung, or unreachable)."""


def probe_interval(budget: float) -> float:
    """Seconds between liveness probes: a few per budget, at most 2 s apart."""
    return max(0.2, min(2.0, budget / 5))


class EchoProbe:
    """JSON-RPC ``echo`` requests to one server member on a connection of their own.

    :meth:`heard` sends an echo when none is outstanding and waits a little for its reply; an
    echo the server has not answered yet stays outstanding (a busy server answers it when it
    is done), so a slow server is never flooded.
    """

    def __init__(self, member: str, settings: OvnSettings) -> None:
        self.member = member
        self.settings = settings
        self.session: Session | None = None
        self.outstanding: int | None = None

    def heard(self, wait: float) -> bool:
        """True when the server answered an echo within ``wait`` seconds."""
        try:
            if self.session is None:
                tls = ssl_context(self.settings) if self.member.startswith("ssl:") else None
                self.session = Session.open(self.member, tls, time.monotonic() + wait)
            if self.outstanding is None:
                self.session.deadline = time.monotonic() + wait
                self.outstanding = self.session.send("echo", ["osc-gitops"])
            reply = self.session.wait_reply(self.outstanding, wait)
        except (OSError, ValueError, ssl.SSLError):
            # Refused, reset, garbled: the server is gone or restarting. Not an answer; the
            # next probe reconnects.
            self.close()
            time.sleep(min(wait, 0.1))
            return False
        if reply is None:
            return False
        self.outstanding = None
        return True

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        self.session = None
        self.outstanding = None


class Probe(Protocol):
    """A liveness probe of the server that has the transaction (:class:`EchoProbe`)."""

    def heard(self, wait: float) -> bool:
        """True when the server answered within ``wait`` seconds."""
        ...

    def close(self) -> None: ...


def await_reply(
    poll: Callable[[float], Mapping[str, Any] | None],
    lost: Callable[[], bool],
    probe_server: Callable[[], Probe],
    settings: OvnSettings,
) -> Mapping[str, Any]:
    """The reply, waited for as long as the server answers liveness probes.

    ``poll(seconds)`` returns the reply if it arrives within ``seconds`` (``None`` otherwise)
    and may raise :class:`ServerLost` when the connection drops; ``lost()`` tells the same
    without waiting. ``probe_server()`` makes the probe (only once the reply is slow).
    Raises :class:`ServerSilent` when no probe was answered for ``settings.timeout`` seconds.
    """
    interval = probe_interval(settings.timeout)
    probe: Probe | None = None
    last_heard = time.monotonic()
    try:
        while True:
            reply = poll(interval)
            if reply is not None:
                return reply
            if lost():
                raise ServerLost()
            if probe is None:
                probe = probe_server()
            if probe.heard(interval):
                last_heard = time.monotonic()
            elif time.monotonic() - last_heard > settings.timeout:
                if lost():
                    raise ServerLost()
                raise ServerSilent()
    finally:
        if probe is not None:
            probe.close()


def lost_lock(remote: str, lock: str) -> OvnLockedError:
    return OvnLockedError(
        f"OVN NB transaction at {remote} was refused: the write lock {lock!r} was lost "
        "(connection reset or stolen) before the commit; nothing was committed"
    )


def check_reply(reply: Mapping[str, Any], built: BuiltTransaction, remote: str, lock: str) -> None:
    """Raise the error a ``transact`` reply reports, if any (nothing was committed then: the
    server commits all operations or none)."""
    error = rpc_error(reply)
    results = reply.get("result")
    if error is None and not isinstance(results, list):
        error = "malformed reply"
    if error is not None:
        raise OvnApplyError(
            f"OVN NB transaction at {remote} failed, nothing was committed: {error}"
        )
    assert isinstance(results, list)
    for index, result in enumerate(results):
        if not isinstance(result, dict) or result.get("error") is None:
            continue
        if index == 0:
            raise lost_lock(remote, lock)
        meaning = built.failures.get(index)
        if meaning is not None:
            raise OvnApplyError(f"cannot apply to OVN NB at {remote}: {meaning}")
        where = ""
        if index < len(built.operations):
            op = built.operations[index]
            where = f" (operation {index}: {' '.join(str(op.get(k, '')) for k in ('op', 'table'))})"
        raise OvnApplyError(
            f"OVN NB transaction at {remote} failed, nothing was committed: "
            f"{rpc_error(result)}{where}"
        )


def unknown(remote: str, why: str, settings: OvnSettings) -> OvnApplyError:
    """The apply could not find out whether its transaction committed."""
    return OvnApplyError(
        f"OVN NB transaction at {remote}: {why}; whether it committed is unknown: the server "
        f"did not answer within --ovn-timeout {settings.timeout:g}s; the next run converges"
    )


def lost_twice(remote: str) -> OvnApplyError:
    return OvnApplyError(
        f"OVN NB transaction at {remote}: the connection was lost before the reply, twice; not "
        "committed (the NB holds none of its changes); the next run applies them"
    )


def mixed(remote: str) -> OvnApplyError:
    return OvnApplyError(
        f"OVN NB transaction at {remote}: the connection was lost before the reply, and now "
        "some of its changes are in the NB and some are not (another writer changed these "
        "rows since); whether it committed is unknown; the next run converges"
    )


def verdict_error(remote: str, verdict: Outcome | None, why: str, settings: OvnSettings) -> Any:
    """The error for a lost reply whose transaction is not known to have committed."""
    if verdict is None:
        return unknown(remote, why, settings)
    if verdict is Outcome.MIXED:
        return mixed(remote)
    return lost_twice(remote)


def silence(settings: OvnSettings) -> str:
    return (
        f"the server stopped answering (no reply to a liveness probe for "
        f"{settings.timeout:g}s) while it had the transaction"
    )


LOST = "the connection was lost before the server answered"


def close_quietly(session: Session | None) -> None:
    if session is not None:
        with contextlib.suppress(OSError):
            session.close()


# -- finding out whether a transaction committed ----------------------------------------------


class Outcome(Enum):
    """What the NB shows of a transaction whose reply never came."""

    COMMITTED = "committed"
    NOT_COMMITTED = "not committed"
    MIXED = "mixed"
    """Some changes are there and some are not: another writer changed those rows since."""


def _map_state(live: Any, before: Any, after: Any, ignore: frozenset[str]) -> bool | None:
    """True when ``live`` has the keys ``after`` sets (and none it removes from ``before``),
    False when it still has ``before``'s, None when neither."""
    live, before, after = dict(live or {}), dict(before or {}), dict(after or {})
    keys = (set(before) | set(after)) - ignore
    now = {k: live.get(k) for k in keys}
    if now == {k: after.get(k) for k in keys}:
        return True
    if now == {k: before.get(k) for k in keys}:
        return False
    return None


_IGNORED_KEYS = frozenset({ownership.REVISION, ownership.OWNER})


def _applied(change: OvnChange, live: Mapping[str, Any] | None) -> bool | None:
    """Whether the live row shows ``change`` (True), shows the state before it (False), or
    neither (None); a change with nothing to tell by says None too."""
    if change.action == "create" and NB_TABLES[change.kind].naming != "singleton":
        return live is not None
    if change.action == "delete":
        return live is None
    if live is None:
        return False if change.action == "create" else None
    before, after = dict(change.before or {}), dict(change.after or {})
    verdicts: list[bool | None] = []
    for col in sorted(set(before) | set(after)):
        if col not in after or before.get(col) == after[col]:
            continue
        if col in NB_TABLES[change.kind].maps:
            verdicts.append(_map_state(live.get(col), before.get(col), after[col], _IGNORED_KEYS))
        else:
            now = live.get(col)
            verdicts.append(
                True if now == after[col] else False if now == before.get(col) else None
            )
    if any(v is None for v in verdicts):
        return None
    if verdicts and all(verdicts):
        return True
    if verdicts and not any(verdicts):
        return False
    return None


def outcome(changes: Sequence[OvnChange], owned: Iterable[Any]) -> Outcome:
    """Did the transaction made of ``changes`` commit, judged by our rows now (``owned``:
    ``OvnRow``-like objects with ``table``, ``key``, ``fields``)?

    A transaction is atomic, so its changes are either all there or none is: all there is
    COMMITTED, none NOT_COMMITTED; anything else (or nothing to tell by) means another writer
    changed the same rows since, and the answer is MIXED.
    """
    live = {(r.table, r.key): r.fields for r in owned}
    seen: set[bool] = set()
    for change in changes:
        verdict = _applied(change, live.get((change.kind, change.key)))
        if verdict is None:
            return Outcome.MIXED
        seen.add(verdict)
    if seen == {True}:
        return Outcome.COMMITTED
    if seen == {False}:
        return Outcome.NOT_COMMITTED
    return Outcome.MIXED
