"""Everything this project takes from python-ovs (the ``ovs`` package): the ONE module that
imports it (an import-linter contract), and the only one that touches its private names.

Why one module: python-ovs is a C-accelerated, well-tested OVSDB client, but the loop needs a
few things it does not offer publicly (a raw ``transact`` on the IDL's own session, which rows
changed, values read without re-validation). Those reach into private names (``Row._data``,
``Idl._outstanding_txns``, the transaction protocol ``_process_reply``/``_status``,
``Idl._session``/``_last_seqno``). Kept here, an upgrade of python-ovs is checked in one place:
``tests/unit/test_python_ovs.py`` asserts that every private name listed in
:data:`PRIVATE_NAMES` still exists, so an incompatible release fails CI loudly instead of a
customer's reconcile. ``pyproject.toml`` pins the versions the code was written for (2.17
added ``Idl.restart_fsm`` and ``ColumnDefaultDict``).

ovsdbapp stays the IDL's connection layer (its thread, queue and lock; ``northbound``): its
``OvsdbIdl`` is subclassed here.

What it offers, as classes and plain functions:

- the IDL: :class:`NbIdl` (ovsdbapp's IDL without its per-row ``time.sleep(0)``, counting
  reconnects, recording changed rows in a :class:`ChangeLog`, sharing its strings), made by
  :func:`nb_idl`; its state (:func:`is_synced`, :func:`session_seqno`,
  :func:`resynced_since`), its write lock (:func:`request_lock`, :func:`lock_state`,
  :func:`release_lock`), TLS (:func:`use_tls_files`), :func:`release_free_memory`;
- a raw request on the IDL's session (:class:`RawRequest`) and a reconnect done on the
  connection thread (:class:`ForceReconnect`);
- values out of the committed cache without the IDL's re-validation (``committed_*``,
  :func:`column_reader`);
- the server's column types for the wire codec (:func:`column_types`, :func:`atom_problem`).
"""

from __future__ import annotations

import ctypes
import errno
import queue
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ovs import jsonrpc
from ovs import stream as ovs_stream
from ovs.db import data as ovs_data
from ovs.db import error as ovs_error
from ovs.db import idl as ovs_idl
from ovs.db import schema as ovs_schema
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection

__all__ = [
    "PRIVATE_NAMES",
    "ChangeLog",
    "ForceReconnect",
    "NbIdl",
    "RawRequest",
    "atom_problem",
    "column_reader",
    "column_types",
    "committed_list",
    "committed_map",
    "committed_scalar",
    "is_synced",
    "lock_state",
    "nb_idl",
    "release_free_memory",
    "release_lock",
    "request_lock",
    "resynced_since",
    "session_seqno",
    "share_strings",
    "use_tls_files",
]

PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    ("ovs.db.idl.Idl", "_outstanding_txns"),
    ("ovs.db.idl.Idl", "_session"),
    ("ovs.db.idl.Idl", "_last_seqno"),
    ("ovs.db.idl.Idl", "_Idl__txn_abort_all"),
    ("ovs.db.idl.Idl", "_Idl__txn_process_reply"),
    ("ovs.db.idl.Transaction", "_process_reply"),
    ("ovs.db.idl.Transaction", "_status"),
    ("ovs.db.idl.Row", "_data"),
    ("ovs.db.idl.Row", "_table"),
    ("ovs.db.idl.ColumnDefaultDict", "_table"),
    ("ovs.jsonrpc.Session", "rpc"),
    ("ovs.jsonrpc.Connection", "stream"),
    ("ovs.jsonrpc.Connection", "parser"),
    ("ovs.jsonrpc.Connection", "input"),
)
"""(class, name): the private names of python-ovs this module relies on. Instance attributes
are checked on a real instance (``tests/unit/test_python_ovs.py``)."""


# -- the IDL --------------------------------------------------------------------------------


