"""One consistent, IDL-free read of the OVN Northbound DB for one-shot commands (cold ``plan``).

Why it exists: :class:`reconciler.adapters.ovn.northbound.OvnNorthbound` mirrors the tables in
ovs's pure-Python IDL, which is the right tool for a long-running loop (it follows other writers
and holds the cache ``apply`` builds its transaction from) but is costly per row to build and
keeps every row alive. A ``plan`` run as a fresh process needs none of that: it reads the
database once, diffs and exits. So :func:`read_snapshot` sends ONE JSON-RPC ``transact`` made of
``select`` operations (the server executes a transaction atomically, so the result is one
consistent snapshot, never a half-loaded cache) and parses the reply with the stdlib's
C-accelerated :mod:`json` (:mod:`~reconciler.adapters.ovn.rpc`).

What it selects (only what :meth:`OvnNorthbound.read` looks at; derived from
:mod:`~reconciler.adapters.ovn.tables`):

- every switch and router (names, port/policy lists, subnet, load balancers);
- pod LSPs (``external_ids:pod=true``) with the columns a :class:`PodPort` needs, and only
  ``_uuid``+``name`` of every other LSP (the names Port_Group/Network_Function references
  resolve to);
- the rows of our instance in full (``external_ids`` *includes* ``osc.io/owner=<instance>``,
  evaluated by the server); of other writers' rows only ``_uuid``+``name`` and the set columns
  holding children (e.g. other Port_Groups' ``acls``: an owned ACL may sit in one), except
  the few rows of id-allocating tables (Network_Function(_Group)), read in full (foreign ids).

The result equals ``OvnNorthbound.connect(settings).read()`` for the same database (same
symbolic rows, sorting, reference names, ``used_ids`` and capabilities): both follow
:func:`~reconciler.adapters.ovn.tables.symbolic_columns` and :mod:`~reconciler.adapters.ovn.rows`,
and the tests assert it on real ``ovsdb-server`` processes for both NB schemas. With a Raft
remote list only the leader is read, so a plan never diffs against a stale follower.

It is read-only: it takes no lock and writes nothing, so it needs no IDL to build a
transaction from.
"""

from __future__ import annotations

import gc
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.ovn.errors import OvnError, OvnSnapshotError
from reconciler.adapters.ovn.rows import OwnedRow, is_ours, nb_global, pod_port, switch
from reconciler.adapters.ovn.rpc import Session, query_leader, rpc_error
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.symbolic import Read, SymbolicRows, active_functions, owned_order
from reconciler.adapters.ovn.tables import (
    CHILD_COLUMNS,
    DB_NAME,
    NAMED_TABLES,
    NB_TABLES,
    OWNED_TABLES,
    REFERRERS,
    NbSchema,
    NbTable,
)
from reconciler.core.model import observed, ovn_kubernetes, ownership
from reconciler.core.model.observed import OvnRow, OvnState
from reconciler.core.model.ovn_kubernetes import OvnKubernetesRows
from reconciler.core.model.target import NB_GLOBAL

__all__ = [
    "OvnSnapshot",
    "OvnSnapshotError",
    "SnapshotIndex",
    "read_on",
    "read_snapshot",
    "snapshot_operations",
]

_POD_TABLE = "Logical_Switch_Port"
_POD_TRUE = ["map", [["pod", "true"]]]
_POD_COLUMNS = ("name", "addresses", "options", "external_ids")
_NF, _NFG, _ACTIVE = "Network_Function", "Network_Function_Group", "network_function_active"
_LSP = "Logical_Switch_Port"


# ---------------------------------------------------------------------------------------------
# what to select


def _owner_is(instance: str, function: str) -> list[Any]:
    return ["external_ids", function, ["map", [[ownership.OWNER, instance]]]]


@dataclass(frozen=True)
class _Select:
    """One ``select`` of the snapshot transaction and what its rows are for."""

    purpose: str  # "all", "owned", "pods", "foreign" (other writers' names + child columns)
    table: str
    where: tuple[Any, ...]
    columns: tuple[str, ...]

    def op(self) -> dict[str, Any]:
        return {
            "op": "select",
            "table": self.table,
            "where": list(self.where),
            "columns": ["_uuid", *self.columns],
        }


def _foreign_columns(spec: NbTable) -> tuple[str, ...]:
    """What is read of other writers' rows of a table we write: the name when our rows name
    them (references, parents) and the set columns that may hold our rows."""
    held = tuple(column for column, _child in CHILD_COLUMNS.get(spec.name, ()))
    if held or spec.name in REFERRERS:
        return ("name", *held)
    return ()


