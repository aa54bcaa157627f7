"""OVN Northbound adapter: connect, read the live NB into plain data, apply a plan in ONE
transaction under the instance's write lock.

Why it looks like this:

- It is the only place that knows UUIDs. Everything it returns is the symbolic form of
  ``reconciler.core.model.target`` (references as names / ``osc.io/key``), and everything it accepts
  is that same form, so the pure core never sees OVSDB details.
- ``read()`` only ever returns a snapshot of a *fully synced* IDL cache, taken under the
  connection lock (the IDL applies a whole monitor reply in one ``run()`` under that lock), so a
  half-loaded cache can never make the diff re-create rows that exist. It is incremental
  (:mod:`~reconciler.adapters.ovn.read_cache`).
- ``apply()`` is :func:`~reconciler.adapters.ovn.writer.write` on the IDL's own session
  (:class:`IdlChannel`): ONE raw ``transact``
  (:mod:`~reconciler.adapters.ovn.transaction`) that asserts the write lock the IDL holds, so
  either all of it commits or nothing does; its reply is waited for while the server answers,
  and a lost reply is never guessed at.

python-ovs (the IDL) is reached only through :mod:`~reconciler.adapters.ovn.python_ovs`;
ovsdbapp's ``Connection`` is the IDL's connection layer (its thread, queue and lock).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ovsdbapp import exceptions as ovsdbapp_exceptions
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection

from reconciler.adapters.ovn.commit import EchoProbe
from reconciler.adapters.ovn.errors import (
    OvnApplyError,
    OvnCapabilityError,
    OvnConnectError,
    OvnLockedError,
)
from reconciler.adapters.ovn.python_ovs import (
    ForceReconnect,
    RawRequest,
    column_types,
    committed_map,
    is_synced,
    lock_state,
    nb_idl,
    release_free_memory,
    release_lock,
    request_lock,
    resynced_since,
    use_tls_files,
)
from reconciler.adapters.ovn.read_cache import ReadCache, RowIndex, idl_symbolic
from reconciler.adapters.ovn.rows import OwnedRow
from reconciler.adapters.ovn.rpc import leader_schema, until_readable
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.tables import NB_TABLES, NbSchema
from reconciler.adapters.ovn.transaction import OvnChange
from reconciler.adapters.ovn.writer import write, write_lock_name
from reconciler.core.model.observed import OvnRow, OvnState

__all__ = [
    "IdlChannel",
    "OvnApplyError",
    "OvnCapabilityError",
    "OvnChange",
    "OvnConnectError",
    "OvnLockedError",
    "OvnNorthbound",
    "OvnSettings",
    "OvnState",
    "write_lock_name",
]


_LARGE_UPDATE = 5_000
"""Rows changed at once after which the C heap's free memory is given back."""


