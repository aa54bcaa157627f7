"""A node's Open_vSwitch database, as the node binder uses it: which OVS interfaces ovs-cni
made (conditional monitor), their ``iface-id`` (set and removed, nothing else) and their
statistics.

Why here, in the OVN adapter, and not in an adapter package of its own: the Open_vSwitch DB
speaks the same OVSDB JSON-RPC as the Northbound DB, and this module reuses the raw session of
:mod:`~reconciler.adapters.ovn.rpc` (framing, TLS, ``echo`` probes) instead of a second copy
of it; adapters must stay independent of each other (``.importlinter``), so a package
``adapters/ovs`` could not share it. What it writes, ``external_ids:iface-id``, is OVN's
contract (ovn-controller binds a logical port to the interface that names it): the binder is
the last step of making our NB rows real on a chassis. Like every module here but
``python_ovs``, it does not import python-ovs: the standard library's ``socket``/``json``
through ``rpc.Session`` are enough for a handful of rows.

What it reads, and why it stays proportional to the node's VNF NICs: a ``monitor_cond`` on
``Port`` rows whose ``external_ids`` say ``owner=ovs-cni.network.kubevirt.io`` (what ovs-cni
marks every port it creates with; pod ports of OVN-Kubernetes' own CNI never match), and on
exactly the ``Interface`` rows those ports hold (a condition by ``_uuid``, changed with
``monitor_cond_change`` as ports come and go). Statistics are not monitored (ovs-vswitchd
rewrites them every few seconds): :meth:`OvsDb.statistics` selects them when asked.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.ovn.errors import OvsDbError
from reconciler.adapters.ovn.rpc import Session, rpc_error
from reconciler.core.compiling.nic_binding import IFACE_ID, OVS_CNI_OWNER, Write
from reconciler.core.model.observed import OvsInterface

__all__ = ["DB_NAME", "DEFAULT_OVS_DB", "InterfaceStats", "OvsDb", "OvsDbError"]

DB_NAME = "Open_vSwitch"
DEFAULT_OVS_DB = "unix:/var/run/openvswitch/db.sock"
"""Where ovs-vswitchd's database listens on a node (OVS' default; ovs-cni's own DaemonSet
mounts ``/var/run/openvswitch`` for it)."""
_MONITOR_ID = "osc-binder"
_STATS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes")


@dataclass(frozen=True, slots=True)
class InterfaceStats:
    """One Interface's counters as ovs-vswitchd last wrote them (``Interface.statistics``)."""

    name: str
    iface_id: str | None
    counters: dict[str, int]


def _map(value: Any) -> dict[str, str]:
    """An OVSDB ``["map", [[k, v], ...]]`` as a dict (a missing column: empty)."""
    if isinstance(value, list) and len(value) == 2 and value[0] == "map":
        return {str(k): str(v) for k, v in value[1]}
    return {}


def _uuids(value: Any) -> set[str]:
    """An OVSDB set of UUIDs (or one UUID) as a set of strings."""
    if isinstance(value, list) and len(value) == 2 and value[0] == "uuid":
        return {str(value[1])}
    if isinstance(value, list) and len(value) == 2 and value[0] == "set":
        return {str(u[1]) for u in value[1]}
    return set()


def _apply_map_diff(old: dict[str, str], diff: Mapping[str, str]) -> dict[str, str]:
    """``update2``'s difference of two maps applied to ``old`` (ovsdb-server(7) 4.1.14: a key
    only in one map is listed with its value, a changed key with the new value)."""
    new = dict(old)
    for key, value in diff.items():
        if key in new and new[key] == value:
            del new[key]
        else:
            new[key] = value
    return new


