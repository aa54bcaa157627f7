"""OVN Northbound adapter: read the live NB into plain data, apply a plan in ONE transaction.

Why it looks like this:

- It is the only place that knows UUIDs. Everything it returns is the symbolic form of
  ``reconciler.core.target`` (references as names / ``osc.io/key``), and everything it accepts
  is that same form, so the pure core never sees OVSDB details.
- ``read()`` only ever returns a snapshot of a *fully synced* IDL cache, taken under the
  connection lock (the IDL applies a whole monitor reply in one ``run()`` under that lock), so a
  half-loaded cache can never make the diff re-create rows that exist.
- ``apply()`` builds every change into ONE ``api.transaction(check_error=True)``: either all of
  it commits or nothing does. Writes are minimal (changed columns only; reference sets and maps
  as mutations), so concurrent writers (OVN-Kubernetes adding ports to a switch) never race us.
- It uses ovsdbapp's generic ``db_*`` commands, never its high-level helpers, because of three
  traps (each covered by a test): bulk ``lsp_del`` is cubic in the Python IDL (we remove our
  ports from a switch with one ``db_remove`` instead); ``pg_acl_add`` fails on a Port_Group
  created in the same transaction unless it was created with ``acls=[]`` (we always create
  groups with every set column given); ``pg_add_ports``/``addvalue`` silently ignore a port
  *name* for a UUID column (we resolve every reference to a row or UUID ourselves and fail
  loudly when it does not exist).
"""

from __future__ import annotations

import errno
import os
import ssl
import threading
import time
import uuid
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from ovs import jsonrpc, poller
from ovs import ovsuuid as ovs_uuid
from ovs import stream as ovs_stream
from ovs.db import data as ovs_data
from ovs.db import error as ovs_error
from ovs.db import idl as ovs_idl
from ovs.db import types as ovs_types
from ovsdbapp import api as ovsdbapp_api
from ovsdbapp import exceptions as ovsdbapp_exceptions
from ovsdbapp.backend import ovs_idl as ovsdbapp_backend
from ovsdbapp.backend.ovs_idl import command as ovsdbapp_command
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection
from ovsdbapp.backend.ovs_idl import transaction as ovsdbapp_transaction

from reconciler.core import ownership
from reconciler.core.observed import OvnCapabilities, OvnRow, OvnState, PodPort, Switch
from reconciler.core.target import OVN_TABLES
from reconciler.errors import ConflictError, EndpointError

__all__ = [
    "OvnApplyError",
    "OvnCapabilityError",
    "OvnChange",
    "OvnConnectError",
    "OvnError",
    "OvnLockedError",
    "OvnNorthbound",
    "OvnSettings",
    "OvnState",
]

DB_NAME = "OVN_Northbound"

# Columns we mirror, per table (only those the server's schema has are registered). Keeping the
# list short keeps the initial sync and the cache small at 10,000 pods.
_COLUMNS: dict[str, tuple[str, ...]] = {
    "Logical_Switch": ("name", "ports", "other_config", "load_balancer", "load_balancer_group"),
    "Logical_Switch_Port": ("name", "addresses", "port_security", "options", "external_ids"),
    "Logical_Router": ("name", "policies"),
    "Port_Group": ("name", "ports", "acls", "external_ids"),
    "ACL": (
        "name",
        "direction",
        "priority",
        "tier",
        "match",
        "action",
        "network_function_group",
        "external_ids",
    ),
    "Network_Function": ("name", "id", "inport", "outport", "external_ids"),
    "Network_Function_Group": (
        "name",
        "id",
        "mode",
        "fallback",
        "network_function",
        "external_ids",
    ),
    "Logical_Router_Policy": ("priority", "match", "action", "nexthops", "external_ids"),
}

# Tables whose osc.io/key is the row's (unique) name.
_NAMED = {"Logical_Switch_Port", "Port_Group", "Network_Function", "Network_Function_Group"}

# Symbolic fields (reconciler.core.target) that are references: field -> (table, kind) where kind is
# "one" (required), "opt" (0..1) or "set".
_REFS: dict[str, dict[str, tuple[str, str]]] = {
    "Port_Group": {"ports": ("Logical_Switch_Port", "set")},
    "ACL": {"network_function_group": ("Network_Function_Group", "opt")},
    "Network_Function": {
        "inport": ("Logical_Switch_Port", "one"),
        "outport": ("Logical_Switch_Port", "one"),
    },
    "Network_Function_Group": {"network_function": ("Network_Function", "set")},
}
# Symbolic "parent" fields: the row is held in a set column of a row of another table.
_PARENT: dict[str, tuple[str, str, str]] = {
    # table: (symbolic field, parent table, parent set column)
    "Logical_Switch_Port": ("switch", "Logical_Switch", "ports"),
    "ACL": ("port_group", "Port_Group", "acls"),
    "Logical_Router_Policy": ("router", "Logical_Router", "policies"),
}
# Optional scalar columns (0..1): None when empty.
_OPTIONAL = {("ACL", "name"), ("Network_Function_Group", "fallback")}
_MAPS = {"external_ids", "options"}


# ---------------------------------------------------------------------------------------------
# public data


@dataclass(frozen=True)
class OvnSettings:
    """How to reach the NB and which rows are ours."""

    remote: str
    """``tcp:h:p``, ``ssl:h:p``, ``unix:/path`` or a comma-separated list (Raft cluster)."""
    private_key: str | None = None
    certificate: str | None = None
    ca_cert: str | None = None
    timeout: float = 10.0
    """Seconds for connect + initial sync, and for each transaction."""
    instance: str = ownership.DEFAULT_INSTANCE
    """Value of ``osc.io/owner`` that marks our rows."""


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


class OvnError(EndpointError):
    """Base class; the message always names the NB endpoint."""

    cause = "ovn"


class OvnConnectError(OvnError):
    """The NB could not be reached or did not finish its initial sync within the timeout."""


class OvnCapabilityError(OvnError):
    """The server's NB schema lacks a table/column the requested rows need."""


class OvnApplyError(OvnError):
    """The transaction failed; nothing was committed."""


class OvnLockedError(OvnApplyError, ConflictError):
    """Another process holds this instance's write lock on the NB; nothing was written."""


def write_lock_name(instance: str) -> str:
    """The OVSDB named lock two reconcilers of one instance serialise on.

    OVSDB lock names are ids (``[_a-zA-Z][_a-zA-Z0-9]*``; the server answers anything else
    with an error the IDL ignores), so ``-`` becomes ``_``: instance names are DNS-1123 labels
    without ``_``, so the mapping stays injective.
    """
    return "osc_gitops_" + instance.replace("-", "_")


# ---------------------------------------------------------------------------------------------
# ovsdbapp plumbing


