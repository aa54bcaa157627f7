"""Prometheus metrics and the ``/healthz``, ``/readyz``, ``/metrics`` endpoints of ``run``.

Each :class:`Metrics` has its own ``CollectorRegistry`` (not the global one), so several loops
can live in one process (tests run two replicas side by side) without "duplicated timeseries"
errors. Names follow Prometheus conventions (``_seconds``, ``_total``, base units).

Probes, as Kubernetes uses them:

- ``/healthz`` (liveness): the loop thread is alive and has not been stuck in one reconcile for
  longer than ``stuck_after`` seconds. A standby replica is healthy.
- ``/readyz`` (readiness): the first observation succeeded (connections work, manifests loaded).
  A standby replica is ready too (it would serve if it became leader); the body says which.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, Metric

from reconciler.core.model.plan import Change
from reconciler.core.steering.base import MAX_OVN_ID

PREFIX = "osc_gitops"
_M = TypeVar("_M", Counter, Gauge, Histogram, Info)


class ConstantLabels:
    """A collector view of ``registry`` whose every sample also carries ``labels`` (a label a
    metric already has keeps its own value). Names and help texts are unchanged.

    prometheus_client has no constant labels per registry; a node agent needs one (``node``) on
    every series so that the series of many agents stay apart once scraped, without changing a
    metric's name or the labels dashboards already use."""

    def __init__(self, registry: CollectorRegistry, labels: Mapping[str, str]) -> None:
        self.registry = registry
        self.labels = dict(labels)

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            out = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            out.samples = [
                sample._replace(labels={**self.labels, **sample.labels})
                for sample in metric.samples
            ]
            yield out