class OvnNorthbound:
    """A live connection to one OVN Northbound database (standalone or Raft cluster)."""

    def __init__(
        self,
        settings: OvnSettings,
        conn: ovsdbapp_connection.Connection,
        schema: dict[str, Any],
    ) -> None:
        self.settings = settings
        self._conn = conn
        self._schema = NbSchema(schema)
        self._types = column_types(schema)
        self._closed = False
        self.capabilities = self._schema.capabilities()
        self._lock = threading.Lock()
        self._cache: ReadCache | None = None
        self._symbolic = idl_symbolic(self._schema, conn.idl)
        self.last_commit: float | None = None
        """``time.perf_counter()`` right after the last transaction's commit succeeded (for
        latency measurements: "pod labelled -> committed")."""

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def connect(cls, settings: OvnSettings) -> OvnNorthbound:
        """Connect and return only after the IDL holds a complete copy of the tables we read."""
        where = f"cannot connect to OVN NB at {settings.remote}"
        if not settings.remote.strip():
            raise OvnConnectError("cannot connect to OVN NB: no remote given")
        if any(m.strip().startswith("ssl:") for m in settings.remote.split(",")):
            use_tls_files(*settings.tls_files())
        deadline = time.monotonic() + settings.timeout
        # The leader's schema, from one request on a session of its own (rpc): the IDL
        # mirrors only the columns of it that we read.
        schema = until_readable(settings, leader_schema, deadline)
        server = NbSchema(schema)
        columns = {t: server.present(t) for t in NB_TABLES if server.has_table(t)}
        idl = nb_idl(settings.remote, schema, columns, settings.max_reply_bytes)
        left = max(0.1, deadline - time.monotonic())
        conn = ovsdbapp_connection.Connection(idl=idl, timeout=settings.timeout)
        conn.timeout = left  # bound the initial sync by what is left of the budget
        try:
            conn.start()
        except ovsdbapp_exceptions.TimeoutException:
            conn.stop(timeout=1)
            idl.close()
            if idl.osc_too_large is not None:  # the server sent more than we read
                raise OvnConnectError(f"{where}: {idl.osc_too_large}") from None
            raise OvnConnectError(
                f"{where}: no complete initial sync within {settings.timeout}s"
            ) from None
        except Exception as exc:
            conn.stop(timeout=1)
            idl.close()
            raise OvnConnectError(f"{where}: {exc}") from exc
        conn.timeout = settings.timeout
        release_free_memory()  # the initial sync's parse tree (see the function)
        return cls(settings, conn, schema)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._conn.stop(timeout=5)

    def __enter__(self) -> OvnNorthbound:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def remote(self) -> str:
        return self.settings.remote

    # -- reading -----------------------------------------------------------------------------
    def _synced_tables(self) -> dict[str, Any]:
        """Wait (up to the timeout) until the IDL is monitoring, then return its tables.

        Must be called with the connection lock held; it releases the lock while waiting so
        the connection thread can make progress (e.g. after a Raft failover).
        """
        idl = self._conn.idl
        deadline = time.monotonic() + self.settings.timeout
        while not is_synced(idl):
            if self._closed:
                raise OvnConnectError(f"OVN NB connection to {self.remote} is closed")
            if time.monotonic() > deadline:
                raise OvnConnectError(
                    f"cannot read OVN NB at {self.remote}: not (re)synced within "
                    f"{self.settings.timeout}s"
                )
            self._conn.lock.release()
            try:
                time.sleep(0.02)
            finally:
                self._conn.lock.acquire()
        return dict(idl.tables)

    def _cache_for(self, tables: Mapping[str, Any]) -> ReadCache:
        """The read cache, brought up to date (rebuilt after a reconnect). Connection lock
        held; on any failure the cache is dropped (rebuilt on the next use), never kept
        half-updated."""
        try:
            cache = self._cache
            if cache is None or not cache.valid_for(tables):
                cache = self._cache = ReadCache(
                    self._conn.idl,
                    tables,
                    instance=self.settings.instance,
                    capabilities=self.capabilities,
                    symbolic=self._symbolic,
                )
                release_free_memory()  # after a resync the IDL parsed the whole NB again
            elif cache.refresh(tables) >= _LARGE_UPDATE:
                release_free_memory()  # e.g. the echo of a cold start's transaction
            return cache
        except BaseException:
            self._cache = None
            raise

    def read(self) -> OvnState:
        """A consistent snapshot of the cache (never a half-loaded one).

        Incremental: only rows the IDL changed since the previous read are converted again;
        when nothing changed, the previous :class:`OvnState` itself is returned (see
        :class:`~reconciler.adapters.ovn.read_cache.ReadCache`).
        """
        with self._conn.lock:
            tables = self._synced_tables()
            cache = self._cache_for(tables)
            try:
                return cache.state_now(tables)
            except BaseException:
                self._cache = None  # never keep a half-updated cache: rebuild on the next read
                raise

    def watch_health(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (on the connection thread: keep it short) whenever northd changes
        which function of one of the NB's Network_Function_Groups is active, or a group comes
        or goes: the loop wakes on it while steering waits for a VNF instance to become healthy
        (``reconciler.engine.transitions``), instead of polling."""
        idl = self._conn.idl
        with self._conn.lock:
            idl.osc_health_watchers = (*idl.osc_health_watchers, callback)

    # -- writing -----------------------------------------------------------------------------
    def apply(self, changes: Sequence[OvnChange], revision: str | None = None) -> None:
        """Apply ``changes`` in ONE transaction (:func:`~reconciler.adapters.ovn.writer.write`
        on the IDL's session); on any failure nothing is committed, and when the reply is lost
        the error says what the NB shows."""
        if not changes:
            return
        with self._lock:
            write(IdlChannel(self), changes, self.settings, revision)
            self.last_commit = time.perf_counter()


class IdlChannel:
    """The :class:`~reconciler.adapters.ovn.writer.Channel` of the loop: the IDL's own session
    (so the transaction asserts the lock the IDL holds), rows from its cache. One per apply;
    everything touching the IDL runs under ovsdbapp's connection lock, and the request itself
    is sent by the connection thread."""

    def __init__(self, nb: OvnNorthbound) -> None:
        self.nb = nb
        self.conn = nb._conn
        self.idl = nb._conn.idl
        self.request: RawRequest | None = None
        """The last request sent (the transaction: a read before it is sent earlier)."""
        self.requests: list[RawRequest] = []
        """Every request sent, forgotten by the IDL on release (one unanswered blocks it)."""
        self.member = ""

    def probe(self) -> EchoProbe:
        return EchoProbe(self.member, self.nb.settings)

    @property
    def schema(self) -> NbSchema:
        return self.nb._schema

    @property
    def types(self) -> Mapping[str, Mapping[str, Any]]:
        return self.nb._types

    def lock(self, name: str, deadline: float) -> bool:
        with self.conn.lock:
            request_lock(self.idl, name)
        # The grant comes back in one round trip: look again soon, then less and less often,
        # so that the first look follows the grant closely (a flat sleep would add itself to
        # every pod event's time to commit) without spinning while another writer holds it.
        pause = 0.0002
        while True:
            with self.conn.lock:
                held = lock_state(self.idl)
                if held is not None:
                    return held
                if time.monotonic() > deadline:
                    raise TimeoutError(name)
            time.sleep(pause)
            pause = min(pause * 2, 0.005)

    @contextmanager
    def rows(self) -> Iterator[IdlIndex]:
        # The write lock is held: its grant arrived after every update committed before it,
        # so refreshing the cached index now sees other writers' rows.
        with self.conn.lock:
            tables = self.nb._synced_tables()
            self.member = str(self.idl.session_name())  # where the transaction will go
            yield IdlIndex(self.nb._cache_for(tables).index, tables)

    def send(self, params: list[Any]) -> RawRequest:
        request = self.request = RawRequest(self.idl, "transact", params)
        self.requests.append(request)
        self.conn.queue_txn(request)
        return request

    def abandon(self, silent: bool) -> None:
        if silent:
            # Drop the connection the transaction went out on: the server releases the lock
            # only when it drops that session, after executing whatever it received on it.
            self.conn.queue_txn(ForceReconnect(self.idl))

    def reread(self, name: str, deadline: float) -> Sequence[OvnRow] | None:
        """Once the IDL has reconnected after the request's connection, re-synced and holds
        the lock again (it asks for it on every reconnect): our rows from its cache."""
        request = self.request
        seqno = None if request is None else request.seqno
        while time.monotonic() < deadline and not self.nb._closed:
            with self.conn.lock:
                if resynced_since(self.idl, seqno) and lock_state(self.idl):
                    tables = dict(self.idl.tables)
                    return self.nb._cache_for(tables).state_now(tables).owned
            time.sleep(0.02)
        return None

    def release(self) -> None:
        with self.conn.lock:
            release_lock(self.idl, *self.requests)


class IdlIndex:
    """The read cache's :class:`RowIndex` as the transaction builder's
    :class:`~reconciler.adapters.ovn.transaction.WriteIndex` (UUIDs as strings). Used under
    the connection lock."""

    def __init__(self, index: RowIndex, tables: Mapping[str, Any]) -> None:
        self.ix = index
        self.tables = tables

    def named(self, table: str, name: str) -> str | None:
        found = self.ix.by_name.get(table, {}).get(name)
        return None if found is None else str(found)

    def owned(self, table: str, key: str) -> OwnedRow | None:
        row = self.ix.owned.get((table, key))
        if row is None:
            return None
        return OwnedRow(str(row.uuid), committed_map(row, "external_ids"))

    def parent_of(self, table: str, child: str) -> str | None:
        found = self.ix.parent.get(table, {}).get(uuid.UUID(child))
        return None if found is None else str(found)

    def singleton(self, table: str) -> str | None:
        row = next(iter(self.tables[table].rows.values()), None) if table in self.tables else None
        return None if row is None else str(row.uuid)
