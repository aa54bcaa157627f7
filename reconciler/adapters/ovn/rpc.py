"""A minimal raw OVSDB JSON-RPC client for one-shot reads: framing, TLS, the Raft leader.

Why not python-ovs' stream and JSON-RPC (``ovs.jsonrpc``): memory and time. The snapshot reader
reads a whole database in one reply. python-ovs parses it with a C parser too (Debian's
``python3-openvswitch``, which the venv uses), but into a tree of C objects that then becomes
Python objects, so both exist at once, and the allocator keeps the freed tree (see
:func:`~reconciler.adapters.ovn.python_ovs.release_free_memory`); the stdlib's C-accelerated
:mod:`json` builds the Python objects directly, in less time and a fraction of the memory
(``bench/rpc_select.py`` measures both ways; docs/benchmarks.md has the figures). Only the
standard library is used (``socket``, ``ssl``, ``json``).

:func:`query_leader` is the entry point: it tries the members of a remote list in order and
hands the first one that is readable (answers, serves the NB, is the Raft leader if clustered,
like the IDL's ``leader_only``) to the caller's query, so a read never sees a stale follower.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from reconciler.adapters.ovn.errors import OvnConnectError, connect_error, tls_failure
from reconciler.adapters.ovn.settings import DEFAULT_MAX_REPLY_BYTES, OvnSettings
from reconciler.adapters.ovn.tables import DB_NAME

__all__ = [
    "DEFAULT_PORT",
    "Framer",
    "MemberSkipped",
    "ReplyTooDeep",
    "ReplyTooLarge",
    "Session",
    "host_port",
    "leader_problem",
    "leader_schema",
    "open_leader",
    "query_leader",
    "rpc_error",
    "ssl_context",
    "until_readable",
]

T = TypeVar("T")

_RECV_BYTES = 1 << 20
DEFAULT_PORT = 6640
"""What OVS assumes for ``tcp:``/``ssl:`` remotes without a port."""

_ESCAPE = re.compile(rb"\\.", re.S)
_BLANK = b" \t\r\n"


class Framer:
    """Tells, chunk by chunk, when the bytes received so far *may* end a JSON-RPC message.

    OVSDB's JSON-RPC puts messages back to back with no delimiter or length, and stdlib
    :mod:`json` has no incremental parser. Re-parsing a large reply after every ``recv`` would
    be quadratic, and a trailing ``}`` alone is no sign of the end: match strings like
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


def host_port(member: str, rest: str) -> tuple[str, int]:
    """Host and port of ``tcp:``/``ssl:`` ``member`` (``rest`` is what follows the kind)."""
    if rest.startswith("["):  # tcp:[::1]:6641
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
    elif rest.count(":") == 1:
        host, port = rest.split(":")
    else:
        host, port = rest, ""
    try:
        return host, int(port) if port else DEFAULT_PORT
    except ValueError:
        raise ValueError(f"{member}: invalid port {port!r}") from None


def ssl_context(settings: OvnSettings) -> ssl.SSLContext:
    """Client TLS like OVS's: the server's certificate must chain to ``ca_cert``; the name is
    not checked (OVS never does: NB certificates are issued by ``ovs-pki`` for switch ids, not
    host names), and we present our own certificate (``ovsdb-server`` requires one)."""
    key, cert, ca = settings.tls_files()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_verify_locations(ca)
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise connect_error(settings.remote, [f"cannot load TLS files: {exc}"]) from None
    return ctx


class ReplyTooLarge(ValueError):
    """The server sent a message larger than ``OvnSettings.max_reply_bytes``."""


class ReplyTooDeep(ValueError):
    """The server sent JSON nested deeper than the decoder goes (Python's recursion limit,
    some 1,000 levels; an OVSDB message has fewer than 10)."""


def _mib(size: int) -> str:
    return f"{size / 1048576:g} MiB"


