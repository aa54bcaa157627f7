"""In-memory fakes of the engine's provider protocols (``reconciler.engine.providers``).

They behave like the real adapters wherever the engine relies on it, and no further:

- :class:`FakeKube` answers reads with sorted tuples, and with the *same* tuple while nothing
  changed (like the informer cache); owned objects are reduced to the managed fields by the
  adapter's own converter; a create of an existing object is a 409, a replace of a missing one
  a 404, a delete of a missing one is fine; ``watch`` blocks until ``stop`` and delivers events.
- :class:`FakeOvn` holds owned rows and applies a list of changes all-or-nothing (every change
  is checked before any is made, like one OVSDB transaction) and records the revision.
- :class:`FakeLease` can be taken away; :class:`RecordingReporter` records every event.

Every write is appended to a shared :class:`Journal`, so a test can check the order of writes
across Kubernetes and OVN. Failures are injected per method with ``fail(...)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reconciler.adapters.kube.errors import KubeConflict, KubeNotFound
from reconciler.adapters.kube.objects import owned_object
from reconciler.core.model import ownership as own
from reconciler.core.model.observed import (
    KubeObject,
    NetworkPolicy,
    Node,
    Observed,
    OvnCapabilities,
    OvnRow,
    OvnState,
    Pod,
    PodPort,
    Switch,
)
from reconciler.core.model.plan import Change
from reconciler.engine.providers import (
    InstanceSeconds,
    KubeProvider,
    LeaseProvider,
    OvnProvider,
    Reporter,
    Rollouts,
)
from reconciler.engine.sources import ManifestSource, Snapshot
from reconciler.errors import EndpointError

WatchCallback = Callable[[str, dict[str, Any]], None]


class FakeOvnError(EndpointError):
    """The fake NB refused a transaction (the real adapter raises ``OvnApplyError``)."""

    cause = "ovn"


class SourceDown(EndpointError):
    """The fake manifest source cannot be reached (the real one raises ``GitSourceError``)."""

    cause = "git"


@dataclass
class Journal:
    """Every write, in order: ``("kube", action, kind, "ns/name")`` or
    ``("ovn", "apply", n_changes, revision)``."""

    entries: list[tuple[Any, ...]] = field(default_factory=list)
    after_write: list[Callable[[tuple[Any, ...]], None]] = field(default_factory=list)
    """Called after each write (e.g. to take the Lease away mid-apply)."""

    def add(self, entry: tuple[Any, ...]) -> None:
        self.entries.append(entry)
        for hook in list(self.after_write):
            hook(entry)

    def systems(self) -> list[str]:
        """``kube``/``ovn`` per write, in order."""
        return [entry[0] for entry in self.entries]


class Failures:
    """Exceptions queued per method name, raised by the next calls of that method."""

    def __init__(self) -> None:
        self._queued: dict[str, list[BaseException]] = {}

    def fail(self, method: str, exc: BaseException, times: int = 1) -> None:
        self._queued.setdefault(method, []).extend([exc] * times)

    def check(self, method: str) -> None:
        queued = self._queued.get(method)
        if queued:
            raise queued.pop(0)


class FakeKube:
    """:class:`reconciler.engine.providers.KubeProvider` in memory."""

    def __init__(
        self,
        pods: Iterable[Pod] = (),
        nodes: Iterable[Node] = (),
        network_policies: Iterable[NetworkPolicy] = (),
        journal: Journal | None = None,
    ) -> None:
        self.journal = journal if journal is not None else Journal()
        self.failures = Failures()
        self._lock = threading.Lock()
        self._pods = {(p.namespace, p.name): p for p in pods}
        self._nodes = tuple(sorted(nodes, key=lambda n: n.name))
        self._policies = tuple(network_policies)
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._pods_tuple: tuple[Pod, ...] | None = None
        self._owned_tuples: dict[tuple[str, str], tuple[KubeObject, ...]] = {}
        self._watchers: list[tuple[str, WatchCallback, str | None]] = []
        self.reads = 0
        self.on_restart: list[Callable[[str], None]] = []

    # ---------------------------------------------------------------- reads

    def list_pods(self) -> Sequence[Pod]:
        self.failures.check("list_pods")
        with self._lock:
            self.reads += 1
            if self._pods_tuple is None:
                self._pods_tuple = tuple(self._pods[k] for k in sorted(self._pods))
            return self._pods_tuple

    def list_nodes(self) -> Sequence[Node]:
        return self._nodes

    def network_policies(self) -> Sequence[NetworkPolicy]:
        return self._policies

    def list_owned(self, kind: str, instance: str) -> Sequence[KubeObject]:
        self.failures.check("list_owned")
        with self._lock:
            cached = self._owned_tuples.get((kind, instance))
            if cached is None:
                cached = tuple(
                    owned_object(k, obj)
                    for (k, _, _), obj in sorted(self._objects.items())
                    if k == kind and _owned_by(obj, instance)
                )
                self._owned_tuples[(kind, instance)] = cached
            return cached

    def set_status(self, kind: str, namespace: str, name: str, status: dict[str, Any]) -> None:
        """What a controller reports (e.g. KubeVirt: a VM ``printableStatus`` ``Running``)."""
        with self._lock:
            self._objects[(kind, namespace, name)]["status"] = dict(status)
            self._owned_tuples.clear()

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every stored object of ``kind`` by ``namespace/name`` (for assertions)."""
        return {f"{ns}/{n}": obj for (k, ns, n), obj in self._objects.items() if k == kind}

    # ---------------------------------------------------------------- writes

    def create(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object:
        self.failures.check("create")
        with self._lock:
            if (kind, namespace, name) in self._objects:
                raise KubeConflict(f"fake API: {kind} {namespace}/{name} exists", status=409)
            meta = {**(body.get("metadata") or {}), "namespace": namespace, "name": name}
            self._objects[(kind, namespace, name)] = {**body, "kind": kind, "metadata": meta}
            self._owned_tuples.clear()
        self.journal.add(("kube", "create", kind, f"{namespace}/{name}"))
        self._emit(kind, "ADDED", self._objects[(kind, namespace, name)])
        return self._objects[(kind, namespace, name)]

    def replace_managed(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object:
        self.failures.check("replace_managed")
        with self._lock:
            live = self._objects.get((kind, namespace, name))
            if live is None:
                raise KubeNotFound(f"fake API: {kind} {namespace}/{name} is gone", status=404)
            meta = {**(body.get("metadata") or {}), "namespace": namespace, "name": name}
            # like the real adapter's merge patch: annotations outside osc.io/ are not managed
            kept = {
                k: v
                for k, v in ((live.get("metadata") or {}).get("annotations") or {}).items()
                if not k.startswith(own.PREFIX)
            }
            meta["annotations"] = {**kept, **(meta.get("annotations") or {})}
            self._objects[(kind, namespace, name)] = {**live, **body, "metadata": meta}
            self._owned_tuples.clear()
        self.journal.add(("kube", "update", kind, f"{namespace}/{name}"))
        self._emit(kind, "MODIFIED", self._objects[(kind, namespace, name)])
        return self._objects[(kind, namespace, name)]

    def delete(self, kind: str, namespace: str, name: str) -> object:
        self.failures.check("delete")
        with self._lock:
            gone = self._objects.pop((kind, namespace, name), None)
            self._owned_tuples.clear()
        self.journal.add(("kube", "delete", kind, f"{namespace}/{name}"))
        if gone is not None:
            self._emit(kind, "DELETED", gone)
        return gone

    def annotate(
        self, kind: str, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> object:
        """Merge-patch annotations (``None`` removes one), as the rollout does."""
        self.failures.check("annotate")
        with self._lock:
            live = self._objects.get((kind, namespace, name))
            if live is None:
                raise KubeNotFound(f"fake API: {kind} {namespace}/{name} is gone", status=404)
            meta = dict(live.get("metadata") or {})
            merged = {**(meta.get("annotations") or {}), **annotations}
            meta["annotations"] = {k: v for k, v in merged.items() if v is not None}
            self._objects[(kind, namespace, name)] = {**live, "metadata": meta}
            self._owned_tuples.clear()
        self.journal.add(("kube", "annotate", kind, f"{namespace}/{name}"))
        self._emit(kind, "MODIFIED", self._objects[(kind, namespace, name)])
        return self._objects[(kind, namespace, name)]

    def restart_vm(self, namespace: str, name: str) -> object:
        """KubeVirt's restart: recorded; ``on_restart`` hooks play the guest going down."""
        self.failures.check("restart_vm")
        if ("VirtualMachine", namespace, name) not in self._objects:
            raise KubeNotFound(f"fake API: VirtualMachine {namespace}/{name} is gone", status=404)
        self.journal.add(("kube", "restart", "VirtualMachine", f"{namespace}/{name}"))
        for hook in list(self.on_restart):
            hook(f"{namespace}/{name}")
        return {}

    # ---------------------------------------------------------------- the world changes

    def set_pod(self, pod: Pod) -> None:
        """Add or replace a pod (someone labelled, scheduled or created it)."""
        with self._lock:
            event = "MODIFIED" if (pod.namespace, pod.name) in self._pods else "ADDED"
            self._pods[(pod.namespace, pod.name)] = pod
            self._pods_tuple = None
        self._emit("Pod", event, {"metadata": {"namespace": pod.namespace, "name": pod.name}})

    def label_pod(self, namespace: str, name: str, labels: Mapping[str, str]) -> None:
        self.set_pod(replace(self._pods[(namespace, name)], labels=dict(labels)))

    # ---------------------------------------------------------------- watch

    def watch(
        self,
        kind: str,
        on_event: WatchCallback,
        stop: threading.Event,
        label_selector: str | None = None,
    ) -> None:
        entry = (kind, on_event, label_selector)
        with self._lock:
            self._watchers.append(entry)
        try:
            stop.wait()
        finally:
            with self._lock:
                self._watchers.remove(entry)

    def watching(self, kind: str) -> int:
        with self._lock:
            return sum(1 for k, _, _ in self._watchers if k == kind)

    def _emit(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        with self._lock:
            listeners = [(cb, sel) for k, cb, sel in self._watchers if k == kind]
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for callback, selector in listeners:
            if selector is None or _selects(selector, labels):
                callback(event, obj)


def _owned_by(obj: dict[str, Any], instance: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(
        labels.get(own.MANAGED_BY_LABEL) == own.MANAGED_BY_VALUE
        and labels.get(own.OWNER) == instance
    )


def _selects(selector: str, labels: Mapping[str, str]) -> bool:
    wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
    return all(labels.get(k) == v for k, v in wanted.items())


class FakeOvn:
    """:class:`reconciler.engine.providers.OvnProvider` in memory: the rows we own plus the
    OVN-Kubernetes topology (switches, routers, pod ports), which tests change directly."""

    def __init__(
        self,
        switches: Iterable[Switch] = (),
        routers: Iterable[str] = ("ovn_cluster_router",),
        pod_ports: Iterable[PodPort] = (),
        capabilities: OvnCapabilities | None = None,
        journal: Journal | None = None,
    ) -> None:
        self.journal = journal if journal is not None else Journal()
        self.failures = Failures()
        self.switches = tuple(switches)
        self.routers = tuple(routers)
        self.pod_ports = tuple(pod_ports)
        self.capabilities = capabilities or OvnCapabilities("7.18.0", True)
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self._owned: tuple[OvnRow, ...] | None = None
        self.transactions = 0
        self.reads = 0
        self.closed = False
        self.healthy: set[str] | None = None
        """Functions northd counts healthy (``None``: northd is not playing; no group has an
        active function). :meth:`read` reports each group's first healthy member active."""
        self._health_watchers: list[Callable[[], None]] = []
        self.ports_up: dict[str, bool] = {}
        """northd's ``up`` of our LSPs (``OvnState.ports_up``): empty, no northd judges."""

    def read(self) -> OvnState:
        self.failures.check("read")
        self.reads += 1
        if self._owned is None:
            self._owned = tuple(OvnRow(t, k, f) for (t, k), f in sorted(self.rows.items()))
        active: dict[str, str | None] = {}
        if self.healthy is not None:
            for (table, key), fields in sorted(self.rows.items()):
                if table == "Network_Function_Group":
                    up = [nf for nf in fields.get("network_function") or () if nf in self.healthy]
                    active[key] = up[0] if up else None
        return OvnState(
            switches=self.switches,
            routers=self.routers,
            pod_ports=self.pod_ports,
            owned=self._owned,
            capabilities=self.capabilities,
            nf_active=active,
            ports_up=dict(self.ports_up),
        )

    def set_healthy(self, functions: Iterable[str]) -> None:
        """northd judged these functions healthy (the others not): health watchers are told."""
        self.healthy = set(functions)
        for callback in list(self._health_watchers):
            callback()

    def watch_health(self, callback: Callable[[], None]) -> None:
        """``callback()`` whenever northd's verdict changes (as ``OvnNorthbound`` does)."""
        self._health_watchers.append(callback)

    def apply(self, changes: Sequence[Change], revision: str | None = None) -> None:
        """One transaction: checked whole before anything is written."""
        self.failures.check("apply")
        for change in changes:
            exists = (change.kind, change.key) in self.rows
            if (change.action == "create") == exists:
                what = "exists" if exists else "is missing"
                raise FakeOvnError(f"fake NB: {change.action} {change.kind} {change.key}: {what}")
        for change in changes:
            ident = (change.kind, change.key)
            if change.action == "delete":
                del self.rows[ident]
                continue
            fields = dict(change.after or {})
            if revision and "external_ids" in fields:
                fields["external_ids"] = {**fields["external_ids"], own.REVISION: revision}
            self.rows[ident] = fields
        self._owned = None
        self.transactions += 1
        self.journal.add(("ovn", "apply", len(changes), revision))

    def close(self) -> None:
        self.closed = True

    def drift(self, table: str, key: str, **fields: Any) -> None:
        """Someone else edits one of our rows."""
        self.rows[(table, key)] = {**self.rows[(table, key)], **fields}
        self._owned = None


def world(observed: Observed) -> tuple[FakeKube, FakeOvn]:
    """A :class:`FakeKube` and a :class:`FakeOvn` sharing one journal, holding ``observed``'s
    pods, nodes and OVN topology (e.g. from ``tests.support.builders.cluster``)."""
    journal = Journal()
    kube = FakeKube(observed.pods, observed.nodes, observed.network_policies, journal)
    ovn = FakeOvn(
        observed.switches, observed.routers, observed.pod_ports, observed.capabilities, journal
    )
    return kube, ovn


class FakeLease:
    """:class:`reconciler.engine.providers.LeaseProvider` that a test holds or takes away."""

    identity = "replica-under-test"
    where = "Lease osc-gitops/osc-gitops"

    def __init__(self, held: bool = True) -> None:
        self.on_change: list[Callable[[bool], None]] = []
        self.holding = held
        self.available = True
        """Whether an acquire would succeed (False: another replica holds it)."""
        self.confirms = 0
        self.released = False

    def held(self) -> bool:
        return self.holding

    def confirm(self) -> bool:
        self.confirms += 1
        return self.try_acquire_or_renew()

    def try_acquire_or_renew(self) -> bool:
        self._set(self.available)
        return self.holding

    def take_away(self) -> None:
        """Another replica took over (our renewals fail from now on)."""
        self.available = False
        self._set(False)

    def release(self) -> None:
        self.released = True
        self._set(False)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.try_acquire_or_renew()
            stop.wait(0.01)

    def _set(self, held: bool) -> None:
        if held != self.holding:
            self.holding = held
            for callback in list(self.on_change):
                callback(held)


class RecordingReporter:
    """:class:`reconciler.engine.providers.Reporter` that keeps every event as a tuple."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def of(self, name: str) -> list[tuple[Any, ...]]:
        """The arguments of every ``name`` event, in order."""
        return [e[1:] for e in self.events if e[0] == name]

    def pass_finished(self, result: str, trigger: str, seconds: float) -> None:
        self.events.append(("pass_finished", result, trigger))

    def reconciled(self, revision: str | None) -> None:
        self.events.append(("reconciled", revision))

    def changes_applied(self, changes: Sequence[Change]) -> None:
        self.events.append(("changes_applied", tuple((c.kind, c.action) for c in changes)))

    def drift_detected(self) -> None:
        self.events.append(("drift_detected",))

    def error(self, cause: str) -> None:
        self.events.append(("error", cause))

    def managed_objects(self, counts: Mapping[str, int]) -> None:
        self.events.append(("managed_objects", dict(counts)))

    def source_up(self, up: bool) -> None:
        self.events.append(("source_up", up))

    def leader(self, held: bool) -> None:
        self.events.append(("leader", held))

    def vnf_health(self, health: Mapping[tuple[str, str], bool | None]) -> None:
        self.events.append(("vnf_health", dict(health)))

    def nf_ids_used(self, used: Mapping[str, int]) -> None:
        self.events.append(("nf_ids_used", dict(used)))

    def unbound_ports(self, unbound: Mapping[tuple[str, str], int]) -> None:
        self.events.append(("unbound_ports", dict(unbound)))

    def transitions(
        self, held: InstanceSeconds, rollouts: Rollouts, allowances: InstanceSeconds | None = None
    ) -> None:
        self.events.append(("transitions", sorted(held), [dict(r) for r in rollouts]))

    def worker(self, thread: str, up: bool) -> None:
        self.events.append(("worker", thread, up))


class FakeSource:
    """A remote manifest source (like git): revisions are folders a test registers, ``head``
    is what a fetch returns, ``down`` makes fetches fail."""

    polls = True
    description = "fake://policies@main"

    def __init__(self) -> None:
        self.revisions: dict[str, Path] = {}
        self.head: str | None = None
        self.down: str | None = None
        self.fetches = 0

    def publish(self, revision: str, directory: Path) -> None:
        self.revisions[revision] = directory
        self.head = revision

    def fetch(self) -> Snapshot:
        self.fetches += 1
        if self.down is not None:
            raise SourceDown(self.down)
        assert self.head is not None, "publish a revision first"
        directory = self.revisions[self.head]
        return Snapshot(directory, self.head, directory.parent)

    def cached(self, revision: str) -> Snapshot | None:
        directory = self.revisions.get(revision)
        return Snapshot(directory, revision, directory.parent) if directory else None


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _stand_ins(
    kube: FakeKube, ovn: FakeOvn, lease: FakeLease, reporter: RecordingReporter, src: FakeSource
) -> None:
    """Never called: ``make lint`` type-checks this folder, and mypy checks here that each fake
    still satisfies the protocol it stands in for (a protocol that grows fails here first)."""
    kube_provider: KubeProvider = kube
    ovn_provider: OvnProvider = ovn
    lease_provider: LeaseProvider = lease
    reports: Reporter = reporter
    source: ManifestSource = src
    del kube_provider, ovn_provider, lease_provider, reports, source
