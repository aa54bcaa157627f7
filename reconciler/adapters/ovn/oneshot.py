"""OvnOneShot: the NB adapter of a one-shot ``apply``: snapshot reads, ONE raw transaction.

Why it exists: :class:`~reconciler.adapters.ovn.northbound.OvnNorthbound` mirrors the tables
in ovs's pure-Python IDL, the right tool for the long-running loop (incremental reads, other
writers followed). A fresh ``osc-gitops apply`` needs none of that, and on a cold start the
mirror is most of its cost: the IDL parses the server's echo of every row the transaction
inserts (tens of thousands) into ``Row``/``Datum`` objects and keeps them all alive. So this
adapter reads like ``plan`` does (:func:`~reconciler.adapters.ovn.snapshot.read_snapshot`:
one ``select`` transaction, parsed by the stdlib's C JSON decoder) and writes the plan's
changes as one raw ``transact`` on a session of its own that holds the write lock; nothing
monitors anything, so nothing is echoed back.

The guarantees are the IDL adapter's: the instance's write lock is taken before the
transaction is built, the rows it refers to are read again under it (so a plan made before
another writer committed cannot duplicate or clobber its rows: the builder refuses), the
transaction asserts the lock (the server refuses the commit if it was lost), and a lost reply
is never guessed at: :mod:`~reconciler.adapters.ovn.commit` finds out.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

from reconciler.adapters.ovn import commit
from reconciler.adapters.ovn.commit import Outcome, outcome
from reconciler.adapters.ovn.errors import OvnApplyError, OvnConnectError, OvnLockedError
from reconciler.adapters.ovn.northbound import write_lock_name
from reconciler.adapters.ovn.rpc import Session, open_leader, rpc_error
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.snapshot import SnapshotIndex, read_on, read_snapshot
from reconciler.adapters.ovn.tables import NbSchema
from reconciler.adapters.ovn.transaction import OvnChange, TransactionBuilder
from reconciler.adapters.ovn.wire import column_types
from reconciler.core.observed import OvnState

__all__ = ["OvnOneShot"]


@contextmanager
def _gc_paused() -> Iterator[None]:
    """A snapshot reply becomes millions of small objects that cannot form cycles: pause the
    cyclic GC while they are built (as :func:`read_snapshot` does)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class OvnOneShot:
    """Reads the NB with one snapshot transaction per :meth:`read`; :meth:`apply` writes ONE
    transaction under the instance's write lock. Fits ``reconciler.engine.pipeline``'s
    ``OvnProvider``; holds no connection between calls."""

    def __init__(self, settings: OvnSettings) -> None:
        self.settings = settings
        self.last_commit: float | None = None
        """``time.perf_counter()`` right after the transaction's commit was confirmed."""
        self._raw_schema: dict[str, Any] = {}
        self._schema_types: tuple[NbSchema, dict[str, dict[str, Any]]] | None = None

    @classmethod
    def connect(cls, settings: OvnSettings) -> OvnOneShot:
        """The adapter (every call connects on its own; nothing is held until then)."""
        if not settings.remote.strip():
            raise OvnConnectError("cannot connect to OVN NB: no remote given")
        return cls(settings)

    @property
    def remote(self) -> str:
        return self.settings.remote

    def read(self) -> OvnState:
        """One snapshot of the leader. While no member can be read (a Raft cluster electing
        a leader, a server restarting) it is tried again until the timeout, as the IDL
        adapter's connect waits for a leader."""
        return _until_readable(self.settings, read_snapshot)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own connections."""

    def __enter__(self) -> OvnOneShot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------
    def apply(self, changes: Sequence[OvnChange], revision: str | None = None) -> None:
        """Apply ``changes`` in ONE transaction; on any failure nothing is committed, and when
        the reply is lost the error says what the NB shows (committed, not committed, or
        unknown because the server did not answer)."""
        if not changes:
            return
        lock = write_lock_name(self.settings.instance)
        deadline = time.monotonic() + self.settings.timeout
        session: Session | None = self._locked_session(lock, deadline, contended_fails=True)
        try:
            for attempt in (1, 2):
                assert session is not None
                with _gc_paused():
                    _state, index = self._read_on(session)
                    built = self._build(changes, index, revision, lock)
                    del index
                    request = self._send(session, built.params())
                    built.sent()
                try:
                    reply = commit.await_reply(
                        _poller(session, request), _never, session.member, self.settings
                    )
                except (commit.ServerLost, commit.ServerSilent) as exc:
                    silent = isinstance(exc, commit.ServerSilent)
                    why = commit.silence(self.settings) if silent else commit.LOST
                    commit.close_quietly(session)
                    session, verdict = self._find_out(changes, lock)
                    if verdict is Outcome.COMMITTED:
                        self.last_commit = time.perf_counter()
                        return
                    if verdict is Outcome.NOT_COMMITTED and attempt == 1:
                        continue
                    raise commit.verdict_error(self.remote, verdict, why, self.settings) from None
                commit.check_reply(reply, built, self.remote, lock)
                self.last_commit = time.perf_counter()
                return
        finally:
            commit.close_quietly(session)

    def _send(self, session: Session, params: list[Any]) -> int:
        """Send the transaction. A server that does not take all of it within the timeout
        never got a complete request, so it cannot execute it: that is "not committed"."""
        session.deadline = time.monotonic() + self.settings.timeout
        try:
            return session.send("transact", params)
        except OSError as exc:
            commit.close_quietly(session)
            raise OvnApplyError(
                f"OVN NB transaction at {self.remote}: the server did not take the whole "
                f"transaction within --ovn-timeout {self.settings.timeout:g}s "
                f"({exc.strerror or exc}); not committed (a request the server did not fully "
                "receive is never executed); the next run applies it"
            ) from None

    def _build(
        self, changes: Sequence[OvnChange], index: SnapshotIndex, revision: str | None, lock: str
    ) -> Any:
        assert self._schema_types is not None
        schema, types = self._schema_types
        return TransactionBuilder(
            types=types,
            schema=schema,
            index=index,
            instance=self.settings.instance,
            remote=self.remote,
            revision=revision,
            lock=lock,
        ).build(changes)

    def _read_on(self, session: Session) -> tuple[OvnState, SnapshotIndex]:
        session.deadline = time.monotonic() + self.settings.timeout
        try:
            state, index = read_on(session, self._raw_schema, self.settings)
            assert index is not None
            return state, index
        except TimeoutError:
            raise OvnConnectError(
                f"cannot read OVN NB at {self.remote} ({session.member}): no answer before the "
                f"timeout ({self.settings.timeout}s)"
            ) from None
        except OSError as exc:
            raise OvnConnectError(
                f"cannot read OVN NB at {self.remote} ({session.member}): {exc.strerror or exc}"
            ) from None

    def _locked_session(self, lock: str, deadline: float, *, contended_fails: bool) -> Session:
        """A session to the leader holding ``lock``.

        ``contended_fails``: another holder is an error at once (the apply refuses to
        interleave with another osc-gitops of this instance); otherwise the grant is waited
        for until ``deadline`` (finding out after a lost reply: our own old session may still
        hold the lock until the server drops it)."""
        session, raw_schema = _until_readable(self.settings, open_leader, deadline)
        self._raw_schema = raw_schema
        if self._schema_types is None:
            self._schema_types = (NbSchema(raw_schema), column_types(raw_schema))
        try:
            session.deadline = max(deadline, time.monotonic() + 0.1)
            reply = session.reply(session.send("lock", [lock]))
            error = rpc_error(reply)
            if error is not None:
                raise OvnLockedError(
                    f"cannot apply to OVN NB at {self.remote}: the server refused the write "
                    f"lock {lock!r} ({error}); nothing was written"
                )
            if (reply.get("result") or {}).get("locked"):
                return session
            if contended_fails:
                raise OvnLockedError(
                    f"cannot apply to OVN NB at {self.remote}: another osc-gitops process holds "
                    f"the write lock {lock!r} (same --instance {self.settings.instance!r}); "
                    "refusing to apply so the two do not interleave. Nothing was written; "
                    "retry when it has finished, or give each reconciler its own --instance"
                )
            while not session.locks.get(lock):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the write lock was not granted")
                session.wait_notification(min(left, 0.5))
            return session
        except BaseException:
            commit.close_quietly(session)
            raise

    def _find_out(self, changes: Sequence[OvnChange], lock: str) -> tuple[Session | None, Any]:
        """After a lost reply: a new locked session and what the NB shows of the transaction
        (:class:`Outcome`), or ``(None, None)`` when the server does not let us find out
        within the timeout."""
        deadline = time.monotonic() + self.settings.timeout
        while time.monotonic() < deadline:
            session: Session | None = None
            try:
                session = self._locked_session(lock, deadline, contended_fails=False)
                with _gc_paused():
                    state, _index = self._read_on(session)
                return session, outcome(changes, state.owned)
            except (OSError, OvnConnectError, OvnLockedError):
                commit.close_quietly(session)
                time.sleep(0.1)
        return None, None


T = TypeVar("T")


def _until_readable(
    settings: OvnSettings, call: Callable[[OvnSettings], T], deadline: float | None = None
) -> T:
    """``call(settings)``, again while the only reason it finds no readable member is a Raft
    cluster without a connected leader (an election), until ``deadline`` (default: the
    timeout from now); each try is bounded by what is left. Anything else (unreachable,
    TLS) fails at once, as the IDL adapter's connect does."""
    until = time.monotonic() + settings.timeout if deadline is None else deadline
    while True:
        left = until - time.monotonic()
        try:
            return call(replace(settings, timeout=max(0.1, left)))
        except OvnConnectError as exc:
            if not exc.electing or left <= 0.5:
                raise
            time.sleep(0.25)


def _never() -> bool:
    return False


def _poller(session: Session, request: int) -> Any:
    """``poll(seconds)`` for :func:`commit.await_reply` on ``session``: a dropped connection
    is :class:`commit.ServerLost`."""

    def poll(seconds: float) -> Any:
        try:
            return session.wait_reply(request, seconds)
        except (OSError, ValueError):
            raise commit.ServerLost() from None

    return poll