class Session:
    """One stream to one server member: send requests, wait for their replies (by id).

    A message is read whole before it is decoded, so it is bounded: more than ``max_bytes``
    received without completing one raises :class:`ReplyTooLarge`, a nesting the decoder
    cannot follow :class:`ReplyTooDeep` (both ``ValueError``: a garbled reply, never a
    traceback)."""

    def __init__(
        self,
        member: str,
        sock: socket.socket,
        deadline: float,
        max_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self.member = member
        self.sock = sock
        self.deadline = deadline
        self.max_bytes = max_bytes
        self.pending_bytes = 0
        self.next_id = 0
        self.replies: dict[Any, dict[str, Any]] = {}
        """Replies received and not yet taken by :meth:`reply`, by request id."""
        self.framer = Framer()
        self.pending: list[bytes] = []
        """Bytes received that do not complete a message yet."""
        self.locks: dict[str, bool] = {}
        """Lock name -> whether the server last said we hold it (``locked``/``stolen``
        notifications; the ``lock`` request's own reply is the caller's)."""
        self.on_notification: Callable[[str, list[Any]], None] | None = None
        """Called with ``(method, params)`` for every other notification (a monitor's
        ``update2``); they are dropped without it."""

    @classmethod
    def open(
        cls,
        member: str,
        tls: ssl.SSLContext | None,
        deadline: float,
        max_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> Session:
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
            host, port = host_port(member, rest)
            sock = socket.create_connection((host, port), timeout=left)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if kind == "ssl":
                try:
                    assert tls is not None  # query_leader makes it for any ssl: member
                    sock = tls.wrap_socket(sock)
                except BaseException:
                    sock.close()
                    raise
        else:
            raise ValueError(f"{member}: unsupported remote (use tcp:, ssl: or unix:)")
        return cls(member, sock, deadline, max_bytes)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, method: str, params: list[Any]) -> int:
        """Send a request; returns its id (for :meth:`reply`)."""
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
            self._receive_for(left)
        return self.replies.pop(request_id)

    def wait_reply(self, request_id: Any, seconds: float) -> dict[str, Any] | None:
        """The reply to ``request_id`` if it arrives within ``seconds`` (else ``None``; the
        session's deadline does not apply). Raises ``ConnectionResetError`` when the server
        closes the connection, ``OSError`` on other socket errors."""
        until = time.monotonic() + seconds
        while request_id not in self.replies:
            left = until - time.monotonic()
            if left <= 0:
                return None
            try:
                self._receive_for(left)
            except TimeoutError:
                return None
        return self.replies.pop(request_id)

    def wait_notification(self, seconds: float) -> None:
        """Receive (and dispatch) for up to ``seconds``: notifications such as ``locked``
        land in :attr:`locks`."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            try:
                self._receive_for(left)
            except TimeoutError:
                return

    def _receive_for(self, seconds: float) -> None:
        self.sock.settimeout(max(0.001, seconds))
        data = self.sock.recv(_RECV_BYTES)
        if not data:
            raise ConnectionResetError("connection closed by the server")
        self.receive(data)

    def receive(self, data: bytes) -> None:
        """Account for bytes received: every message they complete is decoded (a reply is
        kept in :attr:`replies`, an ``echo`` is answered at once)."""
        self.pending.append(data)
        self.pending_bytes += len(data)
        if self.pending_bytes > self.max_bytes:
            self.pending.clear()
            raise ReplyTooLarge(
                f"sent a message larger than {_mib(self.max_bytes)} (the limit "
                "--ovn-max-reply-mib sets; is this an OVN Northbound server?)"
            )
        if self.framer.feed(data):
            self._dispatch()

    def _dispatch(self) -> None:
        """Decode every complete message received; keep an incomplete rest for later."""
        raw = b"".join(self.pending)
        self.pending.clear()
        self.pending_bytes = 0
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
                rest = text[pos:].encode("utf-8")
                self.pending.append(rest)
                self.pending_bytes = len(rest)
                return
            except RecursionError:
                raise ReplyTooDeep(
                    "sent JSON nested deeper than it can be decoded (an OVSDB message has "
                    "fewer than 10 levels)"
                ) from None
            if not isinstance(message, dict):
                raise ValueError(f"{self.member}: not a JSON-RPC message: {message!r:.80}")
            method = message.get("method")
            if method == "echo" and message.get("id") is not None:
                self._write({"id": message["id"], "result": message.get("params"), "error": None})
            elif method in ("locked", "stolen") and message.get("params"):
                self.locks[str(message["params"][0])] = method == "locked"
            elif method is None:
                self.replies[message.get("id")] = message
            elif self.on_notification is not None and message.get("id") is None:
                self.on_notification(str(method), list(message.get("params") or []))


def rpc_error(reply: Mapping[str, Any]) -> str | None:
    """The error of a JSON-RPC reply (or of one operation's result) as text, else ``None``."""
    error = reply.get("error")
    if error is None:
        return None
    if isinstance(error, dict):
        return ": ".join(str(error[k]) for k in ("error", "details") if error.get(k))
    return str(error)


def leader_problem(server_reply: Mapping[str, Any]) -> str | None:
    """Why this member must not be read (the IDL's ``leader_only`` checks), or None.

    ``server_reply`` answers a select of the NB's row in the ``_Server`` database. An error
    reply (a server without ``_Server``) or no row for the NB means a standalone server that
    predates the ``_Server`` database: fine to read.
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


class MemberSkipped(Exception):
    """This member cannot be read (not the leader, wrong database): try the next one.
    ``electing``: it is a Raft member that is not (or not yet) the connected leader."""

    def __init__(self, reason: str, *, electing: bool = False) -> None:
        super().__init__(reason)
        self.electing = electing


def _leader_schema(session: Session) -> dict[str, Any]:
    """The member's NB schema; raises :class:`MemberSkipped` unless it may be read."""
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
    error = rpc_error(schema_reply)
    if error is not None:
        hint = " (is this an OVN Northbound server?)" if "unknown database" in error else ""
        raise MemberSkipped(error + hint)
    schema = schema_reply["result"]
    if not isinstance(schema, dict) or schema.get("name") != DB_NAME:
        raise MemberSkipped(
            f"server database is {schema.get('name') if isinstance(schema, dict) else schema!r}"
        )
    problem = leader_problem(server_reply)
    if problem:
        raise MemberSkipped(problem, electing=True)
    return schema


def open_member(
    member: str, tls: ssl.SSLContext | None, deadline: float, max_reply_bytes: int
) -> Session | str:
    """A session to one member of a remote, or why there is none: one line naming the member
    (a TLS failure, no connection before ``deadline``, a refused socket, a malformed remote).
    The NB's and the SB's readers both go through it, member by member."""
    try:
        return Session.open(member, tls, deadline, max_reply_bytes)
    except ssl.SSLError as exc:
        return tls_failure(member, exc)
    except TimeoutError:
        return f"{member}: no connection before the timeout"
    except ValueError as exc:  # a malformed remote: its message names the member already
        return str(exc)
    except OSError as exc:
        return f"{member}: {exc.strerror or exc}"


def leader_schema(settings: OvnSettings) -> dict[str, Any]:
    """The NB schema of the first member of ``settings.remote`` that may be read and written
    (see :func:`query_leader`): what the IDL adapter registers its columns from."""
    return query_leader(settings, lambda _session, schema: schema)


def open_leader(settings: OvnSettings) -> tuple[Session, dict[str, Any]]:
    """An open session to the first member of ``settings.remote`` that may be read and
    written (see :func:`query_leader`), and its NB schema; the caller closes it."""
    return query_leader(settings, lambda session, schema: (session, schema), keep_open=True)


def query_leader(
    settings: OvnSettings,
    query: Callable[[Session, dict[str, Any]], T],
    *,
    keep_open: bool = False,
) -> T:
    """``query(session, schema)`` on the first member of ``settings.remote`` that answers and,
    if clustered, is the Raft leader; the whole call is bounded by ``settings.timeout``.

    A member that fails (unreachable, TLS, timeout, garbled bytes, :class:`MemberSkipped`
    raised by ``query`` too) is passed over with its reason; :class:`OvnConnectError` naming
    the endpoint and every member's reason is raised when none can be read. Any other error
    of ``query`` (e.g. an ``OvnError``) propagates.
    """
    remote = settings.remote
    members = [m.strip() for m in remote.split(",") if m.strip()]
    if not members:
        raise OvnConnectError("cannot connect to OVN NB: no remote given")
    # TLS files are checked before anything is sent, as OvnNorthbound.connect does.
    tls = ssl_context(settings) if any(m.startswith("ssl:") for m in members) else None
    deadline = time.monotonic() + settings.timeout
    reasons: list[str] = []
    electing = False
    for member in members:
        session = open_member(member, tls, deadline, settings.max_reply_bytes)
        if isinstance(session, str):
            reasons.append(session)
            continue
        keep = False
        try:
            result = query(session, _leader_schema(session))
            keep = keep_open
            return result
        except MemberSkipped as exc:
            reasons.append(f"{member}: {exc}")
            electing = electing or exc.electing
        except ssl.SSLError as exc:
            reasons.append(tls_failure(member, exc, "TLS failed"))
        except TimeoutError:
            reasons.append(f"{member}: no answer before the timeout ({settings.timeout}s)")
        except OSError as exc:
            reasons.append(f"{member}: {exc.strerror or exc}")
        except (ReplyTooLarge, ReplyTooDeep) as exc:
            reasons.append(f"{member}: {exc}")
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            # undecodable bytes or JSON on the wire, or JSON not shaped like OVSDB's replies
            reasons.append(f"{member}: garbled reply ({type(exc).__name__}: {exc})")
        finally:
            if not keep:
                session.close()
    raise connect_error(remote, reasons, electing=electing)


def until_readable(
    settings: OvnSettings, call: Callable[[OvnSettings], T], deadline: float | None = None
) -> T:
    """``call(settings)``, again while the only reason it finds no readable member is a Raft
    cluster without a connected leader (an election), until ``deadline`` (default: the
    timeout from now); each try is bounded by what is left. Anything else (unreachable,
    TLS) fails at once."""
    until = time.monotonic() + settings.timeout if deadline is None else deadline
    while True:
        left = until - time.monotonic()
        try:
            return call(replace(settings, timeout=max(0.1, left)))
        except OvnConnectError as exc:
            if not exc.electing or left <= 0.5:
                raise
            time.sleep(0.25)
