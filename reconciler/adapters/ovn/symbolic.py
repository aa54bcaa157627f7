"""A row read from the NB -> its symbolic :class:`~reconciler.core.model.observed.OvnRow`: the ONE
conversion both readers use.

The IDL reader (:mod:`~reconciler.adapters.ovn.read_cache`: rows of python-ovs' cache) and the
snapshot reader (:mod:`~reconciler.adapters.ovn.snapshot`: JSON rows of one ``select``
transaction) each say how to get one column's value out of their rows (a :data:`Read` per
column); everything after that is decided here, once per table: which columns become fields
(:func:`~reconciler.adapters.ovn.tables.symbolic_columns`), how a reference is named (the
referenced row's name or key), what an optional value, a set and a map look like, and the
parent's name. So the two readers cannot drift apart (the snapshot tests assert both give the
same :class:`~reconciler.core.model.observed.OvnState` on real servers).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

from reconciler.adapters.ovn.tables import NB_TABLES, TABLE_ORDER, symbolic_columns
from reconciler.core.model.observed import OvnRow

__all__ = ["Read", "SymbolicRows", "active_functions", "first_or_none", "owned_order"]

Read = Callable[[Any], Any]
"""``read(row)`` -> one column's value: a scalar (a column of exactly one value), a new list
(a set or 0..1 column; references as the ids the reader's name maps are keyed by) or a dict
sorted by key (a map)."""

ReaderFor = Callable[[str, str], tuple[Read, str]]
"""``reader_for(table, column)`` -> ``(read, shape)``; shape ``"scalar"``, ``"set"`` or
``"map"``."""

_NONE: Mapping[Any, str] = {}
_Step = tuple[str, str, Read | None, Any]  # (field, kind, read, extra)


def first_or_none(value: Any) -> Any:
    """A 0..1 column as read (a list) -> its value or None; a scalar stays as it is."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


class SymbolicRows:
    """Converts one reader's rows to :class:`OvnRow`; how each column is converted is decided
    once per table (schema lookups per value would cost more than the conversion itself).

    ``columns_of(table)``: the columns the server's schema has; ``reader_for``: the reader's
    :data:`Read` of a column.
    """

    def __init__(self, columns_of: Callable[[str], Container[str]], reader_for: ReaderFor) -> None:
        self._columns_of = columns_of
        self._reader_for = reader_for
        self._plans: dict[str, tuple[_Step, ...]] = {}

    def _plan(self, table: str) -> tuple[_Step, ...]:
        steps: list[_Step] = []
        for col, rule, extra in symbolic_columns(table, self._columns_of(table)):
            if rule == "const":
                steps.append((col, "const", None, extra))
                continue
            read, shape = self._reader_for(table, col)
            if rule == "ref":
                ref_table, ref_kind = extra
                steps.append((col, "refset" if ref_kind == "set" else "ref", read, ref_table))
            elif rule == "opt":
                steps.append((col, "opt", read, extra))  # extra True: sparse (NbTable.sparse)
            elif rule == "plain" and shape == "set" and not extra:
                steps.append((col, "sorted", read, None))
            elif rule == "map" and extra:
                steps.append((col, "sparsemap", read, None))  # NbTable.sparse
            else:  # a map (sorted by the reader), a scalar, or a list whose order means something
                steps.append((col, "keep", read, None))
        plan = self._plans[table] = tuple(steps)
        return plan

    def row(
        self,
        table: str,
        key: str,
        row: Any,
        names: Mapping[str, Mapping[Any, str]],
        parent: Any = None,
        dangling: set[Any] | None = None,
    ) -> OvnRow:
        """``row`` of ``table`` (our row with this ``key``) as an :class:`OvnRow`.

        ``names``: table -> row id -> the name other rows call it by; ``parent``: the id of the
        row holding this one (tables with a parent). A reference to a row ``names`` does not
        know is named by its id and, when ``dangling`` is given, remembered there (the IDL's
        read cache redoes the row if a row with that id arrives later)."""
        plan = self._plans.get(table)
        if plan is None:
            plan = self._plan(table)
        fields: dict[str, Any] = {}
        for col, kind, read, extra in plan:
            if read is None:
                fields[col] = extra
                continue
            value = read(row)
            if kind == "keep":
                pass
            elif kind == "sparsemap":
                if not value:
                    continue  # a sparse map (``NbTable.sparse``) that is empty
            elif kind == "sorted":
                value.sort()
            elif kind == "refset":
                ref_names = names.get(extra, _NONE)
                if dangling is not None:
                    dangling.update(u for u in value if u not in ref_names)
                value = sorted([ref_names.get(u, str(u)) for u in value])
            elif kind == "ref":
                one = first_or_none(value)
                if one is None:
                    value = None
                else:
                    ref_names = names.get(extra, _NONE)
                    value = ref_names.get(one)
                    if value is None:
                        value = str(one)
                        if dangling is not None:
                            dangling.add(one)
            else:  # opt
                value = first_or_none(value)
                if value is None and extra:
                    continue  # a sparse column (``NbTable.sparse``) that is not set
            fields[col] = value
        parent_spec = NB_TABLES[table].parent
        if parent_spec is not None:
            fields[parent_spec.field] = (
                None if parent is None else names.get(parent_spec.table, _NONE).get(parent)
            )
        return OvnRow(table=table, key=key, fields=fields)


def active_functions(
    groups: Iterable[tuple[str, Sequence[Any]]], names: Mapping[Any, str]
) -> dict[str, str | None]:
    """``OvnState.nf_active``: our function groups (name, ``network_function_active`` as read)
    -> the name of the function northd made active, or ``None``; sorted by group name."""
    return {
        name: (names.get(active[0], str(active[0])) if active else None)
        for name, active in sorted(groups, key=lambda group: group[0])
    }


def owned_order(row: OvnRow) -> tuple[int, str]:
    """The order of ``OvnState.owned``: by table (``OVN_TABLES``' create order), then key."""
    return TABLE_ORDER[row.table], row.key