class ChangeLog:
    """Rows the IDL changed since the adapter last looked: table -> row UUID -> the names of
    the changed columns, or ``None`` for an inserted or deleted row (or one whose columns are
    unknown). Filled by :meth:`NbIdl.notify` on the connection thread, emptied by
    :meth:`take`; one entry per row, so it stays bounded by the size of the cache however
    long nobody reads."""

    __slots__ = ("_lock", "rows")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rows: dict[str, dict[uuid.UUID, set[str] | None]] = {}

    def record(self, event: str, row: Any, updates: Any) -> None:
        cols: set[str] | None = None
        if event == ovs_idl.ROW_UPDATE and updates is not None:
            cols = set(updates._data)
        table = row._table.name
        with self._lock:
            per = self.rows.get(table)
            if per is None:
                per = self.rows[table] = {}
            key = row.uuid
            if key not in per:
                per[key] = cols
                return
            prev = per[key]
            if prev is None or cols is None:
                per[key] = None
            else:
                prev |= cols

    def take(self) -> dict[str, dict[uuid.UUID, set[str] | None]]:
        with self._lock:
            rows, self.rows = self.rows, {}
        return rows


class _BoundedStream:
    """A python-ovs stream that ends its connection once one message grows past ``limit``
    bytes (python-ovs reads a message whole, with no limit: a server that never stops
    sending would take all memory). A message is in progress while the connection's parser
    exists (python-ovs drops it after each complete message)."""

    def __init__(self, inner: Any, connection: Any, limit: int, idl: NbIdl) -> None:
        self.inner = inner
        self.connection = connection
        self.limit = limit
        self.idl = idl
        self.count = 0

    def recv(self, n: int) -> tuple[int, Any]:
        error, data = self.inner.recv(n)
        if error or not data:
            return error, data
        if self.connection.parser is None and not self.connection.input:
            self.count = 0  # the previous message was complete: a new one starts
        self.count += len(data)
        if self.count > self.limit:
            self.idl.osc_too_large = (
                f"sent a message larger than {self.limit / 1048576:g} MiB (the limit "
                "--ovn-max-reply-mib sets; is this an OVN Northbound server?)"
            )
            return errno.EMSGSIZE, b""  # python-ovs closes the connection on an error
        return error, data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class NbIdl(ovsdbapp_connection.OvsdbIdl):
    """ovsdbapp's IDL without its per-row ``time.sleep(0)``, and with bounded messages.

    ``OvsdbIdl.cooperative_yield`` exists for eventlet green threads; with real threads it is a
    syscall and a GIL hand-off per row of every update, which dominated applying our own large
    commits and the initial sync. The GIL is still released every
    ``sys.getswitchinterval()``, so other threads are not starved.

    Every connection the session opens reads through :class:`_BoundedStream`
    (``osc_max_bytes``); the last message refused for its size is told in ``osc_too_large``.
    """

    osc_max_bytes: int = 256 * 1024 * 1024
    osc_too_large: str | None = None

    def run(self) -> Any:
        connection = self._session.rpc
        if connection is not None and not isinstance(connection.stream, _BoundedStream):
            connection.stream = _BoundedStream(
                connection.stream, connection, self.osc_max_bytes, self
            )
        return super().run()

    osc_generation: int = 0
    """Bumped on every (re)connect: the IDL then re-monitors and may clear and reload its
    tables, which the read cache must not try to follow row by row."""
    osc_log: ChangeLog | None = None
    """Where :meth:`notify` records changed rows; ``None`` until the adapter's first read."""
    osc_health_watchers: tuple[Callable[[], None], ...] = ()
    """Called (on the connection thread) when northd changes a Network_Function_Group's
    ``network_function_active``, or a group comes or goes (``OvnNorthbound.watch_health``)."""

    def cooperative_yield(self) -> None:
        return None

    def restart_fsm(self) -> None:
        self.osc_generation += 1
        super().restart_fsm()

    def notify(self, event: str, row: Any, updates: Any = None) -> None:
        """Record which row changed (and which columns), for the incremental read, and share
        its strings (:func:`share_strings`).

        Called by the IDL on the connection thread for every row it inserts, updates or
        deletes, after the row's committed data changed.
        """
        if event != ovs_idl.ROW_DELETE:
            share_strings(row)
        log = self.osc_log
        if log is not None:
            log.record(event, row, updates)
        if self.osc_health_watchers and row._table.name == "Network_Function_Group":
            changed = event != ovs_idl.ROW_UPDATE or updates is None
            if changed or "network_function_active" in getattr(updates, "_data", {}):
                for watcher in self.osc_health_watchers:
                    watcher()
        super().notify(event, row, updates)


