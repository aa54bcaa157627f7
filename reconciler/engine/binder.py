"""The node binder: gives each VNF NIC of this node's VMs its OVN port as the OVS interface's
``iface-id`` (released ovs-cni does not: ``reconciler.core.compiling.nic_binding``), and
counts the traffic through every VNF NIC it knows.

It runs as ``osc-gitops bind --node N --ovs-db URL`` (a node DaemonSet beside a central
reconciler) or inside a node agent (``osc-gitops run --node N --ovs-db URL``), through the
protocols of ``reconciler.engine.providers`` (``NodeVmProvider``, ``OvsProvider``).

A pass reads the node's VMs and virt-launcher pods (from the watches' memory) and the OVS
interfaces ovs-cni made (from the monitor's), decides (pure), and writes the ``iface-id``
changes in one OVS transaction. Passes run:

- on events: an OVS interface or port changing (the monitor), a VM or virt-launcher pod of the
  node changing (the watches);
- every ``resync`` seconds regardless, after a fresh list from the API (a missed event, a
  watch that lagged, a binding someone removed by hand: all converge within one resync);
- after a failure, with exponential backoff (``backoff_max``): an unreachable OVS database
  (its socket missing, no permission) is retried, named in the log and in the metric
  ``osc_gitops_binder_ovs_db_up``; ``--once`` exits 1 instead.

A binder killed mid-pass leaves at most a part of the pass's ``iface-id`` changes (one OVS
transaction: all or none of them); the next one reads what is there and finishes. Every
``stats_interval`` seconds it samples the OVS counters of the VNF NICs and the node's pod
interfaces (``reconciler.core.views.traffic``), and publishes its state (what it bound,
skipped, waits for, the traffic per instance, which pods talked) in its status Lease
``osc-gitops-binder-<node>``: how ``explain`` tells "no binder runs on node-1" and "the VNF saw
nothing while its pods talked".
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.core.compiling.nic_binding import BindPlan, is_node_vnf_port, plan_bindings
from reconciler.core.model import naming
from reconciler.core.views.traffic import CounterHistory, instance_traffic
from reconciler.engine.providers import NodeVmProvider, OvsProvider, StatusPublisher
from reconciler.engine.reporting.logs import LOGGER
from reconciler.errors import EndpointError, OscError, error_cause

log = logging.getLogger(LOGGER)

__all__ = [
    "BINDER_FORMAT_VERSION",
    "BINDER_LEASE_PREFIX",
    "Binder",
    "BinderConfig",
    "BinderReporter",
    "NoopBinderReporter",
    "binder_lease_name",
]

BINDER_FORMAT_VERSION = 1
BINDER_LEASE_PREFIX = naming.BINDER_LEASE_PREFIX
PODS_TALKING_MAX = 500
"""At most this many pods (the busiest) are listed as having talked in the published record."""


def binder_lease_name(node: str) -> str:
    """``osc-gitops-binder-<node>``: where the binder of ``node`` publishes its state."""
    return naming.binder_lease(node)


class BinderReporter(Protocol):
    """What the binder reports, for metrics
    (``reconciler.engine.reporting.metrics.BinderMetrics``)."""

    def passed(self, bound: int, waiting: int, skipped: list[tuple[str, str]],
               writes: list[str | None]) -> None: ...  # fmt: skip
    def failed(self, cause: str, ovs_down: bool) -> None: ...
    def traffic(self, samples: list[tuple[tuple[str, str, str, str, str], int, int]]) -> None: ...


class NoopBinderReporter:
    """A :class:`BinderReporter` that counts nothing."""

    def passed(self, bound: int, waiting: int, skipped: list[tuple[str, str]],
               writes: list[str | None]) -> None:  # fmt: skip
        pass

    def failed(self, cause: str, ovs_down: bool) -> None:
        pass

    def traffic(self, samples: list[tuple[tuple[str, str, str, str, str], int, int]]) -> None:
        pass


@dataclass(frozen=True)
class BinderConfig:
    node: str
    instance: str
    resync: float = 60.0
    """Seconds between two passes that list the API again, whatever happened."""
    stats_interval: float = 10.0
    """Seconds between two samples of the OVS counters (and publishes of the state)."""
    backoff_max: float = 30.0
    watch: bool = True
    window: float = 60.0
    """Seconds "traffic crossed it lately" looks back (the last minute)."""


@dataclass
class _State:
    plan: BindPlan | None = None
    error: str = ""
    ok: bool = False
    passes: int = 0
    writes: int = 0
    traffic: list[dict[str, Any]] = field(default_factory=list)
    pods_talking: dict[str, int] = field(default_factory=dict)
    sampled_at: float | None = None


class Binder:
    """One node's binder (see the module docstring)."""

    def __init__(
        self, config: BinderConfig, vms: NodeVmProvider, ovs: OvsProvider, *,
        reporter: BinderReporter | None = None, publisher: StatusPublisher | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.config = config
        self.vms = vms
        self.ovs = ovs
        self.reporter: BinderReporter = reporter or NoopBinderReporter()
        self.publisher = publisher
        self.clock = clock
        self.sinks: list[Callable[[dict[str, Any]], None]] = []
        """Called with :meth:`record` whenever it is published (a status file, the node agent's
        status book)."""
        self.state = _State()
        self._vnf_history = CounterHistory(config.window)
        self._pod_history = CounterHistory(config.window)
        self._kube_dirty = threading.Event()
        self._lock = threading.Lock()

    # -- one pass ---------------------------------------------------------------------------
    def pass_once(self) -> BindPlan:
        """Read, decide, write. Raises ``EndpointError`` (OVS DB, Kubernetes)."""
        if not self.ovs.connected:
            self.ovs.connect()
            log.info("binder connected to the Open_vSwitch DB", extra={"ovs_db": self.ovs.remote})
        self._kube_dirty.clear()
        vms, pods = self.vms.read()
        interfaces = self.ovs.interfaces()
        plan = plan_bindings(self.config.node, vms, pods, interfaces)
        if plan.writes:
            self.ovs.write(plan.writes)
            for w in plan.writes:
                log.info(
                    "binder set iface-id" if w.iface_id is not None else "binder removed iface-id",
                    extra={"interface": w.name, "iface_id": w.iface_id, "was": w.was, "why": w.why},
                )  # fmt: skip
        for skip in plan.skipped:
            if (skip.reason, skip.subject) not in self._skipping():
                log.warning("binder skipped a NIC",
                            extra={"reason": skip.reason, "subject": skip.subject,
                                   "detail": skip.detail})  # fmt: skip
        with self._lock:
            self.state.plan = plan
            self.state.ok, self.state.error = True, ""
            self.state.passes += 1
            self.state.writes += len(plan.writes)
        self.reporter.passed(
            len(plan.bound), len(plan.waiting), [(s.reason, s.subject) for s in plan.skipped],
            [w.iface_id for w in plan.writes],
        )  # fmt: skip
        return plan

    def _skipping(self) -> set[tuple[str, str]]:
        previous = self.state.plan
        return {(s.reason, s.subject) for s in previous.skipped} if previous else set()

    def sample(self, wall: float | None = None) -> None:
        """Sample the OVS counters of the VNF NICs and of the node's pod interfaces."""
        plan = self.state.plan
        if plan is None:
            return
        stats = self.ovs.statistics()
        now = self.clock()
        by_port: dict[str, dict[str, int]] = {}
        pods: dict[str, int] = {}
        for iface in stats.values():
            port = iface.iface_id
            if not port:
                continue
            by_port[port] = dict(iface.counters)
            if port.count("_") == 1:  # a pod's port: OVN-Kubernetes' <namespace>_<pod>
                pods[port] = int(iface.counters.get("rx_packets", 0)) + int(
                    iface.counters.get("tx_packets", 0)
                )
        nics = [(b.nic.vnf, b.nic.node, b.nic.vm, b.nic.side, b.nic.port) for b in plan.bound]
        self._vnf_history.add(now, {
            port: int(c.get("tx_packets", 0)) for port, c in by_port.items()
            if is_node_vnf_port(port, self.config.node)
        })  # fmt: skip
        self._pod_history.add(now, pods)
        traffic = instance_traffic(nics, by_port, self._vnf_history)
        talking: dict[str, int] = {}
        for lsp in pods:
            delta = self._pod_history.delta(lsp)
            if delta:
                talking[lsp] = delta
        busiest = dict(sorted(talking.items(), key=lambda kv: -kv[1])[:PODS_TALKING_MAX])
        samples = []
        for inst in traffic:
            for side, counters in inst.ports.items():
                for direction in ("rx", "tx"):
                    samples.append((
                        (inst.vnf, inst.node, inst.instance, side, direction),
                        counters[f"{direction}_packets"], counters[f"{direction}_bytes"],
                    ))  # fmt: skip
        self.reporter.traffic(samples)
        with self._lock:
            self.state.traffic = [t.to_json() for t in traffic]
            self.state.pods_talking = dict(sorted(busiest.items()))
            self.state.sampled_at = wall if wall is not None else time.time()

    # -- what it publishes -------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """The binder's state, JSON-ready (its status Lease, the status file, ``explain``)."""
        with self._lock:
            st = self.state
            plan = st.plan
            sampled = st.sampled_at
            return {
                "format_version": BINDER_FORMAT_VERSION,
                "role": "binder",
                "node": self.config.node,
                "instance": self.config.instance,
                "ovs_db": self.ovs.remote,
                "ok": st.ok,
                "error": st.error,
                "updated_at": _iso(time.time()),
                "bound": [
                    {
                        "vm": f"{b.nic.namespace}/{b.nic.vm}",
                        "nic": b.nic.nic,
                        "port": b.nic.port,
                        "interface": b.interface.name,
                    }
                    for b in (plan.bound if plan else ())
                ],
                "waiting": [
                    {"vm": f"{n.namespace}/{n.vm}", "nic": n.nic, "port": n.port}
                    for n in (plan.waiting if plan else ())
                ],
                "skipped": [
                    {"reason": s.reason, "subject": s.subject, "detail": s.detail}
                    for s in (plan.skipped if plan else ())
                ],
                "traffic": list(st.traffic),
                "traffic_sampled_at": _iso(sampled) if sampled else None,
                "pods_talking": dict(st.pods_talking),
            }

    def publish(self) -> None:
        record = self.record()
        for sink in self.sinks:
            try:
                sink(record)
            except OSError as exc:
                log.warning("binder cannot record its state", extra={"error": str(exc)})
        if self.publisher is None:
            return
        try:
            self.publisher.publish(record)
        except OscError as exc:
            log.warning("binder cannot publish its status",
                        extra={"error": str(exc), "where": self.publisher.where})  # fmt: skip

    def _failed(self, exc: BaseException) -> None:
        cause = error_cause(exc)
        ovs_down = cause == "ovs"
        if ovs_down:
            self.ovs.close()
        with self._lock:
            self.state.ok, self.state.error = False, str(exc)
        self.reporter.failed(cause if isinstance(exc, OscError) else "other", ovs_down)

    # -- ``--once`` and the loop -------------------------------------------------------------
    def run_once(self) -> int:
        """One pass and one traffic sample; 0 when it bound what it could, 1 when the OVS
        database or the API could not be used (the error names it)."""
        try:
            self.pass_once()
            self.sample()
        except EndpointError as exc:
            self._failed(exc)
            log.error("binder --once failed; exiting with code 1",
                      extra={"error": str(exc), "cause": error_cause(exc)})  # fmt: skip
            self.publish()
            raise
        finally:
            self.ovs.close()
        self.publish()
        return 0

    def wake(self) -> None:
        """A VM or virt-launcher pod changed: pass again soon."""
        self._kube_dirty.set()
        self.ovs.wake()

    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: passes on events, a resync, traffic samples, publishes, retries."""
        cfg = self.config
        if cfg.watch:
            self.vms.start(stop, self.wake)
        delay = 0.5
        next_resync = self.clock() + cfg.resync
        next_sample = self.clock()
        due = True
        while not stop.is_set():
            try:
                if self.clock() >= next_resync:
                    self.vms.relist()
                    next_resync = self.clock() + cfg.resync
                    due = True
                if due or self._kube_dirty.is_set() or not self.ovs.connected:
                    self.pass_once()
                    due = False
                if self.clock() >= next_sample:
                    self.sample()
                    self.publish()
                    next_sample = self.clock() + cfg.stats_interval
                delay = 0.5
                left = min(next_resync, next_sample) - self.clock()
                if not stop.is_set():
                    due = self.ovs.wait(max(0.0, min(left, 1.0))) or due
            except EndpointError as exc:
                self._failed(exc)
                log.warning("binder pass failed; retrying",
                            extra={"error": str(exc), "cause": error_cause(exc),
                                   "seconds": round(delay, 2)})  # fmt: skip
                self.publish()
                stop.wait(delay)
                delay = min(delay * 2, cfg.backoff_max)
                due = True
            except Exception as exc:  # a bug of ours: logged with its trace, then retried
                self._failed(exc)
                log.exception("binder pass failed unexpectedly; retrying")
                stop.wait(delay)
                delay = min(delay * 2, cfg.backoff_max)
                due = True
        self.ovs.close()


def _iso(epoch: float) -> str:
    return (
        dt.datetime.fromtimestamp(epoch, dt.UTC)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )


def counters_by_port(stats: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """OVS counters by ``iface-id`` (helper for tests and the benchmark)."""
    return {s.iface_id: dict(s.counters) for s in stats.values() if s.iface_id}
