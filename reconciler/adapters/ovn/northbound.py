"""OVN Northbound adapter: connect, read the live NB into plain data, apply a plan in ONE
transaction under the instance's write lock.

Why it looks like this:

- It is the only place that knows UUIDs. Everything it returns is the symbolic form of
  ``reconciler.core.target`` (references as names / ``osc.io/key``), and everything it accepts
  is that same form, so the pure core never sees OVSDB details.
- ``read()`` only ever returns a snapshot of a *fully synced* IDL cache, taken under the
  connection lock (the IDL applies a whole monitor reply in one ``run()`` under that lock), so a
  half-loaded cache can never make the diff re-create rows that exist. It is incremental
  (:mod:`~reconciler.adapters.ovn.read_cache`).
- ``apply()`` builds every change into ONE raw ``transact``
  (:mod:`~reconciler.adapters.ovn.transaction`), sent on the IDL's own session so it asserts
  the write lock the IDL holds: either all of it commits or nothing does. Its reply is waited
  for while the server answers, and a lost reply is never guessed at
  (:mod:`~reconciler.adapters.ovn.commit`).

The pieces: :mod:`~reconciler.adapters.ovn.tables` (what is read and written),
:mod:`~reconciler.adapters.ovn.idl_patches` (our ovs/ovsdbapp subclasses),
:mod:`~reconciler.adapters.ovn.datum` (values out of the IDL),
:mod:`~reconciler.adapters.ovn.errors`.
"""

from __future__ import annotations

import errno
import os
import ssl
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from ovs import jsonrpc, poller
from ovs import stream as ovs_stream
from ovs.db import idl as ovs_idl
from ovsdbapp import exceptions as ovsdbapp_exceptions
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection

from reconciler.adapters.ovn import commit
from reconciler.adapters.ovn.commit import Outcome, outcome
from reconciler.adapters.ovn.datum import committed_map
from reconciler.adapters.ovn.errors import (
    OvnApplyError,
    OvnCapabilityError,
    OvnConnectError,
    OvnLockedError,
    connect_error,
    tls_failure,
)
from reconciler.adapters.ovn.idl_patches import (
    ForceReconnect,
    NbIdl,
    RawRequest,
    release_free_memory,
)
from reconciler.adapters.ovn.read_cache import ReadCache, RowIndex, SymbolicRows
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.tables import DB_NAME, NB_TABLES, NbSchema
from reconciler.adapters.ovn.transaction import OvnChange, OwnedRow, TransactionBuilder
from reconciler.adapters.ovn.wire import column_types
from reconciler.core.observed import OvnState

