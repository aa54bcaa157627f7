"""VNFs that answer OVN's health probe, where no chassis runs one.

Since issue 22 the reconciler switches steering onto a VNF instance only once northd reports
its ``Network_Function_Group`` active, which northd does only for functions whose health probe
passes. A sandbox without a data path has no ovn-controller to send the probe and no guest to
answer it, so every VNF would look dead forever and no steering ACL would ever be written.
:class:`ForwardingVnfs` plays the VNFs' answers there, on the same wire a real system has:

- **with ovn-northd** (a :class:`~osc_gitops_sandbox.ovn.stack.OvnSandbox` with a Southbound DB): it
  plays ovn-controller for the VNFs: a forwarding VNF's two ports bound and up
  (``Port_Binding.chassis`` = the played chassis :data:`PLAYED_CHASSIS` and ``Port_Binding.up``:
  northd counts a function whose ports are not up offline, and writes the ports' NB ``up``
  from both, as for a real chassis) and its
  ``network-function`` ``Service_Monitor`` row ``online``; a VNF that does not forward
  ``offline`` (ports down). northd then does the rest itself (``network_function_active``);
- **without ovn-northd** (an NB alone, e.g. a zone of
  :class:`~osc_gitops_sandbox.ovn.zones.ZonedCluster`): it plays northd's verdict, writing each
  group's first forwarding function as its ``network_function_active``.

Which VNFs forward: every one, or those whose OVN ports ``forwarding()`` names
(:class:`~osc_gitops_sandbox.ovn.cluster.SandboxCluster`: its VirtualMachine exists, is not
``Halted``, and is not annotated ``sandbox.osc.io/forwarding: "false"`` — how a sandbox user or
test kills a VNF without a data path). Without that callback it waits on the server with an
OVSDB ``wait`` operation (a long poll); with it, it looks twice a second. A
:class:`~osc_gitops_sandbox.datapath.guests.VnfGuests` (real guests behind a real ovn-controller)
stops it: health is then measured, not played.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc

__all__ = ["FORWARDING_ANNOTATION", "PLAYED_CHASSIS", "ForwardingVnfs"]

PLAYED_CHASSIS = "sandbox-vnf-host"
"""The Southbound Chassis the played ovn-controller binds the VNF ports to."""

FORWARDING_ANNOTATION = "sandbox.osc.io/forwarding"
"""On a VNF's VirtualMachine: ``"false"`` makes the sandbox play it not forwarding (OVN's probe
fails) where no data path runs."""
_WAIT_MS = 200
"""How long one long poll blocks before the thread looks at its stop flag: short, because
:meth:`ForwardingVnfs.stop` waits for it (2 s made every stop of a sandbox 1.7 s slower)."""
_LOOK = 0.5
"""Seconds between looks when a ``forwarding`` callback decides (VM changes are not announced
on the OVSDB wire)."""
_NB_PENDING = [
    ["network_function_active", "==", ["set", []]],
    ["network_function", "!=", ["set", []]],
]
_SB_PENDING = [["type", "==", "network-function"], ["status", "!=", "online"]]
_SB_ALL = [["type", "==", "network-function"]]


class ForwardingVnfs:
    """Plays the VNFs' answers to OVN's probe (module docstring), until :meth:`stop`."""

    def __init__(
        self, remote: str, *, northd: bool, forwarding: Callable[[], set[str]] | None = None
    ) -> None:
        self.remote = remote
        """The SB (with northd) or the NB (without) it writes to."""
        self.northd = northd
        self.forwarding = forwarding
        """The OVN ports whose VNF forwards, asked at each look; ``None``: every VNF does."""
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
        while not self._stop.is_set():
            try:
                if self.forwarding is None:
                    self._wait_pending()
                    self._answer(lambda _port: True)
                else:
                    ports = self.forwarding()
                    self._answer(ports.__contains__)
                    self._stop.wait(_LOOK)
            except ovsdb_rpc.OvsdbRpcError as exc:
                if self._stop.is_set():
                    return
                self.error = exc  # the server went away (a test stops it): try again
                self._stop.wait(0.2)

    def _wait_pending(self) -> None:
        """Block until some row may need an answer, or ``_WAIT_MS``."""
        db, table, where = (
            ("OVN_Southbound", "Service_Monitor", _SB_PENDING)
            if self.northd
            else ("OVN_Northbound", "Network_Function_Group", _NB_PENDING)
        )
        wait = {
            "op": "wait", "table": table, "where": where, "columns": ["_uuid"],
            "until": "!=", "rows": [], "timeout": _WAIT_MS,
        }  # fmt: skip
        try:
            ovsdb_rpc.transact(self.remote, db, [wait], timeout=_WAIT_MS / 1000 + 10)
        except ovsdb_rpc.OvsdbRpcError as exc:
            if "timed out" not in str(exc):
                raise

    def _answer(self, forwards: Callable[[str], bool]) -> None:
        if self._stop.is_set():
            return
        if self.northd:
            self._answer_sb(forwards)
        else:
            self._answer_nb(forwards)

    def _answer_sb(self, forwards: Callable[[str], bool]) -> None:
        """ovn-controller's part: ports up and the probe answered, or both not."""
        db = "OVN_Southbound"
        rows = ovsdb_rpc.transact(self.remote, db, [
            {"op": "select", "table": "Service_Monitor", "where": _SB_ALL,
             "columns": ["_uuid", "logical_port", "logical_input_port", "status"]},
        ])[0]["rows"]  # fmt: skip
        ops: list[dict[str, Any]] = []
        chassis = self._chassis() if rows else None
        for row in rows:
            ports = [p for p in (row["logical_port"], row["logical_input_port"]) if p]
            up = all(forwards(p) for p in ports)
            status = "online" if up else "offline"
            if ovsdb_rpc.from_atom(row["status"]) == status:
                continue
            bound: Any = ["uuid", chassis] if up and chassis else ["set", []]
            ops += [
                {"op": "update", "table": "Port_Binding", "where": [["logical_port", "==", p]],
                 "row": {"up": up, "chassis": bound}}
                for p in ports
            ]  # fmt: skip
            where = [["_uuid", "==", row["_uuid"]]]
            monitor = {"op": "update", "table": "Service_Monitor", "where": where}
            ops.append({**monitor, "row": {"status": status}})
        if ops:
            ovsdb_rpc.transact(self.remote, db, ops)

    def _chassis(self) -> str:
        """The played chassis' row (made the first time), as ovn-controller registers one."""
        db = "OVN_Southbound"
        where = [["name", "==", PLAYED_CHASSIS]]
        rows = ovsdb_rpc.transact(self.remote, db, [
            {"op": "select", "table": "Chassis", "where": where, "columns": ["_uuid"]},
        ])[0]["rows"]  # fmt: skip
        if rows:
            return str(ovsdb_rpc.from_atom(rows[0]["_uuid"]))
        result = ovsdb_rpc.transact(self.remote, db, [
            {"op": "insert", "table": "Encap", "uuid-name": "e",
             "row": {"type": "geneve", "ip": "127.0.0.2", "chassis_name": PLAYED_CHASSIS}},
            {"op": "insert", "table": "Chassis", "uuid-name": "c",
             "row": {"name": PLAYED_CHASSIS, "hostname": PLAYED_CHASSIS,
                     "encaps": ["named-uuid", "e"]}},
        ])  # fmt: skip
        return str(ovsdb_rpc.from_atom(result[1]["uuid"]))

    def _answer_nb(self, forwards: Callable[[str], bool]) -> None:
        """northd's part: each group's first forwarding function active."""
        db = "OVN_Northbound"
        nfs, groups = ovsdb_rpc.transact(self.remote, db, [
            {"op": "select", "table": "Network_Function", "where": [],
             "columns": ["_uuid", "inport"]},
            {"op": "select", "table": "Network_Function_Group", "where": [],
             "columns": ["_uuid", "network_function", "network_function_active"]},
        ])  # fmt: skip
        ports = self._port_names() if self.forwarding is not None else {}
        alive = {
            ovsdb_rpc.from_atom(r["_uuid"])
            for r in nfs["rows"]
            if forwards(ports.get(str(ovsdb_rpc.from_atom(r["inport"])), ""))
        }
        ops: list[dict[str, Any]] = []
        for row in groups["rows"]:
            members = ovsdb_rpc.from_atom(row["network_function"])
            members = sorted(members if isinstance(members, list) else [members] if members else [])
            up = [m for m in members if m in alive]
            want: Any = ["uuid", up[0]] if up else ["set", []]
            now = ovsdb_rpc.from_atom(row["network_function_active"])
            if (now or None) == (up[0] if up else None):
                continue
            ops.append({"op": "update", "table": "Network_Function_Group",
                        "where": [["_uuid", "==", row["_uuid"]]],
                        "row": {"network_function_active": want}})  # fmt: skip
        if ops:
            ovsdb_rpc.transact(self.remote, db, ops)

    def _port_names(self) -> dict[str, str]:
        rows = ovsdb_rpc.transact(self.remote, "OVN_Northbound", [
            {"op": "select", "table": "Logical_Switch_Port", "where": [],
             "columns": ["_uuid", "name"]},
        ])[0]["rows"]  # fmt: skip
        return {str(ovsdb_rpc.from_atom(r["_uuid"])): str(r["name"]) for r in rows}