class Metrics:
    """Every metric the loop exports. ``const_labels`` are added to every series (a node agent:
    ``{"node": <its node>}``)."""

    def __init__(self, const_labels: Mapping[str, str] | None = None) -> None:
        self.const_labels = dict(const_labels or {})
        self.registry = CollectorRegistry(auto_describe=True)
        self._pass_metrics()
        self._ovn_metrics()
        self._transition_metrics()
        self._notification_metrics()
        self._binder: BinderMetrics | None = None

    def _metric(self, kind: type[_M], name: str, text: str, labels: Sequence[str] = (),
                **extra: Any) -> _M:  # fmt: skip
        """A metric ``osc_gitops_<name>`` in this registry."""
        return kind(f"{PREFIX}_{name}", text, list(labels), registry=self.registry, **extra)

    def _pass_metrics(self) -> None:
        """How reconcile passes go."""
        self.reconcile_duration = self._metric(
            Histogram,
            "reconcile_duration_seconds",
            "Time of one reconcile (observe, plan, apply, verify), by result.",
            ["result"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.reconciles = self._metric(
            Counter,
            "reconciles_total",
            "Reconciles by result (ok, error, refused, skipped) and trigger.",
            ["result", "trigger"],
        )
        self.changes_applied = self._metric(
            Counter,
            "changes_applied_total",
            "Changes written, by object kind (OVN table or Kubernetes kind) and action.",
            ["kind", "action"],
        )
        self.drift = self._metric(
            Counter,
            "drift_detected_total",
            "Reconciles whose plan was not empty although the manifests had not changed "
            "(somebody or something changed the live state).",
        )
        self.errors = self._metric(
            Counter,
            "errors_total",
            "Errors by cause (git, manifests, kubernetes, ovn, lease, not-converged, other).",
            ["cause"],
        )
        self.last_success = self._metric(
            Gauge,
            "last_success_timestamp_seconds",
            "Unix time of the last successful reconcile.",
        )
        self.managed_objects = self._metric(
            Gauge,
            "managed_objects",
            "Objects this instance owns after the last reconcile, by kind.",
            ["kind"],
        )
        self.leader = self._metric(
            Gauge,
            "leader",
            "1 while this replica holds the Lease (or without election).",
        )
        self.source_ok = self._metric(
            Gauge,
            "source_up",
            "1 when the last git fetch succeeded, 0 while the source is unreachable.",
        )
        self.revision = self._metric(
            Info,
            "applied_revision",
            "The commit the live state was last reconciled to.",
        )

    def _ovn_metrics(self) -> None:
        """VNF health, unbound VNF ports and NF ids as OVN reports them."""
        self.vnf_healthy = self._metric(
            Gauge,
            "vnf_instance_healthy",
            "1 while OVN counts the VNF instance healthy (northd made its Network_Function the "
            "active one), 0 while it does not (its bindings' failure policy is in force). "
            "Absent when OVN cannot tell (health check disabled, no binding through it).",
            ["vnf", "node"],
        )
        self.nf_ids_used = self._metric(
            Gauge,
            "nf_ids_used",
            "Network_Function / Network_Function_Group ids in use in the Northbound DB, ours "
            "and others' (OVN allows 255 per table and NB).",
            ["table"],
        )
        self.nf_ids_limit = self._metric(
            Gauge,
            "nf_ids_limit",
            "The most Network_Function / Network_Function_Group ids one Northbound DB holds.",
            ["table"],
        )
        self.unbound_ports = self._metric(
            Gauge,
            "unbound_vnf_ports",
            "Data ports of a running VNF VM that OVN has not bound (the LSP's up is not true): "
            "the CNI set no iface-id on its OVS interface (ovs-cni up to v0.39.0 needs the node "
            "binder) or ovn-controller has not claimed it. The VNF never passes its health "
            "check, so the steering onto it stays held. Absent when none.",
            ["vnf", "node"],
        )

    def _transition_metrics(self) -> None:
        """Held steering and rolling updates."""
        self.held_instances = self._metric(
            Gauge,
            "held_instances",
            "VNF instances that steering waits for: a binding's traffic is not switched onto "
            "them until OVN reports them healthy (health-gated steering).",
        )
        self.held_seconds = self._metric(
            Gauge,
            "held_seconds",
            "How long steering has waited for this VNF instance to become healthy (since this "
            "process first saw it held). Absent when nothing waits for it.",
            ["vnf", "node"],
        )
        self.held_allowance = self._metric(
            Gauge,
            "held_allowance_seconds",
            "The boot allowance of a VNF instance steering waits for: its VnfDeployment's "
            "bootSeconds plus the health check's detection time. Held longer, its pods stay "
            "unprotected for longer than a boot (OscGitopsVnfInstanceNotReady).",
            ["vnf", "node"],
        )
        self.rollout_nodes_updated = self._metric(
            Gauge,
            "rollout_nodes_updated",
            "Nodes whose VNF instances run the VnfDeployment's current template, while a rolling "
            "update is under way (absent otherwise).",
            ["vnf"],
        )
        self.rollout_nodes_total = self._metric(
            Gauge,
            "rollout_nodes_total",
            "Nodes with an instance of the VnfDeployment, while a rolling update is under way.",
            ["vnf"],
        )
        self.rollout_halted = self._metric(
            Gauge,
            "rollout_halted",
            "1 while the VnfDeployment's rolling update is halted (an upgraded instance did not "
            "become healthy within progressDeadlineSeconds), 0 while it proceeds.",
            ["vnf"],
        )

    def _notification_metrics(self) -> None:
        """The security managers' outbox (``reconciler.engine.notifications``)."""
        self.notifications = self._metric(
            Counter,
            "security_manager_notifications_total",
            "Notifications POSTed to a VnfDeployment's security manager, by manager (its URL "
            "without credentials or query), event (deployed, removed, members) and result "
            "(delivered; failed: retried with backoff; rejected: a 4xx, dropped).",
            ["manager", "event", "result"],
        )
        self.notifications_pending = self._metric(
            Gauge,
            "security_manager_pending",
            "Notifications waiting for delivery to the security manager (events queued, member "
            "lists it does not hold yet).",
            ["manager"],
        )
        self.manager_up = self._metric(
            Gauge,
            "security_manager_up",
            "1 when the last notification to the security manager was delivered (or refused "
            "by it), 0 while deliveries fail and are retried. Absent until the first attempt.",
            ["manager"],
        )

    def set_transitions(
        self,
        held: Mapping[tuple[str, str], float],
        rollouts: Sequence[Mapping[str, Any]],
        allowances: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        """Replace the held-steering and rollout gauges (instances and VNFs no longer waiting
        or rolling drop out)."""
        self.held_instances.set(len(held))
        allowed = {k: v for k, v in (allowances or {}).items() if k in held}
        for gauge, present in ((self.held_seconds, set(held)), (self.held_allowance, set(allowed))):
            for labels in list(gauge._metrics):
                if labels not in present:
                    gauge.remove(*labels)
        for (vnf, node), seconds in held.items():
            self.held_seconds.labels(vnf, node).set(round(seconds, 3))
        for (vnf, node), seconds in allowed.items():
            self.held_allowance.labels(vnf, node).set(round(seconds, 3))
        current = {str(r["vnf"]): r for r in rollouts}
        for gauge in (self.rollout_nodes_updated, self.rollout_nodes_total, self.rollout_halted):
            for labels in list(gauge._metrics):
                if labels[0] not in current:
                    gauge.remove(*labels)
        for vnf, rollout in current.items():
            self.rollout_nodes_updated.labels(vnf).set(int(rollout.get("nodes_updated", 0)))
            self.rollout_nodes_total.labels(vnf).set(int(rollout.get("nodes_total", 0)))
            self.rollout_halted.labels(vnf).set(1 if rollout.get("halted") else 0)

    def set_unbound(self, unbound: Mapping[tuple[str, str], int]) -> None:
        """Replace the unbound-ports gauge (instances whose ports are bound drop out)."""
        for labels in list(self.unbound_ports._metrics):
            if labels not in unbound:
                self.unbound_ports.remove(*labels)
        for (vnf, node), count in unbound.items():
            self.unbound_ports.labels(vnf, node).set(count)

    def binder(self) -> BinderMetrics:
        """The node binder's metrics, in this registry (made on first use)."""
        if self._binder is None:
            self._binder = BinderMetrics(self.registry)
        return self._binder

    def set_managed(self, counts: Mapping[str, int]) -> None:
        """Replace the managed-objects gauge (kinds that dropped to zero are shown as 0)."""
        for (kind,), _ in list(self.managed_objects._metrics.items()):
            if kind not in counts:
                self.managed_objects.labels(kind).set(0)
        for kind, count in counts.items():
            self.managed_objects.labels(kind).set(count)

    def set_vnf_health(self, health: Mapping[tuple[str, str], bool | None]) -> None:
        """Replace the health gauge: instances OVN cannot tell about, or that are gone, drop
        out (an alert on ``== 0`` must not fire for an instance that no longer exists)."""
        known = {where: ok for where, ok in health.items() if ok is not None}
        for labels in list(self.vnf_healthy._metrics):
            if labels not in known:
                self.vnf_healthy.remove(*labels)
        for (vnf, node), ok in known.items():
            self.vnf_healthy.labels(vnf, node).set(1 if ok else 0)

    def set_nf_ids(self, used: Mapping[str, int]) -> None:
        for table, count in used.items():
            self.nf_ids_used.labels(table).set(count)
            self.nf_ids_limit.labels(table).set(MAX_OVN_ID)

    def exposition(self) -> bytes:
        if self.const_labels:
            return generate_latest(ConstantLabels(self.registry, self.const_labels))
        return generate_latest(self.registry)


class VnfTrafficCollector:
    """``osc_gitops_vnf_port_packets_total`` and ``_bytes_total``: the OVS counters of every
    VNF NIC the binder knows, as ovs-vswitchd last wrote them (counters: they only grow, and
    start again from 0 when the VM's interface is re-created, which ``rate()`` handles)."""

    def __init__(self) -> None:
        self.samples: list[tuple[tuple[str, str, str, str, str], int, int]] = []
        """((vnf, node, instance, port, direction), packets, bytes)."""

    def collect(self) -> Iterator[Metric]:
        labels = ["vnf", "node", "instance", "port", "direction"]
        packets = CounterMetricFamily(
            f"{PREFIX}_vnf_port_packets",
            "Packets through a VNF instance's data NIC, as OVS counts them: direction tx = OVS "
            "sent them into the VNF, rx = the VNF sent them (port in/out: its data-in/-out).",
            labels=labels,
        )
        octets = CounterMetricFamily(
            f"{PREFIX}_vnf_port_bytes",
            "Bytes through a VNF instance's data NIC (see osc_gitops_vnf_port_packets_total).",
            labels=labels,
        )
        for values, npackets, nbytes in self.samples:
            packets.add_metric(list(values), npackets)
            octets.add_metric(list(values), nbytes)
        yield packets
        yield octets


class BinderMetrics:
    """The node binder's metrics (``osc-gitops bind``, or ``run --node --ovs-db``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.up = Gauge(
            f"{PREFIX}_binder_ovs_db_up",
            "1 while the binder is connected to the node's Open_vSwitch database.",
            registry=r,
        )
        self.bound = Gauge(
            f"{PREFIX}_binder_bound_nics",
            "VNF NICs of this node whose OVS interface carries their OVN port as iface-id "
            "(set by the binder, or already right: a newer ovs-cni).",
            registry=r,
        )
        self.waiting = Gauge(
            f"{PREFIX}_binder_waiting_nics",
            "VNF NICs of this node's VMs whose virt-launcher pod or OVS interface is not there "
            "(yet).",
            registry=r,
        )
        self.skipped = Gauge(
            f"{PREFIX}_binder_skipped_nics",
            "VNF NICs (or pods) the binder leaves alone after its last pass, by reason "
            "(network-status-missing, network-status-malformed, mac-mismatch, "
            "port-claimed-twice, pod-uid-missing, vm-unreadable, launcher-pods-ambiguous).",
            ["reason"],
            registry=r,
        )
        self.skips = Counter(
            f"{PREFIX}_binder_skips_total",
            "Times a NIC or pod started being skipped, by reason (one count per occurrence, "
            "not per pass).",
            ["reason"],
            registry=r,
        )
        self.writes = Counter(
            f"{PREFIX}_binder_writes_total",
            "iface-id values the binder set (action=set) or took away (action=remove).",
            ["action"],
            registry=r,
        )
        self.errors = Counter(
            f"{PREFIX}_binder_errors_total",
            "Failed binder passes, by cause (ovs, kubernetes, other).",
            ["cause"],
            registry=r,
        )
        self.last_pass = Gauge(
            f"{PREFIX}_binder_last_pass_timestamp_seconds",
            "Unix time of the binder's last successful pass.",
            registry=r,
        )
        self.traffic_collector = VnfTrafficCollector()
        r.register(self.traffic_collector)
        self._skipping: set[tuple[str, str]] = set()

    def passed(self, bound: int, waiting: int, skipped: list[tuple[str, str]],
               writes: list[str | None]) -> None:  # fmt: skip
        """One pass: counts, the skips (reason, subject) now, the writes (value or None)."""
        self.up.set(1)
        self.bound.set(bound)
        self.waiting.set(waiting)
        now = set(skipped)
        for reason, _subject in now - self._skipping:
            self.skips.labels(reason).inc()
        self._skipping = now
        reasons: dict[str, int] = {}
        for reason, _subject in skipped:
            reasons[reason] = reasons.get(reason, 0) + 1
        for (reason,) in list(self.skipped._metrics):
            if reason not in reasons:
                self.skipped.labels(reason).set(0)
        for reason, count in reasons.items():
            self.skipped.labels(reason).set(count)
        for value in writes:
            self.writes.labels("set" if value is not None else "remove").inc()
        self.last_pass.set(time.time())

    def failed(self, cause: str, ovs_down: bool) -> None:
        self.errors.labels(cause).inc()
        if ovs_down:
            self.up.set(0)

    def traffic(self, samples: list[tuple[tuple[str, str, str, str, str], int, int]]) -> None:
        self.traffic_collector.samples = list(samples)


class PrometheusReporter:
    """The loop's :class:`reconciler.engine.providers.Reporter` that feeds :class:`Metrics`."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics if metrics is not None else Metrics()

    def pass_finished(self, result: str, trigger: str, seconds: float) -> None:
        self.metrics.reconcile_duration.labels(result).observe(seconds)
        self.metrics.reconciles.labels(result, trigger).inc()

    def reconciled(self, revision: str | None) -> None:
        self.metrics.last_success.set(time.time())
        if revision:
            self.metrics.revision.info({"revision": revision})

    def changes_applied(self, changes: Sequence[Change]) -> None:
        for change in changes:
            self.metrics.changes_applied.labels(change.kind, change.action).inc()

    def drift_detected(self) -> None:
        self.metrics.drift.inc()

    def error(self, cause: str) -> None:
        self.metrics.errors.labels(cause).inc()

    def managed_objects(self, counts: Mapping[str, int]) -> None:
        self.metrics.set_managed(counts)

    def source_up(self, up: bool) -> None:
        self.metrics.source_ok.set(1 if up else 0)

    def leader(self, held: bool) -> None:
        self.metrics.leader.set(1 if held else 0)

    def vnf_health(self, health: Mapping[tuple[str, str], bool | None]) -> None:
        self.metrics.set_vnf_health(health)

    def nf_ids_used(self, used: Mapping[str, int]) -> None:
        self.metrics.set_nf_ids(used)

    def unbound_ports(self, unbound: Mapping[tuple[str, str], int]) -> None:
        self.metrics.set_unbound(unbound)

    def transitions(
        self,
        held: Mapping[tuple[str, str], float],
        rollouts: Sequence[Mapping[str, Any]],
        allowances: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        self.metrics.set_transitions(held, rollouts, allowances)

    # the security managers' outbox (reconciler.engine.notifications.NotificationReporter)
    def notification_sent(self, manager: str, event: str, result: str) -> None:
        self.metrics.notifications.labels(manager, event, result).inc()

    def notification_backlog(self, manager: str, pending: int, up: bool | None) -> None:
        self.metrics.notifications_pending.labels(manager).set(pending)
        if up is not None:
            self.metrics.manager_up.labels(manager).set(1 if up else 0)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    disable_nagle_algorithm = True  # or every response waits for the client's delayed ACK
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: quiet
        return

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.server.metrics.exposition(), CONTENT_TYPE_LATEST)
            return
        probe = {"/healthz": self.server.health, "/readyz": self.server.ready}.get(path)
        if probe is None:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")
            return
        ok, detail = probe()
        body = json.dumps({"ok": ok, **detail}).encode() + b"\n"
        self._send(200 if ok else 503, body, "application/json")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    metrics: Metrics
    health: Callable[[], tuple[bool, dict[str, Any]]]
    ready: Callable[[], tuple[bool, dict[str, Any]]]


class MetricsServer:
    """Serves the three endpoints on ``host:port`` (port 0 = any free port) in a thread."""

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        health: Callable[[], tuple[bool, dict[str, Any]]],
        ready: Callable[[], tuple[bool, dict[str, Any]]],
    ) -> None:
        host, _, port = address.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        try:
            self._server = _Server((host, int(port)), _Handler)
        except (OSError, ValueError) as exc:
            raise OSError(f"cannot listen on --metrics-addr {address}: {exc}") from exc
        self._server.metrics = metrics
        self._server.health = health
        self._server.ready = ready
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True,
            name="metrics-http",
        )  # fmt: skip

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
