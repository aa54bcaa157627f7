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

The guarantees are the IDL adapter's, because the algorithm is the same one
(:func:`~reconciler.adapters.ovn.writer.write`, on the :class:`RawChannel` here): the
instance's write lock is taken before the transaction is built, the rows it refers to are read
again under it (so a plan made before another writer committed cannot duplicate or clobber its
rows: the builder refuses), the transaction asserts the lock (the server refuses the commit if
it was lost), and a lost reply is never guessed at.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from reconciler.adapters.ovn import commit
from reconciler.adapters.ovn.errors import OvnConnectError, connect_error
from reconciler.adapters.ovn.python_ovs import column_types
from reconciler.adapters.ovn.rpc import Session, open_leader, rpc_error, until_readable
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.snapshot import SnapshotIndex, read_on, read_snapshot
from reconciler.adapters.ovn.tables import NbSchema
from reconciler.adapters.ovn.transaction import OvnChange
from reconciler.adapters.ovn.writer import LockRefused, NotSent, write
from reconciler.core.model.observed import OvnRow, OvnState

__all__ = ["OvnOneShot", "RawChannel"]


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
    transaction under the instance's write lock. Fits ``reconciler.engine.providers``'
    ``OvnProvider``; holds no connection between calls."""

    def __init__(self, settings: OvnSettings) -> None:
        self.settings = settings
        self.last_commit: float | None = None
        """``time.perf_counter()`` right after the transaction's commit was confirmed."""

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
        return until_readable(self.settings, read_snapshot)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own connections."""

    def __enter__(self) -> OvnOneShot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def apply(self, changes: Sequence[OvnChange], revision: str | None = None) -> None:
        """Apply ``changes`` in ONE transaction (:func:`~reconciler.adapters.ovn.writer.write`
        on a session of its own); on any failure nothing is committed, and when the reply is
        lost the error says what the NB shows."""
        if not changes:
            return
        write(RawChannel(self.settings), changes, self.settings, revision)
        self.last_commit = time.perf_counter()


class RawChannel:
    """The :class:`~reconciler.adapters.ovn.writer.Channel` of a one-shot apply: a JSON-RPC
    session of its own to the leader (a new one after a lost reply), rows read with the
    snapshot's ``select`` transaction on it."""

    def __init__(self, settings: OvnSettings) -> None:
        self.settings = settings
        self.session: Session | None = None
        self._raw_schema: dict[str, Any] = {}
        self._schema: NbSchema | None = None
        self._types: dict[str, dict[str, Any]] = {}

    def probe(self) -> commit.EchoProbe:
        assert self.session is not None
        return commit.EchoProbe(self.session.member, self.settings)

    @property
    def schema(self) -> NbSchema:
        assert self._schema is not None
        return self._schema

    @property
    def types(self) -> Mapping[str, Mapping[str, Any]]:
        return self._types

    def lock(self, name: str, deadline: float) -> bool:
        session = self._open(deadline)
        session.deadline = max(deadline, time.monotonic() + 0.1)
        try:
            reply = session.reply(session.send("lock", [name]))
        except TimeoutError:
            raise
        except (OSError, ValueError) as exc:  # the server went away (or garbled) meanwhile
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise connect_error(self.settings.remote, [f"{session.member}: {detail}"]) from None
        error = rpc_error(reply)
        if error is not None:
            raise LockRefused(error)
        return bool((reply.get("result") or {}).get("locked"))

    @contextmanager
    def rows(self) -> Iterator[SnapshotIndex]:
        session = self.session
        assert session is not None
        session.deadline = time.monotonic() + self.settings.timeout
        with _gc_paused():
            yield self._read_on(session)[1]

    def send(self, params: list[Any]) -> _Reply:
        """Send the transaction. A server that does not take all of it within the timeout
        never got a complete request, so it cannot execute it: that is "not committed"."""
        session = self.session
        assert session is not None
        session.deadline = time.monotonic() + self.settings.timeout
        try:
            request = session.send("transact", params)
        except OSError as exc:
            self.release()
            raise NotSent(exc.strerror or str(exc)) from None
        return _Reply(session, request)

    def abandon(self, silent: bool) -> None:
        self.release()

    def reread(self, name: str, deadline: float) -> Sequence[OvnRow] | None:
        """A new session holding ``name`` (waiting for the grant: our own old session may
        hold the lock until the server drops it), and our rows read on it."""
        self.release()
        if not self.lock(name, deadline):
            session = self.session
            assert session is not None
            while not session.locks.get(name):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                session.wait_notification(min(left, 0.5))
        session = self.session
        assert session is not None
        session.deadline = max(deadline, time.monotonic() + 0.1)
        with _gc_paused():
            state, _index = self._read_on(session)
        return state.owned

    def release(self) -> None:
        commit.close_quietly(self.session)
        self.session = None

    def _open(self, deadline: float) -> Session:
        """A session to the leader (waiting, until ``deadline``, for a Raft cluster to elect
        one), kept as :attr:`session`."""
        self.release()
        session, raw_schema = until_readable(self.settings, open_leader, deadline)
        self.session = session
        if self._schema is None:
            self._raw_schema = raw_schema
            self._schema = NbSchema(raw_schema)
            self._types = column_types(raw_schema)
        return session

    def _read_on(self, session: Session) -> tuple[OvnState, SnapshotIndex]:
        try:
            state, index = read_on(session, self._raw_schema, self.settings)
            assert index is not None
            return state, index
        except TimeoutError:
            raise OvnConnectError(
                f"cannot read OVN NB at {self.settings.remote} ({session.member}): no answer "
                f"before the timeout ({self.settings.timeout}s)"
            ) from None
        except OSError as exc:
            raise OvnConnectError(
                f"cannot read OVN NB at {self.settings.remote} ({session.member}): "
                f"{exc.strerror or exc}"
            ) from None


class _Reply:
    """A transaction sent on a raw session (:class:`~reconciler.adapters.ovn.writer.Pending`):
    a dropped connection is :class:`commit.ServerLost`; the session tells of it only when
    read from, so :meth:`lost` never knows more than :meth:`poll` did."""

    def __init__(self, session: Session, request: int) -> None:
        self.session = session
        self.request = request

    def poll(self, seconds: float) -> Mapping[str, Any] | None:
        try:
            return self.session.wait_reply(self.request, seconds)
        except (OSError, ValueError):
            raise commit.ServerLost() from None

    def lost(self) -> bool:
        return False
