"""A minimal raw OVSDB JSON-RPC client (RFC 7047) built on the standard library only.

Why it exists: seeding 10,000 pod ports through ``ovn-nbctl`` (one process per object) or
through the Python IDL takes minutes, while one raw ``transact`` takes a fraction of a second.
Tests and benchmarks also need an *independent* view of the database (not the IDL the adapter
under test uses) to compare before/after dumps, so this module deliberately shares no code with
``reconciler.adapters.ovn.northbound``.

Only ``unix:`` and ``tcp:`` remotes are supported; for a comma-separated list the first member
that accepts a connection is used (ovsdb-server forwards transactions from Raft followers).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "OvsdbRpcError",
    "call",
    "dump",
    "from_atom",
    "get_schema",
    "list_dbs",
    "to_datum",
    "transact",
]


class OvsdbRpcError(RuntimeError):
    """The server refused a request, or could not be reached (message names the remote)."""


def _connect(remote: str, timeout: float) -> socket.socket:
    errors: list[str] = []
    for member in (r.strip() for r in remote.split(",") if r.strip()):
        kind, _, rest = member.partition(":")
        try:
            if kind == "unix":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(timeout)
                sock.connect(rest)
            elif kind == "tcp":
                host, _, port = rest.rpartition(":")
                sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
            else:
                raise OvsdbRpcError(f"unsupported OVSDB remote {member!r} (use unix: or tcp:)")
        except OSError as exc:
            errors.append(f"{member}: {exc.strerror or exc}")
            continue
        return sock
    raise OvsdbRpcError(f"cannot connect to OVSDB at {remote}: {'; '.join(errors)}")


def _recv_reply(sock: socket.socket, remote: str, request_id: int) -> dict[str, Any]:
    """Read JSON messages until the reply to ``request_id``; answers server echo requests."""
    decoder = json.JSONDecoder()
    buf = ""
    chunks: list[str] = []
    while True:
        data = sock.recv(1 << 20)
        if not data:
            raise OvsdbRpcError(f"OVSDB server at {remote} closed the connection")
        chunk = data.decode()
        chunks.append(chunk)
        # Only try to parse when the message may be complete: replies are JSON objects, so a
        # complete buffer ends with '}' (avoids quadratic re-parsing of multi-MB dumps).
        if not chunk.rstrip().endswith("}"):
            continue
        buf += "".join(chunks)
        chunks.clear()
        while buf:
            try:
                msg, end = decoder.raw_decode(buf)
            except json.JSONDecodeError:
                break
            buf = buf[end:].lstrip()
            if msg.get("method") == "echo" and msg.get("id") is not None:
                reply = {"id": msg["id"], "result": msg.get("params", []), "error": None}
                sock.sendall(json.dumps(reply).encode())
                continue
            if msg.get("id") == request_id:
                return dict(msg)


def call(remote: str, method: str, params: list[Any], timeout: float = 30.0) -> Any:
    """Send one JSON-RPC request and return its ``result``; raise on an RPC ``error``."""
    sock = _connect(remote, timeout)
    try:
        sock.sendall(json.dumps({"method": method, "params": params, "id": 1}).encode())
        reply = _recv_reply(sock, remote, 1)
    except OSError as exc:
        raise OvsdbRpcError(f"OVSDB request {method} to {remote} failed: {exc}") from exc
    finally:
        sock.close()
    if reply.get("error") is not None:
        raise OvsdbRpcError(f"OVSDB {method} at {remote} failed: {reply['error']}")
    return reply.get("result")


def list_dbs(remote: str, timeout: float = 5.0) -> list[str]:
    """Names of the databases the server serves (a cheap readiness probe)."""
    return list(call(remote, "list_dbs", [], timeout))


def get_schema(remote: str, db: str, timeout: float = 10.0) -> dict[str, Any]:
    return dict(call(remote, "get_schema", [db], timeout))


def transact(
    remote: str, db: str, ops: Sequence[dict[str, Any]], timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Run ``ops`` as ONE atomic transaction; raise :class:`OvsdbRpcError` if any op failed.

    The server answers with one result per op, plus a trailing error entry when a constraint
    check at commit failed; both are turned into an exception so callers never miss a rollback.
    """
    results = call(remote, "transact", [db, *ops], timeout)
    for i, res in enumerate(results):
        if isinstance(res, dict) and res.get("error"):
            where = (
                f"op {i} ({ops[i].get('op')} {ops[i].get('table', '')})"
                if i < len(ops)
                else ("commit")
            )
            raise OvsdbRpcError(
                f"transaction on {db} at {remote} failed at {where}: "
                f"{res['error']}: {res.get('details', '')}"
            )
    return list(results)


def from_atom(value: Any) -> Any:
    """Turn an OVSDB wire datum into plain Python: uuids to str, sets to sorted lists,
    maps to dicts (so dumps compare with ``==`` regardless of server ordering)."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
        tag, body = value
        if tag in ("uuid", "named-uuid"):
            return body
        if tag == "set":
            return sorted((from_atom(v) for v in body), key=_sort_key)
        if tag == "map":
            return {from_atom(k): from_atom(v) for k, v in body}
    return value


def _sort_key(v: Any) -> tuple[str, str]:
    return (type(v).__name__, str(v))


def to_datum(value: Any) -> Any:
    """Plain Python to OVSDB wire form: dict -> map, list/tuple/set -> set (strings, ints and
    bools pass through). ``("uuid", x)`` / ``("named-uuid", x)`` pairs are kept as references."""
    if isinstance(value, dict):
        return ["map", [[to_datum(k), to_datum(v)] for k, v in value.items()]]
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("uuid", "named-uuid"):
        return list(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return ["set", [to_datum(v) for v in value]]
    return value


def dump(
    remote: str, db: str, tables: Iterable[str], timeout: float = 60.0
) -> dict[str, list[dict[str, Any]]]:
    """Every row (all columns, including ``_uuid``) of ``tables``, as plain dicts.

    Rows are sorted by ``_uuid`` so two dumps of an unchanged database are equal.
    """
    names = list(tables)
    ops = [{"op": "select", "table": t, "where": []} for t in names]
    results = transact(remote, db, ops, timeout)
    out: dict[str, list[dict[str, Any]]] = {}
    for name, res in zip(names, results, strict=False):
        rows = [{col: from_atom(v) for col, v in row.items()} for row in res.get("rows", [])]
        rows.sort(key=lambda r: str(r.get("_uuid", "")))
        out[name] = rows
    return out
