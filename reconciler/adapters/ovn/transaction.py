"""Symbolic changes -> the ovsdbapp commands of ONE transaction.

:class:`TransactionBuilder` runs under the connection lock, against the read cache's
:class:`~reconciler.adapters.ovn.read_cache.RowIndex` (names <-> UUIDs, our rows, parents); it
takes everything it needs as arguments and knows nothing of the adapter object.

Why it looks like this:

- Writes are minimal: changed columns only; reference sets and maps as mutations
  (:class:`MapMutate`), so concurrent writers (OVN-Kubernetes adding ports to a switch) never
  race us.
- It uses ovsdbapp's generic ``db_*`` commands, never its high-level helpers, because of three
  traps (each covered by a test): bulk ``lsp_del`` is cubic in the Python IDL (we remove our
  ports from a switch with one ``db_remove`` instead); ``pg_acl_add`` fails on a Port_Group
  created in the same transaction unless it was created with ``acls=[]`` (we always create
  rows with every reference set column given); ``pg_add_ports``/``addvalue`` silently ignore
  a port *name* for a UUID column (we resolve every reference to a row or UUID ourselves and
  fail loudly when it does not exist).
- New rows are inserted by one command (:class:`InsertRows`) carrying Datums validated here.
- The first command (:class:`CreatesStillAbsent`) makes a retried transaction safe.
- ``NB_Global`` (the cluster's one row) is never created, updated or deleted as a row of ours:
  its changes set and delete exactly the map keys the plan names (our service-monitor options
  and our marker), as mutations, so keys others set are never touched.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ovs.db import data as ovs_data
from ovs.db import types as ovs_types
from ovsdbapp.backend.ovs_idl import command as ovsdbapp_command

from reconciler.adapters.ovn.datum import (
    ColumnKind,
    InvalidValue,
    check_value,
    committed_map,
    committed_scalar,
)
from reconciler.adapters.ovn.errors import OvnApplyError, OvnCapabilityError, OvnError
from reconciler.adapters.ovn.read_cache import RowIndex
from reconciler.adapters.ovn.rows import is_ours
from reconciler.adapters.ovn.tables import CHILD_COLUMNS, NB_TABLES, TABLE_ORDER, NbSchema
from reconciler.core import ownership

__all__ = [
    "AlreadyCommitted",
    "CreatesStillAbsent",
    "InsertRows",
    "MapMutate",
    "OvnChange",
    "TransactionBuilder",
]


@runtime_checkable
class OvnChange(Protocol):
    """What :meth:`OvnNorthbound.apply` needs from a plan entry (the plan module's type fits)."""

    @property
    def action(self) -> str: ...  # "create" | "update" | "delete"

    @property
    def kind(self) -> str: ...  # OVN table

    @property
    def key(self) -> str: ...

    @property
    def before(self) -> Mapping[str, Any] | None: ...

    @property
    def after(self) -> Mapping[str, Any] | None: ...


class MapMutate(ovsdbapp_command.BaseCommand):
    """Set and delete individual keys of a map column as OVSDB *mutations*.

    ovsdbapp's ``db_set`` rewrites the whole map (with a verify); a per-key mutation leaves keys
    others wrote (e.g. OVN-Kubernetes options) alone and never conflicts with them.
    """

    def __init__(
        self,
        api: Any,
        table: str,
        record: Any,
        column: str,
        set_keys: Mapping[str, str],
        del_keys: Iterable[str],
    ) -> None:
        super().__init__(api)
        self.table = table
        self.record = record
        self.column = column
        self.set_keys = dict(set_keys)
        self.del_keys = list(del_keys)

    def run_idl(self, txn: Any) -> None:
        row = self.api.lookup(self.table, self.record)
        for key in self.del_keys:
            row.delkey(self.column, key)
        for key, value in self.set_keys.items():
            row.setkey(self.column, key, value)


class AlreadyCommitted(Exception):
    """A retried transaction found every row it creates already there: the first attempt
    committed and only its reply was lost."""


class CreatesStillAbsent(ovsdbapp_command.BaseCommand):
    """First command of every apply transaction: on a *retry*, refuse to create twice.

    ovsdbapp re-runs all commands when a commit ends in TRY_AGAIN, which is also what happens
    when the connection drops after the server committed but before its reply arrived. The
    re-run sees the resynced cache, where our new rows already exist; inserting them again would
    duplicate ACLs (no unique column). The first run is skipped: the builder just checked the
    same cache under the same lock.
    """

    def __init__(self, api: Any, instance: str, creates: Sequence[tuple[str, str]]) -> None:
        super().__init__(api)
        self.instance = instance
        self.creates = set(creates)
        self.runs = 0

    def run_idl(self, txn: Any) -> None:
        self.runs += 1
        if self.runs == 1 or not self.creates:
            return
        present: set[tuple[str, str]] = set()
        for table in {t for t, _k in self.creates}:
            by_name = NB_TABLES[table].naming == "unique-name"
            for row in self.api.tables[table].rows.values():
                ext = committed_map(row, "external_ids")
                if not is_ours(ext, self.instance):
                    continue
                key = str(committed_scalar(row, "name") if by_name else ext.get(ownership.KEY))
                if (table, key) in self.creates:
                    present.add((table, key))
        if present == self.creates:
            raise AlreadyCommitted()
        if present:
            raise OvnApplyError(
                "the NB connection dropped during the commit and, after reconnecting, "
                f"{len(present)} of {len(self.creates)} rows to create already exist (another "
                "writer?); nothing more was written, re-run plan"
            )


class InsertRows(ovsdbapp_command.BaseCommand):
    """Insert every new row of the transaction, and add the new children of existing parents
    (a switch's ports, a router's policies) as one set mutation per parent.

    One command instead of one ``db_create`` and one ``db_add`` per row: the values arrive as
    Datums the builder already validated against the server's schema, so they are placed in
    the IDL transaction as they are (``Row.__setattr__`` would convert and validate each one
    again on the connection thread). Runs again, identically, if ovsdbapp retries the
    transaction (TRY_AGAIN): the provisional UUIDs are the builder's.
    """

    def __init__(
        self,
        api: Any,
        remote: str,
        inserts: Sequence[tuple[str, uuid.UUID, dict[str, Any]]],
        parent_adds: Mapping[tuple[str, uuid.UUID, str], Sequence[uuid.UUID]],
    ) -> None:
        super().__init__(api)
        self.remote = remote
        self.inserts = inserts
        self.parent_adds = parent_adds

    def run_idl(self, txn: Any) -> None:
        tables = self.api.tables
        for table, new_uuid, datums in self.inserts:
            row = txn.insert(tables[table], new_uuid=new_uuid)
            row._changes.update(datums)
        for (ptable, parent_uuid, column), children in self.parent_adds.items():
            parent = tables[ptable].rows.get(parent_uuid)
            if parent is None or parent._data is None:
                raise OvnApplyError(
                    f"cannot apply to OVN NB at {self.remote}: the {ptable} that should hold "
                    f"new rows no longer exists (deleted by another writer?); nothing was "
                    "committed, re-run plan"
                )
            txn._txn_rows[parent.uuid] = parent
            inserts = parent._mutations.setdefault("_inserts", {})
            inserts.setdefault(column, set()).update(children)


class TransactionBuilder:
    """Turns symbolic changes into ovsdbapp commands (runs under the connection lock).

    ``api`` is the connection's ovsdbapp API, ``idl_tables`` the IDL's tables (their column
    types), ``index`` the read cache's index, brought up to date under the write lock.
    """

    def __init__(
        self,
        *,
        api: Any,
        idl_tables: Mapping[str, Any],
        schema: NbSchema,
        index: RowIndex,
        instance: str,
        remote: str,
        revision: str | None,
    ) -> None:
        self.api = api
        self.idl_tables = idl_tables
        self.schema = schema
        self.ix = index
        self.instance = instance
        self.remote = remote
        self.revision = revision
        # (table, name) -> provisional UUID of a row this transaction inserts
        self.created: dict[tuple[str, str], uuid.UUID] = {}
        self.inserts: list[tuple[str, uuid.UUID, dict[str, Any]]] = []
        self.insert_cols: dict[uuid.UUID, dict[str, Any]] = {}
        # (parent table, existing parent row, set column) -> children inserted here
        self.parent_adds: dict[tuple[str, uuid.UUID, str], list[uuid.UUID]] = {}
        self.deleted: set[tuple[str, str]] = set()
        self.commands: list[Any] = []
        self._kinds: dict[tuple[str, str], ColumnKind] = {}

    def fail(self, message: str, cls: type[OvnError] = OvnApplyError) -> OvnError:
        return cls(f"cannot apply to OVN NB at {self.remote}: {message}; nothing was committed")

    # references ------------------------------------------------------------------------------
    def ref(self, table: str, name: str, by: str) -> Any:
        """The (provisional) UUID of the row this transaction creates or the UUID of the
        existing row named ``name``."""
        if (table, name) in self.created:
            return self.created[(table, name)]
        if (table, name) in self.deleted:
            raise self.fail(f"{by} references {table} {name!r}, which this plan deletes")
        if NB_TABLES[table].naming == "osc-key":
            row = self.ix.owned.get((table, name))
            if row is not None:
                return row.uuid
        found = self.ix.by_name.get(table, {}).get(name)
        if found is None:
            raise self.fail(f"{by} references {table} {name!r}, which does not exist")
        return found

    def owned_row(self, change: OvnChange) -> Any:
        row = self.ix.owned.get((change.kind, change.key))
        if row is None:
            raise self.fail(
                f"{change.kind} {change.key!r} to {change.action} is not (or no longer) owned by "
                f"{self.instance!r}; re-run plan"
            )
        return row

    # building --------------------------------------------------------------------------------
    def build(self, changes: Sequence[OvnChange]) -> list[Any]:
        """Every command of the transaction, in order (the retry guard first)."""
        order = TABLE_ORDER
        for change in changes:
            if change.kind not in order:
                raise self.fail(f"unknown OVN table {change.kind!r} (key {change.key!r})")
            if not self.schema.has_table(change.kind):
                since = NB_TABLES[change.kind].since
                raise self.fail(
                    f"table {change.kind} does not exist in NB schema {self.schema.version}"
                    + (f" (needs OVN >= {since})" if since else ""),
                    OvnCapabilityError,
                )
            if change.action not in ("create", "update", "delete"):
                raise self.fail(f"unknown action {change.action!r} for {change.kind}")
        singletons = [c for c in changes if NB_TABLES[c.kind].naming == "singleton"]
        of_rows = [c for c in changes if NB_TABLES[c.kind].naming != "singleton"]
        deletes = sorted((c for c in of_rows if c.action == "delete"), key=lambda c: -order[c.kind])
        others = sorted((c for c in of_rows if c.action != "delete"), key=lambda c: order[c.kind])
        self.deleted = {(c.kind, c.key) for c in deletes}
        self._deletes(deletes)
        for change in singletons:
            self._singleton_keys(change)
        for change in others:
            if change.action == "create":
                self._create(change)
            else:
                self._update(change)
        if self.inserts:
            # First: commands that follow may look up a row inserted here by its UUID.
            rows = InsertRows(self.api, self.remote, self.inserts, self.parent_adds)
            self.commands.insert(0, rows)
        # Setting NB_Global keys again is harmless: only rows are guarded against a retry.
        creates = [(c.kind, c.key) for c in of_rows if c.action == "create"]
        return [CreatesStillAbsent(self.api, self.instance, creates), *self.commands]

    def _singleton_keys(self, change: OvnChange) -> None:
        """Set and delete the map keys of the table's one row that the change names: keys in
        ``after`` that differ from ``before`` are set, keys only in ``before`` deleted; every
        other key of the row stays as it is. (No row yet, e.g. before northd ever ran: insert
        one holding just our keys.)"""
        table = change.kind
        spec = NB_TABLES[table]
        who = f"{table} {change.key!r}"
        before, after = dict(change.before or {}), dict(change.after or {})
        row = next(iter(self.idl_tables[table].rows.values()), None)
        columns: dict[str, dict[str, str]] = {}
        for col in sorted(set(before) | set(after)):
            if col not in spec.maps:
                raise self.fail(f"{who}: only the map columns {sorted(spec.maps)} are written")
            old = {str(k): str(v) for k, v in (before.get(col) or {}).items()}
            new = {str(k): str(v) for k, v in (after.get(col) or {}).items()}
            set_keys = {k: v for k, v in new.items() if old.get(k) != v}
            del_keys = [k for k in old if k not in new]
            for key, value in set_keys.items():
                self._validate(table, col, {key: value}, who)
            if row is not None and (set_keys or del_keys):
                self.commands.append(MapMutate(self.api, table, row.uuid, col, set_keys, del_keys))
            columns[col] = set_keys
        if row is None and any(columns.values()):
            self.commands.append(
                self.api.db_create(table, **{c: v for c, v in columns.items() if v})
            )

    def _ext(self, after: Mapping[str, Any]) -> dict[str, str]:
        ext = {str(k): str(v) for k, v in (after.get("external_ids") or {}).items()}
        ext[ownership.OWNER] = self.instance
        if self.revision:
            ext[ownership.REVISION] = self.revision
        return ext

    def _columns(
        self, table: str, values: Mapping[str, Any], who: str, datums: bool = False
    ) -> dict[str, Any]:
        """Symbolic fields -> IDL column values (refs resolved), capability-checked and
        validated; with ``datums``, as the validated ``Datum`` the insert will carry."""
        spec = NB_TABLES[table]
        out: dict[str, Any] = {}
        parent_field = spec.parent.field if spec.parent is not None else ""
        for col, value in values.items():
            if col in (parent_field, "external_ids"):
                continue
            if col not in spec.columns:
                raise self.fail(f"{who}: unknown field {col!r}")
            if not self.schema.has_column(table, col):
                if col in spec.absent and not value:
                    continue
                raise self.fail(
                    f"{who}: column {table}.{col} does not exist in NB schema "
                    f"{self.schema.version}",
                    OvnCapabilityError,
                )
            ref = spec.refs.get(col)
            if ref is not None:
                if ref.kind == "set":
                    value = [self.ref(ref.table, n, who) for n in value or []]
                elif ref.kind == "opt":
                    value = [] if value is None else [self.ref(ref.table, value, who)]
                else:
                    value = self.ref(ref.table, value, who)
            elif col in spec.optional:
                value = [] if value is None else [value]
            elif col in spec.maps:
                value = {str(k): str(v) for k, v in (value or {}).items()}
            elif isinstance(value, tuple):
                value = list(value)
            if datums:
                out[col] = self._datum(table, col, value, who)
                continue
            if ref is None:
                self._validate(table, col, value, who)
            out[col] = value
        return out

    def _datum(self, table: str, col: str, value: Any, who: str) -> Any:
        """``value`` as a ``Datum`` of the server's column type, refused if it does not fit.

        Built directly for the common cases that certainly fit (plain strings; references we
        resolved ourselves to rows of the right table), else through the IDL's full check.
        The insert then carries the Datum as is: the IDL's ``setattr`` would convert and check
        every value a second time, on the connection thread.
        """
        kind = self._kinds.get((table, col))
        if kind is None:
            kind = self._kinds[(table, col)] = ColumnKind.of(
                self.idl_tables[table].columns[col].type
            )
        try:
            return kind.datum(value)
        except InvalidValue as exc:
            raise self.fail(f"{who}: invalid value {value!r} for {table}.{col}: {exc}") from None

    def _validate(self, table: str, col: str, value: Any, who: str) -> None:
        """Check a value against the server's column type *before* building the txn.

        The Python IDL's ``setattr`` logs and silently drops a value that does not fit the
        column (a priority out of range would be committed as 0); we refuse it instead.
        """
        try:
            check_value(self.idl_tables[table].columns[col].type, value)
        except InvalidValue as exc:
            raise self.fail(f"{who}: invalid value {value!r} for {table}.{col}: {exc}") from None

    def _create(self, change: OvnChange) -> None:
        table, after = change.kind, dict(change.after or {})
        spec = NB_TABLES[table]
        who = f"{table} {change.key!r}"
        if change.after is None:
            raise self.fail(f"{who}: create without 'after' fields")
        if (table, change.key) in self.ix.owned:
            raise self.fail(
                f"{who} to create already exists (another writer created it after the plan "
                "was made); re-run plan"
            )
        cols = self._columns(table, after, who, datums=True)
        cols["external_ids"] = self._datum(table, "external_ids", self._ext(after), who)
        # Every reference set column given (an empty Datum is the column's default and is not
        # sent): a child created in the same transaction is added to this Datum below.
        for column, _child in CHILD_COLUMNS.get(table, ()):
            cols.setdefault(column, self._datum(table, column, [], who))
        for column, ref in spec.refs.items():
            if ref.kind == "set":
                cols.setdefault(column, self._datum(table, column, [], who))
        if spec.naming == "unique-name" and "name" not in cols:
            cols["name"] = self._datum(table, "name", change.key, who)
        new_uuid = uuid.uuid4()  # provisional: the IDL names it in the transaction
        self.created[(table, change.key)] = new_uuid
        self.inserts.append((table, new_uuid, cols))
        if spec.parent is not None:
            fname, ptable, column = spec.parent.field, spec.parent.table, spec.parent.column
            parent = after.get(fname)
            if not parent:
                raise self.fail(f"{who}: field {fname!r} (the {ptable} holding it) is required")
            parent_uuid = self.ref(ptable, parent, who)
            created_parent = self.insert_cols.get(parent_uuid)
            if created_parent is not None:
                # The parent is new too: the child goes into the parent's own insert.
                created_parent[column].values[ovs_data.Atom(ovs_types.UuidType, new_uuid)] = None
            else:
                self.parent_adds.setdefault((ptable, parent_uuid, column), []).append(new_uuid)
        self.insert_cols[new_uuid] = cols

    def _update(self, change: OvnChange) -> None:
        table = change.kind
        spec = NB_TABLES[table]
        who = f"{table} {change.key!r}"
        row = self.owned_row(change)
        before = dict(change.before or {})
        after = dict(change.after or {})
        plain: dict[str, Any] = {}
        for col in sorted(set(before) | set(after)):
            old, new = before.get(col), after.get(col)
            if col in after and old == new and col != "external_ids":
                continue
            if col not in after:
                continue  # a field the plan does not manage
            ref = spec.refs.get(col)
            if spec.parent is not None and col == spec.parent.field:
                ptable, pcol = spec.parent.table, spec.parent.column
                if not new:
                    raise self.fail(f"{who}: field {col!r} (the {ptable} holding it) is required")
                live_parent = self.ix.parent.get(table, {}).get(row.uuid)
                if live_parent is not None:
                    self.commands.append(self.api.db_remove(ptable, live_parent, pcol, row.uuid))
                self.commands.append(
                    self.api.db_add(ptable, self.ref(ptable, str(new), who), pcol, row.uuid)
                )
            elif ref is not None and ref.kind == "set":
                old_set, new_set = set(old or []), set(new or [])
                added = [self.ref(ref.table, n, who) for n in sorted(new_set - old_set)]
                removed_names = sorted(old_set - new_set)
                removed = [
                    self.ix.by_name.get(ref.table, {}).get(n)
                    for n in removed_names
                    if (ref.table, n) not in self.created
                ]
                if added:
                    self.commands.append(self.api.db_add(table, row.uuid, col, *added))
                if any(removed):
                    self.commands.append(
                        self.api.db_remove(table, row.uuid, col, *[u for u in removed if u])
                    )
            elif col in spec.maps:
                new_map = self._ext(after) if col == "external_ids" else dict(new or {})
                old_map = dict(old or {}) if col != "external_ids" else dict(row.external_ids)
                set_keys = {k: str(v) for k, v in new_map.items() if old_map.get(k) != str(v)}
                if col == "external_ids":
                    # Keys we do not manage (not in before/after) stay; revision is refreshed.
                    managed_old = dict(old or {})
                    del_keys = [k for k in managed_old if k not in new_map]
                else:
                    del_keys = [k for k in old_map if k not in new_map]
                if set_keys or del_keys:
                    self.commands.append(
                        MapMutate(self.api, table, row.uuid, col, set_keys, del_keys)
                    )
            else:
                plain[col] = new
        if plain:
            cols = self._columns(table, plain, who)
            if cols:
                self.commands.append(self.api.db_set(table, row.uuid, *cols.items()))

    def _deletes(self, deletes: Sequence[OvnChange]) -> None:
        by_parent: dict[tuple[str, uuid.UUID, str], list[uuid.UUID]] = {}
        destroy: list[tuple[str, uuid.UUID]] = []
        deleted_uuids = set()
        for change in deletes:
            row = self.owned_row(change)
            deleted_uuids.add(row.uuid)
        for change in deletes:
            table = change.kind
            parent_spec = NB_TABLES[table].parent
            row = self.ix.owned[(table, change.key)]
            if parent_spec is not None:
                parent = self.ix.parent.get(table, {}).get(row.uuid)
                if parent is not None and parent not in deleted_uuids:
                    key = (parent_spec.table, parent, parent_spec.column)
                    by_parent.setdefault(key, []).append(row.uuid)
            destroy.append((table, row.uuid))
        # One db_remove per parent (the fast path that replaces per-port lsp_del).
        for (ptable, parent, pcol), children in by_parent.items():
            self.commands.append(self.api.db_remove(ptable, parent, pcol, *children))
        for table, row_uuid in destroy:
            clear = [
                c for c in NB_TABLES[table].clear_on_delete if self.schema.has_column(table, c)
            ]
            if clear:
                # The Python IDL never sends a delete for a non-root row (ACL): ovsdb-server
                # garbage-collects it once unreferenced, but checks references *before* that
                # collection, so a Network_Function_Group deleted in the same transaction would
                # still look referenced. Clearing the ACL's reference first makes it commit.
                self.commands.extend(self.api.db_clear(table, row_uuid, c) for c in clear)
            else:
                self.commands.append(self.api.db_destroy(table, row_uuid))