def nb_idl(
    remote: str,
    schema: Mapping[str, Any],
    columns: Mapping[str, Iterable[str]],
    max_bytes: int | None = None,
) -> NbIdl:
    """An IDL of ``remote`` mirroring ``columns`` (table -> column names) of the server's
    ``schema`` (a ``get_schema`` reply). ``leader_only=True`` (the default, stated on
    purpose): with a Raft remote list the IDL moves on from followers, so reads are never
    stale and writes never bounce. ``max_bytes``: the largest message read."""
    helper = ovs_idl.SchemaHelper(None, dict(schema))
    for table, cols in columns.items():
        helper.register_columns(table, list(cols))
    idl = NbIdl(remote, helper, leader_only=True)
    if max_bytes is not None:
        idl.osc_max_bytes = max_bytes
    return idl


def use_tls_files(private_key: str, certificate: str, ca_cert: str) -> None:
    """The OVS stream library keeps SSL files process-wide: set them before connecting."""
    ovs_stream.Stream.ssl_set_private_key_file(private_key)
    ovs_stream.Stream.ssl_set_certificate_file(certificate)
    ovs_stream.Stream.ssl_set_ca_cert_file(ca_cert)


def is_synced(idl: Any) -> bool:
    """The IDL is monitoring and has loaded the database at least once."""
    return bool(idl.state == ovs_idl.Idl.IDL_S_MONITORING and idl.has_ever_connected())


def session_seqno(idl: Any) -> int:
    """The session's sequence number: it changes whenever the connection drops or is
    (re)established."""
    return int(idl._session.get_seqno())


def resynced_since(idl: Any, seqno: int | None) -> bool:
    """The IDL is on a newer connection than the one of ``seqno`` and has processed its
    (re)connect: it monitors again, so its cache shows that connection's database."""
    now = idl._session.get_seqno()
    return bool(
        now != seqno and idl._last_seqno == now and idl.state == ovs_idl.Idl.IDL_S_MONITORING
    )


def request_lock(idl: Any, name: str) -> None:
    """Ask the server for the named lock (the IDL asks again after every reconnect, and
    asserts it in the transactions it sends; we assert it ourselves in raw ones)."""
    idl.set_lock(name)


def lock_state(idl: Any) -> bool | None:
    """True: the IDL holds its lock; False: another client does; None: no answer yet."""
    if idl.has_lock:
        return True
    return False if idl.is_lock_contended else None


def release_lock(idl: Any, *pending: RawRequest | None) -> None:
    """Give the lock up, after forgetting ``pending`` raw requests (connection lock held).

    The IDL drops outstanding requests itself only when it reconnects: while the server stays
    down it would keep ours, and ``Idl.set_lock`` asserts there are none (an NB
    killed holding our transaction and still down would turn the documented error into a bare
    ``AssertionError``)."""
    for request in pending:
        if request is not None:
            idl._outstanding_txns.pop(request.message.id, None)
    idl.set_lock(None)


