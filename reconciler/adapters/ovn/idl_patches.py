"""Our subclasses of ovs / ovsdbapp classes, and why each exists.

- :class:`RawRequest`: a raw ``transact`` sent on the IDL's own session (so under the write
  lock the IDL holds), its reply routed back by the IDL's own outstanding-transaction table;
  :class:`ForceReconnect`: a reconnect done on the connection thread.
- :class:`NbIdl`: ovsdbapp's IDL without its per-row ``time.sleep(0)``, counting reconnects and
  recording which rows changed (:class:`ChangeLog`) for the incremental read, its strings
  shared (:func:`share_strings`); :func:`release_free_memory` after large updates.

Each overrides as little as it can; everything else is the library's own behaviour.
"""

from __future__ import annotations

import ctypes
import queue
import sys
import threading
import uuid
from typing import Any

from ovs import jsonrpc
from ovs.db import idl as ovs_idl
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection

__all__ = [
    "ChangeLog",
    "ForceReconnect",
    "NbIdl",
    "RawRequest",
    "release_free_memory",
    "share_strings",
]


class RawRequest:
    """A raw JSON-RPC request sent on the IDL's own session, and its reply.

    It goes through ovsdbapp's transaction queue because only the connection thread may
    touch the session: :meth:`do_commit` runs there (the queue's contract: a ``results``
    queue and a ``do_commit()``), sends the request and registers it with the IDL as an
    outstanding transaction, so the IDL hands the reply to :meth:`_process_reply`, and marks
    it ``TRY_AGAIN`` (:attr:`_status`) when the connection is lost and re-established. Same
    session, so the write lock the IDL holds is the one the request asserts.
    """

    def __init__(self, idl: ovs_idl.Idl, method: str, params: list[Any]) -> None:
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
    def forget(self) -> None:
        """Take the request out of the IDL's outstanding transactions (connection lock held).

        The IDL drops them itself only when it reconnects; while the server stays down it
        would keep ours, and ``Idl.set_lock`` (releasing the write lock) asserts there are
        none."""
        self.idl._outstanding_txns.pop(self.message.id, None)

    def wait(self, seconds: float) -> dict[str, Any] | None:
        """The reply if it arrives within ``seconds`` (``None`` also when the request never
        left: then :meth:`lost` is true)."""
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

    def __init__(self, idl: ovs_idl.Idl) -> None:
        self.idl = idl
        self.results: queue.Queue[Any] = queue.Queue(1)

    def do_commit(self) -> None:
        self.idl.force_reconnect()


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


class NbIdl(ovsdbapp_connection.OvsdbIdl):
    """ovsdbapp's IDL without its per-row ``time.sleep(0)``.

    ``OvsdbIdl.cooperative_yield`` exists for eventlet green threads; with real threads it is a
    syscall and a GIL hand-off per row of every update, which dominated applying our own large
    commits and the initial sync. The GIL is still released every
    ``sys.getswitchinterval()``, so other threads are not starved.
    """

    osc_generation: int = 0
    """Bumped on every (re)connect: the IDL then re-monitors and may clear and reload its
    tables, which the read cache must not try to follow row by row."""
    osc_log: ChangeLog | None = None
    """Where :meth:`notify` records changed rows; ``None`` until the adapter's first read."""

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
        super().notify(event, row, updates)


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
