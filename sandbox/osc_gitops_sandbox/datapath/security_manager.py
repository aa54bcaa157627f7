"""The sandbox's security manager: what a VnfDeployment's ``securityManager.url`` talks to.

The seeds' security manager managed the deployed VNFs and learnt each security group's members
so the VNF's policy could use them. This one does that for the sandbox's Suricata guests
(:mod:`osc_gitops_sandbox.datapath.suricata`): it receives the reconciler's notifications
(``POST``, JSON, ``schemas/security-manager-notification.json``) and turns the ``members`` of
each Binding's SecurityGroup on a node into Suricata address groups of the VNF's guests on that
node (``$SG_<GROUP>`` per group, ``$PROTECTED`` for all of them), reloaded without a restart.

As a receiver should:

- every message is validated against the published schema (400 otherwise: the reconciler drops
  a refused message instead of retrying it);
- per (binding, VNF, node) only a ``sequence`` newer than the one applied is applied; an older
  or equal one is answered 200 and ignored (a retry that arrives late, a duplicate);
- a list in parts is applied once every part of its sequence arrived (older incomplete ones
  are forgotten);
- a list whose ``digest`` equals what is applied changes nothing (no reload);
- a reload that fails (the guest stops Suricata and reports it) is answered 500 naming the
  guest, so the reconciler's outbox retries and reports it; the members are kept for the guest's
  next start.

Faults a test can set (:attr:`SecurityManager.fault`): answer every POST with a status code,
answer late (``delay`` seconds), or stop listening (:meth:`SecurityManager.stop`: connection
refused). ``GET /status`` shows what it holds and what its guests report.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from osc_gitops_sandbox.datapath.suricata import (
    SuricataError,
    SuricataProgram,
    SuricataPrograms,
    group_variable,
)
from osc_gitops_sandbox.lifecycle import Lifecycle

__all__ = ["Applied", "Fault", "SecurityManager"]

MAX_BODY = 8 << 20
"""The largest notification accepted (8 MiB: 1,000 members are ~100 KiB)."""


@dataclass
class Fault:
    """How the manager misbehaves: ``status`` answers every POST with it (500, 503, 400, ...),
    ``delay`` answers after that many seconds."""

    status: int | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Applied:
    """One member list applied to the guests of ``vnf`` on ``node``: when (``time.time()``),
    the address groups that resulted, and how long the guests' reload took."""

    at: float
    binding: str
    vnf: str
    node: str
    sequence: int
    groups: dict[str, list[str]]
    reload_seconds: float
    error: str | None = None


@dataclass
class _Binding:
    group: str
    sequence: int
    digest: str
    members: list[dict[str, Any]]