def release_free_memory() -> None:
    """Give the C heap's free memory back to the system (glibc's ``malloc_trim``).

    ovs's C JSON parser builds each message as a tree of C objects before it becomes Python
    objects; for the initial sync (or the echo of a large transaction) that tree is hundreds of
    MiB, freed at once but kept by the allocator, so the process's RSS would stay at that peak.
    A no-op where the C library has no ``malloc_trim``.
    """
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


_LIBC: Any = None


def share_strings(row: Any) -> None:
    """Make the row's column names and string values the interpreter's shared (interned)
    copies.

    The IDL keeps every string the JSON parser made: tens of thousands of our rows repeat the
    same column names, ``external_ids`` keys and values (owner, resource, node), directions
    and actions, each as a string object of its own. Sharing one object per distinct string
    keeps the mirror tens of MiB smaller at 10,000 pods. Only *which object* holds a value
    changes: keys keep their hash and equality, and nothing here ever mutates a value.
    """
    data = row._data
    if not data:
        return
    intern = sys.intern
    # The IDL's ColumnDefaultDict answers absent columns with their default: keep its type
    # (and read it with dict's own methods, which see only the columns it holds).
    shared = type(data)(data._table) if isinstance(data, ovs_idl.ColumnDefaultDict) else {}
    dict.update(shared, ((intern(k), v) for k, v in dict.items(data)))
    # Row.__setattr__ is the IDL's write path (it needs a transaction): set the attribute
    # directly, as the IDL itself does when it applies an update.
    object.__setattr__(row, "_data", shared)
    for datum in dict.values(data):
        for atom, value in datum.values.items():
            if type(atom.value) is str:
                atom.value = intern(atom.value)
            if value is not None and type(value.value) is str:
                value.value = intern(value.value)


# -- a raw request on the IDL's session -------------------------------------------------------


class RawRequest:
    """A raw JSON-RPC request sent on the IDL's own session, and its reply.

    It goes through ovsdbapp's transaction queue because only the connection thread may
    touch the session: :meth:`do_commit` runs there (the queue's contract: a ``results``
    queue and a ``do_commit()``), sends the request and registers it with the IDL as an
    outstanding transaction, so the IDL hands the reply to :meth:`_process_reply`, and marks
    it ``TRY_AGAIN`` (:attr:`_status`) when the connection is lost and re-established. Same
    session, so the write lock the IDL holds is the one the request asserts.
    """

    def __init__(self, idl: Any, method: str, params: list[Any]) -> None:
        self.idl = idl
        self.message = jsonrpc.Message.create_request(method, params)
        self.results: queue.Queue[Any] = queue.Queue(1)
        self.sent = threading.Event()
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None
        self.seqno: int | None = None
        """The session's sequence number when the request was sent: it changes whenever
        the connection drops or is re-established."""
        self.dropped = False

    # -- connection thread ---------------------------------------------------------------------
    def do_commit(self) -> None:
        session = self.idl._session
        self.seqno = session.get_seqno()
        if not session.is_connected() or session.send(self.message):
            self.dropped = True  # never left this process
            self.done.set()
        else:
            self.idl._outstanding_txns[self.message.id] = self
        self.sent.set()

    def _process_reply(self, msg: Any) -> None:
        if msg.type == jsonrpc.Message.T_ERROR:
            self.reply = {"result": None, "error": msg.error}
        else:
            self.reply = {"result": msg.result, "error": None}
        self.done.set()

    @property
    def _status(self) -> Any:
        return None

    @_status.setter
    def _status(self, value: Any) -> None:
        # The IDL aborts its outstanding transactions this way after a reconnect.
        self.dropped = True
        self.done.set()

    # -- caller --------------------------------------------------------------------------------
    def poll(self, seconds: float) -> dict[str, Any] | None:
        """The reply if it arrives within ``seconds`` (``None`` also when the request never
        left or its connection dropped: then :meth:`lost` is true)."""
        return self.reply if self.done.wait(seconds) else None

    def lost(self) -> bool:
        """The connection the request went out on has dropped (no reply can come)."""
        if self.dropped:
            return True
        seqno = self.seqno
        return seqno is not None and self.idl._session.get_seqno() != seqno