class _NbApi(ovsdbapp_backend.Backend, ovsdbapp_api.API):
    """ovsdbapp's generic backend (db_* commands). ovsdbapp keeps the connection in a *class*
    attribute, so :func:`_api_for` makes one subclass per connection: two adapters in one
    process (tests, per-node zones) must never share an IDL."""

    schema = DB_NAME
    lookup_table: dict[str, Any] = {}

    def create_transaction(
        self, check_error: bool = False, log_errors: bool = True, **kwargs: Any
    ) -> _NbTransaction:
        return _NbTransaction(
            self, self.ovsdb_connection, self.ovsdb_connection.timeout, check_error, log_errors
        )


class _IdlTransaction(ovs_idl.Transaction):
    """The IDL's transaction with a cheaper ``_substitute_uuids``.

    ``commit()`` passes the JSON of every value it sends through ``_substitute_uuids`` (to name
    rows inserted in the same transaction); the original recurses into every element, strings
    included: ~1.6 s of a 41,600-row insert. This one recurses into lists only and gives the
    same result.
    """

    def _substitute_uuids(self, json: Any) -> Any:
        if isinstance(json, (list, tuple)):
            if len(json) == 2 and json[0] == "uuid" and ovs_uuid.is_valid_string(json[1]):
                return super()._substitute_uuids(json)
            sub = self._substitute_uuids
            return [sub(e) if isinstance(e, (list, tuple)) else e for e in json]
        return json


class _NbTransaction(ovsdbapp_transaction.Transaction):
    """ovsdbapp's transaction; its ``pre_commit`` hook (called with each new IDL transaction,
    before any command runs) makes that IDL transaction an :class:`_IdlTransaction`."""

    def pre_commit(self, txn: Any) -> None:
        if type(txn) is ovs_idl.Transaction:
            txn.__class__ = _IdlTransaction
        super().pre_commit(txn)


class _ChangeLog:
    """Rows the IDL changed since the adapter last looked: table -> row UUID -> the names of
    the changed columns, or ``None`` for an inserted or deleted row (or one whose columns are
    unknown). Filled by :meth:`_Idl.notify` on the connection thread, emptied by
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


class _Idl(ovsdbapp_connection.OvsdbIdl):
    """ovsdbapp's IDL without its per-row ``time.sleep(0)``.

    ``OvsdbIdl.cooperative_yield`` exists for eventlet green threads; with real threads it is a
    syscall and a GIL hand-off per row of every update: 42,000 rows of our own commit spent
    ~3.5 s there (py-spy), the initial sync of 10,000 pod LSPs ~0.6 s. The GIL is still
    released every ``sys.getswitchinterval()``, so other threads are not starved.
    """

    osc_generation: int = 0
    """Bumped on every (re)connect: the IDL then re-monitors and may clear and reload its
    tables, which :class:`_ReadCache` must not try to follow row by row."""
    osc_log: _ChangeLog | None = None
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


def _api_for(conn: ovsdbapp_connection.Connection) -> _NbApi:
    cls = type("_NbApiInstance", (_NbApi,), {"_ovsdb_connection": None})
    return cls(conn, start=False, auto_index=False)


class _MapMutate(ovsdbapp_command.BaseCommand):
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


def _set_ssl(settings: OvnSettings) -> None:
    """The OVS stream library keeps SSL files process-wide: set them before connecting."""
    files = (settings.private_key, settings.certificate, settings.ca_cert)
    if not all(files):
        raise OvnConnectError(
            f"cannot connect to OVN NB at {settings.remote}: an ssl: remote needs "
            "private_key, certificate and ca_cert"
        )
    for path in files:
        assert path is not None
        if not os.path.isfile(path):
            raise OvnConnectError(
                f"cannot connect to OVN NB at {settings.remote}: file not found: {path}"
            )
    ovs_stream.Stream.ssl_set_private_key_file(settings.private_key)
    ovs_stream.Stream.ssl_set_certificate_file(settings.certificate)
    ovs_stream.Stream.ssl_set_ca_cert_file(settings.ca_cert)


def symbolic_columns(table: str, present: Container[str]) -> Iterator[tuple[str, str, Any]]:
    """How each column of ``_COLUMNS[table]`` becomes a symbolic field, in order: the one rule
    the IDL reader (``OvnNorthbound._symbolic``) and the snapshot reader (``ovn_snapshot``) share.

    Yields ``(column, rule, extra)``: ``const`` (a column this schema lacks, ``extra`` is its
    value), ``ref`` (``extra`` = (table, "set"|"one") it names), ``opt`` (an optional scalar),
    ``map``, or ``plain``. ``Port_Group.acls`` is skipped: ACLs name their Port_Group."""
    refs = _REFS.get(table, {})
    for col in _COLUMNS[table]:
        if table == "Port_Group" and col == "acls":
            continue
        if col not in present:
            if col == "tier":
                yield col, "const", 0  # OVN before 23.09: every ACL is in tier 0
            elif col == "network_function_group":
                yield col, "const", None
            continue
        if col in refs:
            yield col, "ref", refs[col]
        elif (table, col) in _OPTIONAL:
            yield col, "opt", None
        elif col in _MAPS:
            yield col, "map", None
        else:
            yield col, "plain", None


def tls_failure(member: str, exc: ssl.SSLError, what: str = "TLS handshake failed") -> str:
    """The user-facing reason a TLS connection to ``member`` failed (both NB readers)."""
    reason = getattr(exc, "verify_message", None) or exc.reason or str(exc)
    return f"{member}: {what} ({reason}; check --ovn-ca-cert)"


def _fetch_schema(remote: str, deadline: float) -> dict[str, Any]:
    """``get_schema`` from the first member that answers, bounded by ``deadline`` (ovsdbapp's
    own helper blocks without a timeout)."""
    errors: list[str] = []
    for member in (m.strip() for m in remote.split(",") if m.strip()):
        left_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
        try:
            err, strm = ovs_stream.Stream.open_block(ovs_stream.Stream.open(member), left_ms)
        except ssl.SSLError as exc:  # the OVS stream lets handshake errors escape
            errors.append(tls_failure(member, exc))
            continue
        if err:
            errors.append(f"{member}: {os.strerror(err) if err > 0 else 'failed'}")
            continue
        rpc = jsonrpc.Connection(strm)
        try:
            req = jsonrpc.Message.create_request("get_schema", [DB_NAME])
            err = rpc.send(req)
            while not err:
                rpc.run()
                err, msg = rpc.recv()
                if err == errno.EAGAIN:
                    err = 0
                    if time.monotonic() >= deadline:
                        errors.append(f"{member}: no answer before the timeout")
                        break
                    p = poller.Poller()
                    rpc.wait(p)
                    rpc.recv_wait(p)
                    p.timer_wait(max(1, int((deadline - time.monotonic()) * 1000)))
                    p.block()
                    continue
                if err or msg is None:
                    break
                if msg.id == req.id:
                    if msg.type == jsonrpc.Message.T_ERROR:
                        errors.append(f"{member}: {msg.error}")
                        break
                    return dict(msg.result)
            if err:
                errors.append(f"{member}: {os.strerror(err) if err > 0 else 'connection closed'}")
        finally:
            rpc.close()
    raise OvnConnectError(f"cannot connect to OVN NB at {remote}: {'; '.join(errors)}")


# ---------------------------------------------------------------------------------------------
# value helpers


def _row_to_uuid(value: Any) -> Any:
    return value.uuid if isinstance(value, ovs_idl.Row) else value


def _uuid_of(value: Any) -> uuid.UUID:
    return value.uuid if hasattr(value, "uuid") else value


# Fast cache accessors. ``Row.__getattr__`` re-validates every map through
# ``Datum.from_python`` (3 s for 10,000 LSPs); reading the committed ``Datum`` directly is ~10x
# faster. Only valid for rows of the committed cache read under the connection lock (no
# transaction is in flight then: ovsdbapp commits under the same lock).
def _scalar(row: Any, col: str) -> Any:
    datum = row._data.get(col)
    if datum is None or not datum.values:
        return None
    return next(iter(datum.values)).value


def _list(row: Any, col: str) -> list[Any]:
    datum = row._data.get(col)
    return [] if datum is None else [k.value for k in datum.values]


def _map(row: Any, col: str) -> dict[Any, Any]:
    datum = row._data.get(col)
    return {} if datum is None else {k.value: v.value for k, v in datum.values.items()}


def _python(row: Any, col: str, col_type: Any) -> Any:
    """What ``getattr(row, col)`` returns (scalar, list for optional/set, dict for map), read
    from the committed ``Datum`` like the accessors above: ``Row.__getattr__`` re-validates
    every value through ``Datum.from_python``, which made ``read()`` of 40,000 owned rows take
    ~4 s (0.4 s this way). References come back as UUIDs instead of rows (callers accept both).
    """
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


def _unconstrained_str(base: Any) -> bool:
    return bool(
        base is not None
        and base.type == ovs_types.StringType
        and base.enum is None
        and base.min_length == 0
        and base.max_length >= 2**31 - 1
        and not base.ref_table_name
    )


def _plain_strings(col_type: Any, value: Any) -> bool:
    """``value`` certainly fits ``col_type``: strings into string columns without constraints.

    The common case (``match``, ``external_ids``, ``options``, ``addresses``) then skips the
    full ``Datum.from_python`` check, which ovsdbapp's ``setattr`` repeats anyway: 1-2 s of a
    40,000-row apply. Anything else still goes through the full check.
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


