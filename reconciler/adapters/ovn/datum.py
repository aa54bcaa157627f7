"""Values in and out of the Python IDL's ``Datum``, without its generic slow paths.

Reading: ``Row.__getattr__`` re-validates every value through ``Datum.from_python`` on each
access; the committed ``Datum`` a row holds is already valid, so the readers here take the
values straight from it. Only valid for rows of the committed cache read under the connection
lock (no transaction is in flight then: ovsdbapp commits under the same lock).

Writing: :class:`ColumnKind` builds the ``Datum`` of a value directly when the value certainly
fits the column (plain strings, references the builder resolved itself, an integer in range,
an enum member) and leaves everything else to the IDL's full ``Datum.from_python`` check, so
nothing that does not fit is ever sent: the IDL's ``setattr`` would log and silently drop it
(a priority out of range would be committed as 0).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ovs.db import data as ovs_data
from ovs.db import error as ovs_error
from ovs.db import idl as ovs_idl
from ovs.db import types as ovs_types

__all__ = [
    "ColumnKind",
    "InvalidValue",
    "check_value",
    "committed_list",
    "committed_map",
    "committed_scalar",
    "committed_value",
    "first_or_none",
    "plain_strings",
    "uuid_of",
]


class InvalidValue(ValueError):
    """The value does not fit the column type; the message is the IDL's reason."""


# -- reading the committed cache ------------------------------------------------------------


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


def committed_value(row: Any, col: str, col_type: Any) -> Any:
    """What ``getattr(row, col)`` returns (scalar, list for optional/set, dict for map), read
    from the committed ``Datum``. References come back as UUIDs instead of rows (callers
    accept both)."""
    datum = row._data.get(col)
    if datum is None:  # the IDL keeps no Datum for a column still at its default (empty) value
        if col_type.is_map():
            return {}
        if col_type.n_min == 1 and col_type.n_max == 1:
            return getattr(row, col)
        return []
    values = datum.values
    if col_type.is_map():
        return {k.value: v.value for k, v in values.items()}
    if col_type.n_min == 1 and col_type.n_max == 1:
        return next(iter(values)).value
    return [k.value for k in values]


def uuid_of(value: Any) -> uuid.UUID:
    """A reference as the IDL gives it (a row or a UUID) -> its UUID."""
    return value.uuid if hasattr(value, "uuid") else value


