"""Values in the OVSDB JSON wire format (RFC 7047 ``<value>``), checked against the column type.

Why: every transaction is sent as raw JSON-RPC operations (see
:mod:`~reconciler.adapters.ovn.transaction`), so a value is turned into its wire form exactly
once and checked on the way: a value that does not fit the server's column is refused with the
column's name before anything is sent (the Python IDL's ``setattr`` used to log and silently
drop it, so a priority out of range would have been committed as 0).

The column types are python-ovs' ``Type`` objects of the server's schema
(:func:`~reconciler.adapters.ovn.python_ovs.column_types` of a ``get_schema`` reply): the
constraint checks are the library's own (:func:`~reconciler.adapters.ovn.python_ovs.atom_problem`),
only the common, unconstrained cases (plain strings, references the builder resolved itself)
skip them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.ovn.python_ovs import atom_problem, column_types

__all__ = ["ColumnCodec", "InvalidValue", "Ref", "column_types"]

_STRING, _INTEGER, _REAL, _BOOLEAN, _UUID = "string", "integer", "real", "boolean", "uuid"
"""The atomic types' names (``base.type.name``)."""


class InvalidValue(ValueError):
    """The value does not fit the column type; the message says why."""


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to a row: ``uuid`` of an existing row, or ``named`` (the ``uuid-name`` of a
    row inserted by the same transaction)."""

    uuid: str | None = None
    named: str | None = None

    def wire(self) -> list[str]:
        if self.named is not None:
            return ["named-uuid", self.named]
        return ["uuid", str(self.uuid)]


def _constrained(base: Any) -> bool:
    """The base type has constraints beyond its atomic type (enum, range, lengths, refTable
    is not a constraint on the value we send: the builder resolved it)."""
    if base.enum is not None:
        return True
    if base.type.name in (_INTEGER, _REAL):
        return base.min is not None or base.max is not None
    if base.type.name == _STRING:
        return base.min_length > 0 or base.max_length < 2**31 - 1
    return False


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    _STRING: (str,),
    _INTEGER: (int,),
    _REAL: (int, float),
    _BOOLEAN: (bool,),
}


@dataclass(frozen=True)
class ColumnCodec:
    """Turns Python values into the wire form of one column type, refusing what does not fit.

    Scalars are plain Python values (``str``, ``int``, ``float``, ``bool``) or a :class:`Ref`;
    a set column takes a list (or one value), an optional (0..1) column a list of at most one
    value or ``None``; a map a ``dict``. Decided once per column (:meth:`of`), applied per
    value (:meth:`encode`).
    """

    col_type: Any
    plain_str_map: bool
    fast: str = ""
    """The common shape decided once: ``str`` (exactly one unconstrained string), ``strmap``
    (a map of unconstrained strings), ``ref`` (0..1 or exactly one reference), or ``""``
    (the general path)."""

    @classmethod
    def of(cls, col_type: Any) -> ColumnCodec:
        key = col_type.key
        plain = bool(
            col_type.is_map()
            and key.type.name == _STRING
            and col_type.value.type.name == _STRING
            and not _constrained(key)
            and not _constrained(col_type.value)
        )
        fast = ""
        if plain:
            fast = "strmap"
        elif col_type.value is None and col_type.n_max == 1:
            if key.type.name == _STRING and not _constrained(key) and col_type.n_min == 1:
                fast = "str"
            elif key.type.name == _UUID:
                fast = "ref"
        return cls(col_type, plain, fast)

    def encode(self, value: Any) -> Any:
        """The wire form of ``value``; raises :class:`InvalidValue` when it does not fit."""
        fast = self.fast
        if fast == "str":
            if type(value) is str:
                return value
        elif fast == "strmap":
            if type(value) is dict and len(value) <= self.col_type.n_max:
                pairs = [[k, v] for k, v in value.items()]
                if all(type(k) is str and type(v) is str for k, v in pairs):
                    return ["map", pairs]
        elif fast == "ref":
            if type(value) is Ref:
                return value.wire()
            if value is None and self.col_type.n_min == 0:
                return ["set", []]
        return self._general(value)

    def _general(self, value: Any) -> Any:
        col_type = self.col_type
        if col_type.is_map():
            return self._map(value)
        if value is None:
            values: list[Any] = []
        elif isinstance(value, (list, tuple)):
            values = list(value)
        else:
            values = [value]
        if not col_type.n_min <= len(values) <= col_type.n_max:
            raise InvalidValue(
                f"{len(values)} value(s) where the column takes {col_type.n_min} to "
                f"{col_type.n_max}"
            )
        atoms = [self._atom(col_type.key, v) for v in values]
        if len(atoms) > 1:
            seen = {repr(a) for a in atoms}
            if len(seen) != len(atoms):
                raise InvalidValue("duplicate values in a set")
        if len(atoms) == 1:
            return atoms[0]
        return ["set", atoms]

    def _map(self, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise InvalidValue(f"expected a map, got {type(value).__name__}")
        col_type = self.col_type
        if not col_type.n_min <= len(value) <= col_type.n_max:
            raise InvalidValue(
                f"{len(value)} pairs where the column takes at most {col_type.n_max}"
            )
        if self.plain_str_map:
            pairs = []
            for k, v in value.items():
                if type(k) is not str or type(v) is not str:
                    raise InvalidValue(f"map of strings expected, got {k!r}: {v!r}")
                pairs.append([k, v])
            return ["map", pairs]
        return [
            "map",
            [
                [self._atom(col_type.key, k), self._atom(col_type.value, v)]
                for k, v in value.items()
            ],
        ]

    @staticmethod
    def _atom(base: Any, value: Any) -> Any:
        name = base.type.name
        if name == _UUID:
            if not isinstance(value, Ref):
                raise InvalidValue(f"expected a reference, got {value!r}")
            return value.wire()
        expected = _PYTHON_TYPES[name]
        if not isinstance(value, expected) or (name != _BOOLEAN and isinstance(value, bool)):
            raise InvalidValue(f"{value!r} is not of type {base.type.to_string()}")
        if _constrained(base):
            problem = atom_problem(base, value)
            if problem is not None:
                raise InvalidValue(problem)
        return value