def _string_datum(col_type: Any, value: Any) -> Any:
    """A Datum of a value :func:`_plain_strings` accepted (no further checks needed)."""
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
class _ColumnKind:
    """How to turn a value into a Datum of one column type without the IDL's generic
    ``Datum.from_python`` (~30 us a value) when the value certainly fits: the checks below are
    the column's constraints (string without limits, integer range, enum, count)."""

    col_type: Any
    kind: str  # "str", "strmap", "uuid", "int", "enum" or "other"
    enum: frozenset[Any] = frozenset()

    @classmethod
    def of(cls, col_type: Any) -> _ColumnKind:
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
            if _plain_strings(col_type, value):
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


def _opt(value: Any) -> Any:
    """A 0..1 column as the IDL gives it (a list) -> value or None."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


def _parse_addresses(addresses: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    for entry in addresses:
        parts = entry.split()
        if parts and parts[0].count(":") == 5:
            return parts[0], tuple(parts[1:])
    return None, ()


@dataclass
class _Index:
    """UUID <-> symbolic name maps of the cache, used by read and apply.

    Kept up to date incrementally by :class:`_ReadCache` (never rebuilt from scratch while the
    IDL stays connected): ``names[t]`` maps every row of a named table (and every *owned* ACL /
    Logical_Router_Policy) to its name (key); ``parent[t]`` maps a child row to the row whose
    set column holds it.
    """

    names: dict[str, dict[uuid.UUID, str]] = field(default_factory=dict)
    by_name: dict[str, dict[str, uuid.UUID]] = field(default_factory=dict)
    owned: dict[tuple[str, str], Any] = field(default_factory=dict)  # (table, key) -> Row
    parent: dict[str, dict[uuid.UUID, uuid.UUID]] = field(default_factory=dict)


# Parent table -> (its set column holding children, the child table).
_CHILD_COL: dict[str, tuple[str, str]] = {p: (c, t) for t, (_f, p, c) in _PARENT.items()}
# Referenced table -> the tables whose symbolic fields name its rows.
_REFERRERS: dict[str, set[str]] = {}
for _t, _refs in _REFS.items():
    for _rt, _kind in _refs.values():
        _REFERRERS.setdefault(_rt, set()).add(_t)
_NAME_TABLES = ("Logical_Switch", "Logical_Router", *sorted(_NAMED))


class _ReadCache:
    """Everything :meth:`OvnNorthbound.read` derives from the IDL cache, kept between reads.

    Why: at 10,000 pods the NB holds ~52,000 rows, 41,600 of them ours; converting all of them
    on every read took ~2.6 s even when nothing had changed. The IDL tells us which rows it
    changed (:class:`_ChangeLog`), so a read only redoes those: unchanged :class:`OvnRow`,
    :class:`PodPort` and tuples are reused as the *same* objects (the core compares with
    ``is`` first), and a read with nothing changed returns the previous :class:`OvnState`.

    Correctness rules: every method runs under the connection lock (the IDL changes its cache
    only under it); a reconnect (:attr:`_Idl.osc_generation`) or a replaced ``table.rows``
    (the IDL's clear-and-reload) drops the whole cache, which is then rebuilt by feeding every
    row through the same incremental path as "inserted".
    """

    def __init__(self, nb: OvnNorthbound, tables: Mapping[str, Any]) -> None:
        idl = nb._conn.idl
        self.nb = nb
        self.generation = idl.osc_generation
        self.rows_ids = {name: id(t.rows) for name, t in tables.items()}
        self.ix = _Index()
        for table in (*_NAME_TABLES, *OVN_TABLES):
            if table in tables:
                self.ix.names.setdefault(table, {})
                self.ix.by_name.setdefault(table, {})
        for child, (_f, ptable, _c) in _PARENT.items():
            if ptable in tables:
                self.ix.parent[child] = {}
        self.owned_key: dict[str, dict[uuid.UUID, str]] = {t: {} for t in OVN_TABLES}
        self.children: dict[str, dict[uuid.UUID, frozenset[uuid.UUID]]] = {
            p: {} for p in _CHILD_COL
        }
        self.extra: dict[tuple[str, str], int] = {}  # (table, key) -> rows beyond the first
        self.sym: dict[tuple[str, uuid.UUID], OvnRow] = {}
        self.dangling: set[uuid.UUID] = set()
        self.pod_port: dict[uuid.UUID, PodPort] = {}
        # Pending work, accumulated by refresh() (apply refreshes too) until the next read.
        self.sym_dirty: set[tuple[str, uuid.UUID]] = set()
        self.pod_dirty: set[uuid.UUID] = set()
        self.tables_dirty: set[str] = set()
        self.renamed: set[str] = set()
        # The last read's results.
        self.state: OvnState | None = None
        self.owned_list: list[OvnRow] = []
        self.owned_pos: dict[tuple[str, uuid.UUID], int] = {}
        # Start recording before building: both happen under the connection lock.
        idl.osc_log = _ChangeLog()
        everything = {
            name: dict.fromkeys(t.rows.keys()) for name, t in tables.items() if name in _COLUMNS
        }
        self._follow(tables, everything)

    def valid_for(self, tables: Mapping[str, Any]) -> bool:
        """False after a reconnect or a clear-and-reload of any table (drop the cache)."""
        if self.generation != self.nb._conn.idl.osc_generation:
            return False
        return all(id(t.rows) == self.rows_ids.get(name) for name, t in tables.items())

    def refresh(self, tables: Mapping[str, Any]) -> None:
        """Bring the index up to date with what the IDL changed since the last refresh."""
        log = self.nb._conn.idl.osc_log
        if log is not None:
            changes = log.take()
            if changes:
                self._follow(tables, changes)

    # -- incremental maintenance -------------------------------------------------------------
    def _follow(
        self, tables: Mapping[str, Any], changes: Mapping[str, Mapping[uuid.UUID, Any]]
    ) -> None:
        instance = self.nb.settings.instance
        ix = self.ix
        for tname, per in changes.items():
            table = tables.get(tname)
            if table is None or not per:
                continue
            self.tables_dirty.add(tname)
            rows = table.rows
            named = tname in ix.by_name and tname in _NAME_TABLES
            child_spec = _CHILD_COL.get(tname)
            ours = tname in self.owned_key
            for u, cols in per.items():
                row = rows.get(u)
                structural = cols is None
                if named and (structural or "name" in cols):
                    self._set_name(tname, u, None if row is None else _scalar(row, "name"))
                if ours:
                    if structural or "external_ids" in cols or "name" in cols:
                        self._set_owned(tname, u, row, rows, instance)
                    self.sym_dirty.add((tname, u))
                if child_spec is not None:
                    column, child = child_spec
                    if structural or column in cols or "name" in cols:
                        everyone = structural or "name" in cols
                        self._set_children(tname, u, row, column, child, everyone)
                if tname == "Logical_Switch_Port":
                    self.pod_dirty.add(u)

    def _set_name(self, table: str, u: uuid.UUID, name: str | None) -> None:
        names, by_name = self.ix.names[table], self.ix.by_name[table]
        old = names.get(u)
        if old is not None and old != name:
            del names[u]
            if by_name.get(old) == u:
                del by_name[old]
                if table in ("Logical_Switch", "Logical_Router"):
                    # Their names need not be unique: another row may still hold it.
                    other = next((k for k, v in names.items() if v == old), None)
                    if other is not None:
                        by_name[old] = other
            if name is not None:
                # A rename changes how other rows name this one. (A delete does not: the
                # server removes weak references to it, updating those rows, and refuses
                # the delete while strong ones remain.)
                self.renamed.add(table)
        if name is not None and old != name:
            names[u] = name
            by_name[name] = u
        if name is not None and u in self.dangling:
            self.renamed.add(table)  # a row named by its UUID before it arrived

    def _set_owned(
        self, table: str, u: uuid.UUID, row: Any, rows: Mapping[uuid.UUID, Any], instance: str
    ) -> None:
        key: str | None = None
        if row is not None:
            ext = _map(row, "external_ids")
            if ext.get(ownership.OWNER) == instance:
                if table in _NAMED:
                    key = _scalar(row, "name")
                else:
                    key = ext.get(ownership.KEY) or f"uuid:{row.uuid}"
        keys = self.owned_key[table]
        owned = self.ix.owned
        old = keys.get(u)
        if old == key and (key is None or owned.get((table, key)) is row):
            return
        if old is not None:
            del keys[u]
            if table not in _NAMED:
                self.ix.names[table].pop(u, None)
            tk = (table, old)
            cur = owned.get(tk)
            if cur is not None and cur.uuid == u:
                del owned[tk]
                if self.extra.get(tk):
                    # Two rows with one key (a duplicate someone made): the other takes over.
                    self._one_less(tk)
                    other = next(k for k, v in keys.items() if v == old)
                    owned[tk] = rows[other]
                    self.sym_dirty.add((table, other))
            elif self.extra.get(tk):
                self._one_less(tk)
        if key is not None:
            keys[u] = key
            if table not in _NAMED:
                self.ix.names[table][u] = key
            tk = (table, key)
            cur = owned.get(tk)
            if cur is not None and cur.uuid != u:
                self.extra[tk] = self.extra.get(tk, 0) + 1
                self.sym_dirty.add((table, cur.uuid))
            owned[tk] = row

    def _one_less(self, tk: tuple[str, str]) -> None:
        left = self.extra[tk] - 1
        if left:
            self.extra[tk] = left
        else:
            del self.extra[tk]

    def _set_children(
        self, ptable: str, u: uuid.UUID, row: Any, column: str, child: str, all_: bool
    ) -> None:
        old = self.children[ptable].pop(u, frozenset())
        new = frozenset(_list(row, column)) if row is not None else frozenset()
        if row is not None:
            self.children[ptable][u] = new
        parent = self.ix.parent.get(child)
        if parent is None:
            return
        for c in old - new:
            if parent.get(c) == u:
                del parent[c]
        for c in new:
            parent[c] = u
        affected = (old | new) if all_ else (old ^ new)
        self.sym_dirty.update((child, c) for c in affected)
        if child == "Logical_Switch_Port":
            self.pod_dirty.update(affected)

    # -- the read ------------------------------------------------------------------------------
    def state_now(self, tables: Mapping[str, Any]) -> OvnState:
        """The current :class:`OvnState`, recomputing only what changed since the last one."""
        self.refresh(tables)
        prev = self.state
        if prev is not None and not (self.tables_dirty or self.sym_dirty or self.pod_dirty):
            return prev
        switches = prev.switches if prev is not None else None
        routers = prev.routers if prev is not None else None
        used = prev.used_ids if prev is not None else None
        dirty = self.tables_dirty
        if switches is None or "Logical_Switch" in dirty:
            switches = self._switches(tables)
        if routers is None or "Logical_Router" in dirty:
            routers = tuple(sorted(self.ix.names.get("Logical_Router", {}).values()))
        if used is None or dirty & {"Network_Function", "Network_Function_Group"}:
            used = self._used_ids(tables)
        pod_ports = self._pod_ports(tables, prev)
        owned = self._owned(prev)
        self.tables_dirty = set()
        if prev is not None and (
            switches == prev.switches
            and routers == prev.routers
            and used == prev.used_ids
            and pod_ports is prev.pod_ports
            and owned is prev.owned
        ):
            return prev
        self.state = OvnState(
            switches=switches if prev is None or switches != prev.switches else prev.switches,
            routers=routers if prev is None or routers != prev.routers else prev.routers,
            pod_ports=pod_ports,
            owned=owned,
            capabilities=self.nb.capabilities,
            used_ids=used if prev is None or used != prev.used_ids else prev.used_ids,
        )
        return self.state

    def _switches(self, tables: Mapping[str, Any]) -> tuple[Switch, ...]:
        out = []
        for ls in tables["Logical_Switch"].rows.values():
            other = _map(ls, "other_config")
            lbs = bool(_list(ls, "load_balancer") or _list(ls, "load_balancer_group"))
            out.append(
                Switch(name=_scalar(ls, "name"), subnet=other.get("subnet"), load_balancers=lbs)
            )
        out.sort(key=lambda sw: sw.name)
        return tuple(out)

    def _used_ids(self, tables: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        used: dict[str, tuple[int, ...]] = {}
        instance = self.nb.settings.instance
        for table in ("Network_Function", "Network_Function_Group"):
            if table in tables:
                used[table] = tuple(
                    sorted(
                        _scalar(row, "id")
                        for row in tables[table].rows.values()
                        if _map(row, "external_ids").get(ownership.OWNER) != instance
                    )
                )
        return used

    def _pod_ports(self, tables: Mapping[str, Any], prev: OvnState | None) -> tuple[PodPort, ...]:
        dirty, self.pod_dirty = self.pod_dirty, set()
        if prev is not None and not dirty:
            return prev.pod_ports
        lsps = tables["Logical_Switch_Port"].rows
        parent = self.ix.parent.get("Logical_Switch_Port", {})
        switch_names = self.ix.names.get("Logical_Switch", {})
        changed = prev is None
        for u in dirty:
            old = self.pod_port.pop(u, None)
            lsp = lsps.get(u)
            sw = parent.get(u)
            new = None
            if lsp is not None and sw is not None:
                ext = _map(lsp, "external_ids")
                if ext.get("pod") == "true":
                    ns = ext.get("namespace", "")
                    name = _scalar(lsp, "name")
                    pod = name[len(ns) + 1 :] if ns and name.startswith(ns + "_") else name
                    mac, ips = _parse_addresses(_list(lsp, "addresses"))
                    new = PodPort(
                        name=name,
                        switch=switch_names.get(sw, ""),
                        namespace=ns,
                        pod=pod,
                        pod_uid=_map(lsp, "options").get("iface-id-ver"),
                        mac=mac,
                        ips=ips,
                    )
                    if old is not None and old == new:
                        new = old
            if new is not None:
                self.pod_port[u] = new
            if new is not old:
                changed = True
        if not changed and prev is not None:
            return prev.pod_ports
        return tuple(sorted(self.pod_port.values(), key=lambda p: p.name))

    def _owned(self, prev: OvnState | None) -> tuple[OvnRow, ...]:
        if self.renamed:
            for table in self.renamed:
                for referrer in _REFERRERS.get(table, ()):
                    self.sym_dirty.update((referrer, u) for u in self.owned_key[referrer])
            self.renamed = set()
        dirty, self.sym_dirty = self.sym_dirty, set()
        if prev is not None and not dirty:
            return prev.owned
        owned = self.ix.owned
        replaced: list[tuple[tuple[str, uuid.UUID], OvnRow]] = []
        reorder = prev is None
        for tu in dirty:
            table, u = tu
            old = self.sym.get(tu)
            key = self.owned_key.get(table, {}).get(u)
            row = None if key is None else owned.get((table, key))
            if key is None or row is None or row.uuid != u:
                if old is not None:
                    del self.sym[tu]
                    reorder = True
                continue
            new = self.nb._symbolic(table, key, row, self.ix, self.dangling)
            if old is not None and old == new:
                continue
            self.sym[tu] = new
            if old is None or old.key != new.key:
                reorder = True
            else:
                replaced.append((tu, new))
        if reorder:
            items = sorted(self.sym.items(), key=lambda kv: (_TABLE_ORDER[kv[1].table], kv[1].key))
            self.owned_list = [r for _tu, r in items]
            self.owned_pos = {tu: i for i, (tu, _r) in enumerate(items)}
        elif replaced:
            for tu, new in replaced:
                self.owned_list[self.owned_pos[tu]] = new
        elif prev is not None:
            return prev.owned
        return tuple(self.owned_list)


_TABLE_ORDER = {t: i for i, t in enumerate(OVN_TABLES)}


# ---------------------------------------------------------------------------------------------
# the adapter


class OvnNorthbound:
    """A live connection to one OVN Northbound database (standalone or Raft cluster)."""

    def __init__(
        self,
        settings: OvnSettings,
        conn: ovsdbapp_connection.Connection,
        schema: dict[str, Any],
    ) -> None:
        self.settings = settings
        self._conn = conn
        self._api = _api_for(conn)
        self._schema = schema
        self._closed = False
        tables = schema.get("tables", {})
        nf = (
            "Network_Function" in tables
            and "Network_Function_Group" in tables
            and "network_function_group" in tables.get("ACL", {}).get("columns", {})
        )
        self.capabilities = OvnCapabilities(
            schema_version=str(schema.get("version", "")), network_function=nf
        )
        self._lock = threading.Lock()
        self._cache: _ReadCache | None = None
        self._sym_plans: dict[str, list[tuple[str, str, Any, Any]]] = {}
        self.last_commit: float | None = None
        """``time.perf_counter()`` right after the last transaction's commit succeeded (for
        latency measurements: "pod labelled -> committed")."""

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def connect(cls, settings: OvnSettings) -> OvnNorthbound:
        """Connect and return only after the IDL holds a complete copy of the tables we read."""
        where = f"cannot connect to OVN NB at {settings.remote}"
        if not settings.remote.strip():
            raise OvnConnectError("cannot connect to OVN NB: no remote given")
        if any(m.strip().startswith("ssl:") for m in settings.remote.split(",")):
            _set_ssl(settings)
        deadline = time.monotonic() + settings.timeout
        schema = _fetch_schema(settings.remote, deadline)
        if schema.get("name") != DB_NAME:
            raise OvnConnectError(f"{where}: server database is {schema.get('name')!r}")
        helper = ovs_idl.SchemaHelper(None, schema)
        for table, columns in _COLUMNS.items():
            if table in schema["tables"]:
                present = [c for c in columns if c in schema["tables"][table]["columns"]]
                helper.register_columns(table, present)
        # leader_only=True (the default, stated on purpose): with a Raft remote list the IDL
        # moves on from followers, so reads are never stale and writes never bounce.
        idl = _Idl(settings.remote, helper, leader_only=True)
        left = max(0.1, deadline - time.monotonic())
        conn = ovsdbapp_connection.Connection(idl=idl, timeout=settings.timeout)
        conn.timeout = left  # bound the initial sync by what is left of the budget
        try:
            conn.start()
        except ovsdbapp_exceptions.TimeoutException:
            conn.stop(timeout=1)
            idl.close()
            raise OvnConnectError(
                f"{where}: no complete initial sync within {settings.timeout}s"
            ) from None
        except Exception as exc:
            conn.stop(timeout=1)
            idl.close()
            raise OvnConnectError(f"{where}: {exc}") from exc
        conn.timeout = settings.timeout
        return cls(settings, conn, schema)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._conn.stop(timeout=5)

    def __enter__(self) -> OvnNorthbound:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def remote(self) -> str:
        return self.settings.remote

    # -- reading -----------------------------------------------------------------------------
    def _synced_tables(self) -> dict[str, Any]:
        """Wait (up to the timeout) until the IDL is monitoring, then return its tables.

        Must be called with the connection lock held; it releases the lock while waiting so
        the connection thread can make progress (e.g. after a Raft failover).
        """
        idl = self._conn.idl
        deadline = time.monotonic() + self.settings.timeout
        while idl.state != ovs_idl.Idl.IDL_S_MONITORING or not idl.has_ever_connected():
            if self._closed:
                raise OvnConnectError(f"OVN NB connection to {self.remote} is closed")
            if time.monotonic() > deadline:
                raise OvnConnectError(
                    f"cannot read OVN NB at {self.remote}: not (re)synced within "
                    f"{self.settings.timeout}s"
                )
            self._conn.lock.release()
            try:
                time.sleep(0.02)
            finally:
                self._conn.lock.acquire()
        return dict(idl.tables)

    def _cache_for(self, tables: Mapping[str, Any]) -> _ReadCache:
        """The read cache, brought up to date (rebuilt after a reconnect). Connection lock held."""
        cache = self._cache
        if cache is None or not cache.valid_for(tables):
            cache = self._cache = _ReadCache(self, tables)
        else:
            cache.refresh(tables)
        return cache

    def read(self) -> OvnState:
        """A consistent snapshot of the cache (never a half-loaded one).

        Incremental: only rows the IDL changed since the previous read are converted again;
        when nothing changed, the previous :class:`OvnState` itself is returned (see
        :class:`_ReadCache`).
        """
        with self._conn.lock:
            tables = self._synced_tables()
            try:
                return self._cache_for(tables).state_now(tables)
            except BaseException:
                self._cache = None  # never keep a half-updated cache: rebuild on the next read
                raise

    def _symbolic(
        self, table: str, key: str, row: Any, ix: _Index, dangling: set[uuid.UUID] | None = None
    ) -> OvnRow:
        """A cache row in the symbolic form of ``reconciler.core.target``.

        A reference to a row the cache does not hold is named by its UUID and, when
        ``dangling`` is given, remembered there (the read cache must redo this row if a row
        with that UUID arrives later)."""
        plan = self._sym_plans.get(table)
        if plan is None:
            plan = self._sym_plans[table] = self._sym_plan(table)
        data = row._data
        fields: dict[str, Any] = {}
        for col, how, col_type, extra in plan:
            if how == "const":
                fields[col] = extra
                continue
            datum = data.get(col)
            if how == "map":
                fields[col] = (
                    {}
                    if datum is None
                    else dict(sorted((k.value, v.value) for k, v in datum.values.items()))
                )
                continue
            value = (
                _python(row, col, col_type)
                if datum is None or how != "scalar"
                else (next(iter(datum.values)).value)
            )
            if how == "ref":
                ref_table, kind = extra
                names = ix.names.get(ref_table, {})
                if kind == "set":
                    uuids = [_uuid_of(v) for v in value]
                    value = sorted(names.get(u, str(u)) for u in uuids)
                else:
                    one = _opt(value)
                    uuids = [] if one is None else [_uuid_of(one)]
                    value = None if one is None else names.get(uuids[0], str(uuids[0]))
                if dangling is not None:
                    dangling.update(u for u in uuids if u not in names)
            elif how == "opt":
                value = _opt(value)
            elif isinstance(value, list):
                value = sorted(value) if extra else list(value)
            fields[col] = value
        if table in _PARENT:
            fname, ptable, _column = _PARENT[table]
            parent = ix.parent.get(table, {}).get(row.uuid)
            fields[fname] = None if parent is None else ix.names.get(ptable, {}).get(parent)
        return OvnRow(table=table, key=key, fields=fields)

    def _sym_plan(self, table: str) -> list[tuple[str, str, Any, Any]]:
        """Per column of ``table``: how :meth:`_symbolic` converts it, decided once (the
        schema lookups per value cost ~1 s of a 41,600-row read)."""
        columns = self._schema["tables"][table]["columns"]
        idl_columns = self._conn.idl.tables[table].columns
        plan: list[tuple[str, str, Any, Any]] = []
        for col, rule, extra in symbolic_columns(table, columns):
            if rule == "const":
                plan.append((col, "const", None, extra))
                continue
            col_type = idl_columns[col].type
            if rule != "plain":
                plan.append((col, rule, col_type, extra))
            elif col_type.n_min == 1 and col_type.n_max == 1 and not col_type.is_map():
                plan.append((col, "scalar", col_type, None))
            else:
                plan.append((col, "value", col_type, col != "addresses"))
        return plan

    # -- writing -----------------------------------------------------------------------------
    def apply(self, changes: Sequence[OvnChange], revision: str | None = None) -> None:
        """Apply ``changes`` in ONE transaction; on any failure nothing is committed."""
        if not changes:
            return
        with self._lock:
            self._take_write_lock()
            try:
                self._apply_locked(changes, revision)
            finally:
                self._release_write_lock()

    # Two reconcilers of one instance (a CronJob overlapping a loop, two replicas without
    # leader election) must not interleave: both would plan the same creates and the second
    # would insert duplicate ACLs (ACL has no unique column). ovsdb-server's named locks solve
    # it in the database itself: we take ``osc_gitops_<instance>`` before building the
    # transaction from the cache, the IDL adds an ``assert`` of the lock to the transaction (so
    # the server refuses the commit if the lock was lost meanwhile), and we release it after.
    # The lock reply arrives on the same session after every update committed before it, so
    # once we hold it our cache includes the other writer's rows. Locks are per server: with a
    # Raft cluster they work because the adapter only talks to the leader (leader_only=True).
    def _take_write_lock(self) -> None:
        idl = self._conn.idl
        name = write_lock_name(self.settings.instance)
        deadline = time.monotonic() + self.settings.timeout
        with self._conn.lock:
            idl.set_lock(name)
        while True:
            with self._conn.lock:
                if idl.has_lock:
                    return
                contended = idl.is_lock_contended
                if contended or time.monotonic() > deadline:
                    idl.set_lock(None)
            if contended:
                raise OvnLockedError(
                    f"cannot apply to OVN NB at {self.remote}: another osc-gitops process holds "
                    f"the write lock {name!r} (same --instance {self.settings.instance!r}); "
                    "refusing to apply so the two do not interleave. Nothing was written; "
                    "retry when it has finished, or give each reconciler its own --instance"
                )
            if time.monotonic() > deadline:
                raise OvnLockedError(
                    f"cannot apply to OVN NB at {self.remote}: the server did not grant the "
                    f"write lock {name!r} within {self.settings.timeout}s; nothing was written"
                )
            time.sleep(0.005)

    def _release_write_lock(self) -> None:
        with self._conn.lock:
            self._conn.idl.set_lock(None)

    def _apply_locked(self, changes: Sequence[OvnChange], revision: str | None) -> None:
        with self._conn.lock:
            # The write lock is held: its grant arrived after every update committed before
            # it, so refreshing the cached index now sees other writers' rows.
            tables = self._synced_tables()
            try:
                ix = self._cache_for(tables).ix
            except BaseException:
                self._cache = None
                raise
            builder = _TxnBuilder(self, ix, revision)
            commands = builder.build(changes)
        creates = [(c.kind, c.key) for c in changes if c.action == "create"]
        guard = _CreatesStillAbsent(self._api, self.settings.instance, creates)
        try:
            with self._api.transaction(check_error=True, log_errors=False) as txn:
                txn.add(guard)
                for command in commands:
                    txn.add(command)
            self.last_commit = time.perf_counter()
        except _AlreadyCommitted:
            # The lost reply's transaction had committed; the verify plan proves it.
            self.last_commit = time.perf_counter()
            return
        except OvnError:
            raise
        except ovsdbapp_exceptions.TimeoutException as exc:
            raise OvnApplyError(
                f"OVN NB transaction at {self.remote} timed out after "
                f"{self.settings.timeout}s; nothing was committed"
            ) from exc
        except RuntimeError as exc:
            if "configured to require a database lock" not in str(exc):
                raise OvnApplyError(
                    f"OVN NB transaction at {self.remote} failed, nothing was committed: {exc}"
                ) from exc
            raise OvnLockedError(
                f"OVN NB transaction at {self.remote} was refused: the write lock "
                f"{write_lock_name(self.settings.instance)!r} was lost (connection reset "
                "or stolen) before the commit; nothing was committed"
            ) from exc
        except Exception as exc:
            raise OvnApplyError(
                f"OVN NB transaction at {self.remote} failed, nothing was committed: {exc}"
            ) from exc

    def _has_column(self, table: str, column: str) -> bool:
        return column in self._schema["tables"].get(table, {}).get("columns", {})


class _AlreadyCommitted(Exception):
    """A retried transaction found every row it creates already there: the first attempt
    committed and only its reply was lost."""


class _CreatesStillAbsent(ovsdbapp_command.BaseCommand):
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
            for row in self.api.tables[table].rows.values():
                ext = _map(row, "external_ids")
                if ext.get(ownership.OWNER) != self.instance:
                    continue
                key = str(_scalar(row, "name") if table in _NAMED else ext.get(ownership.KEY))
                if (table, key) in self.creates:
                    present.add((table, key))
        if present == self.creates:
            raise _AlreadyCommitted()
        if present:
            raise OvnApplyError(
                "the NB connection dropped during the commit and, after reconnecting, "
                f"{len(present)} of {len(self.creates)} rows to create already exist (another "
                "writer?); nothing more was written, re-run plan"
            )


class _InsertRows(ovsdbapp_command.BaseCommand):
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


class _TxnBuilder:
    """Turns symbolic changes into ovsdbapp commands (runs under the connection lock)."""

    def __init__(self, nb: OvnNorthbound, ix: _Index, revision: str | None) -> None:
        self.nb = nb
        self.api = nb._api
        self.ix = ix
        self.revision = revision
        # (table, name) -> provisional UUID of a row this transaction inserts
        self.created: dict[tuple[str, str], uuid.UUID] = {}
        self.inserts: list[tuple[str, uuid.UUID, dict[str, Any]]] = []
        self.insert_cols: dict[uuid.UUID, dict[str, Any]] = {}
        # (parent table, existing parent row, set column) -> children inserted here
        self.parent_adds: dict[tuple[str, uuid.UUID, str], list[uuid.UUID]] = {}
        self.deleted: set[tuple[str, str]] = set()
        self.commands: list[Any] = []
        self._kinds: dict[tuple[str, str], _ColumnKind] = {}

    def fail(self, message: str, cls: type[OvnError] = OvnApplyError) -> OvnError:
        return cls(f"cannot apply to OVN NB at {self.nb.remote}: {message}; nothing was committed")

    # references ------------------------------------------------------------------------------
    def ref(self, table: str, name: str, by: str) -> Any:
        """The (provisional) UUID of the row this transaction creates or the UUID of the
        existing row named ``name``."""
        if (table, name) in self.created:
            return self.created[(table, name)]
        if (table, name) in self.deleted:
            raise self.fail(f"{by} references {table} {name!r}, which this plan deletes")
        if table in ("ACL", "Logical_Router_Policy"):
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
                f"{self.nb.settings.instance!r}; re-run plan"
            )
        return row

    # building --------------------------------------------------------------------------------
    def build(self, changes: Sequence[OvnChange]) -> list[Any]:
        order = {t: i for i, t in enumerate(OVN_TABLES)}
        for change in changes:
            if change.kind not in order:
                raise self.fail(f"unknown OVN table {change.kind!r} (key {change.key!r})")
            if change.kind not in self.nb._schema["tables"]:
                raise self.fail(
                    f"table {change.kind} does not exist in NB schema "
                    f"{self.nb.capabilities.schema_version} (needs OVN >= 26.03)",
                    OvnCapabilityError,
                )
            if change.action not in ("create", "update", "delete"):
                raise self.fail(f"unknown action {change.action!r} for {change.kind}")
        deletes = sorted((c for c in changes if c.action == "delete"), key=lambda c: -order[c.kind])
        others = sorted((c for c in changes if c.action != "delete"), key=lambda c: order[c.kind])
        self.deleted = {(c.kind, c.key) for c in deletes}
        self._deletes(deletes)
        for change in others:
            if change.action == "create":
                self._create(change)
            else:
                self._update(change)
        if self.inserts:
            # First: commands that follow may look up a row inserted here by its UUID.
            rows = _InsertRows(self.api, self.nb.remote, self.inserts, self.parent_adds)
            self.commands.insert(0, rows)
        return self.commands

    def _ext(self, after: Mapping[str, Any]) -> dict[str, str]:
        ext = {str(k): str(v) for k, v in (after.get("external_ids") or {}).items()}
        ext[ownership.OWNER] = self.nb.settings.instance
        if self.revision:
            ext[ownership.REVISION] = self.revision
        return ext

    def _columns(
        self, table: str, values: Mapping[str, Any], who: str, datums: bool = False
    ) -> dict[str, Any]:
        """Symbolic fields -> IDL column values (refs resolved), capability-checked and
        validated; with ``datums``, as the validated ``Datum`` the insert will carry."""
        out: dict[str, Any] = {}
        refs = _REFS.get(table, {})
        parent_field = _PARENT.get(table, ("",))[0]
        for col, value in values.items():
            if col in (parent_field, "external_ids"):
                continue
            if col not in _COLUMNS[table]:
                raise self.fail(f"{who}: unknown field {col!r}")
            if not self.nb._has_column(table, col):
                if (col == "tier" and not value) or (col == "network_function_group" and not value):
                    continue
                raise self.fail(
                    f"{who}: column {table}.{col} does not exist in NB schema "
                    f"{self.nb.capabilities.schema_version}",
                    OvnCapabilityError,
                )
            if col in refs:
                ref_table, kind = refs[col]
                if kind == "set":
                    value = [self.ref(ref_table, n, who) for n in value or []]
                elif kind == "opt":
                    value = [] if value is None else [self.ref(ref_table, value, who)]
                else:
                    value = self.ref(ref_table, value, who)
            elif (table, col) in _OPTIONAL:
                value = [] if value is None else [value]
            elif col in _MAPS:
                value = {str(k): str(v) for k, v in (value or {}).items()}
            elif isinstance(value, tuple):
                value = list(value)
            if datums:
                out[col] = self._datum(table, col, value, who)
                continue
            if col not in refs:
                self._validate(table, col, value, who)
            out[col] = value
        return out

    def _datum(self, table: str, col: str, value: Any, who: str) -> Any:
        """``value`` as a ``Datum`` of the server's column type, refused if it does not fit.

        Built directly for the common cases that certainly fit (plain strings; references we
        resolved ourselves to rows of the right table), else through the IDL's full
        ``Datum.from_python`` check. The insert then carries the Datum as is: the IDL's
        ``setattr`` would convert and check every value a second time (~5 s of a 41,600-row
        apply, on the connection thread).
        """
        kind = self._kinds.get((table, col))
        if kind is None:
            kind = self._kinds[(table, col)] = _ColumnKind.of(
                self.nb._conn.idl.tables[table].columns[col].type
            )
        fast = kind.datum(value)
        if fast is not None:
            return fast
        col_type = kind.col_type
        try:
            return ovs_data.Datum.from_python(col_type, value, _row_to_uuid)
        except (ovs_error.Error, ValueError, TypeError, AttributeError) as exc:
            raise self.fail(f"{who}: invalid value {value!r} for {table}.{col}: {exc}") from None

    def _validate(self, table: str, col: str, value: Any, who: str) -> None:
        """Check a value against the server's column type *before* building the txn.

        The Python IDL's ``setattr`` logs and silently drops a value that does not fit the
        column (a priority out of range would be committed as 0); we refuse it instead.
        """
        column = self.nb._conn.idl.tables[table].columns[col]
        if _plain_strings(column.type, value):
            return
        try:
            ovs_data.Datum.from_python(column.type, value, _row_to_uuid)
        except (ovs_error.Error, ValueError, TypeError, AttributeError) as exc:
            raise self.fail(f"{who}: invalid value {value!r} for {table}.{col}: {exc}") from None

    def _create(self, change: OvnChange) -> None:
        table, after = change.kind, dict(change.after or {})
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
        if table == "Port_Group":
            # Every set column given (an empty Datum is the column's default and is not sent):
            # a child ACL created in the same transaction is added to this Datum below.
            cols.setdefault("acls", self._datum(table, "acls", [], who))
            cols.setdefault("ports", self._datum(table, "ports", [], who))
        if table == "Network_Function_Group":
            cols.setdefault("network_function", self._datum(table, "network_function", [], who))
        if table in _NAMED and "name" not in cols:
            cols["name"] = self._datum(table, "name", change.key, who)
        new_uuid = uuid.uuid4()  # provisional: the IDL names it in the transaction
        self.created[(table, change.key)] = new_uuid
        self.inserts.append((table, new_uuid, cols))
        if table in _PARENT:
            fname, ptable, column = _PARENT[table]
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
        who = f"{table} {change.key!r}"
        row = self.owned_row(change)
        before = dict(change.before or {})
        after = dict(change.after or {})
        refs = _REFS.get(table, {})
        plain: dict[str, Any] = {}
        for col in sorted(set(before) | set(after)):
            old, new = before.get(col), after.get(col)
            if col in after and old == new and col != "external_ids":
                continue
            if col not in after:
                continue  # a field the plan does not manage
            if table in _PARENT and col == _PARENT[table][0]:
                _f, ptable, pcol = _PARENT[table]
                if not new:
                    raise self.fail(f"{who}: field {col!r} (the {ptable} holding it) is required")
                live_parent = self.ix.parent.get(table, {}).get(row.uuid)
                if live_parent is not None:
                    self.commands.append(self.api.db_remove(ptable, live_parent, pcol, row.uuid))
                self.commands.append(
                    self.api.db_add(ptable, self.ref(ptable, str(new), who), pcol, row.uuid)
                )
            elif col in refs and refs[col][1] == "set":
                ref_table = refs[col][0]
                old_set, new_set = set(old or []), set(new or [])
                added = [self.ref(ref_table, n, who) for n in sorted(new_set - old_set)]
                removed_names = sorted(old_set - new_set)
                removed = [
                    self.ix.by_name.get(ref_table, {}).get(n)
                    for n in removed_names
                    if (ref_table, n) not in self.created
                ]
                if added:
                    self.commands.append(self.api.db_add(table, row.uuid, col, *added))
                if any(removed):
                    self.commands.append(
                        self.api.db_remove(table, row.uuid, col, *[u for u in removed if u])
                    )
            elif col in _MAPS:
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
                        _MapMutate(self.api, table, row.uuid, col, set_keys, del_keys)
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
            row = self.ix.owned[(table, change.key)]
            if table in _PARENT:
                _f, ptable, pcol = _PARENT[table]
                parent = self.ix.parent.get(table, {}).get(row.uuid)
                if parent is not None and parent not in deleted_uuids:
                    by_parent.setdefault((ptable, parent, pcol), []).append(row.uuid)
            destroy.append((table, row.uuid))
        # One db_remove per parent (the fast path that replaces per-port lsp_del).
        for (ptable, parent, pcol), children in by_parent.items():
            self.commands.append(self.api.db_remove(ptable, parent, pcol, *children))
        for table, row_uuid in destroy:
            if table == "ACL" and self.nb._has_column("ACL", "network_function_group"):
                # The Python IDL never sends a delete for a non-root row (ACL): ovsdb-server
                # garbage-collects it once unreferenced, but checks references *before* that
                # collection, so a Network_Function_Group deleted in the same transaction would
                # still look referenced. Clearing the ACL's reference first makes it commit.
                self.commands.append(self.api.db_clear(table, row_uuid, "network_function_group"))
            else:
                self.commands.append(self.api.db_destroy(table, row_uuid))