def _selects(schema: NbSchema, instance: str) -> list[_Select]:
    out: list[_Select] = []
    for spec in NB_TABLES.values():
        if not spec.owned:
            out.append(_Select("all", spec.name, (), schema.present(spec.name)))
    # Pod ports in full, every other LSP by name only: these are also the foreign LSP rows.
    pods = (["external_ids", "includes", _POD_TRUE],)
    out.append(_Select("pods", _POD_TABLE, pods, schema.present(_POD_TABLE, _POD_COLUMNS)))
    others = (["external_ids", "excludes", _POD_TRUE],)
    out.append(_Select("foreign", _POD_TABLE, others, ("name",)))
    for spec in OWNED_TABLES:
        table = spec.name
        if not schema.has_table(table):
            continue
        columns = schema.present(table)
        if spec.read_in_full:
            out.append(_Select("all", table, (), columns))
            continue
        out.append(_Select("owned", table, (_owner_is(instance, "includes"),), columns))
        foreign = _foreign_columns(spec)
        if foreign and table != _POD_TABLE:
            where = (_owner_is(instance, "excludes"),)
            out.append(_Select("foreign", table, where, schema.present(table, foreign)))
    # OVN-Kubernetes' generation (reconciler.core.model.ovn_kubernetes): the external_ids of
    # every Port_Group not ours, and the router policies at EgressIP's no-reroute priority.
    out.append(
        _Select("ovnk", "Port_Group", (_owner_is(instance, "excludes"),), ("name", "external_ids"))
    )
    no_reroute = (["priority", "==", ovn_kubernetes.NO_REROUTE_PRIORITY],)
    out.append(
        _Select(
            "ovnk",
            "Logical_Router_Policy",
            no_reroute,
            ("priority", "action", "match", "external_ids"),
        )
    )
    return out


def snapshot_operations(schema: Mapping[str, Any], instance: str) -> list[dict[str, Any]]:
    """The ``select`` operations of the snapshot transaction for this server ``schema``.

    Public so a test or a tool can show exactly what is read (and send it with ``ovsdb-client
    transact``); :func:`read_snapshot` sends them as one transaction.
    """
    return [s.op() for s in _selects(NbSchema(schema), instance)]


# ---------------------------------------------------------------------------------------------
# JSON datum -> the values the symbolic conversion reads (as the IDL reader gives them)


def _atom(value: Any) -> Any:
    """A JSON atom; UUIDs (``["uuid", s]``) become their string."""
    if type(value) is list:
        return value[1]
    return value


def _as_set(value: Any) -> list[Any]:
    """Any set datum (a bare atom when it has one element) as a list of atoms."""
    if type(value) is list and value[0] == "set":
        return [_atom(v) for v in value[1]]
    return [_atom(value)]


def _as_map(value: Any) -> dict[Any, Any]:
    return {_atom(k): _atom(v) for k, v in value[1]}


def _str_map(value: Any) -> dict[str, str]:
    """``["map", [[k, v], ...]]`` of plain atoms (external_ids, options): no atom checks."""
    return dict(value[1])


def _base_type(base: Any) -> str:
    return base if isinstance(base, str) else str(base.get("type", ""))


def json_reader(col: str, column_type: Any) -> tuple[Read, str]:
    """``(read, shape)`` of column ``col`` of an OVSDB column type for JSON rows: ``read(row)``
    is the value :mod:`~reconciler.adapters.ovn.symbolic` wants (UUIDs as strings, a map as a
    dict sorted by key, a set as a new list); ``shape`` is ``"map"``, ``"scalar"`` (exactly
    one value) or ``"set"``. Chosen once per column; each reader is one call per value (the
    snapshot converts tens of thousands of rows)."""
    if isinstance(column_type, str):
        key, one = column_type, True
    else:
        key = _base_type(column_type["key"])
        if "value" in column_type:
            if key == "uuid" or _base_type(column_type["value"]) == "uuid":

                def read_map(row: Any) -> Any:
                    return dict(sorted(_as_map(row[col]).items()))

                return read_map, "map"

            # ovsdb-server sends a map sorted by key (bytewise, which for UTF-8 is code point
            # order, Python's): a map of plain strings is already in the order
            # ``dict(sorted(...))`` gives it.
            def read_str_map(row: Any) -> Any:
                return dict(row[col][1])

            return read_str_map, "map"
        one = column_type.get("min", 1) == 1 and column_type.get("max", 1) == 1
    if one and key != "uuid":
        return operator.itemgetter(col), "scalar"
    if one:

        def read_ref(row: Any) -> Any:
            value = row[col]
            return value[1] if type(value) is list else value

        return read_ref, "scalar"
    if key == "uuid":

        def read_refs(row: Any) -> Any:
            value = row[col]
            return [v[1] for v in value[1]] if value[0] == "set" else [value[1]]

        return read_refs, "set"

    def read_set(row: Any) -> Any:  # only ``["set", [...]]`` is a JSON list here
        value = row[col]
        return list(value[1]) if type(value) is list else [value]

    return read_set, "set"


