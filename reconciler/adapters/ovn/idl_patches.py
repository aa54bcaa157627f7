"""Our subclasses of ovs / ovsdbapp classes, and why each exists.

- :class:`NbApi`: ovsdbapp's generic backend (the ``db_*`` commands), one class per
  connection (:func:`api_for`) because ovsdbapp keeps the connection in a *class* attribute.
- :class:`NbTransaction` / :class:`IdlTransaction`: the IDL's transaction with a cheaper
  ``_substitute_uuids``.
- :class:`NbIdl`: ovsdbapp's IDL without its per-row ``time.sleep(0)``, counting reconnects and
  recording which rows changed (:class:`ChangeLog`) for the incremental read.

Each overrides as little as it can; everything else is the library's own behaviour.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from ovs import ovsuuid as ovs_uuid
from ovs.db import idl as ovs_idl
from ovsdbapp import api as ovsdbapp_api
from ovsdbapp.backend import ovs_idl as ovsdbapp_backend
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection
from ovsdbapp.backend.ovs_idl import transaction as ovsdbapp_transaction

from reconciler.adapters.ovn.tables import DB_NAME

__all__ = ["ChangeLog", "IdlTransaction", "NbApi", "NbIdl", "NbTransaction", "api_for"]


class NbApi(ovsdbapp_backend.Backend, ovsdbapp_api.API):
    """ovsdbapp's generic backend (db_* commands). ovsdbapp keeps the connection in a *class*
    attribute, so :func:`api_for` makes one subclass per connection: two adapters in one
    process (tests, per-node zones) must never share an IDL."""

    schema = DB_NAME
    lookup_table: dict[str, Any] = {}

    def create_transaction(
        self, check_error: bool = False, log_errors: bool = True, **kwargs: Any
    ) -> NbTransaction:
        return NbTransaction(
            self, self.ovsdb_connection, self.ovsdb_connection.timeout, check_error, log_errors
        )


def api_for(conn: ovsdbapp_connection.Connection) -> NbApi:
    """An API bound to ``conn`` alone (see :class:`NbApi`)."""
    cls = type("NbApiInstance", (NbApi,), {"_ovsdb_connection": None})
    return cls(conn, start=False, auto_index=False)


class IdlTransaction(ovs_idl.Transaction):
    """The IDL's transaction with a cheaper ``_substitute_uuids``.

    ``commit()`` passes the JSON of every value it sends through ``_substitute_uuids`` (to name
    rows inserted in the same transaction); the original recurses into every element, strings
    included, which dominates the commit of a large insert. This one recurses into lists only
    and gives the same result.
    """

    def _substitute_uuids(self, json: Any) -> Any:
        if isinstance(json, (list, tuple)):
            if len(json) == 2 and json[0] == "uuid" and ovs_uuid.is_valid_string(json[1]):
                return super()._substitute_uuids(json)
            sub = self._substitute_uuids
            return [sub(e) if isinstance(e, (list, tuple)) else e for e in json]
        return json


class NbTransaction(ovsdbapp_transaction.Transaction):
    """ovsdbapp's transaction; its ``pre_commit`` hook (called with each new IDL transaction,
    before any command runs) makes that IDL transaction an :class:`IdlTransaction`."""

    def pre_commit(self, txn: Any) -> None:
        if type(txn) is ovs_idl.Transaction:
            txn.__class__ = IdlTransaction
        super().pre_commit(txn)


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
        """Record which row changed (and which columns), for the incremental read.

        Called by the IDL on the connection thread for every row it inserts, updates or
        deletes, after the row's committed data changed.
        """
        log = self.osc_log
        if log is not None:
            log.record(event, row, updates)
        super().notify(event, row, updates)
