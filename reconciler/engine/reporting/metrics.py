"""Prometheus metrics and the ``/healthz``, ``/readyz``, ``/metrics`` endpoints of ``run``.

Each :class:`Metrics` has its own ``CollectorRegistry`` (not the global one), so several loops
can live in one process (tests run two replicas side by side) without "duplicated timeseries"
errors. Names follow Prometheus conventions (``_seconds``, ``_total``, base units).

Probes, as Kubernetes uses them:

- ``/healthz`` (liveness): the loop thread is alive and has not been stuck in one reconcile for
  longer than ``stuck_after`` seconds, and no worker thread of it died (``dead_threads``: the
  source poller, a watch, the lease, this server; ``osc_gitops_worker_up``). A standby replica
  is healthy.
- ``/readyz`` (readiness): the first observation succeeded (connections work, manifests loaded).
  A standby replica is ready too (it would serve if it became leader); the body says which.

The server faces the network, so it is bounded: at most :data:`MAX_CONNECTIONS`
connections at once (more get an immediate ``503``), each answering one request and cut after
:data:`IDLE_TIMEOUT` without bytes or :data:`CONNECTION_DEADLINE` in all; what it refuses or
cuts is counted (``osc_gitops_http_refused_total{reason}``) and logged as JSON, a flood as one
line per :data:`REFUSAL_LOG_EVERY` seconds; nothing is ever printed as a traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
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
from reconciler.engine.providers import InstanceSeconds, Rollouts
from reconciler.engine.reporting.logs import LOGGER

PREFIX = "osc_gitops"
log = logging.getLogger(LOGGER)
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
        self._server_metrics()
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

    def _server_metrics(self) -> None:
        """This process's own health: its HTTP server and its worker threads."""
        self.http_refused = self._metric(
            Counter,
            "http_refused_total",
            "Connections to /metrics, /healthz and /readyz refused or cut, by reason "
            "(evicted-idle, too-many-connections, deadline, error).",
            ["reason"],
        )
        self.worker_up = self._metric(
            Gauge,
            "worker_up",
            "1 while a worker thread of the loop runs (source-poller, watch-pods, watch-vms, "
            "lease, metrics-http, notify-<manager>), 0 once it died: /healthz fails then, and "
            "the kubelet restarts the process.",
            ["thread"],
        )

    def set_transitions(
        self, held: InstanceSeconds, rollouts: Rollouts, allowances: InstanceSeconds | None = None
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
        self, held: InstanceSeconds, rollouts: Rollouts, allowances: InstanceSeconds | None = None
    ) -> None:
        self.metrics.set_transitions(held, rollouts, allowances)

    # the security managers' outbox (reconciler.engine.notifications.NotificationReporter)
    def notification_sent(self, manager: str, event: str, result: str) -> None:
        self.metrics.notifications.labels(manager, event, result).inc()

    def notification_backlog(self, manager: str, pending: int, up: bool | None) -> None:
        self.metrics.notifications_pending.labels(manager).set(pending)
        if up is not None:
            self.metrics.manager_up.labels(manager).set(1 if up else 0)

    def worker(self, thread: str, up: bool) -> None:
        self.metrics.worker_up.labels(thread).set(1 if up else 0)


MAX_CONNECTIONS = 32
"""Connections served at once (one thread each). Prometheus scrapes once per interval and the
kubelet probes every few seconds, so a handful are open at a time; 32 leaves room for several
scrapers while bounding threads and file descriptors (a pod has 1,024 by default, which 1,500
idle connections once exhausted: every probe then failed). A connection beyond it closes the
oldest one that has not sent a request yet (a probe sends its request at once, so a flood of
idle connections cannot starve it); when every connection is in a request, it gets an
immediate ``503`` and is closed. Threads never exceed twice this number."""
IDLE_TIMEOUT = 5.0
"""Seconds a connection may wait for its client's next bytes. The kubelet gives up on a probe
after 1 s by default, Prometheus after its ``scrape_timeout`` (10 s): a request that has not
arrived in 5 s is not coming."""
CONNECTION_DEADLINE = 10.0
"""Seconds a connection may live in all (one request and its answer: every response closes
it), however slowly its client trickles bytes (a "slowloris" keeps a connection alive with a
byte every few seconds, which :data:`IDLE_TIMEOUT` alone never ends)."""
REFUSAL_LOG_EVERY = 10.0
"""A flood is logged as one JSON line per this many seconds (with the counts since the last),
not one line per connection."""