def json_symbolic(tables: Mapping[str, Any]) -> SymbolicRows:
    """The symbolic conversion of JSON rows of the server's ``tables`` (its schema's), the
    rule the IDL reader follows on its cache's rows."""
    return SymbolicRows(
        lambda table: tables[table]["columns"],
        lambda table, col: json_reader(col, tables[table]["columns"][col]["type"]),
    )


# ---------------------------------------------------------------------------------------------
# the snapshot


class SnapshotIndex:
    """The rows of a snapshot a transaction refers to, by name or key: a
    :class:`~reconciler.adapters.ovn.transaction.WriteIndex` (UUIDs as strings)."""

    def __init__(
        self,
        names: Mapping[str, Mapping[str, str]],
        owned: Mapping[tuple[str, str], OwnedRow],
        parents: Mapping[str, Mapping[str, str]],
        singletons: Mapping[str, str],
    ) -> None:
        self._names = names
        self._by_name: dict[str, dict[str, str]] = {}
        self._owned = owned
        self._parents = parents
        self._singletons = singletons

    def named(self, table: str, name: str) -> str | None:
        by_name = self._by_name.get(table)
        if by_name is None:
            by_name = self._by_name[table] = {n: u for u, n in self._names.get(table, {}).items()}
            if NB_TABLES[table].naming == "osc-key":
                by_name.update({k: r.uuid for (t, k), r in self._owned.items() if t == table})
        return by_name.get(name)

    def owned(self, table: str, key: str) -> OwnedRow | None:
        return self._owned.get((table, key))

    def parent_of(self, table: str, child: str) -> str | None:
        return self._parents.get(table, {}).get(child)

    def singleton(self, table: str) -> str | None:
        return self._singletons.get(table)