class ForceReconnect:
    """A job for the connection thread: drop the connection and reconnect (ovsdbapp's own
    ``force_reconnect`` signals the thread in a way that leaves it spinning until the next
    transaction)."""

    def __init__(self, idl: Any) -> None:
        self.idl = idl
        self.results: queue.Queue[Any] = queue.Queue(1)

    def do_commit(self) -> None:
        self.idl.force_reconnect()


# -- values out of the committed cache --------------------------------------------------------
#
# ``Row.__getattr__`` re-validates every value through ``Datum.from_python`` on each access; the
# committed ``Datum`` a row holds is already valid, so these take the values straight from it.
# Only valid for rows of the committed cache read under the connection lock (no transaction is
# in flight then: ovsdbapp commits under the same lock).


def committed_scalar(row: Any, col: str) -> Any:
    """The single value of ``col`` (``None`` when empty)."""
    datum = row._data.get(col)
    if datum is None or not datum.values:
        return None
    return next(iter(datum.values)).value


def committed_list(row: Any, col: str) -> list[Any]:
    """The values of a set column."""
    datum = row._data.get(col)
    return [] if datum is None else [k.value for k in datum.values]


def committed_map(row: Any, col: str) -> dict[Any, Any]:
    """A map column as a dict."""
    datum = row._data.get(col)
    return {} if datum is None else {k.value: v.value for k, v in datum.values.items()}


def _uuid_of(value: Any) -> Any:
    """A reference as ``Row.__getattr__`` gives it (a row, or a UUID) -> its UUID."""
    return value.uuid if isinstance(value, ovs_idl.Row) else value


def column_reader(idl: Any, table: str, col: str) -> tuple[Callable[[Any], Any], str]:
    """``(read, shape)`` for one column of the IDL's ``table``: ``read(row)`` is the committed
    value as the readers want it (references as UUIDs, a map as a dict sorted by key, a set
    as a new list); ``shape`` is ``"map"``, ``"scalar"`` (exactly one value) or ``"set"``."""
    col_type = idl.tables[table].columns[col].type
    if col_type.is_map():

        def read_map(row: Any) -> Any:
            datum = row._data.get(col)
            if datum is None:
                return {}
            return dict(sorted((k.value, v.value) for k, v in datum.values.items()))

        return read_map, "map"
    if col_type.n_min == 1 and col_type.n_max == 1:

        def read_scalar(row: Any) -> Any:
            datum = row._data.get(col)
            if datum is None:  # no Datum for a column still at its default: the IDL's value
                return _uuid_of(getattr(row, col))
            return next(iter(datum.values)).value

        return read_scalar, "scalar"

    def read_set(row: Any) -> Any:
        datum = row._data.get(col)
        return [] if datum is None else [k.value for k in datum.values]

    return read_set, "set"


# -- column types for the wire codec ------------------------------------------------------------


def column_types(raw_schema: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Table -> column -> the column's type (``ovs.db.types.Type``: ``key``/``value`` base
    types with ``type.name``, ``enum``, ``min``/``max``, ``min_length``/``max_length``;
    ``n_min``, ``n_max``, ``is_map()``) of a ``get_schema`` reply (no IDL needed)."""
    db = ovs_schema.DbSchema.from_json(dict(raw_schema), allow_extensions=True)
    return {name: {c: col.type for c, col in t.columns.items()} for name, t in db.tables.items()}


def atom_problem(base: Any, value: Any) -> str | None:
    """Why ``value`` (of the base type's Python type) breaks the constraints of ``base`` (enum,
    range, length), in python-ovs' own words; ``None`` when it fits."""
    try:
        ovs_data.Atom(base.type, value).check_constraints(base)
    except (ovs_error.Error, ovs_data.ConstraintViolation) as exc:
        return str(exc)
    return None
