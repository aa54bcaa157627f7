"""VNFs that answer OVN's health probe, where no chassis runs one.

Since issue 22 the reconciler switches steering onto a VNF instance only once northd reports
its ``Network_Function_Group`` active, which northd does only for functions whose health probe
passes. A sandbox without a data path has no ovn-controller to send the probe and no guest to
answer it, so every VNF would look dead forever and no steering ACL would ever be written.
:class:`ForwardingVnfs` plays "every VNF forwards" there, on the same wire a real system has:

- **with ovn-northd** (a :class:`~osc_gitops_sandbox.ovn.OvnSandbox` with a Southbound DB): it
  plays ovn-controller for a VNF that forwards: the function's two ports bound and up
  (``Port_Binding.up``: northd counts a function whose ports are not up offline) and each
  ``network-function`` ``Service_Monitor`` row ``online``; northd then does the rest itself
  (``network_function_active``);
- **without ovn-northd** (an NB alone, e.g. a zone of
  :class:`~osc_gitops_sandbox.zones.ZonedCluster`): it plays northd's verdict, writing each
  group's first function as its ``network_function_active``.

It waits on the server with an OVSDB ``wait`` operation (a long poll: no polling loop), one
thread per database. A :class:`~osc_gitops_sandbox.vnf_guests.VnfGuests` (real guests behind a
real ovn-controller) stops it: health is then measured, not played.
"""

from __future__ import annotations

import threading
from typing import Any

from osc_gitops_sandbox import ovsdb_rpc

__all__ = ["ForwardingVnfs"]

_WAIT_MS = 2000
"""How long one long poll blocks before the thread looks at its stop flag."""
_NB_PENDING = [
    ["network_function_active", "==", ["set", []]],
    ["network_function", "!=", ["set", []]],
]
_SB_PENDING = [["type", "==", "network-function"], ["status", "!=", "online"]]


class ForwardingVnfs:
    """Marks every VNF's health probe as answered (module docstring), until :meth:`stop`."""

    def __init__(self, remote: str, *, northd: bool) -> None:
        self.remote = remote
        """The SB (with northd) or the NB (without) it writes to."""
        self.northd = northd
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> ForwardingVnfs:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="forwarding-vnfs", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(_WAIT_MS / 1000 + 5)

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _run(self) -> None:
        db, table, where = (
            ("OVN_Southbound", "Service_Monitor", _SB_PENDING)
            if self.northd
            else ("OVN_Northbound", "Network_Function_Group", _NB_PENDING)
        )
        while not self._stop.is_set():
            try:
                self._once(db, table, where)
            except ovsdb_rpc.OvsdbRpcError as exc:
                if self._stop.is_set():
                    return
                self.error = exc  # the server went away (a test stops it): try again
                self._stop.wait(0.2)

    def _once(self, db: str, table: str, where: list[Any]) -> None:
        """Block until some row needs an answer (or ``_WAIT_MS``), then answer every such row."""
        wait = {
            "op": "wait", "table": table, "where": where, "columns": ["_uuid"],
            "until": "!=", "rows": [], "timeout": _WAIT_MS,
        }  # fmt: skip
        try:
            ovsdb_rpc.transact(self.remote, db, [wait], timeout=_WAIT_MS / 1000 + 10)
        except ovsdb_rpc.OvsdbRpcError as exc:
            if "timed out" in str(exc):
                return  # nothing pending for the whole wait
            raise
        if self._stop.is_set():
            return
        if self.northd:
            # ovn-controller binds the VNF's ports (northd counts a function whose ports are not
            # up offline) and reports the probe answered
            rows = ovsdb_rpc.transact(self.remote, db, [
                {"op": "select", "table": table, "where": where,
                 "columns": ["logical_port", "logical_input_port"]},
            ])[0]["rows"]  # fmt: skip
            ports = sorted({r[c] for r in rows for c in ("logical_port", "logical_input_port")})
            ops: list[dict[str, Any]] = [
                {"op": "update", "table": "Port_Binding", "where": [["logical_port", "==", p]],
                 "row": {"up": True}}
                for p in ports if isinstance(p, str) and p
            ]  # fmt: skip
            ops.append(
                {"op": "update", "table": table, "where": where, "row": {"status": "online"}}
            )
            ovsdb_rpc.transact(self.remote, db, ops)
            return
        rows = ovsdb_rpc.transact(self.remote, db, [
            {"op": "select", "table": table, "where": where,
             "columns": ["_uuid", "network_function"]},
        ])[0]["rows"]  # fmt: skip
        ops = []
        for row in rows:
            members = ovsdb_rpc.from_atom(row["network_function"])
            first = sorted(members)[0] if isinstance(members, list) else members
            ops.append({
                "op": "update", "table": table, "where": [["_uuid", "==", row["_uuid"]]],
                "row": {"network_function_active": ["uuid", first]},
            })  # fmt: skip
        if ops:
            ovsdb_rpc.transact(self.remote, db, ops)