def first_or_none(value: Any) -> Any:
    """A 0..1 column as the IDL gives it (a list) -> value or None."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


# -- writing ----------------------------------------------------------------------------------


def _row_to_uuid(value: Any) -> Any:
    return value.uuid if isinstance(value, ovs_idl.Row) else value


def _full_datum(col_type: Any, value: Any) -> Any:
    try:
        return ovs_data.Datum.from_python(col_type, value, _row_to_uuid)
    except (ovs_error.Error, ValueError, TypeError, AttributeError) as exc:
        raise InvalidValue(str(exc)) from None


def _unconstrained_str(base: Any) -> bool:
    return bool(
        base is not None
        and base.type == ovs_types.StringType
        and base.enum is None
        and base.min_length == 0
        and base.max_length >= 2**31 - 1
        and not base.ref_table_name
    )


def plain_strings(col_type: Any, value: Any) -> bool:
    """``value`` certainly fits ``col_type``: strings into string columns without constraints.

    The common case (``match``, ``external_ids``, ``options``, ``addresses``) then skips the
    full ``Datum.from_python`` check, which ovsdbapp's ``setattr`` repeats anyway. Anything
    else still goes through the full check.
    """
    if not _unconstrained_str(col_type.key):
        return False
    if col_type.is_map():
        return (
            _unconstrained_str(col_type.value)
            and isinstance(value, dict)
            and len(value) <= col_type.n_max
            and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        )
    if col_type.value is not None:
        return False
    if isinstance(value, str):
        return col_type.n_min <= 1 <= col_type.n_max
    return (
        isinstance(value, list)
        and col_type.n_min <= len(value) <= col_type.n_max
        and all(isinstance(v, str) for v in value)
        and len(set(value)) == len(value)
    )


def check_value(col_type: Any, value: Any) -> None:
    """Raise :class:`InvalidValue` unless ``value`` fits ``col_type`` (checked before the
    transaction is built, so a bad value never reaches the IDL's silent drop)."""
    if not plain_strings(col_type, value):
        _full_datum(col_type, value)


def _string_datum(col_type: Any, value: Any) -> Any:
    """A Datum of a value :func:`plain_strings` accepted (no further checks needed)."""
    string = ovs_types.StringType
    if col_type.is_map():
        return ovs_data.Datum(
            col_type,
            {ovs_data.Atom(string, k): ovs_data.Atom(string, v) for k, v in value.items()},
        )
    if isinstance(value, str):
        return ovs_data.Datum(col_type, {ovs_data.Atom(string, value): None})
    return ovs_data.Datum(col_type, {ovs_data.Atom(string, v): None for v in value})


def _uuid_datum(col_type: Any, value: Any) -> Any:
    """A Datum of references the builder resolved itself (UUIDs of rows of the referenced
    table, or provisional ones of rows it inserts), or ``None`` when ``value`` is anything
    else or the count does not fit (the full check then reports it)."""
    if col_type.key.type != ovs_types.UuidType or col_type.value is not None:
        return None
    values = [value] if isinstance(value, uuid.UUID) else value
    if not isinstance(values, list) or not col_type.n_min <= len(values) <= col_type.n_max:
        return None
    if not all(isinstance(v, uuid.UUID) for v in values) or len(set(values)) != len(values):
        return None
    uuid_type = ovs_types.UuidType
    return ovs_data.Datum(col_type, {ovs_data.Atom(uuid_type, v): None for v in values})


@dataclass(frozen=True)
class ColumnKind:
    """How to turn a value into a Datum of one column type without the IDL's generic
    ``Datum.from_python`` when the value certainly fits: the checks below are the column's
    constraints (string without limits, integer range, enum, count). Decided once per column
    (:meth:`of`), applied per value (:meth:`datum`)."""

    col_type: Any
    kind: str  # "str", "strmap", "uuid", "int", "enum" or "other"
    enum: frozenset[Any] = frozenset()

    @classmethod
    def of(cls, col_type: Any) -> ColumnKind:
        key, value = col_type.key, col_type.value
        if col_type.is_map():
            plain = _unconstrained_str(key) and _unconstrained_str(value)
            return cls(col_type, "strmap" if plain else "other")
        if value is not None:
            return cls(col_type, "other")
        if _unconstrained_str(key):
            return cls(col_type, "str")
        if key.type == ovs_types.UuidType:
            return cls(col_type, "uuid")
        if key.type == ovs_types.IntegerType and key.enum is None:
            return cls(col_type, "int")
        if (
            key.type == ovs_types.StringType
            and key.enum is not None
            and key.min_length == 0
            and key.max_length >= 2**31 - 1
        ):
            return cls(col_type, "enum", frozenset(a.value for a in key.enum.values))
        return cls(col_type, "other")

    def datum(self, value: Any) -> Any:
        """``value`` as a Datum of this column type; raises :class:`InvalidValue` when it
        does not fit."""
        fast = self._fast_datum(value)
        return fast if fast is not None else _full_datum(self.col_type, value)

    def _fast_datum(self, value: Any) -> Any:
        """The Datum, or ``None`` when the value needs the full check (which may refuse it)."""
        kind, col_type = self.kind, self.col_type
        if kind == "strmap":
            if type(value) is not dict or len(value) > col_type.n_max:
                return None
            string = ovs_types.StringType
            atoms = {}
            for k, v in value.items():
                if type(k) is not str or type(v) is not str:
                    return None
                atoms[ovs_data.Atom(string, k)] = ovs_data.Atom(string, v)
            return ovs_data.Datum(col_type, atoms)
        if kind == "str":
            if plain_strings(col_type, value):
                return _string_datum(col_type, value)
            return None
        if kind == "uuid":
            return _uuid_datum(col_type, value)
        if kind in ("int", "enum") and col_type.n_min <= 1 <= col_type.n_max:
            key = col_type.key
            if kind == "int":
                if type(value) is not int:
                    return None
                if (key.min is not None and value < key.min) or (
                    key.max is not None and value > key.max
                ):
                    return None
            elif type(value) is not str or value not in self.enum:
                return None
            return ovs_data.Datum(col_type, {ovs_data.Atom(key.type, value): None})
        return None
