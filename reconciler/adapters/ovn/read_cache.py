"""The incremental read of the IDL cache: everything ``OvnNorthbound.read()`` derives from it,
kept between reads and redone only for the rows the IDL changed.

Why: the NB of a large cluster holds tens of thousands of rows, most of them ours, and
converting all of them on every read dominated a loop in which usually nothing changed. The
IDL tells us which rows it changed (:class:`~reconciler.adapters.ovn.python_ovs.ChangeLog`),
so a read only redoes those: unchanged :class:`OvnRow`, :class:`PodPort` and tuples are reused
as the *same* objects (the core compares with ``is`` first), and a read with nothing changed
returns the previous :class:`OvnState`.

Correctness rules: every method runs under the connection lock (the IDL changes its cache only
under it); a reconnect (:attr:`NbIdl.osc_generation`) or a replaced ``table.rows`` (the IDL's
clear-and-reload) makes :meth:`ReadCache.valid_for` false, and the owner then builds a new
cache, which feeds every row through the same incremental path as "inserted".

Everything table-specific comes from :mod:`~reconciler.adapters.ovn.tables`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.adapters.ovn.python_ovs import (
    ChangeLog,
    NbIdl,
    column_reader,
    committed_list,
    committed_map,
    committed_scalar,
)
from reconciler.adapters.ovn.rows import is_ours, nb_global, pod_port, switch
from reconciler.adapters.ovn.symbolic import SymbolicRows, active_functions, owned_order
from reconciler.adapters.ovn.tables import (
    CHILD_COLUMNS,
    NAMED_TABLES,
    NB_TABLES,
    OWNED_TABLES,
    REFERRERS,
    NbSchema,
)
from reconciler.core.model import ovn_kubernetes
from reconciler.core.model.observed import (
    NbGlobal,
    OvnCapabilities,
    OvnRow,
    OvnState,
    PodPort,
    Switch,
)
from reconciler.core.model.ovn_kubernetes import OvnKubernetesRows
from reconciler.core.model.target import NB_GLOBAL

__all__ = ["ReadCache", "RowIndex", "idl_symbolic"]

_OWNED_NAMES = tuple(t.name for t in OWNED_TABLES if t.naming != "singleton")
_ID_TABLES = tuple(t.name for t in OWNED_TABLES if t.foreign_ids)
_NF, _NFG, _ACTIVE = "Network_Function", "Network_Function_Group", "network_function_active"
_LSP = "Logical_Switch_Port"
_ACTIVE_INPUTS = frozenset({_NF, _NFG})
"""Tables whose changes can change ``OvnState.nf_active`` (our groups, the functions' names)."""
_OVNK_COLUMNS = {
    "Port_Group": frozenset({"name", "external_ids"}),
    "Logical_Router_Policy": frozenset({"priority", "action", "match", "external_ids"}),
}
"""The columns ``OvnState.ovn_kubernetes`` is read from, per table."""


@dataclass
class RowIndex:
    """UUID <-> symbolic name maps of the cache, used by read and apply.

    Kept up to date incrementally by :class:`ReadCache` (never rebuilt from scratch while the
    IDL stays connected): ``names[t]`` maps every row of a named table (and every *owned*
    row of a table keyed by ``osc.io/key``) to its name (key); ``by_name`` is the reverse;
    ``owned[(t, key)]`` is our row of that key; ``parent[t]`` maps a child row to the row
    whose set column holds it.
    """

    names: dict[str, dict[uuid.UUID, str]] = field(default_factory=dict)
    by_name: dict[str, dict[str, uuid.UUID]] = field(default_factory=dict)
    owned: dict[tuple[str, str], Any] = field(default_factory=dict)  # (table, key) -> Row
    parent: dict[str, dict[uuid.UUID, uuid.UUID]] = field(default_factory=dict)


def idl_symbolic(schema: NbSchema, idl: NbIdl) -> SymbolicRows:
    """The symbolic conversion of the IDL's rows (:mod:`~reconciler.adapters.ovn.symbolic`,
    the rule the snapshot reader follows on JSON rows)."""
    return SymbolicRows(
        lambda table: schema.tables[table]["columns"],
        lambda table, col: column_reader(idl, table, col),
    )


class ReadCache:
    """Everything ``OvnNorthbound.read()`` derives from the IDL cache, kept between reads.

    Built under the connection lock from the IDL's ``tables``; starts the IDL's change log.
    :attr:`index` is also what the transaction builder resolves references with.
    """

    def __init__(
        self,
        idl: NbIdl,
        tables: Mapping[str, Any],
        *,
        instance: str,
        capabilities: OvnCapabilities,
        symbolic: SymbolicRows,
    ) -> None:
        self._idl = idl
        self._instance = instance
        self._capabilities = capabilities
        self._symbolic = symbolic
        self._generation = idl.osc_generation
        self._rows_ids = {name: id(t.rows) for name, t in tables.items()}
        self.index = RowIndex()
        for table in (*NAMED_TABLES, *_OWNED_NAMES):
            if table in tables:
                self.index.names.setdefault(table, {})
                self.index.by_name.setdefault(table, {})
        for spec in NB_TABLES.values():
            if spec.parent is not None and spec.parent.table in tables:
                self.index.parent[spec.name] = {}
        self._owned_key: dict[str, dict[uuid.UUID, str]] = {t: {} for t in _OWNED_NAMES}
        self._children: dict[tuple[str, str], dict[uuid.UUID, frozenset[uuid.UUID]]] = {
            (p, column): {} for p, pairs in CHILD_COLUMNS.items() for column, _child in pairs
        }
        self._extra: dict[tuple[str, str], int] = {}  # (table, key) -> rows beyond the first
        self._sym: dict[tuple[str, uuid.UUID], OvnRow] = {}
        self._dangling: set[uuid.UUID] = set()
        self._pod_port: dict[uuid.UUID, PodPort] = {}
        # Pending work, accumulated by refresh() (apply refreshes too) until the next read.
        self._sym_dirty: set[tuple[str, uuid.UUID]] = set()
        self._pod_dirty: set[uuid.UUID] = set()
        self._tables_dirty: set[str] = set()
        self._renamed: set[str] = set()
        # The last read's results.
        self._state: OvnState | None = None
        self._generic: tuple[OvnRow, ...] = ()  # the owned rows of every table but NB_Global
        self._nb_global: tuple[NbGlobal, OvnRow | None] = (NbGlobal(), None)
        self._owned_list: list[OvnRow] = []
        self._ovnk: OvnKubernetesRows | None = None
        """OVN-Kubernetes' generation evidence (``None``: to be read again): a Port_Group or
        router policy came or went, or changed a column the evidence reads; a pod event, which
        changes ``ports`` only, never makes it read all Port_Groups again."""
        self._owned_pos: dict[tuple[str, uuid.UUID], int] = {}
        # Start recording before building: both happen under the connection lock.
        idl.osc_log = ChangeLog()
        everything = {
            name: dict.fromkeys(t.rows.keys()) for name, t in tables.items() if name in NB_TABLES
        }
        self._follow(tables, everything)

    def valid_for(self, tables: Mapping[str, Any]) -> bool:
        """False after a reconnect or a clear-and-reload of any table (drop the cache)."""
        if self._generation != self._idl.osc_generation:
            return False
        return all(id(t.rows) == self._rows_ids.get(name) for name, t in tables.items())

    def refresh(self, tables: Mapping[str, Any]) -> int:
        """Bring the index up to date with what the IDL changed since the last refresh;
        returns how many rows changed."""
        log = self._idl.osc_log
        if log is not None:
            changes = log.take()
            if changes:
                self._follow(tables, changes)
                return sum(len(per) for per in changes.values())
        return 0

    # -- incremental maintenance -------------------------------------------------------------
    def _follow(
        self, tables: Mapping[str, Any], changes: Mapping[str, Mapping[uuid.UUID, Any]]
    ) -> None:
        index = self.index
        for tname, per in changes.items():
            table = tables.get(tname)
            if table is None or not per:
                continue
            self._tables_dirty.add(tname)
            if tname == NB_GLOBAL:
                continue  # the cluster's row: re-read whole (state_now), never indexed
            rows = table.rows
            named = tname in index.by_name and tname in NAMED_TABLES
            child_specs = CHILD_COLUMNS.get(tname, ())
            ours = tname in self._owned_key
            ovnk = _OVNK_COLUMNS.get(tname)
            for u, cols in per.items():
                row = rows.get(u)
                structural = cols is None
                if ovnk is not None and (structural or not ovnk.isdisjoint(cols)):
                    self._ovnk = None  # OVN-Kubernetes' evidence: read again (not on ports)
                if named and (structural or "name" in cols):
                    self._set_name(tname, u, None if row is None else committed_scalar(row, "name"))
                if ours:
                    if structural or "external_ids" in cols or "name" in cols:
                        self._set_owned(tname, u, row, rows)
                    self._sym_dirty.add((tname, u))
                for column, child in child_specs:
                    if structural or column in cols or "name" in cols:
                        everyone = structural or "name" in cols
                        self._set_children(tname, u, row, column, child, everyone)
                if tname == "Logical_Switch_Port":
                    self._pod_dirty.add(u)

    def _set_name(self, table: str, u: uuid.UUID, name: str | None) -> None:
        names, by_name = self.index.names[table], self.index.by_name[table]
        old = names.get(u)
        if old is not None and old != name:
            del names[u]
            if by_name.get(old) == u:
                del by_name[old]
                if NB_TABLES[table].naming == "shared-name":
                    # Their names need not be unique: another row may still hold it.
                    other = next((k for k, v in names.items() if v == old), None)
                    if other is not None:
                        by_name[old] = other
            if name is not None:
                # A rename changes how other rows name this one. (A delete does not: the
                # server removes weak references to it, updating those rows, and refuses
                # the delete while strong ones remain.)
                self._renamed.add(table)
        if name is not None and old != name:
            names[u] = name
            by_name[name] = u
        if name is not None and u in self._dangling:
            self._renamed.add(table)  # a row named by its UUID before it arrived

    def _set_owned(self, table: str, u: uuid.UUID, row: Any, rows: Mapping[uuid.UUID, Any]) -> None:
        spec = NB_TABLES[table]
        by_key = spec.naming != "unique-name"
        key: str | None = None
        if row is not None:
            ext = committed_map(row, "external_ids")
            if is_ours(ext, self._instance):
                key = spec.key_of(committed_scalar(row, "name"), ext, row.uuid)
        keys = self._owned_key[table]
        owned = self.index.owned
        old = keys.get(u)
        if old == key and (key is None or owned.get((table, key)) is row):
            return
        if old is not None:
            del keys[u]
            if by_key:
                self.index.names[table].pop(u, None)
            tk = (table, old)
            cur = owned.get(tk)
            if cur is not None and cur.uuid == u:
                del owned[tk]
                if self._extra.get(tk):
                    # Two rows with one key (a duplicate someone made): the other takes over.
                    self._one_less(tk)
                    other = next(k for k, v in keys.items() if v == old)
                    owned[tk] = rows[other]
                    self._sym_dirty.add((table, other))
            elif self._extra.get(tk):
                self._one_less(tk)
        if key is not None:
            keys[u] = key
            if by_key:
                self.index.names[table][u] = key
            tk = (table, key)
            cur = owned.get(tk)
            if cur is not None and cur.uuid != u:
                self._extra[tk] = self._extra.get(tk, 0) + 1
                self._sym_dirty.add((table, cur.uuid))
            owned[tk] = row

    def _one_less(self, tk: tuple[str, str]) -> None:
        left = self._extra[tk] - 1
        if left:
            self._extra[tk] = left
        else:
            del self._extra[tk]

    def _set_children(
        self, ptable: str, u: uuid.UUID, row: Any, column: str, child: str, all_: bool
    ) -> None:
        held = self._children[(ptable, column)]
        old = held.pop(u, frozenset())
        new = frozenset(committed_list(row, column)) if row is not None else frozenset()
        if row is not None:
            held[u] = new
        parent = self.index.parent.get(child)
        if parent is None:
            return
        for c in old - new:
            if parent.get(c) == u:
                del parent[c]
        for c in new:
            parent[c] = u
        affected = (old | new) if all_ else (old ^ new)
        self._sym_dirty.update((child, c) for c in affected)
        if child == "Logical_Switch_Port":
            self._pod_dirty.update(affected)

    # -- the read ------------------------------------------------------------------------------
    def state_now(self, tables: Mapping[str, Any]) -> OvnState:
        """The current :class:`OvnState`, recomputing only what changed since the last one."""
        self.refresh(tables)
        prev = self._state
        if prev is not None and not (self._tables_dirty or self._sym_dirty or self._pod_dirty):
            return prev
        switches = prev.switches if prev is not None else None
        routers = prev.routers if prev is not None else None
        used = prev.used_ids if prev is not None else None
        active = prev.nf_active if prev is not None else None
        ports_up = prev.ports_up if prev is not None else None
        dirty = self._tables_dirty
        if switches is None or "Logical_Switch" in dirty:
            switches = self._switches(tables)
        if routers is None or "Logical_Router" in dirty:
            routers = tuple(sorted(self.index.names.get("Logical_Router", {}).values()))
        if used is None or dirty.intersection(_ID_TABLES):
            used = self._used_ids(tables)
        if active is None or dirty.intersection(_ACTIVE_INPUTS):
            active = self._nf_active(tables)
        if ports_up is None or _LSP in dirty:
            ports_up = self._ports_up(tables)
        prev_nb = self._nb_global
        if prev is None or NB_GLOBAL in dirty:
            fresh = self._read_nb_global(tables)
            if fresh != prev_nb:
                self._nb_global = fresh
        nb_view, nb_row = self._nb_global
        pod_ports = self._pod_ports(tables, prev)
        generic = self._owned(prev is None)
        self._tables_dirty = set()
        if prev is not None and generic is self._generic and self._nb_global is prev_nb:
            owned = prev.owned
        else:
            owned = generic + ((nb_row,) if nb_row is not None else ())
        self._generic = generic
        ovnk = self._ovnk
        if ovnk is None:
            ovnk = self._ovnk = self._ovn_kubernetes(tables)
        if prev is not None and (
            ovnk == prev.ovn_kubernetes
            and switches == prev.switches
            and routers == prev.routers
            and used == prev.used_ids
            and pod_ports is prev.pod_ports
            and owned is prev.owned
            and nb_view is prev.nb_global
            and active == prev.nf_active
            and ports_up == prev.ports_up
        ):
            return prev
        self._state = OvnState(
            switches=switches if prev is None or switches != prev.switches else prev.switches,
            routers=routers if prev is None or routers != prev.routers else prev.routers,
            pod_ports=pod_ports,
            owned=owned,
            capabilities=self._capabilities,
            used_ids=used if prev is None or used != prev.used_ids else prev.used_ids,
            nb_global=nb_view,
            nf_active=active if prev is None or active != prev.nf_active else prev.nf_active,
            ports_up=ports_up if prev is None or ports_up != prev.ports_up else prev.ports_up,
            ovn_kubernetes=ovnk
            if prev is None or ovnk != prev.ovn_kubernetes
            else prev.ovn_kubernetes,
        )
        return self._state

    def _read_nb_global(self, tables: Mapping[str, Any]) -> tuple[NbGlobal, OvnRow | None]:
        table = tables.get(NB_GLOBAL)
        row = next(iter(table.rows.values()), None) if table is not None else None
        if row is None:
            return NbGlobal(), None
        options = committed_map(row, "options")
        external_ids = committed_map(row, "external_ids")
        return nb_global(options, external_ids, self._instance)

    def _ports_up(self, tables: Mapping[str, Any]) -> dict[str, bool]:
        """Our LSPs by name -> northd's ``up`` (only where the schema has the column)."""
        if _LSP not in tables or "up" not in tables[_LSP].columns:
            return {}
        out = {}
        for u, key in self._owned_key.get(_LSP, {}).items():
            row = self.index.owned.get((_LSP, key))
            if row is None or row.uuid != u:
                continue
            up = committed_scalar(row, "up")
            if isinstance(up, bool):  # empty: no northd has judged it (unknown)
                out[key] = up
        return dict(sorted(out.items()))

    def _nf_active(self, tables: Mapping[str, Any]) -> dict[str, str | None]:
        """Our groups by name -> the function northd made active (by name), or None."""
        if _NFG not in tables or _ACTIVE not in tables[_NFG].columns:
            return {}
        groups = []
        for u, key in self._owned_key.get(_NFG, {}).items():
            row = self.index.owned.get((_NFG, key))
            if row is None or row.uuid != u:
                continue  # a duplicate of the key: the row that holds it answers
            groups.append((key, committed_list(row, _ACTIVE)))
        return active_functions(groups, self.index.names.get(_NF, {}))

    def _switches(self, tables: Mapping[str, Any]) -> tuple[Switch, ...]:
        out = []
        for ls in tables["Logical_Switch"].rows.values():
            lbs = bool(
                committed_list(ls, "load_balancer") or committed_list(ls, "load_balancer_group")
            )
            out.append(switch(committed_scalar(ls, "name"), committed_map(ls, "other_config"), lbs))
        out.sort(key=lambda sw: sw.name)
        return tuple(out)

    def _ovn_kubernetes(self, tables: Mapping[str, Any]) -> OvnKubernetesRows:
        """Port_Groups' external_ids and the no-reroute router policies (module
        ``reconciler.core.model.ovn_kubernetes``)."""
        groups = tables["Port_Group"].rows.values() if "Port_Group" in tables else ()
        policies = (
            tables["Logical_Router_Policy"].rows.values()
            if "Logical_Router_Policy" in tables
            else ()
        )
        return ovn_kubernetes.evidence(
            ((committed_scalar(r, "name"), committed_map(r, "external_ids")) for r in groups),
            (
                (
                    committed_scalar(r, "priority"),
                    committed_scalar(r, "action"),
                    committed_scalar(r, "match"),
                    committed_map(r, "external_ids"),
                )
                for r in policies
                if committed_scalar(r, "priority") == ovn_kubernetes.NO_REROUTE_PRIORITY
            ),
        )

    def _used_ids(self, tables: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        used: dict[str, tuple[int, ...]] = {}
        for table in _ID_TABLES:
            if table in tables:
                used[table] = tuple(
                    sorted(
                        committed_scalar(row, "id")
                        for row in tables[table].rows.values()
                        if not is_ours(committed_map(row, "external_ids"), self._instance)
                    )
                )
        return used

    def _pod_ports(self, tables: Mapping[str, Any], prev: OvnState | None) -> tuple[PodPort, ...]:
        dirty, self._pod_dirty = self._pod_dirty, set()
        if prev is not None and not dirty:
            return prev.pod_ports
        lsps = tables["Logical_Switch_Port"].rows
        parent = self.index.parent.get("Logical_Switch_Port", {})
        switch_names = self.index.names.get("Logical_Switch", {})
        changed = prev is None
        for u in dirty:
            old = self._pod_port.pop(u, None)
            lsp = lsps.get(u)
            sw = parent.get(u)
            new = None
            if lsp is not None and sw is not None:
                new = pod_port(
                    committed_scalar(lsp, "name"),
                    switch_names.get(sw, ""),
                    committed_map(lsp, "external_ids"),
                    committed_list(lsp, "addresses"),
                    committed_map(lsp, "options"),
                )
                if new is not None and old is not None and old == new:
                    new = old
            if new is not None:
                self._pod_port[u] = new
            if new is not old:
                changed = True
        if not changed and prev is not None:
            return prev.pod_ports
        return tuple(sorted(self._pod_port.values(), key=lambda p: p.name))

    def _owned(self, first: bool) -> tuple[OvnRow, ...]:
        """Our rows of every table but NB_Global, sorted; the previous tuple itself when none
        of them changed."""
        if self._renamed:
            for table in self._renamed:
                for referrer in REFERRERS.get(table, ()):
                    self._sym_dirty.update((referrer, u) for u in self._owned_key[referrer])
            self._renamed = set()
        dirty, self._sym_dirty = self._sym_dirty, set()
        if not first and not dirty:
            return self._generic
        owned = self.index.owned
        replaced: list[tuple[tuple[str, uuid.UUID], OvnRow]] = []
        reorder = first
        for tu in dirty:
            table, u = tu
            old = self._sym.get(tu)
            key = self._owned_key.get(table, {}).get(u)
            row = None if key is None else owned.get((table, key))
            if key is None or row is None or row.uuid != u:
                if old is not None:
                    del self._sym[tu]
                    reorder = True
                continue
            parent = self.index.parent.get(table)
            new = self._symbolic.row(
                table,
                key,
                row,
                self.index.names,
                None if parent is None else parent.get(u),
                self._dangling,
            )
            if old is not None and old == new:
                continue
            self._sym[tu] = new
            if old is None or old.key != new.key:
                reorder = True
            else:
                replaced.append((tu, new))
        if reorder:
            items = sorted(self._sym.items(), key=lambda kv: owned_order(kv[1]))
            self._owned_list = [r for _tu, r in items]
            self._owned_pos = {tu: i for i, (tu, _r) in enumerate(items)}
        elif replaced:
            for tu, new in replaced:
                self._owned_list[self._owned_pos[tu]] = new
        elif not first:
            return self._generic
        return tuple(self._owned_list)