class _Builder:
    """Turns the rows of the snapshot transaction into the :class:`OvnState` of ``read()``."""

    def __init__(self, schema: NbSchema, instance: str, want_index: bool = False) -> None:
        self.schema = schema
        self.instance = instance
        self.want_index = want_index
        """Also collect what :meth:`index` needs (a writer's read)."""
        self.tables: Mapping[str, Any] = schema.tables
        self.names: dict[str, dict[str, str]] = {}
        self.owned_rows: dict[str, list[dict[str, Any]]] = {}
        self.all_rows: dict[str, list[dict[str, Any]]] = {}
        self.pods: list[dict[str, Any]] = []
        self.foreign_rows: dict[str, list[dict[str, Any]]] = {}
        self.ovnk_rows: dict[str, list[dict[str, Any]]] = {}
        self.symbolic = json_symbolic(self.tables)
        self.owned_index: dict[tuple[str, str], OwnedRow] = {}
        self.parent_index: dict[str, dict[str, str]] = {}

    def index(self) -> SnapshotIndex:
        """What a transaction built from this snapshot refers to (after :meth:`state`)."""
        singletons = {
            table: rows[0]["_uuid"][1]
            for table, rows in self.all_rows.items()
            if rows and NB_TABLES[table].naming == "singleton"
        }
        return SnapshotIndex(self.names, self.owned_index, self.parent_index, singletons)

    def add(self, select: _Select, rows: list[dict[str, Any]]) -> None:
        table = select.table
        if select.purpose == "all":
            self.all_rows[table] = rows
            if NB_TABLES[table].owned:
                self.owned_rows[table] = [r for r in rows if self._is_mine(r)]
        elif select.purpose == "owned":
            self.owned_rows[table] = rows
        elif select.purpose == "pods":
            self.pods = rows
        elif select.purpose == "foreign":
            self.foreign_rows[table] = rows
        elif select.purpose == "ovnk":
            self.ovnk_rows[table] = rows
            return
        if "name" in select.columns and table in NAMED_TABLES:
            names = self.names.setdefault(table, {})
            for row in rows:
                names[row["_uuid"][1]] = row["name"]

    def _is_mine(self, row: Mapping[str, Any]) -> bool:
        return is_ours(_str_map(row["external_ids"]), self.instance)

    def capabilities(self) -> observed.OvnCapabilities:
        return self.schema.capabilities()

    def state(self) -> OvnState:
        switches: list[observed.Switch] = []
        pod_ports: list[observed.PodPort] = []
        pods = {row["_uuid"][1]: row for row in self.pods}
        self.pods = []
        for ls in self.all_rows["Logical_Switch"]:
            ls_name = ls["name"]
            other = _str_map(ls["other_config"]) if "other_config" in ls else {}
            lbs = bool(
                ("load_balancer" in ls and _as_set(ls["load_balancer"]))
                or ("load_balancer_group" in ls and _as_set(ls["load_balancer_group"]))
            )
            switches.append(switch(ls_name, other, lbs))
            for port_uuid in _as_set(ls["ports"]):
                lsp = pods.get(port_uuid)
                if lsp is None:
                    continue
                port = pod_port(
                    lsp["name"],
                    ls_name,
                    _str_map(lsp["external_ids"]),
                    _as_set(lsp["addresses"]),
                    _str_map(lsp["options"]),
                )
                if port is not None:
                    pod_ports.append(port)
        del pods
        routers = sorted(r["name"] for r in self.all_rows["Logical_Router"])
        nb_view, nb_row = self._nb_global()
        ports_up = {  # northd writes true or false; empty: no northd has judged it (unknown)
            str(row["name"]): row["up"]
            for row in self.owned_rows.get(_LSP, ())
            if isinstance(row.get("up"), bool)
        }
        owned = self._owned()
        if nb_row is not None:
            owned.append(nb_row)
        used: dict[str, tuple[int, ...]] = {}
        for spec in OWNED_TABLES:
            if spec.foreign_ids and spec.name in self.all_rows:
                used[spec.name] = tuple(
                    sorted(r["id"] for r in self.all_rows[spec.name] if not self._is_mine(r))
                )
        switches.sort(key=lambda s: s.name)
        pod_ports.sort(key=lambda p: p.name)
        return OvnState(
            switches=tuple(switches),
            routers=tuple(routers),
            pod_ports=tuple(pod_ports),
            owned=tuple(owned),
            capabilities=self.capabilities(),
            used_ids=used,
            nb_global=nb_view,
            nf_active=self._nf_active(),
            ports_up=ports_up,
            ovn_kubernetes=self._ovn_kubernetes(),
        )

    def _ovn_kubernetes(self) -> OvnKubernetesRows:
        groups = self.ovnk_rows.get("Port_Group", ())
        policies = self.ovnk_rows.get("Logical_Router_Policy", ())
        self.ovnk_rows = {}
        return ovn_kubernetes.evidence(
            ((r["name"], _str_map(r["external_ids"])) for r in groups),
            (
                (r["priority"], r["action"], r["match"], _str_map(r["external_ids"]))
                for r in policies
            ),
        )

    def _nb_global(self) -> tuple[observed.NbGlobal, OvnRow | None]:
        row = next(iter(self.all_rows.get(NB_GLOBAL, ())), None)
        if row is None:
            return observed.NbGlobal(), None
        return nb_global(_str_map(row["options"]), _str_map(row["external_ids"]), self.instance)

    def _nf_active(self) -> dict[str, str | None]:
        groups = [
            (row["name"], _as_set(row[_ACTIVE]))
            for row in self.owned_rows.get(_NFG, ())
            if _ACTIVE in row
        ]
        return active_functions(groups, self.names.get(_NF, {}))

    def _parents(self, spec: NbTable, children: set[str]) -> dict[str, str]:
        """child UUID -> parent UUID for the owned ``children`` of ``spec``."""
        assert spec.parent is not None
        parent_table, column = spec.parent.table, spec.parent.column
        if parent_table not in self.tables:
            return {}
        rows: Iterable[dict[str, Any]]
        if NB_TABLES[parent_table].read_in_full:
            rows = self.all_rows.get(parent_table, [])
        else:
            rows = [
                *self.owned_rows.get(parent_table, []),
                *self.foreign_rows.get(parent_table, []),
            ]
        out: dict[str, str] = {}
        for prow in rows:
            for cu in _as_set(prow[column]):
                if cu in children:
                    out[cu] = prow["_uuid"][1]
        return out

    def _owned(self) -> list[OvnRow]:
        """Our rows, symbolic. Each table's JSON rows are dropped once converted (every
        parent is found first): a converged NB's snapshot is mostly our rows, and holding
        both forms of all of them at once would double the read's peak memory."""
        keyed_by_table: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for spec in OWNED_TABLES:
            table = spec.name
            if table not in self.tables or spec.naming == "singleton":
                continue
            keyed: list[tuple[str, dict[str, Any]]] = []
            for row in self.owned_rows.get(table, []):
                ext = _str_map(row["external_ids"])
                key = spec.key_of(row.get("name"), ext, row["_uuid"][1])
                if key is not None:  # always: JSON rows carry their name
                    keyed.append((key, row))
            keyed_by_table[table] = keyed
            if spec.parent is not None:
                children = {row["_uuid"][1] for _k, row in keyed}
                self.parent_index[table] = self._parents(spec, children)
        rows: dict[tuple[str, str], OvnRow] = {}
        for table, keyed in keyed_by_table.items():
            parents = self.parent_index.get(table, {})
            for key, row in keyed:
                parent = parents.get(row["_uuid"][1])
                rows[(table, key)] = self.symbolic.row(table, key, row, self.names, parent)
                if self.want_index:
                    self.owned_index[(table, key)] = OwnedRow(
                        row["_uuid"][1], _str_map(row["external_ids"])
                    )
            keyed.clear()
            if not NB_TABLES[table].read_in_full:
                self.owned_rows[table] = []
                self.foreign_rows.pop(table, None)
        return sorted(rows.values(), key=owned_order)


