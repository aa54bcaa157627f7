"""The one registry of the OVN Northbound tables the adapter reads and writes.

Both NB readers (the IDL-backed ``northbound`` with its ``read_cache``, and the one-shot
``snapshot``) and the writer (``transaction``) take every table-specific fact from here: which
columns are mirrored, how a row is keyed, which symbolic fields are references to other rows,
which row holds it (its *parent*), and what a column the server's schema lacks reads as. So
the two readers cannot drift apart, and the writer resolves exactly the references the
readers name.

Adding an NB table we write touches exactly:

1. ``reconciler/core/model/target.py``: its name in ``OVN_TABLES`` (the order: a table is created
   after the tables it references and deleted before them) and its symbolic form in the
   docstring there;
2. one :class:`NbTable` entry in ``_TABLES`` below (:data:`NB_TABLES` is built from it; an
   import-time check refuses a registry that disagrees with ``OVN_TABLES``).

The IDL registration, the read cache, the transaction builder and the snapshot's ``select``
operations derive everything else from those two. Only behaviour none of the fields of
:class:`NbTable` describe needs code: e.g. the pod ports read from ``Logical_Switch_Port``
(:mod:`~reconciler.adapters.ovn.rows`), or a new capability the compiler asks about
(:meth:`NbSchema.capabilities` and ``core.observed.OvnCapabilities``). What *produces* rows of
the new table is the compiler's business (``reconciler.core.steering``), not the adapter's.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.core.model import ownership
from reconciler.core.model.observed import OvnCapabilities
from reconciler.core.model.target import NB_GLOBAL, OVN_TABLES

__all__ = [
    "CHILD_COLUMNS",
    "DB_NAME",
    "NAMED_TABLES",
    "NB_TABLES",
    "OWNED_TABLES",
    "REFERRERS",
    "TABLE_ORDER",
    "NbSchema",
    "NbTable",
    "Parent",
    "Ref",
    "symbolic_columns",
]

DB_NAME = "OVN_Northbound"


@dataclass(frozen=True)
class Ref:
    """A symbolic field that names a row of ``table`` (by its name or ``osc.io/key``)."""

    table: str
    kind: Literal["one", "opt", "set"]
    """``one`` (required), ``opt`` (0..1, ``None`` when empty) or ``set`` (a sorted list)."""


@dataclass(frozen=True)
class Parent:
    """The row is held in the set ``column`` of a row of ``table``; the symbolic ``field``
    names that row (e.g. an LSP's ``switch``: the Logical_Switch whose ``ports`` hold it)."""

    field: str
    table: str
    column: str


@dataclass(frozen=True)
class NbTable:
    """Everything table-specific the adapter knows about one NB table."""

    name: str
    columns: tuple[str, ...]
    """The columns mirrored and read, in symbolic-field order (only those the server's schema
    has are registered). Keeping the list short keeps the initial sync and the cache small."""
    naming: Literal["unique-name", "shared-name", "osc-key", "singleton"]
    """How other rows name a row: by its ``name`` that is unique in the table (also the key of
    our rows), by a ``name`` that need not be unique (switches, routers: we never write them),
    or, for our rows of a table without a unique name, by ``external_ids:osc.io/key``.
    ``singleton``: the table's one row (``NB_Global``), which belongs to the cluster; we own
    some keys of its maps, recorded in a marker (:func:`~reconciler.adapters.ovn.rows.nb_global`
    reads them, ``TransactionBuilder`` writes them key by key), never the row; no row names it."""
    owned: bool = True
    """We write rows of this table (then it must be in ``core.target.OVN_TABLES``); else it is
    only read (switches and routers, which hold our rows)."""
    refs: Mapping[str, Ref] = field(default_factory=dict)
    """Symbolic fields (= columns) that reference other rows."""
    parent: Parent | None = None
    """The row that holds a row of this table in one of its set columns, if any."""
    optional: frozenset[str] = frozenset()
    """Scalar columns of 0..1 values: the symbolic value is the value or ``None``."""
    sparse: frozenset[str] = frozenset()
    """Optional columns (or maps) that are in a row's symbolic form only when set (a service
    chain's child ports have ``parent_name`` and ``tag_request``, a from-lport ACL its
    ``options``; every other row of ours reads as before)."""
    maps: frozenset[str] = frozenset({"external_ids"})
    """Map columns of strings: written key by key as mutations, read as a sorted dict."""
    keep_order: frozenset[str] = frozenset()
    """List columns whose order means something (read as is; every other list is sorted)."""
    absent: Mapping[str, Any] = field(default_factory=dict)
    """Columns older NB schemas lack -> the value they read as there. Writing an empty or zero
    value to such a column is skipped there; any other value is refused (capability error)."""
    foreign_ids: bool = False
    """The ``id`` column is allocated among every writer: the ids of rows we do not own are
    read (``OvnState.used_ids``), so every row is read, not only ours."""
    clear_on_delete: tuple[str, ...] = ()
    """Reference columns cleared instead of deleting the row, where the server has them: the
    server collects the unreferenced non-root row itself (see ``TransactionBuilder``)."""
    since: str | None = None
    """The first OVN release whose NB schema has the table (for the capability error)."""
    read_all: bool = False
    """Every row is read, ours and others' (``Logical_Switch``: every node switch is read for
    its subnet and ports, and a service chain's link switches are ours)."""
    reported: tuple[str, ...] = ()
    """Columns another writer (northd) sets on our rows that we read for reports only (VNF
    health): mirrored and selected with the row, never part of its symbolic form, so they are
    never drift and a change of them never re-plans anything."""

    @property
    def mirrored(self) -> tuple[str, ...]:
        """Every column read: :attr:`columns` and :attr:`reported`."""
        return (*self.columns, *self.reported)

    @property
    def read_in_full(self) -> bool:
        """Every row is read in full (switches, routers, id-allocating tables, NB_Global)."""
        return not self.owned or self.foreign_ids or self.read_all or self.naming == "singleton"

    def key_of(
        self, name: str | None, external_ids: Mapping[str, str], row_uuid: Any
    ) -> str | None:
        """The key of one of our rows: its unique name, else its ``osc.io/key`` (a row without
        one, made by hand, is keyed by its UUID so it is still seen and deleted)."""
        if self.naming == "unique-name":
            return name
        return external_ids.get(ownership.KEY) or f"uuid:{row_uuid}"


_TABLES = (
    NbTable(
        "Logical_Switch",
        ("name", "ports", "other_config", "load_balancer", "load_balancer_group", "external_ids"),
        naming="shared-name",
        read_all=True,  # node switches are not ours; the links of a service chain are
    ),
    NbTable("Logical_Router", ("name", "policies"), naming="shared-name", owned=False),
    NbTable(
        "Logical_Switch_Port",
        (
            "name",
            "addresses",
            "port_security",
            "options",
            "parent_name",
            "tag_request",
            "external_ids",
        ),
        naming="unique-name",
        parent=Parent("switch", "Logical_Switch", "ports"),
        optional=frozenset({"parent_name", "tag_request"}),  # a service chain's VLAN child ports
        sparse=frozenset({"parent_name", "tag_request"}),
        maps=frozenset({"external_ids", "options"}),
        keep_order=frozenset({"addresses"}),
        reported=("up",),  # northd: the port is bound on a chassis (our VNF ports: bound?)
    ),
    NbTable(
        "Port_Group",
        ("name", "ports", "acls", "external_ids"),
        naming="unique-name",
        refs={"ports": Ref("Logical_Switch_Port", "set")},
    ),
    NbTable(
        "ACL",
        (
            "name",
            "direction",
            "priority",
            "tier",
            "match",
            "action",
            "network_function_group",
            "options",
            "external_ids",
        ),
        naming="osc-key",
        refs={"network_function_group": Ref("Network_Function_Group", "opt")},
        parent=Parent("port_group", "Port_Group", "acls"),
        optional=frozenset({"name"}),
        maps=frozenset({"external_ids", "options"}),  # options: apply-after-lb (from-lport)
        sparse=frozenset({"options"}),  # only from-lport steering ACLs have options
        absent={"tier": 0, "network_function_group": None},  # OVN < 23.09 / < 26.03
        clear_on_delete=("network_function_group",),
    ),
    NbTable(
        "Network_Function",
        ("name", "id", "inport", "outport", "health_check", "external_ids"),
        naming="unique-name",
        refs={
            "inport": Ref("Logical_Switch_Port", "one"),
            "outport": Ref("Logical_Switch_Port", "one"),
        },
        foreign_ids=True,
        since="26.03",
    ),
    NbTable(
        "Network_Function_Health_Check",
        ("name", "options", "external_ids"),
        naming="unique-name",
        parent=Parent("network_function", "Network_Function", "health_check"),
        maps=frozenset({"external_ids", "options"}),
        since="26.03",
    ),
    NbTable(
        "Network_Function_Group",
        ("name", "id", "mode", "fallback", "network_function", "external_ids"),
        naming="unique-name",
        refs={"network_function": Ref("Network_Function", "set")},
        optional=frozenset({"fallback"}),
        foreign_ids=True,
        since="26.03",
        reported=("network_function_active",),
    ),
    NbTable(
        "Logical_Router_Policy",
        ("priority", "match", "action", "nexthops", "external_ids"),
        naming="osc-key",
        parent=Parent("router", "Logical_Router", "policies"),
    ),
    NbTable(
        NB_GLOBAL,
        ("options", "external_ids"),
        naming="singleton",
        maps=frozenset({"external_ids", "options"}),
    ),
)

NB_TABLES: dict[str, NbTable] = {t.name: t for t in _TABLES}
"""Every NB table the adapter reads, by name."""


def _owned_in_target_order() -> tuple[NbTable, ...]:
    owned = {t.name for t in _TABLES if t.owned}
    if owned != set(OVN_TABLES):
        raise RuntimeError(
            "reconciler.adapters.ovn.tables and reconciler.core.model.target.OVN_TABLES disagree "
            f"on the tables we write: only here {sorted(owned - set(OVN_TABLES))}, only in "
            f"OVN_TABLES {sorted(set(OVN_TABLES) - owned)}"
        )
    return tuple(NB_TABLES[name] for name in OVN_TABLES)


OWNED_TABLES: tuple[NbTable, ...] = _owned_in_target_order()
"""The tables we write, in ``OVN_TABLES`` order (create in this order, delete in reverse)."""

TABLE_ORDER: dict[str, int] = {name: i for i, name in enumerate(OVN_TABLES)}

NAMED_TABLES: tuple[str, ...] = (
    *(t.name for t in _TABLES if t.naming == "shared-name"),
    *sorted(t.name for t in _TABLES if t.naming == "unique-name"),
)
"""Tables whose rows other rows name by their ``name`` column (every row is indexed)."""

CHILD_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    parent: tuple(
        (t.parent.column, t.name)
        for t in _TABLES
        if t.parent is not None and t.parent.table == parent
    )
    for parent in dict.fromkeys(t.parent.table for t in _TABLES if t.parent is not None)
}
"""Parent table -> its (set column, child table) pairs: the rows it holds."""

