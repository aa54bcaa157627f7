"""Symbolic changes -> the raw OVSDB operations of ONE ``transact`` (RFC 7047 JSON).

:class:`TransactionBuilder` resolves every reference through a :class:`WriteIndex` (names and
keys -> UUIDs, our rows, parents: the IDL cache's or a snapshot's, both read under the write
lock) and knows nothing of the adapter object or the connection that sends the operations.

Why it looks like this:

- Raw operations, not the IDL's transaction objects: a cold apply creates tens of thousands of
  rows, and the IDL builds a ``Row`` and a ``Datum`` per value and re-encodes them on the
  connection thread; here every value is checked against the server's column type and turned
  into its wire form once (:mod:`~reconciler.adapters.ovn.wire`), and the operations are
  serialised by the stdlib's C encoder. What is sent is exactly what a hand-written
  transaction would send.
- Writes are minimal: changed columns only; reference sets and maps as mutations, so
  concurrent writers (OVN-Kubernetes adding ports to a switch, options of others) never race
  us. A map key is set as ``delete`` then ``insert`` of that key (OVSDB's ``insert`` keeps an
  existing key's value).
- Every reference is resolved here (a port *name* silently ignored for a UUID column was one
  of ovsdbapp's traps); one that does not exist is refused before anything is sent.
- New children of an existing parent (a switch's ports, a router's policies) are added by one
  mutation per parent, preceded by a ``wait`` that the parent still exists: without it a
  parent deleted meanwhile would leave the new rows unreferenced and the server would drop
  them silently; with it the whole transaction fails and nothing is committed.
- ``NB_Global`` (the cluster's one row) is never created, updated or deleted as a row of ours:
  its changes set and delete exactly the map keys the plan names, as mutations.
- Retrying is safe because the writer never resends blindly: after a lost reply it finds out
  from the NB whether the transaction committed
  (:func:`~reconciler.adapters.ovn.commit.outcome`) before sending it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reconciler.adapters.ovn.errors import OvnApplyError, OvnCapabilityError, OvnError
from reconciler.adapters.ovn.rows import OwnedRow
from reconciler.adapters.ovn.tables import DB_NAME, NB_TABLES, TABLE_ORDER, NbSchema
from reconciler.adapters.ovn.wire import ColumnCodec, InvalidValue, Ref
from reconciler.core.model import ownership

__all__ = [
    "BuiltTransaction",
    "OvnChange",
    "TransactionBuilder",
    "WriteIndex",
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


class WriteIndex(Protocol):
    """The live rows a transaction refers to, by name or key (UUIDs as strings)."""

    def named(self, table: str, name: str) -> str | None:
        """The row of ``table`` whose name (or, for our rows of a table keyed by
        ``osc.io/key``, whose key) is ``name``."""

    def owned(self, table: str, key: str) -> OwnedRow | None:
        """Our row of ``table`` with this key."""

    def parent_of(self, table: str, child: str) -> str | None:
        """The row whose set column holds the row ``child`` of ``table``."""

    def singleton(self, table: str) -> str | None:
        """The one row of a singleton table (``NB_Global``), if there is one."""


@dataclass
class BuiltTransaction:
    """The ``transact`` parameters, and how to explain a failed operation."""

    operations: list[dict[str, Any]]
    """Every operation, the lock assertion first."""
    creates: int = 0
    failures: dict[int, str] = field(default_factory=dict)
    """Operation index -> what it means when that operation fails (the parent waits)."""

    def params(self) -> list[Any]:
        return [DB_NAME, *self.operations]

    def sent(self) -> None:
        """Keep only what explains a failed operation (its kind and table): a cold apply's
        operations are tens of thousands of rows the process need not hold any more."""
        self.operations = [
            {"op": op.get("op"), "table": op.get("table", "")} for op in self.operations
        ]


_MISSING = object()


def _where_uuid(row_uuid: str) -> list[Any]:
    return [["_uuid", "==", ["uuid", row_uuid]]]


@dataclass(kw_only=True)
class TransactionBuilder:
    """Turns symbolic changes into the operations of one transaction.

    ``types`` are the server's column types (table -> column -> ``ovs.db.types.Type``),
    ``index`` the live rows, read under the write lock ``lock`` (asserted by the first
    operation, so the server refuses the commit if the lock was lost meanwhile).
    """

    types: Mapping[str, Mapping[str, Any]]
    schema: NbSchema
    index: WriteIndex
    instance: str
    remote: str
    revision: str | None
    lock: str
    created: dict[tuple[str, str], str] = field(default_factory=dict, init=False)
    """(table, name/key) -> uuid-name of a row this transaction inserts."""
    insert_rows: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict, init=False)
    """uuid-name -> (table, row)."""
    inserts: list[dict[str, Any]] = field(default_factory=list, init=False)
    new_children: dict[tuple[str, str], list[Ref]] = field(default_factory=dict, init=False)
    """Children inserted under a parent inserted here: (uuid-name, column) -> refs."""
    parent_adds: dict[tuple[str, str, str], list[Ref]] = field(default_factory=dict, init=False)
    """(parent table, existing parent uuid, set column) -> children inserted here."""
    deleted: set[tuple[str, str]] = field(default_factory=set, init=False)
    operations: list[dict[str, Any]] = field(default_factory=list, init=False)
    _codecs: dict[tuple[str, str], ColumnCodec] = field(default_factory=dict, init=False)
    _plans: dict[str, dict[str, tuple[str, Any]]] = field(default_factory=dict, init=False)

    def fail(self, message: str, cls: type[OvnError] = OvnApplyError) -> OvnError:
        return cls(f"cannot apply to OVN NB at {self.remote}: {message}; nothing was committed")

    # references ------------------------------------------------------------------------------
    def ref(self, table: str, name: str, by: str) -> Ref:
        """The row this transaction creates, or the existing row named ``name``."""
        named = self.created.get((table, name))
        if named is not None:
            return Ref(named=named)
        if (table, name) in self.deleted:
            raise self.fail(f"{by} references {table} {name!r}, which this plan deletes")
        if NB_TABLES[table].naming == "osc-key":
            row = self.index.owned(table, name)
            if row is not None:
                return Ref(uuid=row.uuid)
        found = self.index.named(table, name)
        if found is None:
            raise self.fail(f"{by} references {table} {name!r}, which does not exist")
        return Ref(uuid=found)

    def owned_row(self, change: OvnChange) -> OwnedRow:
        row = self.index.owned(change.kind, change.key)
        if row is None:
            raise self.fail(
                f"{change.kind} {change.key!r} to {change.action} is not (or no longer) owned by "
                f"{self.instance!r}; re-run plan"
            )
        return row

    # values ----------------------------------------------------------------------------------
    def encode(self, table: str, col: str, value: Any, who: str) -> Any:
        """``value`` in its wire form, refused if it does not fit the server's column."""
        codec = self._codecs.get((table, col))
        if codec is None:
            codec = self._codecs[(table, col)] = ColumnCodec.of(self.types[table][col])
        try:
            return codec.encode(value)
        except InvalidValue as exc:
            shown = value.wire() if isinstance(value, Ref) else value
            raise self.fail(f"{who}: invalid value {shown!r} for {table}.{col}: {exc}") from None

    def _ext(self, after: Mapping[str, Any]) -> dict[str, str]:
        ext = {str(k): str(v) for k, v in (after.get("external_ids") or {}).items()}
        ext[ownership.OWNER] = self.instance
        if self.revision:
            ext[ownership.REVISION] = self.revision
        return ext

    def _column_plan(self, table: str) -> dict[str, tuple[str, Any]]:
        """Per symbolic field of ``table``: how :meth:`_columns` turns it into a column,
        decided once per table (``skip``, ``absent`` (the server lacks the column: the value
        it reads as), ``refset``/``ref`` (the referenced table), ``map`` or ``plain``)."""
        plan = self._plans.get(table)
        if plan is not None:
            return plan
        spec = NB_TABLES[table]
        plan = {}
        for col in spec.columns:
            ref = spec.refs.get(col)
            if (spec.parent is not None and col == spec.parent.field) or col == "external_ids":
                plan[col] = ("skip", None)
            elif not self.schema.has_column(table, col):
                plan[col] = ("absent", spec.absent.get(col, _MISSING))
            elif ref is not None:
                plan[col] = ("refset" if ref.kind == "set" else "ref", ref.table)
            elif col in spec.maps:
                plan[col] = ("map", None)
            else:
                plan[col] = ("plain", None)
        if spec.parent is not None:
            plan[spec.parent.field] = ("skip", None)
        plan["external_ids"] = ("skip", None)
        self._plans[table] = plan
        return plan

    def _columns(self, table: str, values: Mapping[str, Any], who: str) -> dict[str, Any]:
        """Symbolic fields -> wire values (references resolved), capability-checked and
        validated. The parent field and ``external_ids`` are the caller's."""
        plan = self._column_plan(table)
        out: dict[str, Any] = {}
        for col, value in values.items():
            how, extra = plan.get(col, ("unknown", None))
            if how == "skip":
                continue
            if how == "unknown":
                raise self.fail(f"{who}: unknown field {col!r}")
            if how == "absent":
                if extra is not _MISSING and not value:
                    continue
                raise self.fail(
                    f"{who}: column {table}.{col} does not exist in NB schema "
                    f"{self.schema.version}",
                    OvnCapabilityError,
                )
            if how == "refset":
                value = [self.ref(extra, n, who) for n in value or []]
            elif how == "ref":
                if value is not None:
                    value = self.ref(extra, value, who)
            elif how == "map":
                value = {str(k): str(v) for k, v in (value or {}).items()}
            elif isinstance(value, tuple):
                value = list(value)
            out[col] = self.encode(table, col, value, who)
        return out

    # building --------------------------------------------------------------------------------
    def build(self, changes: Sequence[OvnChange]) -> BuiltTransaction:
        """Every operation of the transaction, in order (the lock assertion first)."""
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
        for (named, column), children in self.new_children.items():
            table, row = self.insert_rows[named]
            row[column] = self.encode(table, column, children, table)
        failures: dict[int, str] = {}
        adds: list[dict[str, Any]] = []
        for (ptable, parent, column), children in self.parent_adds.items():
            failures[1 + len(self.inserts) + len(adds)] = (
                f"the {ptable} that should hold new rows no longer exists (deleted by another "
                "writer?); nothing was committed, re-run plan"
            )
            adds.append(
                {
                    "op": "wait",
                    "timeout": 0,
                    "table": ptable,
                    "where": _where_uuid(parent),
                    "columns": ["_uuid"],
                    "until": "==",
                    "rows": [{"_uuid": ["uuid", parent]}],
                }
            )
            adds.append(
                {
                    "op": "mutate",
                    "table": ptable,
                    "where": _where_uuid(parent),
                    "mutations": [[column, "insert", ["set", [c.wire() for c in children]]]],
                }
            )
        operations = [
            {"op": "assert", "lock": self.lock},
            *self.inserts,
            *adds,
            *self.operations,
        ]
        return BuiltTransaction(operations, creates=len(self.inserts), failures=failures)

    def _map_mutation(
        self, table: str, col: str, set_keys: Mapping[str, str], del_keys: Iterable[str], who: str
    ) -> list[list[Any]]:
        """Mutations that set ``set_keys`` and delete ``del_keys`` of a map column, leaving
        every other key as it is."""
        remove = sorted(set(del_keys) | set(set_keys))
        mutations: list[list[Any]] = []
        if remove:
            mutations.append([col, "delete", ["set", remove]])
        if set_keys:
            mutations.append([col, "insert", self.encode(table, col, dict(set_keys), who)])
        return mutations

    def _singleton_keys(self, change: OvnChange) -> None:
        """Set and delete the map keys of the table's one row that the change names: keys in
        ``after`` that differ from ``before`` are set, keys only in ``before`` deleted; every
        other key of the row stays as it is. (No row yet, e.g. before northd ever ran: insert
        one holding just our keys.)"""
        table = change.kind
        spec = NB_TABLES[table]
        who = f"{table} {change.key!r}"
        before, after = dict(change.before or {}), dict(change.after or {})
        row = self.index.singleton(table)
        mutations: list[list[Any]] = []
        new_row: dict[str, Any] = {}
        for col in sorted(set(before) | set(after)):
            if col not in spec.maps:
                raise self.fail(f"{who}: only the map columns {sorted(spec.maps)} are written")
            old = {str(k): str(v) for k, v in (before.get(col) or {}).items()}
            new = {str(k): str(v) for k, v in (after.get(col) or {}).items()}
            set_keys = {k: v for k, v in new.items() if old.get(k) != v}
            del_keys = [k for k in old if k not in new]
            mutations += self._map_mutation(table, col, set_keys, del_keys, who)
            if set_keys:
                new_row[col] = self.encode(table, col, set_keys, who)
        if row is not None and mutations:
            self.operations.append(
                {"op": "mutate", "table": table, "where": _where_uuid(row), "mutations": mutations}
            )
        elif row is None and new_row:
            self.operations.append({"op": "insert", "table": table, "row": new_row})

    def _create(self, change: OvnChange) -> None:
        table, after = change.kind, dict(change.after or {})
        spec = NB_TABLES[table]
        who = f"{table} {change.key!r}"
        if change.after is None:
            raise self.fail(f"{who}: create without 'after' fields")
        if self.index.owned(table, change.key) is not None:
            raise self.fail(
                f"{who} to create already exists (another writer created it after the plan "
                "was made); re-run plan"
            )
        row = self._columns(table, after, who)
        row["external_ids"] = self.encode(table, "external_ids", self._ext(after), who)
        if spec.naming == "unique-name" and "name" not in row:
            row["name"] = self.encode(table, "name", change.key, who)
        named = f"row{len(self.inserts)}"
        self.created[(table, change.key)] = named
        self.insert_rows[named] = (table, row)
        self.inserts.append({"op": "insert", "table": table, "uuid-name": named, "row": row})
        if spec.parent is not None:
            fname, ptable, column = spec.parent.field, spec.parent.table, spec.parent.column
            parent = after.get(fname)
            if not parent:
                raise self.fail(f"{who}: field {fname!r} (the {ptable} holding it) is required")
            parent_ref = self.ref(ptable, parent, who)
            if parent_ref.named is not None:
                # The parent is new too: the child goes into the parent's own insert.
                self.new_children.setdefault((parent_ref.named, column), []).append(
                    Ref(named=named)
                )
            else:
                key = (ptable, str(parent_ref.uuid), column)
                self.parent_adds.setdefault(key, []).append(Ref(named=named))

    def _update(self, change: OvnChange) -> None:
        table = change.kind
        spec = NB_TABLES[table]
        who = f"{table} {change.key!r}"
        row = self.owned_row(change)
        where = _where_uuid(row.uuid)
        before = dict(change.before or {})
        after = dict(change.after or {})
        plain: dict[str, Any] = {}
        mutations: list[list[Any]] = []
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
                target = self.ref(ptable, str(new), who)
                live_parent = self.index.parent_of(table, row.uuid)
                if live_parent is not None:
                    self.operations.append(
                        {
                            "op": "mutate",
                            "table": ptable,
                            "where": _where_uuid(live_parent),
                            "mutations": [[pcol, "delete", ["set", [["uuid", row.uuid]]]]],
                        }
                    )
                self.operations.append(
                    {
                        "op": "mutate",
                        "table": ptable,
                        "where": [["_uuid", "==", target.wire()]],
                        "mutations": [[pcol, "insert", ["set", [["uuid", row.uuid]]]]],
                    }
                )
            elif ref is not None and ref.kind == "set":
                old_set, new_set = set(old or []), set(new or [])
                added = [self.ref(ref.table, n, who).wire() for n in sorted(new_set - old_set)]
                removed = [
                    self.index.named(ref.table, n)
                    for n in sorted(old_set - new_set)
                    if (ref.table, n) not in self.created
                ]
                if added:
                    mutations.append([col, "insert", ["set", added]])
                gone = [["uuid", u] for u in removed if u]
                if gone:
                    mutations.append([col, "delete", ["set", gone]])
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
                mutations += self._map_mutation(table, col, set_keys, del_keys, who)
            else:
                plain[col] = new
        if plain:
            cols = self._columns(table, plain, who)
            if cols:
                self.operations.append({"op": "update", "table": table, "where": where,
                                        "row": cols})  # fmt: skip
        if mutations:
            self.operations.append(
                {"op": "mutate", "table": table, "where": where, "mutations": mutations}
            )

    def _deletes(self, deletes: Sequence[OvnChange]) -> None:
        rows = {(c.kind, c.key): self.owned_row(c) for c in deletes}
        deleted_uuids = {row.uuid for row in rows.values()}
        by_parent: dict[tuple[str, str, str], list[str]] = {}
        for change in deletes:
            parent_spec = NB_TABLES[change.kind].parent
            row = rows[(change.kind, change.key)]
            if parent_spec is None:
                continue
            parent = self.index.parent_of(change.kind, row.uuid)
            if parent is not None and parent not in deleted_uuids:
                key = (parent_spec.table, parent, parent_spec.column)
                by_parent.setdefault(key, []).append(row.uuid)
        # One mutation per parent (never one per child: each would rewrite the parent's set).
        for (ptable, parent, pcol), children in by_parent.items():
            self.operations.append(
                {
                    "op": "mutate",
                    "table": ptable,
                    "where": _where_uuid(parent),
                    "mutations": [[pcol, "delete", ["set", [["uuid", c] for c in children]]]],
                }
            )
        # Rows of non-root tables (ports, ACLs) are deleted explicitly too: the server checks
        # references before it collects unreferenced rows, so an ACL left to the collector
        # would still count as referencing its Network_Function_Group.
        for change in deletes:
            row = rows[(change.kind, change.key)]
            self.operations.append(
                {"op": "delete", "table": change.kind, "where": _where_uuid(row.uuid)}
            )