def read_on(
    session: Session, raw_schema: dict[str, Any], settings: OvnSettings, *, index: bool = True
) -> tuple[OvnState, SnapshotIndex | None]:
    """The snapshot transaction on an open ``session`` (e.g. one holding the write lock):
    the state ``read()`` gives, and (``index``) the index a transaction built from it
    needs."""
    schema = NbSchema(raw_schema)
    selects = _selects(schema, settings.instance)
    txn_id = session.send("transact", [DB_NAME, *(s.op() for s in selects)])
    reply = session.reply(txn_id)
    error = rpc_error(reply)
    results = reply.get("result")
    if error is None and isinstance(results, list):
        error = next(
            (rpc_error(r) for r in results if isinstance(r, dict) and r.get("error")), None
        )
    if error is not None or not isinstance(results, list) or len(results) < len(selects):
        raise OvnSnapshotError(
            f"cannot read OVN NB at {settings.remote} ({session.member}): "
            f"the snapshot transaction failed: {error or 'malformed reply'}"
        )
    builder = _Builder(schema, settings.instance, want_index=index)
    for select, result in zip(selects, results, strict=False):
        builder.add(select, result["rows"])
    del reply, results
    state = builder.state()
    return state, builder.index() if index else None


def _select_all(settings: OvnSettings) -> Callable[[Session, dict[str, Any]], OvnState]:
    """The query :func:`read_snapshot` runs on the leader: the snapshot transaction."""

    def query(session: Session, raw_schema: dict[str, Any]) -> OvnState:
        return read_on(session, raw_schema, settings, index=False)[0]

    return query


def read_snapshot(settings: OvnSettings) -> OvnState:
    """One consistent snapshot of the NB, equal to ``OvnNorthbound.connect(settings).read()``.

    Tries the members of ``settings.remote`` in order and reads the first that answers and,
    if clustered, is the Raft leader; the whole call is bounded by ``settings.timeout``.
    Raises :class:`OvnConnectError` naming the endpoint (and every member's reason) when none
    can be read, :class:`OvnSnapshotError` when the server refuses the read transaction.
    """
    # The reply becomes millions of small lists and dicts at once. CPython's cyclic GC would
    # run a full collection over all of them again and again while they are being built; none
    # of them can form a cycle, and everything not returned is freed by reference counting.
    # So it is paused for this call and restored as it was.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return query_leader(settings, _select_all(settings))
    finally:
        if collecting:
            gc.enable()


class OvnSnapshot:
    """A read-only stand-in for :class:`OvnNorthbound` where a one-shot command only reads.

    ``read()`` takes a fresh :func:`read_snapshot` each call (no connection is held between
    calls); ``apply()`` refuses anything but an empty change list, so a ``plan`` wired to it
    can never write by mistake. It fits ``reconciler.engine.pipeline.OvnProvider``.
    """

    def __init__(self, settings: OvnSettings) -> None:
        self.settings = settings

    def read(self) -> OvnState:
        return read_snapshot(self.settings)

    def apply(self, changes: Sequence[Any], revision: str | None = None) -> None:
        if changes:
            raise OvnError(
                f"cannot apply to OVN NB at {self.settings.remote}: this is a read-only "
                "snapshot (use OvnNorthbound to write); nothing was written"
            )

    def close(self) -> None:
        """Nothing to release: every read opens and closes its own connection."""

    def __enter__(self) -> OvnSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