__all__ = [
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


def write_lock_name(instance: str) -> str:
    """The OVSDB named lock two reconcilers of one instance serialise on.

    OVSDB lock names are ids (``[_a-zA-Z][_a-zA-Z0-9]*``; the server answers anything else
    with an error the IDL ignores), so ``-`` becomes ``_``: instance names are DNS-1123 labels
    without ``_``, so the mapping stays injective.
    """
    return "osc_gitops_" + instance.replace("-", "_")


def _set_ssl(settings: OvnSettings) -> None:
    """The OVS stream library keeps SSL files process-wide: set them before connecting."""
    key, cert, ca = settings.tls_files()
    ovs_stream.Stream.ssl_set_private_key_file(key)
    ovs_stream.Stream.ssl_set_certificate_file(cert)
    ovs_stream.Stream.ssl_set_ca_cert_file(ca)


def _fetch_schema(remote: str, deadline: float) -> dict[str, Any]:
    """``get_schema`` from the first member that answers, bounded by ``deadline`` (ovsdbapp's
    own helper blocks without a timeout)."""
    errors: list[str] = []
    for member in (m.strip() for m in remote.split(",") if m.strip()):
        left_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
        try:
            err, strm = ovs_stream.Stream.open_block(ovs_stream.Stream.open(member), left_ms)
        except ssl.SSLError as exc:  # the OVS stream lets handshake errors escape
            errors.append(tls_failure(member, exc))
            continue
        if err:
            errors.append(f"{member}: {os.strerror(err) if err > 0 else 'failed'}")
            continue
        rpc = jsonrpc.Connection(strm)
        try:
            req = jsonrpc.Message.create_request("get_schema", [DB_NAME])
            err = rpc.send(req)
            while not err:
                rpc.run()
                err, msg = rpc.recv()
                if err == errno.EAGAIN:
                    err = 0
                    if time.monotonic() >= deadline:
                        errors.append(f"{member}: no answer before the timeout")
                        break
                    p = poller.Poller()
                    rpc.wait(p)
                    rpc.recv_wait(p)
                    p.timer_wait(max(1, int((deadline - time.monotonic()) * 1000)))
                    p.block()
                    continue
                if err or msg is None:
                    break
                if msg.id == req.id:
                    if msg.type == jsonrpc.Message.T_ERROR:
                        errors.append(f"{member}: {msg.error}")
                        break
                    return dict(msg.result)
            if err:
                errors.append(f"{member}: {os.strerror(err) if err > 0 else 'connection closed'}")
        finally:
            rpc.close()
    raise connect_error(remote, errors)


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
        self._symbolic = SymbolicRows(self._schema, conn.idl)
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
            _set_ssl(settings)
        deadline = time.monotonic() + settings.timeout
        schema = _fetch_schema(settings.remote, deadline)
        if schema.get("name") != DB_NAME:
            raise OvnConnectError(f"{where}: server database is {schema.get('name')!r}")
        server = NbSchema(schema)
        helper = ovs_idl.SchemaHelper(None, schema)
        for table in NB_TABLES:
            if server.has_table(table):
                helper.register_columns(table, list(server.present(table)))
        # leader_only=True (the default, stated on purpose): with a Raft remote list the IDL
        # moves on from followers, so reads are never stale and writes never bounce.
        idl = NbIdl(settings.remote, helper, leader_only=True)
        left = max(0.1, deadline - time.monotonic())
        conn = ovsdbapp_connection.Connection(idl=idl, timeout=settings.timeout)
        conn.timeout = left  # bound the initial sync by what is left of the budget
        try:
            conn.start()
        except ovsdbapp_exceptions.TimeoutException:
            conn.stop(timeout=1)
            idl.close()
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
        while idl.state != ovs_idl.Idl.IDL_S_MONITORING or not idl.has_ever_connected():
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

    # -- writing -----------------------------------------------------------------------------
    def apply(self, changes: Sequence[OvnChange], revision: str | None = None) -> None:
        """Apply ``changes`` in ONE transaction; on any failure nothing is committed."""
        if not changes:
            return
        with self._lock:
            self._take_write_lock()
            try:
                self._apply_locked(changes, revision)
            finally:
                self._release_write_lock()

    # Two reconcilers of one instance (a CronJob overlapping a loop, two replicas without
    # leader election) must not interleave: both would plan the same creates and the second
    # would insert duplicate ACLs (ACL has no unique column). ovsdb-server's named locks solve
    # it in the database itself: we take ``osc_gitops_<instance>`` before building the
    # transaction from the cache, the IDL adds an ``assert`` of the lock to the transaction (so
    # the server refuses the commit if the lock was lost meanwhile), and we release it after.
    # The lock reply arrives on the same session after every update committed before it, so
    # once we hold it our cache includes the other writer's rows. Locks are per server: with a
    # Raft cluster they work because the adapter only talks to the leader (leader_only=True).
    def _take_write_lock(self) -> None:
        idl = self._conn.idl
        name = write_lock_name(self.settings.instance)
        deadline = time.monotonic() + self.settings.timeout
        with self._conn.lock:
            idl.set_lock(name)
        while True:
            with self._conn.lock:
                if idl.has_lock:
                    return
                contended = idl.is_lock_contended
                if contended or time.monotonic() > deadline:
                    idl.set_lock(None)
            if contended:
                raise OvnLockedError(
                    f"cannot apply to OVN NB at {self.remote}: another osc-gitops process holds "
                    f"the write lock {name!r} (same --instance {self.settings.instance!r}); "
                    "refusing to apply so the two do not interleave. Nothing was written; "
                    "retry when it has finished, or give each reconciler its own --instance"
                )
            if time.monotonic() > deadline:
                raise OvnLockedError(
                    f"cannot apply to OVN NB at {self.remote}: the server did not grant the "
                    f"write lock {name!r} within {self.settings.timeout}s; nothing was written"
                )
            time.sleep(0.005)

    def _release_write_lock(self) -> None:
        with self._conn.lock:
            self._conn.idl.set_lock(None)

    def _apply_locked(self, changes: Sequence[OvnChange], revision: str | None) -> None:
        """Build and send the transaction; when its reply is lost, find out whether it
        committed (see :mod:`~reconciler.adapters.ovn.commit`) and send it once more if it
        did not."""
        lock = write_lock_name(self.settings.instance)
        for attempt in (1, 2):
            with self._conn.lock:
                # The write lock is held: its grant arrived after every update committed
                # before it, so refreshing the cached index now sees other writers' rows.
                tables = self._synced_tables()
                index = self._cache_for(tables).index
                built = TransactionBuilder(
                    types=self._types,
                    schema=self._schema,
                    index=IdlIndex(index, tables),
                    instance=self.settings.instance,
                    remote=self.remote,
                    revision=revision,
                    lock=lock,
                ).build(changes)
                member = self._conn.idl.session_name()
            request = RawRequest(self._conn.idl, "transact", built.params())
            built.sent()
            self._conn.queue_txn(request)
            try:
                reply = commit.await_reply(
                    request.wait,
                    request.lost,
                    member,
                    self.settings,
                )
            except (commit.ServerLost, commit.ServerSilent) as exc:
                silent = isinstance(exc, commit.ServerSilent)
                why = commit.silence(self.settings) if silent else commit.LOST
                try:
                    verdict = self._find_out(changes, request, silent)
                finally:
                    with self._conn.lock:
                        request.forget()
                if verdict is Outcome.COMMITTED:
                    self.last_commit = time.perf_counter()
                    return
                if verdict is Outcome.NOT_COMMITTED and attempt == 1:
                    continue
                raise commit.verdict_error(self.remote, verdict, why, self.settings) from None
            if reply is None:  # the request never left: the connection was down
                raise OvnApplyError(
                    f"OVN NB transaction at {self.remote} failed, nothing was committed: "
                    "not connected to the server"
                )
            commit.check_reply(reply, built, self.remote, lock)
            self.last_commit = time.perf_counter()
            return

    def _find_out(
        self, changes: Sequence[OvnChange], request: RawRequest, silent: bool
    ) -> Outcome | None:
        """Whether the lost transaction committed, from the NB once the IDL has reconnected,
        re-synced and holds the write lock again; ``None`` when that does not happen within
        the timeout (then nobody can tell)."""
        idl = self._conn.idl
        if silent:
            # Drop the connection the transaction went out on: the server releases the lock
            # only when it drops that session, after executing whatever it received on it.
            self._conn.queue_txn(ForceReconnect(idl))
        deadline = time.monotonic() + self.settings.timeout
        while time.monotonic() < deadline and not self._closed:
            with self._conn.lock:
                seqno = idl._session.get_seqno()
                if (
                    seqno != request.seqno
                    and idl._last_seqno == seqno
                    and idl.state == ovs_idl.Idl.IDL_S_MONITORING
                    and idl.has_lock
                ):
                    tables = dict(idl.tables)
                    state = self._cache_for(tables).state_now(tables)
                    return outcome(changes, state.owned)
            time.sleep(0.02)
        return None


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