REFERRERS: dict[str, frozenset[str]] = {
    referenced: frozenset(
        t.name for t in _TABLES if any(r.table == referenced for r in t.refs.values())
    )
    for referenced in dict.fromkeys(r.table for t in _TABLES for r in t.refs.values())
}
"""Referenced table -> the tables whose symbolic fields name its rows."""


def symbolic_columns(table: str, present: Container[str]) -> Iterator[tuple[str, str, Any]]:
    """How each column of ``NB_TABLES[table].columns`` becomes a symbolic field, in order: the
    one rule the IDL reader (``read_cache``) and the snapshot reader (``snapshot``) share.

    Yields ``(column, rule, extra)``: ``const`` (a column this schema lacks, ``extra`` is its
    value), ``ref`` (``extra`` = (table, "one"|"opt"|"set") it names), ``opt`` (an optional
    scalar), ``map``, or ``plain`` (``extra`` is True when a list keeps its order, else it is
    sorted). A column holding child rows (``Port_Group.acls``) is skipped: the children name
    their parent."""
    spec = NB_TABLES[table]
    held = {column for column, _child in CHILD_COLUMNS.get(table, ())}
    for col in spec.columns:
        if col in held:
            continue
        if col not in present:
            if col in spec.absent:
                yield col, "const", spec.absent[col]
            continue
        ref = spec.refs.get(col)
        if ref is not None:
            yield col, "ref", (ref.table, ref.kind)
        elif col in spec.optional:
            yield col, "opt", True if col in spec.sparse else None
        elif col in spec.maps:
            yield col, "map", True if col in spec.sparse else None
        else:
            yield col, "plain", col in spec.keep_order


@dataclass(frozen=True)
class NbSchema:
    """The server's NB schema (the ``get_schema`` reply): what it has and supports."""

    raw: Mapping[str, Any]

    @property
    def name(self) -> Any:
        return self.raw.get("name")

    @property
    def version(self) -> str:
        return str(self.raw.get("version", ""))

    @property
    def tables(self) -> Mapping[str, Any]:
        return self.raw.get("tables", {})

    def has_table(self, table: str) -> bool:
        return table in self.tables

    def has_column(self, table: str, column: str) -> bool:
        return column in self.tables.get(table, {}).get("columns", {})

    def present(self, table: str, columns: Iterable[str] | None = None) -> tuple[str, ...]:
        """Those of ``columns`` (default: ``NB_TABLES[table].mirrored``) this server has."""
        have = self.tables[table]["columns"]
        wanted = NB_TABLES[table].mirrored if columns is None else columns
        return tuple(c for c in wanted if c in have)

    def capabilities(self) -> OvnCapabilities:
        nf = (
            self.has_table("Network_Function")
            and self.has_table("Network_Function_Group")
            and self.has_column("ACL", "network_function_group")
        )
        return OvnCapabilities(schema_version=self.version, network_function=nf)
