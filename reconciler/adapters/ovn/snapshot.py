"""One consistent, IDL-free read of the OVN Northbound DB for one-shot commands (cold ``plan``).

Why it exists: :class:`reconciler.adapters.ovn.northbound.OvnNorthbound` mirrors the tables in ovs's
pure-Python IDL, which is the right tool for a long-running loop (it follows other writers and
holds the cache ``apply`` builds its transaction from) but costs ~10 KB and ~0.2 ms per row to
build and keeps every row alive. A ``plan`` run as a fresh process needs none of that: it reads
the database once, diffs and exits. So :func:`read_snapshot` sends ONE JSON-RPC ``transact``
made of ``select`` operations (the server executes a transaction atomically, so the result is
one consistent snapshot, never a half-loaded cache) and parses the reply with the stdlib's
C-accelerated :mod:`json`.

What it selects (only what :meth:`OvnNorthbound.read` looks at):

- every switch and router (names, port/policy lists, subnet, load balancers);
- pod LSPs (``external_ids:pod=true``) with the columns a :class:`PodPort` needs, and only
  ``_uuid``+``name`` of every other LSP (the names Port_Group/Network_Function references
  resolve to);
- the rows of our instance in full (``external_ids`` *includes* ``osc.io/owner=<instance>``,
  evaluated by the server), ``_uuid``+``name``+``acls`` of other Port_Groups (the parents an
  owned ACL may sit in), and the few Network_Function(_Group) rows in full (foreign ids).

The result equals ``OvnNorthbound.connect(settings).read()`` for the same database (same
symbolic rows, sorting, reference names, ``used_ids`` and capabilities); the tests assert it on
real ``ovsdb-server`` processes for both NB schemas. With a Raft remote list the members are
tried in order and, like the IDL with ``leader_only=True``, only the leader is read (checked
in the ``_Server`` database), so a plan never diffs against a stale follower.

It is read-only: it takes no lock and writes nothing, so it needs no IDL to build a
transaction from. Only the standard library is used (``socket``, ``ssl``, ``json``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.ovn.northbound import (
    _COLUMNS,
    _NAMED,
    _PARENT,
    DB_NAME,
    OvnConnectError,
    OvnError,
    OvnSettings,
    OvnState,
    _parse_addresses,
    symbolic_columns,
    tls_failure,
)
from reconciler.core import ownership
from reconciler.core.observed import OvnCapabilities, OvnRow, PodPort, Switch
from reconciler.core.target import OVN_TABLES

__all__ = ["OvnSnapshot", "OvnSnapshotError", "read_snapshot", "snapshot_operations"]

_RECV_BYTES = 1 << 20
_DEFAULT_PORT = 6640  # what OVS assumes for tcp:/ssl: remotes without a port


class OvnSnapshotError(OvnError):
    """The server answered the snapshot transaction with an error (message names the NB)."""


# ---------------------------------------------------------------------------------------------
# framing: where does one JSON-RPC message end?

_ESCAPE = re.compile(rb"\\.", re.S)
_BLANK = b" \t\r\n"


class _Framer:
    """Tells, chunk by chunk, when the bytes received so far *may* end a JSON-RPC message.

    OVSDB's JSON-RPC puts messages back to back with no delimiter or length, and stdlib
    :mod:`json` has no incremental parser. Re-parsing a 20 MB reply after every ``recv``
    would be quadratic, and a trailing ``}`` alone is no sign of the end: match strings like
    ``ip4.src == {$a, $b}`` end in one. A message ends outside any string (an even number of
    unescaped quotes so far) on a ``}``; both are tracked with C-speed passes per chunk
    (``bytes.count``, and an escape-dropping regex only for the rare chunk with a backslash).
    So no real end is ever missed; a false candidate (a chunk that happens to end right after
    a row's closing brace) only costs one failed decode. The exact answer is the decoder's.
    """

    def __init__(self) -> None:
        self.in_string = False
        self.carry = b""  # a trailing backslash whose escaped character is in the next chunk
        self.last = b""  # the last non-blank byte outside the carry

    def feed(self, data: bytes) -> bool:
        """Account for ``data``; True when the stream may now end on a message boundary."""
        text = self.carry + data
        self.carry = b""
        if b"\\" in text:
            run = len(text) - len(text.rstrip(b"\\"))
            if run % 2:
                text, self.carry = text[:-1], text[-1:]
            text = _ESCAPE.sub(b"", text)
        if text.count(b'"') % 2:
            self.in_string = not self.in_string
        tail = text.rstrip(_BLANK)
        if tail:
            self.last = tail[-1:]
        return not self.in_string and not self.carry and self.last == b"}"


# ---------------------------------------------------------------------------------------------
# a minimal JSON-RPC session


def _connect_error(remote: str, reasons: Iterable[str]) -> OvnConnectError:
    return OvnConnectError(f"cannot connect to OVN NB at {remote}: {'; '.join(reasons)}")


def _host_port(member: str, rest: str) -> tuple[str, int]:
    if rest.startswith("["):  # tcp:[::1]:6641
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
    elif rest.count(":") == 1:
        host, port = rest.split(":")
    else:
        host, port = rest, ""
    try:
        return host, int(port) if port else _DEFAULT_PORT
    except ValueError:
        raise ValueError(f"{member}: invalid port {port!r}") from None


def _ssl_context(settings: OvnSettings) -> ssl.SSLContext:
    """Client TLS like OVS's: the server's certificate must chain to ``ca_cert``; the name is
    not checked (OVS never does: NB certificates are issued by ``ovs-pki`` for switch ids, not
    host names), and we present our own certificate (``ovsdb-server`` requires one)."""
    files = (settings.private_key, settings.certificate, settings.ca_cert)
    if not all(files):
        raise _connect_error(
            settings.remote, ["an ssl: remote needs private_key, certificate and ca_cert"]
        )
    for path in files:
        assert path is not None
        if not os.path.isfile(path):
            raise _connect_error(settings.remote, [f"file not found: {path}"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_verify_locations(settings.ca_cert)
        ctx.load_cert_chain(str(settings.certificate), str(settings.private_key))
    except (ssl.SSLError, OSError) as exc:
        raise _connect_error(settings.remote, [f"cannot load TLS files: {exc}"]) from None
    return ctx


class _Session:
    """One stream to one server member: send requests, wait for their replies (by id)."""

    def __init__(self, member: str, sock: socket.socket, deadline: float) -> None:
        self.member = member
        self.sock = sock
        self.deadline = deadline
        self.next_id = 0
        self.replies: dict[Any, dict[str, Any]] = {}
        self.framer = _Framer()
        self.pending: list[bytes] = []

    @classmethod
    def open(cls, member: str, tls: ssl.SSLContext | None, deadline: float) -> _Session:
        """Connect to ``member``; raises ``ValueError`` (bad remote) or ``OSError``."""
        kind, _, rest = member.partition(":")
        left = max(0.001, deadline - time.monotonic())
        if kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(left)
                sock.connect(rest)
            except OSError:
                sock.close()
                raise
        elif kind in ("tcp", "ssl"):
            host, port = _host_port(member, rest)
            sock = socket.create_connection((host, port), timeout=left)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if kind == "ssl":
                try:
                    assert tls is not None  # read_snapshot makes it for any ssl: member
                    sock = tls.wrap_socket(sock)
                except BaseException:
                    sock.close()
                    raise
        else:
            raise ValueError(f"{member}: unsupported remote (use tcp:, ssl: or unix:)")
        return cls(member, sock, deadline)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, method: str, params: list[Any]) -> int:
        self.next_id += 1
        self._write({"method": method, "params": params, "id": self.next_id})
        return self.next_id

    def _write(self, message: Mapping[str, Any]) -> None:
        self.sock.settimeout(max(0.001, self.deadline - time.monotonic()))
        self.sock.sendall(json.dumps(message, separators=(",", ":")).encode())

    def reply(self, request_id: int) -> dict[str, Any]:
        """The reply to ``request_id``, answering the server's ``echo`` probes meanwhile."""
        while request_id not in self.replies:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer before the timeout")
            self.sock.settimeout(left)
            data = self.sock.recv(_RECV_BYTES)
            if not data:
                raise ConnectionResetError("connection closed by the server")
            self.pending.append(data)
            if self.framer.feed(data):
                self._dispatch()
        return self.replies.pop(request_id)

    def _dispatch(self) -> None:
        """Decode every complete message received; keep an incomplete rest for later."""
        raw = b"".join(self.pending)
        self.pending.clear()
        text = raw.decode("utf-8")
        del raw
        decoder = json.JSONDecoder()
        pos, end = 0, len(text)
        while True:
            while pos < end and text[pos] in " \t\r\n":
                pos += 1
            if pos >= end:
                return
            try:
                message, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError:
                # Not complete yet (a false candidate of the framer): wait for more bytes.
                self.pending.append(text[pos:].encode("utf-8"))
                return
            if not isinstance(message, dict):
                raise ValueError(f"{self.member}: not a JSON-RPC message: {message!r:.80}")
            if message.get("method") == "echo" and message.get("id") is not None:
                self._write({"id": message["id"], "result": message.get("params"), "error": None})
            elif "method" not in message:
                self.replies[message.get("id")] = message
            # other notifications (we monitor nothing) are ignored


def _rpc_error(reply: Mapping[str, Any]) -> str | None:
    error = reply.get("error")
    if error is None:
        return None
    if isinstance(error, dict):
        return ": ".join(str(error[k]) for k in ("error", "details") if error.get(k))
    return str(error)


# ---------------------------------------------------------------------------------------------
# what to select


def _owner_is(instance: str, function: str) -> list[Any]:
    return ["external_ids", function, ["map", [[ownership.OWNER, instance]]]]


_POD_TRUE = ["map", [["pod", "true"]]]
_POD_COLUMNS = ("name", "addresses", "options", "external_ids")


@dataclass(frozen=True)
class _Select:
    """One ``select`` of the snapshot transaction and what its rows are for."""

    purpose: str  # "all", "owned", "pods", "names" (name only), "parents" (name + children)
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


def _present(schema: Mapping[str, Any], table: str, columns: Iterable[str]) -> tuple[str, ...]:
    have = schema["tables"][table]["columns"]
    return tuple(c for c in columns if c in have)


def _selects(schema: Mapping[str, Any], instance: str) -> list[_Select]:
    tables = schema["tables"]
    out: list[_Select] = []
    for table in ("Logical_Switch", "Logical_Router"):
        out.append(_Select("all", table, (), _present(schema, table, _COLUMNS[table])))
    lsp = "Logical_Switch_Port"
    out.append(
        _Select(
            "pods",
            lsp,
            (["external_ids", "includes", _POD_TRUE],),
            _present(schema, lsp, _POD_COLUMNS),
        )
    )
    out.append(_Select("names", lsp, (["external_ids", "excludes", _POD_TRUE],), ("name",)))
    for table in OVN_TABLES:
        if table not in tables:
            continue
        columns = _present(schema, table, _COLUMNS[table])
        if table in ("Network_Function", "Network_Function_Group"):
            # At most 255 rows each: read all (foreign ids and names for references).
            out.append(_Select("all", table, (), columns))
            continue
        out.append(_Select("owned", table, (_owner_is(instance, "includes"),), columns))
        if table == "Port_Group":
            out.append(
                _Select(
                    "parents",
                    table,
                    (_owner_is(instance, "excludes"),),
                    _present(schema, table, ("name", "acls")),
                )
            )
    return out


def snapshot_operations(schema: Mapping[str, Any], instance: str) -> list[dict[str, Any]]:
    """The ``select`` operations of the snapshot transaction for this server ``schema``.

    Public so a test or a tool can show exactly what is read (and send it with ``ovsdb-client
    transact``); :func:`read_snapshot` sends them as one transaction.
    """
    return [s.op() for s in _selects(schema, instance)]


# ---------------------------------------------------------------------------------------------
# JSON datum -> Python value, the way the IDL presents it


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


def _plain_set(value: Any) -> list[Any]:
    """A set of strings/integers: only ``["set", [...]]`` is a JSON list there."""
    return list(value[1]) if type(value) is list else [value]


def _uuid_set(value: list[Any]) -> list[str]:
    return [v[1] for v in value[1]] if value[0] == "set" else [value[1]]


def _as_map(value: Any) -> dict[Any, Any]:
    return {_atom(k): _atom(v) for k, v in value[1]}


def _str_map(value: Any) -> dict[str, str]:
    """``["map", [[k, v], ...]]`` of plain atoms (external_ids, options): no atom checks."""
    return dict(value[1])


def _identity(value: Any) -> Any:
    return value


def _base_type(base: Any) -> str:
    return base if isinstance(base, str) else str(base.get("type", ""))


def _reader(column_type: Any) -> tuple[str, Callable[[Any], Any]]:
    """(shape, JSON datum -> the value ``_python`` gives) for an OVSDB column type; shape is
    ``"map"``, ``"scalar"`` (exactly one value) or ``"set"``. Chosen once per column so the
    per-row work is one call."""
    if isinstance(column_type, str):
        return "scalar", (_atom if column_type == "uuid" else _identity)
    key = _base_type(column_type["key"])
    if "value" in column_type:
        plain = key != "uuid" and _base_type(column_type["value"]) != "uuid"
        return "map", (_str_map if plain else _as_map)
    if column_type.get("min", 1) == 1 and column_type.get("max", 1) == 1:
        return "scalar", (_atom if key == "uuid" else _identity)
    return "set", (_uuid_set if key == "uuid" else _plain_set)


def _opt(value: list[Any]) -> Any:
    return value[0] if value else None


# ---------------------------------------------------------------------------------------------
# the snapshot


class _Builder:
    """Turns the rows of the snapshot transaction into the :class:`OvnState` of ``read()``."""

    def __init__(self, schema: Mapping[str, Any], instance: str) -> None:
        self.schema = schema
        self.instance = instance
        self.tables: Mapping[str, Any] = schema["tables"]
        self.names: dict[str, dict[str, str]] = {}
        self.owned_rows: dict[str, list[dict[str, Any]]] = {}
        self.all_rows: dict[str, list[dict[str, Any]]] = {}
        self.pods: list[dict[str, Any]] = []
        self.parent_rows: dict[str, list[dict[str, Any]]] = {}
        self.plans: dict[str, list[tuple[str, str, Any, Any]]] = {}

    def add(self, select: _Select, rows: list[dict[str, Any]]) -> None:
        table = select.table
        if select.purpose == "all":
            self.all_rows[table] = rows
            if table in ("Network_Function", "Network_Function_Group"):
                mine = [r for r in rows if self._is_mine(r)]
                self.owned_rows[table] = mine
        elif select.purpose == "owned":
            self.owned_rows[table] = rows
        elif select.purpose == "pods":
            self.pods = rows
        elif select.purpose == "parents":
            self.parent_rows[table] = rows
        if "name" in select.columns and table in ("Logical_Switch", "Logical_Router", *_NAMED):
            names = self.names.setdefault(table, {})
            for row in rows:
                names[row["_uuid"][1]] = row["name"]

    def _is_mine(self, row: Mapping[str, Any]) -> bool:
        return bool(_str_map(row["external_ids"]).get(ownership.OWNER) == self.instance)

    def capabilities(self) -> OvnCapabilities:
        nf = (
            "Network_Function" in self.tables
            and "Network_Function_Group" in self.tables
            and "network_function_group" in self.tables.get("ACL", {}).get("columns", {})
        )
        return OvnCapabilities(
            schema_version=str(self.schema.get("version", "")), network_function=nf
        )

    def state(self) -> OvnState:
        switches: list[Switch] = []
        pod_ports: list[PodPort] = []
        pods = {row["_uuid"][1]: row for row in self.pods}
        for ls in self.all_rows["Logical_Switch"]:
            ls_name = ls["name"]
            other = _str_map(ls["other_config"]) if "other_config" in ls else {}
            lbs = bool(
                ("load_balancer" in ls and _as_set(ls["load_balancer"]))
                or ("load_balancer_group" in ls and _as_set(ls["load_balancer_group"]))
            )
            switches.append(Switch(name=ls_name, subnet=other.get("subnet"), load_balancers=lbs))
            for port_uuid in _as_set(ls["ports"]):
                lsp = pods.get(port_uuid)
                if lsp is None:
                    continue
                ext = _str_map(lsp["external_ids"])
                ns = ext.get("namespace", "")
                name = lsp["name"]
                pod = name[len(ns) + 1 :] if ns and name.startswith(ns + "_") else name
                mac, ips = _parse_addresses(_as_set(lsp["addresses"]))
                pod_ports.append(
                    PodPort(
                        name=name,
                        switch=ls_name,
                        namespace=ns,
                        pod=pod,
                        pod_uid=_str_map(lsp["options"]).get("iface-id-ver"),
                        mac=mac,
                        ips=ips,
                    )
                )
        routers = sorted(r["name"] for r in self.all_rows["Logical_Router"])
        owned = self._owned()
        used: dict[str, tuple[int, ...]] = {}
        for table in ("Network_Function", "Network_Function_Group"):
            if table in self.all_rows:
                used[table] = tuple(
                    sorted(r["id"] for r in self.all_rows[table] if not self._is_mine(r))
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
        )

    def _parents(self, table: str, children: set[str]) -> dict[str, str]:
        """child UUID -> parent UUID for the owned ``children`` of ``table``."""
        _field, parent_table, column = _PARENT[table]
        if parent_table not in self.tables:
            return {}
        if parent_table == "Port_Group":
            rows = [*self.owned_rows.get(parent_table, []), *self.parent_rows.get(parent_table, [])]
        else:
            rows = self.all_rows.get(parent_table, [])
        out: dict[str, str] = {}
        for prow in rows:
            for cu in _as_set(prow[column]):
                if cu in children:
                    out[cu] = prow["_uuid"][1]
        return out

    def _owned(self) -> list[OvnRow]:
        rows: dict[tuple[str, str], OvnRow] = {}
        for table in OVN_TABLES:
            if table not in self.tables:
                continue
            mine = self.owned_rows.get(table, [])
            keyed: list[tuple[str, dict[str, Any]]] = []
            for row in mine:
                if table in _NAMED:
                    key = row["name"]
                else:
                    ext = _str_map(row["external_ids"])
                    key = ext.get(ownership.KEY) or f"uuid:{row['_uuid'][1]}"
                keyed.append((key, row))
            parents = (
                self._parents(table, {row["_uuid"][1] for _k, row in keyed})
                if table in _PARENT
                else {}
            )
            for key, row in keyed:
                rows[(table, key)] = self._symbolic(table, key, row, parents)
        return sorted(rows.values(), key=lambda r: (OVN_TABLES.index(r.table), r.key))

    def _plan(self, table: str) -> list[tuple[str, str, Any, Any]]:
        """Per column of ``_COLUMNS[table]``, in order: (column, kind, reader, extra), the
        steps ``OvnNorthbound._symbolic`` takes for it, decided once per table."""
        plan = self.plans.get(table)
        if plan is not None:
            return plan
        columns = self.tables[table]["columns"]
        plan = []
        for col, rule, extra in symbolic_columns(table, columns):
            if rule == "const":
                plan.append((col, "const", None, extra))
                continue
            shape, read = _reader(columns[col]["type"])
            if rule == "ref":
                ref_table, ref_kind = extra
                names = self.names.setdefault(ref_table, {})
                plan.append((col, "refset" if ref_kind == "set" else "ref", read, names))
            elif rule == "opt":
                plan.append((col, "opt", read, None))
            elif rule == "map":
                # ovsdb-server sends a map sorted by key (bytewise, which for UTF-8 is code
                # point order, Python's): a map of plain strings is already in the order
                # ``dict(sorted(...))`` gives it, so only other maps are re-sorted.
                plan.append((col, "keep" if read is _str_map else "map", read, None))
            elif shape == "set":
                plan.append((col, "keep" if col == "addresses" else "sorted", read, None))
            else:
                plan.append((col, "keep", read, None))
        self.plans[table] = plan
        return plan

    def _symbolic(
        self, table: str, key: str, row: Mapping[str, Any], parents: Mapping[str, str]
    ) -> OvnRow:
        """Mirrors ``OvnNorthbound._symbolic`` on a JSON row."""
        fields: dict[str, Any] = {}
        for col, kind, read, extra in self._plan(table):
            if kind == "const":
                fields[col] = extra
                continue
            value = read(row[col])
            if kind == "map":
                value = dict(sorted(value.items()))
            elif kind == "sorted":
                value.sort()
            elif kind == "refset":
                value = sorted([extra.get(u, u) for u in value])
            elif kind == "ref":
                one = _opt(value) if isinstance(value, list) else value
                value = None if one is None else extra.get(one, one)
            elif kind == "opt":
                value = _opt(value) if isinstance(value, list) else value
            fields[col] = value
        if table in _PARENT:
            fname, ptable, _column = _PARENT[table]
            parent = parents.get(row["_uuid"][1])
            fields[fname] = None if parent is None else self.names.get(ptable, {}).get(parent)
        return OvnRow(table=table, key=key, fields=fields)


def _leader_problem(server_reply: Mapping[str, Any]) -> str | None:
    """Why this member must not be read (the IDL's ``leader_only`` checks), or None.

    An error reply (a server without ``_Server``) or no row for the NB means a standalone
    server that predates the ``_Server`` database: fine to read.
    """
    if server_reply.get("error") is not None:
        return None
    result = server_reply.get("result") or [{}]
    rows = result[0].get("rows") or []
    if not rows:
        return None
    db = rows[0]
    if db.get("model") != "clustered":
        return None
    if not db.get("schema"):
        return "the database's schema was deleted"
    if not db.get("connected"):
        return "not connected to the Raft cluster"
    if not db.get("leader"):
        return "not the Raft leader"
    return None


def _read_member(session: _Session, settings: OvnSettings) -> OvnState:
    """The snapshot from one member; raises ``_Skip`` when that member must not be read."""
    schema_id = session.send("get_schema", [DB_NAME])
    server_id = session.send(
        "transact",
        [
            "_Server",
            {
                "op": "select",
                "table": "Database",
                "where": [["name", "==", DB_NAME]],
                "columns": ["model", "connected", "leader", "schema"],
            },
        ],
    )
    schema_reply = session.reply(schema_id)
    server_reply = session.reply(server_id)
    error = _rpc_error(schema_reply)
    if error is not None:
        hint = " (is this an OVN Northbound server?)" if "unknown database" in error else ""
        raise _Skip(error + hint)
    schema = schema_reply["result"]
    if not isinstance(schema, dict) or schema.get("name") != DB_NAME:
        raise _Skip(
            f"server database is {schema.get('name') if isinstance(schema, dict) else schema!r}"
        )
    problem = _leader_problem(server_reply)
    if problem:
        raise _Skip(problem)
    selects = _selects(schema, settings.instance)
    txn_id = session.send("transact", [DB_NAME, *(s.op() for s in selects)])
    reply = session.reply(txn_id)
    error = _rpc_error(reply)
    results = reply.get("result")
    if error is None and isinstance(results, list):
        error = next(
            (_rpc_error(r) for r in results if isinstance(r, dict) and r.get("error")), None
        )
    if error is not None or not isinstance(results, list) or len(results) < len(selects):
        raise OvnSnapshotError(
            f"cannot read OVN NB at {settings.remote} ({session.member}): "
            f"the snapshot transaction failed: {error or 'malformed reply'}"
        )
    builder = _Builder(schema, settings.instance)
    for select, result in zip(selects, results, strict=False):
        builder.add(select, result["rows"])
    del reply, results
    return builder.state()


class _Skip(Exception):
    """This member cannot be read (not the leader, wrong database): try the next one."""


def read_snapshot(settings: OvnSettings) -> OvnState:
    """One consistent snapshot of the NB, equal to ``OvnNorthbound.connect(settings).read()``.

    Tries the members of ``settings.remote`` in order and reads the first that answers and,
    if clustered, is the Raft leader; the whole call is bounded by ``settings.timeout``.
    Raises :class:`OvnConnectError` naming the endpoint (and every member's reason) when none
    can be read, :class:`OvnSnapshotError` when the server refuses the read transaction.
    """
    # The reply becomes millions of small lists and dicts at once. CPython's cyclic GC would
    # run a full collection over all of them again and again while they are being built
    # (json.loads of a 20 MB reply: 1.3 s with it, 0.2 s without); none of them can form a
    # cycle, and everything not returned is freed by reference counting. So it is paused for
    # this call and restored as it was.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read(settings)
    finally:
        if collecting:
            gc.enable()


def _read(settings: OvnSettings) -> OvnState:
    remote = settings.remote
    members = [m.strip() for m in remote.split(",") if m.strip()]
    if not members:
        raise OvnConnectError("cannot connect to OVN NB: no remote given")
    # TLS files are checked before anything is sent, as OvnNorthbound.connect does.
    tls = _ssl_context(settings) if any(m.startswith("ssl:") for m in members) else None
    deadline = time.monotonic() + settings.timeout
    reasons: list[str] = []
    for member in members:
        try:
            session = _Session.open(member, tls, deadline)
        except ssl.SSLError as exc:
            reasons.append(tls_failure(member, exc))
            continue
        except TimeoutError:
            reasons.append(f"{member}: no connection before the timeout")
            continue
        except (OSError, ValueError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            reasons.append(detail if isinstance(exc, ValueError) else f"{member}: {detail}")
            continue
        try:
            return _read_member(session, settings)
        except _Skip as exc:
            reasons.append(f"{member}: {exc}")
        except ssl.SSLError as exc:
            reasons.append(tls_failure(member, exc, "TLS failed"))
        except TimeoutError:
            reasons.append(f"{member}: no answer before the timeout ({settings.timeout}s)")
        except OSError as exc:
            reasons.append(f"{member}: {exc.strerror or exc}")
        except ValueError as exc:  # undecodable bytes or JSON on the wire
            reasons.append(f"{member}: garbled reply ({exc})")
        finally:
            session.close()
    raise _connect_error(remote, reasons)


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