@dataclass
class _State:
    bindings: dict[tuple[str, str, str], _Binding] = field(default_factory=dict)
    """(binding, VNF, node) -> what is applied."""
    parts: dict[tuple[str, str, str], tuple[int, dict[int, list[dict[str, Any]]]]] = field(
        default_factory=dict
    )
    """(binding, VNF, node) -> (sequence, part number -> members) while parts arrive."""
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    """VirtualMachine -> its last deployed/removed event."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 30.0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/status":
            self._answer(404, {"error": "GET /status"})
            return
        self._answer(200, self.server.manager.status())

    def do_POST(self) -> None:
        manager = self.server.manager
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._answer(413, {"error": f"more than {MAX_BODY} bytes"})
            return
        body = self.rfile.read(length)
        fault = manager.fault
        if fault.delay:
            time.sleep(fault.delay)
        if fault.status is not None:
            manager.count("fault")
            self._answer(fault.status, {"error": f"fault injected: HTTP {fault.status}"})
            return
        try:
            payload = json.loads(body)
        except ValueError as exc:
            self._answer(400, {"error": f"not JSON: {exc}"})
            return
        code, answer = manager.receive(payload)
        self._answer(code, answer)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    manager: SecurityManager


class SecurityManager(Lifecycle):
    """An HTTP server on ``host:port`` (0: any free port; :attr:`url` says which) that applies
    notifications to ``programs``' Suricata guests (``None``: it only records them)."""

    def __init__(
        self, programs: SuricataPrograms | None = None, *, host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:  # fmt: skip
        from reconciler.manifests.schema import notification_schema

        self.programs = programs
        self.host = host
        self.port = port
        self.fault = Fault()
        self.received: list[dict[str, Any]] = []
        """Every valid notification, as received (duplicates and stale ones included)."""
        self.applied: list[Applied] = []
        self.counts: dict[str, int] = {"received": 0, "applied": 0, "stale": 0, "invalid": 0,
                                       "duplicate": 0, "fault": 0}  # fmt: skip
        self._state = _State()
        self._lock = threading.RLock()
        self._applied = threading.Condition(self._lock)
        import jsonschema

        schema = notification_schema()
        self._validator = jsonschema.validators.validator_for(schema)(schema)
        """Built once: ``jsonschema.validate`` builds a validator per call (~10 ms)."""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.reports: list[dict[str, Any]] = []
        """What the guests reported: ``{at, vnf, node, virtualMachine, failure}`` (``None``:
        it runs again)."""
        if programs is not None:
            programs.on_change = self._guest_changed

    # -- lifecycle -------------------------------------------------------------------------
    def _start(self) -> None:
        server = _Server((self.host, self.port), _Handler)
        server.manager = self
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1},
            name=f"security-manager-{self.port}", daemon=True,
        )  # fmt: skip
        self._thread.start()

    def _stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def url(self) -> str:
        """Where the reconciler posts (a VnfDeployment's ``securityManager.url``)."""
        return f"http://{self.host}:{self.port}/events"

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    # -- receiving -------------------------------------------------------------------------
    def receive(self, payload: Any) -> tuple[int, dict[str, Any]]:
        """Handle one notification: ``(HTTP status, answer)``."""
        errors = sorted(self._validator.iter_errors(payload), key=lambda e: list(e.path))
        if errors:
            self.count("invalid")
            return 400, {"error": f"not a notification: {errors[0].message}"}
        with self._lock:
            self.counts["received"] += 1
            self.received.append(payload)
            if payload["event"] != "members":
                vm = str(payload["virtualMachine"])
                self._state.instances[vm] = payload
                return 200, {"result": "recorded"}
            key = (payload["binding"], payload["vnf"], payload["node"])
            sequence = int(payload["sequence"])
            current = self._state.bindings.get(key)
            if current is not None and sequence <= current.sequence:
                what = "duplicate" if sequence == current.sequence else "stale"
                self.counts[what] += 1
                return 200, {"result": what, "applied": current.sequence}
            pending = self._state.parts.get(key)
            if pending is None or pending[0] < sequence:
                pending = (sequence, {})
            elif pending[0] > sequence:
                self.counts["stale"] += 1
                return 200, {"result": "stale", "assembling": pending[0]}
            pending[1][int(payload["part"])] = payload["members"]
            self._state.parts[key] = pending
            if len(pending[1]) < int(payload["parts"]):
                return 200, {"result": "part", "have": sorted(pending[1])}
            del self._state.parts[key]
            members = [m for n in sorted(pending[1]) for m in pending[1][n]]
            if current is not None and current.digest == payload["digest"]:
                current.sequence = sequence  # same content: nothing to reload
                self.counts["duplicate"] += 1
                return 200, {"result": "unchanged", "applied": sequence}
            self._state.bindings[key] = _Binding(
                payload["securityGroup"], sequence, payload["digest"], members
            )
            vnf, node = payload["vnf"], payload["node"]
            groups = self.groups(vnf, node)
        error = None
        took = 0.0
        if self.programs is not None:
            try:
                took = self.programs.set_members(vnf, node, groups)
            except SuricataError as exc:
                error = str(exc)
        with self._lock:
            self.counts["applied"] += 1
            self.applied.append(
                Applied(time.time(), key[0], vnf, node, sequence, groups, took, error)
            )
            self._applied.notify_all()
        if error is not None:
            return 500, {"error": error}
        return 200, {"result": "applied", "applied": sequence, "reload_seconds": round(took, 3)}

    def groups(self, vnf: str, node: str) -> dict[str, list[str]]:
        """The Suricata address groups of ``vnf``'s guests on ``node``: per SecurityGroup
        steered through it there, its members' addresses (``PROTECTED``, their union, is the
        guest's)."""
        with self._lock:
            out: dict[str, set[str]] = {}
            for (_, v, n), held in sorted(self._state.bindings.items()):
                if (v, n) != (vnf, node):
                    continue
                addresses = out.setdefault(group_variable(held.group), set())
                for member in held.members:
                    addresses.update(str(a) for a in member.get("addresses") or [])
            return {name: sorted(a) for name, a in out.items()}

    def members(self, binding: str, vnf: str, node: str) -> list[str]:
        """``namespace/name`` of the members applied for (binding, VNF, node)."""
        with self._lock:
            held = self._state.bindings.get((binding, vnf, node))
            return [f"{m['namespace']}/{m['name']}" for m in held.members] if held else []

    def wait_applied(self, predicate: Any, timeout: float = 10.0) -> Applied:
        """Until an :class:`Applied` satisfying ``predicate`` was recorded; returns it."""
        deadline = time.monotonic() + timeout
        with self._applied:
            while True:
                hit = next((a for a in reversed(self.applied) if predicate(a)), None)
                if hit is not None:
                    return hit
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no matching member list applied within {timeout} s")
                self._applied.wait(left)

    # -- the guests' reports ---------------------------------------------------------------
    def _guest_changed(self, program: SuricataProgram) -> None:
        """A guest's Suricata failed (start, reload, died) or runs again."""
        with self._lock:
            self.reports.append({
                "at": time.time(), "vnf": program.vnf, "node": program.node,
                "virtualMachine": program.vm, "failure": program.failure,
            })  # fmt: skip

    def status(self) -> dict[str, Any]:
        """What ``GET /status`` answers."""
        with self._lock:
            bindings = [
                {"binding": b, "vnf": v, "node": n, "securityGroup": held.group,
                 "sequence": held.sequence, "members": [
                     f"{m['namespace']}/{m['name']}" for m in held.members]}
                for (b, v, n), held in sorted(self._state.bindings.items())
            ]  # fmt: skip
            instances = sorted(self._state.instances.values(), key=lambda e: e["virtualMachine"])
            counts = dict(self.counts)
        guests = []
        if self.programs is not None:
            guests = [p.status() for p in list(self.programs.running.values())]
        with self._lock:
            reports = list(self.reports[-20:])
        return {"counts": counts, "bindings": bindings, "instances": instances, "guests": guests,
                "reports": reports}  # fmt: skip