class _Refusals:
    """Connections the server refused or cut, counted (``osc_gitops_http_refused_total``)
    and logged as JSON at most once per :data:`REFUSAL_LOG_EVERY` seconds."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._lock = threading.Lock()
        self._since: dict[str, int] = {}
        self._last_log = float("-inf")
        self._peer: str | None = None

    def add(self, reason: str, peer: Any = None, error: str | None = None) -> None:
        self.metrics.http_refused.labels(reason).inc()
        with self._lock:
            self._since[reason] = self._since.get(reason, 0) + 1
            self._peer = _peer(peer) or self._peer
            now = time.monotonic()
            if now - self._last_log < REFUSAL_LOG_EVERY:
                return
            counts, self._since, self._last_log = self._since, {}, now
            peer_text = self._peer
        log.warning(
            "metrics server refused or cut connections",
            extra={"refused": counts, "last_peer": peer_text, "error": error,
                   "max_connections": MAX_CONNECTIONS},
        )  # fmt: skip


def _peer(address: Any) -> str | None:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    disable_nagle_algorithm = True  # or every response waits for the client's delayed ACK
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT  # StreamRequestHandler sets it on the socket

    def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: quiet
        return

    def parse_request(self) -> bool:
        self.server.in_request(self.connection)  # a request line arrived: not idle any more
        return super().parse_request()

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True

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


_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 28\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    b"too many connections, retry\n"
)


@dataclass
class _Connection:
    since: float
    idle: bool = True
    """No request line received yet."""
    closing: bool = False
    """Evicted or past its deadline: shut down, its thread ending."""


class _Server(ThreadingHTTPServer):
    """One thread per connection, at most :data:`MAX_CONNECTIONS` of them, each cut after
    :data:`CONNECTION_DEADLINE`; errors and refusals are JSON log lines, never tracebacks."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64  # accepted at once by the kernel; refused by us beyond the cap
    metrics: Metrics
    health: Callable[[], tuple[bool, dict[str, Any]]]
    ready: Callable[[], tuple[bool, dict[str, Any]]]
    refusals: _Refusals

    def server_activate(self) -> None:
        super().server_activate()
        self._open_lock = threading.Lock()
        self._open: dict[Any, _Connection] = {}

    def in_request(self, sock: Any) -> None:
        with self._open_lock:
            connection = self._open.get(sock)
            if connection is not None:
                connection.idle = False

    def process_request(self, request: Any, client_address: Any) -> None:
        victim: Any = None
        with self._open_lock:
            live = [(c.since, s) for s, c in self._open.items() if not c.closing]
            admit = len(live) < MAX_CONNECTIONS
            if not admit and len(self._open) < 2 * MAX_CONNECTIONS:
                idle = [(since, s) for since, s in live if self._open[s].idle]
                if idle:
                    victim = min(idle, key=lambda pair: pair[0])[1]
                    self._open[victim].closing = True
                    admit = True
            if admit:
                self._open[request] = _Connection(time.monotonic())
        if victim is not None:
            self.refusals.add("evicted-idle", _safe_peer(victim))
            with contextlib.suppress(OSError):
                victim.shutdown(socket.SHUT_RDWR)
        if not admit:
            self.refusals.add("too-many-connections", client_address)
            with contextlib.suppress(OSError):
                request.setblocking(False)  # never wait on a client that does not read
                request.send(_BUSY)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)

    def service_actions(self) -> None:
        """Between accepts (every ``poll_interval``): cut connections past their deadline."""
        now = time.monotonic()
        with self._open_lock:
            late = [
                s
                for s, c in self._open.items()
                if not c.closing and now - c.since > CONNECTION_DEADLINE
            ]
            for sock in late:
                self._open[sock].closing = True
        for sock in late:
            self.refusals.add("deadline", _safe_peer(sock))
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """socketserver prints a traceback to stderr here; we count and log one JSON line."""
        error = sys.exc_info()[1]
        self.refusals.add("error", client_address, f"{type(error).__name__}: {error}")


def _safe_peer(sock: socket.socket) -> Any:
    try:
        return sock.getpeername()
    except OSError:
        return None


class MetricsServer:
    """Serves the three endpoints on ``host:port`` (port 0 = any free port) in a thread."""

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        health: Callable[[], tuple[bool, dict[str, Any]]],
        ready: Callable[[], tuple[bool, dict[str, Any]]],
        supervise: Callable[..., None] | None = None,
    ) -> None:
        """``supervise(name, target)``: how the serving thread runs (the loop's
        ``Loop.supervised``, so that its death is reported like any worker's)."""
        host, _, port = address.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        try:
            self._server = _Server((host, int(port)), _Handler)
        except (OSError, ValueError) as exc:
            raise OSError(f"cannot listen on --metrics-addr {address}: {exc}") from exc
        self._server.metrics = metrics
        self._server.health = health
        self._server.ready = ready
        self._server.refusals = _Refusals(metrics)
        serve = partial(self._server.serve_forever, poll_interval=0.2)
        self._thread = threading.Thread(
            target=partial(supervise, "metrics-http", serve) if supervise else serve,
            daemon=True,
            name="metrics-http",
        )

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