class OvsDb:
    """One session to a node's Open_vSwitch DB (see the module docstring).

    Not thread-safe: one thread (the binder's) reads, waits and writes."""

    def __init__(
        self, remote: str, *, private_key: str | None = None, certificate: str | None = None,
        ca_cert: str | None = None, timeout: float = 10.0,
    ) -> None:  # fmt: skip
        self.remote = remote
        self._tls_files = (private_key, certificate, ca_cert)
        self.timeout = timeout
        self._session: Session | None = None
        self._ports: dict[str, dict[str, Any]] = {}
        self._interfaces: dict[str, dict[str, Any]] = {}
        self._watched: frozenset[str] = frozenset()
        self._changed = False
        self._selector: selectors.BaseSelector | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    # -- connection -------------------------------------------------------------------------
    def _error(self, detail: str) -> OvsDbError:
        return OvsDbError(f"Open_vSwitch DB at {self.remote}: {detail}")

    def _tls(self) -> ssl.SSLContext | None:
        if not self.remote.startswith("ssl:"):
            return None
        key, cert, ca = self._tls_files
        if not (key and cert and ca):
            raise self._error("an ssl: remote needs --ovs-private-key, --ovs-certificate and "
                              "--ovs-ca-cert")  # fmt: skip
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False  # as OVS: certificates name switches, not hosts
        ctx.verify_mode = ssl.CERT_REQUIRED
        try:
            ctx.load_verify_locations(ca)
            ctx.load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            raise self._error(f"cannot load TLS files: {exc}") from None
        return ctx

    def connect(self) -> None:
        """Open the session and start the monitor (its initial rows are in before this
        returns). Raises :class:`OvsDbError` naming the socket."""
        self.close()
        kind = self.remote.partition(":")[0]
        if kind not in ("unix", "ssl", "tcp"):
            raise self._error("unsupported remote (use unix:PATH or ssl:HOST:PORT)")
        deadline = time.monotonic() + self.timeout
        try:
            session = Session.open(self.remote, self._tls(), deadline)
        except PermissionError as exc:
            raise self._error(
                f"cannot connect: {exc.strerror} (connecting to a unix socket needs write "
                "permission on it: run as the socket's owner, root on most nodes, or its group)"
            ) from None
        except FileNotFoundError:
            path = self.remote.partition(":")[2]
            raise self._error(
                f"cannot connect: no socket at {path} (is ovs-vswitchd's ovsdb-server running, "
                "and its directory mounted?)"
            ) from None
        except ssl.SSLError as exc:
            raise self._error(f"TLS handshake failed: {exc.reason or exc}") from None
        except (OSError, ValueError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise self._error(f"cannot connect: {detail}") from None
        session.on_notification = self._notified
        self._session = session
        try:
            self._request("get_schema", [DB_NAME], what="read its schema")
            self._ports, self._interfaces, self._watched = {}, {}, frozenset()
            reply = self._request("monitor_cond", [DB_NAME, _MONITOR_ID, {
                "Port": [{"columns": ["name", "interfaces", "external_ids"],
                          "where": [["external_ids", "includes",
                                     ["map", [["owner", OVS_CNI_OWNER]]]]]}],
                "Interface": [{"columns": ["name", "external_ids"], "where": [False]}],
            }], what="monitor its ports")  # fmt: skip
            self._update(reply.get("result") or {})
            self._follow_interfaces()
        except BaseException:
            self.close()
            raise
        self._selector = selectors.DefaultSelector()
        self._selector.register(session.sock, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._changed = True

    @property
    def connected(self) -> bool:
        return self._session is not None

    def close(self) -> None:
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        if self._session is not None:
            self._session.close()
            self._session = None

    def _request(self, method: str, params: list[Any], *, what: str) -> dict[str, Any]:
        """Send and wait for the reply (notifications are dispatched meanwhile)."""
        session = self._session
        if session is None:
            raise self._error("not connected")
        session.deadline = time.monotonic() + self.timeout
        try:
            reply = session.reply(session.send(method, params))
        except TimeoutError:
            raise self._error(f"no answer within {self.timeout} s (to {what})") from None
        except ssl.SSLError as exc:
            raise self._error(f"TLS failed: {exc.reason or exc}") from None
        except (OSError, ValueError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise self._error(f"connection lost ({detail})") from None
        error = rpc_error(reply)
        if error is not None:
            hint = " (is this ovs-vswitchd's database?)" if "unknown database" in error else ""
            raise self._error(f"cannot {what}: {error}{hint}")
        return reply

    # -- the monitor ------------------------------------------------------------------------
    def _notified(self, method: str, params: list[Any]) -> None:
        if method == "update2" and len(params) >= 2 and params[0] == _MONITOR_ID:
            self._update(params[1] or {})

    def _update(self, tables: Mapping[str, Any]) -> None:
        for table, store, columns in (
            ("Port", self._ports, ("name", "interfaces", "external_ids")),
            ("Interface", self._interfaces, ("name", "external_ids")),
        ):
            for uuid, change in (tables.get(table) or {}).items():
                self._changed = True
                if "delete" in change:
                    store.pop(uuid, None)
                    continue
                row = change.get("initial") or change.get("insert")
                if row is not None:
                    store[uuid] = {
                        "name": str(row.get("name", "")),
                        "interfaces": _uuids(row.get("interfaces")),
                        "external_ids": _map(row.get("external_ids")),
                    }
                    continue
                diff = change.get("modify") or {}
                old = store.setdefault(uuid, {"name": "", "interfaces": set(), "external_ids": {}})
                for column in columns:
                    if column not in diff:
                        continue
                    if column == "name":
                        old["name"] = str(diff["name"])
                    elif column == "interfaces":
                        old["interfaces"] = old["interfaces"] ^ _uuids(diff["interfaces"])
                    else:
                        old["external_ids"] = _apply_map_diff(
                            old["external_ids"], _map(diff["external_ids"])
                        )

    def _follow_interfaces(self) -> None:
        """Monitor exactly the Interface rows of the monitored ports."""
        wanted = frozenset(u for p in self._ports.values() for u in p["interfaces"])
        if wanted == self._watched:
            return
        self._watched = wanted
        where: list[Any] = [["_uuid", "==", ["uuid", u]] for u in sorted(wanted)] or [False]
        self._request("monitor_cond_change", [_MONITOR_ID, _MONITOR_ID, {
            "Interface": [{"where": where}],
        }], what="monitor its interfaces")  # fmt: skip
        for uuid in list(self._interfaces):
            if uuid not in wanted:
                del self._interfaces[uuid]

    def interfaces(self) -> list[OvsInterface]:
        """Every Interface of a port ovs-cni made, with its Port's ``external_ids``."""
        self._follow_interfaces()
        out = []
        for port in self._ports.values():
            for uuid in sorted(port["interfaces"]):
                row = self._interfaces.get(uuid)
                if row is None:
                    continue
                out.append(OvsInterface(
                    uuid=uuid, name=row["name"], iface_id=row["external_ids"].get(IFACE_ID),
                    port_ids=dict(port["external_ids"]),
                ))  # fmt: skip
        return sorted(out, key=lambda i: i.name)

    def wait(self, seconds: float) -> bool:
        """Receive monitor updates for up to ``seconds`` or until :meth:`wake`; True when
        something changed since the last call. Raises :class:`OvsDbError` when the
        connection is lost."""
        session, selector = self._session, self._selector
        if session is None or selector is None:
            raise self._error("not connected")
        until = time.monotonic() + max(0.0, seconds)
        while not self._changed:
            pending = isinstance(session.sock, ssl.SSLSocket) and session.sock.pending()
            left = until - time.monotonic()
            if left <= 0 and not pending:
                break
            events = [] if pending else selector.select(max(0.0, left))
            woken = False
            for key, _ in events:
                if key.fileobj is self._wake_r:
                    with contextlib.suppress(OSError):
                        while self._wake_r.recv(4096):
                            pass
                    woken = True
            if pending or any(key.fileobj is not self._wake_r for key, _ in events):
                try:
                    session.sock.settimeout(max(0.001, self.timeout))
                    data = session.sock.recv(1 << 20)
                except (OSError, ssl.SSLError) as exc:
                    raise self._error(f"connection lost ({exc})") from None
                if not data:
                    raise self._error("connection closed by the server")
                try:
                    session.receive(data)
                except (OSError, ValueError) as exc:
                    raise self._error(f"connection lost ({exc})") from None
            if woken:
                break
        changed, self._changed = self._changed, False
        return changed

    def wake(self) -> None:
        """End a :meth:`wait` now (from another thread)."""
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- writes and statistics --------------------------------------------------------------
    def write(self, writes: Sequence[Write]) -> None:
        """Set or remove ``iface-id`` of each interface (by UUID), in ONE transaction: the
        key is deleted and inserted by mutation, so no other key of the map is touched and an
        interface deleted meanwhile is simply not found."""
        if not writes:
            return
        ops: list[dict[str, Any]] = []
        for w in writes:
            mutations: list[Any] = [["external_ids", "delete", ["set", [IFACE_ID]]]]
            if w.iface_id is not None:
                mutations.append(["external_ids", "insert", ["map", [[IFACE_ID, w.iface_id]]]])
            ops.append({"op": "mutate", "table": "Interface",
                        "where": [["_uuid", "==", ["uuid", w.interface]]],
                        "mutations": mutations})  # fmt: skip
        reply = self._request("transact", [DB_NAME, *ops], what="set iface-id")
        results = reply.get("result") or []
        for result in results:
            error = rpc_error(result) if isinstance(result, dict) else None
            if error is not None:
                raise self._error(f"cannot set iface-id: {error} (is the database read-only, "
                                  "or served by a backup ovsdb-server?)")  # fmt: skip

    def statistics(self, names: Iterable[str] | None = None) -> dict[str, InterfaceStats]:
        """Counters of every Interface that has an ``iface-id`` (the VNF NICs and the pods'
        interfaces), or only of ``names``, by Interface name."""
        wanted = set(names) if names is not None else None
        reply = self._request("transact", [DB_NAME, {
            "op": "select", "table": "Interface", "where": [],
            "columns": ["name", "external_ids", "statistics"],
        }], what="read interface statistics")  # fmt: skip
        rows = ((reply.get("result") or [{}])[0] or {}).get("rows") or []
        out: dict[str, InterfaceStats] = {}
        for row in rows:
            name = str(row.get("name", ""))
            ids = _map(row.get("external_ids"))
            if name not in wanted if wanted is not None else IFACE_ID not in ids:
                continue
            stats = {k: int(v) for k, v in _map(row.get("statistics")).items() if k in _STATS}
            out[name] = InterfaceStats(name, ids.get(IFACE_ID), stats)
        return out

    def __enter__(self) -> OvsDb:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        for sock in (self._wake_r, self._wake_w):
            with contextlib.suppress(Exception):
                sock.close()


def default_remote() -> str:
    """``OSC_OVS_DB``, else OVS' default socket."""
    return os.environ.get("OSC_OVS_DB") or DEFAULT_OVS_DB


StatsReader = Callable[[], Mapping[str, InterfaceStats]]
