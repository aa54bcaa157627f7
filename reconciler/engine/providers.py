"""The seams between the engine and the live world, as typed Protocols.

In resolvelib's provider/reporter style, the engine's algorithms (the pipeline, the loop) are
written against these and never import an adapter: the CLI (the composition root) hands them
``KubeCluster``/``KubeCache``, ``OvnNorthbound``/``OvnSnapshot`` and ``LeaseLock``, which satisfy
them structurally, and tests hand them the in-memory fakes of ``tests/support/fakes.py``.
The Protocols declare exactly what the engine relies on, nothing more: anything else an adapter
offers is the adapter's business.

A :class:`Reporter` receives every event the loop reports (pass results, changes applied, error
causes, drift, source and leadership changes, managed-object counts, VNF instance health and
the NF id budget): Prometheus is one
implementation (``reconciler.engine.reporting.metrics``), :class:`NoopReporter` another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from reconciler.core.compiling.nic_binding import Write
from reconciler.core.compiling.notices import MemberKey, MemberNotice
from reconciler.core.model.observed import (
    KubeObject,
    LauncherPod,
    NetworkPolicy,
    Node,
    OvnState,
    OvsInterface,
    Pod,
)
from reconciler.core.model.plan import Change

WatchCallback = Callable[[str, dict[str, Any]], None]
"""``on_event(type, object)``: ``type`` is ADDED, MODIFIED, DELETED, or RELIST (then the object
is empty: the watch lost its place and listed again)."""

Notifier = Callable[[str, dict[str, Any]], None]
"""``notify(url, payload)``: POST a JSON event to a security manager; raises on failure."""

InstanceSeconds = Mapping[tuple[str, str], float]
"""Seconds by VNF instance ``(vnf, node)`` (:meth:`Reporter.transitions`: how long steering has
waited for it, or its boot allowance)."""

Rollouts = Sequence[Mapping[str, Any]]
"""The rolling updates under way, one JSON object each (the plan's ``rollouts``)."""


class NotificationSink(Protocol):
    """Where a pass hands the security managers' notifications (the outbox,
    ``reconciler.engine.notifications``): both calls only record and return at once, whatever
    the managers do."""

    def send(self, url: str, payload: dict[str, Any]) -> None:
        """Queue a ``deployed``/``removed`` event for the manager at ``url``."""
        ...

    def members(self, notices: Mapping[MemberKey, MemberNotice]) -> None:
        """What every manager should hold now (``reconciler.core.compiling.notices``)."""
        ...


class KubeReader(Protocol):
    """What the engine reads from Kubernetes. Every read returns a sequence sorted by
    (namespace, name); a cache may return the very same tuple while nothing changed (the
    incremental planner relies on that identity to skip work, never for correctness)."""

    def list_pods(self) -> Sequence[Pod]: ...
    def list_nodes(self) -> Sequence[Node]: ...
    def list_owned(self, kind: str, instance: str) -> Sequence[KubeObject]:
        """Objects of ``kind`` labelled as owned by ``instance``."""
        ...

    def network_policies(self) -> Sequence[NetworkPolicy]: ...


@runtime_checkable
class NodeNetworkReader(Protocol):
    """What ``--kubernetes-only`` reads instead of the NB's node switches."""

    def list_node_subnets(self) -> Sequence[tuple[Node, str | None]]:
        """Every node, sorted by name, with its default-network pod subnet as OVN-Kubernetes
        annotates it (``k8s.ovn.org/node-subnets``), ``None`` when it has none yet."""
        ...


class KubeWriter(Protocol):
    """What the engine writes to Kubernetes (NetworkAttachmentDefinitions, VirtualMachines).
    ``namespace``/``name`` come from the plan's ``namespace/name`` keys. Errors are
    ``reconciler.errors`` classes (``EndpointError`` subclasses); the answer is not used."""

    def create(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object: ...
    def replace_managed(
        self, kind: str, namespace: str, name: str, body: dict[str, Any]
    ) -> object: ...
    def delete(self, kind: str, namespace: str, name: str) -> object:
        """Delete; an object already gone is not an error."""
        ...


class KubeWatcher(Protocol):
    def watch(
        self,
        kind: str,
        on_event: WatchCallback,
        stop: threading.Event,
        label_selector: str | None = None,
    ) -> None:
        """Call ``on_event`` for every change of ``kind`` (matching ``label_selector``) until
        ``stop`` is set; blocks, so the loop runs it in a thread. An exception raised by
        ``on_event`` ends the watch and propagates."""
        ...


class KubeProvider(KubeReader, KubeWriter, KubeWatcher, Protocol):
    """Kubernetes as the loop uses it: reads, writes and watches."""


class OvnReader(Protocol):
    def read(self) -> OvnState:
        """One consistent snapshot of the Northbound (waits for the initial sync)."""
        ...


class OvnWriter(Protocol):
    def apply(self, changes: Sequence[Change], revision: str | None = None) -> None:
        """Every change in ONE transaction: all of them are committed or none is (the
        pipeline's safe order depends on it). ``revision`` is recorded on written rows."""
        ...


class OvnProvider(OvnReader, OvnWriter, Protocol):
    """The OVN Northbound as the engine uses it."""

    def close(self) -> None: ...


class NodeVmProvider(Protocol):
    """What the node binder reads from Kubernetes: one node's VNF VMs of ours and its
    virt-launcher pods (``reconciler.adapters.kube.node_vms.NodeVms``)."""

    def read(self) -> tuple[Sequence[KubeObject], Sequence[LauncherPod]]: ...
    def relist(self) -> None:
        """Refresh from the API (the periodic resync)."""
        ...

    def start(self, stop: threading.Event, on_change: Callable[[], None]) -> None:
        """Follow both in watches until ``stop``, calling ``on_change()`` after each event."""
        ...


class InterfaceCounters(Protocol):
    """One OVS Interface's counters (``Interface.statistics``)."""

    @property
    def iface_id(self) -> str | None: ...
    @property
    def counters(self) -> dict[str, int]: ...


class OvsProvider(Protocol):
    """A node's Open_vSwitch database as the binder uses it
    (``reconciler.adapters.ovn.vswitch.OvsDb``). Errors are ``EndpointError``s naming it."""

    remote: str

    @property
    def connected(self) -> bool: ...
    def connect(self) -> None: ...
    def close(self) -> None: ...
    def interfaces(self) -> Sequence[OvsInterface]:
        """Every Interface of a port ovs-cni made (its Port's ``external_ids`` with it)."""
        ...

    def wait(self, seconds: float) -> bool:
        """Follow the database for up to ``seconds`` (or until :meth:`wake`); True when
        something changed."""
        ...

    def wake(self) -> None: ...
    def write(self, writes: Sequence[Write]) -> None:
        """Set or remove ``iface-id`` only, in one transaction."""
        ...

    def statistics(self) -> Mapping[str, InterfaceCounters]:
        """Counters of every Interface with an ``iface-id``, by Interface name."""
        ...


class LeaseProvider(Protocol):
    """Leader election as the loop uses it (``reconciler.adapters.kube.lease.LeaseLock``)."""

    on_change: list[Callable[[bool], None]]
    """Called with the new state whenever leadership is gained or lost."""

    @property
    def identity(self) -> str:
        """This replica's name in the Lease (logged with every apply)."""
        ...

    @property
    def where(self) -> str:
        """``Lease <namespace>/<name>``, for messages."""
        ...

    def held(self) -> bool:
        """True while our last renewal is recent enough to write (cheap, no I/O)."""
        ...

    def confirm(self) -> bool:
        """Renew on the server now (before an apply); any failure means not held."""
        ...

    def try_acquire_or_renew(self) -> bool: ...
    def release(self) -> None:
        """Give the Lease up so another replica takes over at once (clean shutdown)."""
        ...

    def run(self, stop: threading.Event) -> None:
        """Acquire/renew periodically until ``stop`` (blocks: run it in a thread)."""
        ...


class StatusPublisher(Protocol):
    """Where a node agent (or the central owner) publishes its state after each pass, for
    ``osc-gitops status --all-nodes`` (``reconciler.adapters.kube.status_lease``)."""

    @property
    def where(self) -> str:
        """``Lease <namespace>/<name>``, for messages."""
        ...

    def publish(self, status: Mapping[str, Any], observed: str | None = None) -> None:
        """Replace the published state with ``status`` (JSON-ready) and renew the heartbeat;
        ``observed``: a node agent's encoded view of its zone
        (``reconciler.core.planning.zoned.encode_slice``), left as it was when ``None``."""
        ...


class Reporter(Protocol):
    """Every event the loop reports, for metrics (or anything else that counts)."""

    def pass_finished(self, result: str, trigger: str, seconds: float) -> None:
        """One reconcile ended with ``result`` (applied, unchanged, error, refused, ...)."""
        ...

    def reconciled(self, revision: str | None) -> None:
        """The live state matches ``revision`` (a pass ended applied or unchanged)."""
        ...

    def changes_applied(self, changes: Sequence[Change]) -> None: ...
    def drift_detected(self) -> None:
        """A plan was not empty although the manifests had not changed since the last
        successful pass: something else changed the live state."""
        ...

    def error(self, cause: str) -> None:
        """An error with the label ``reconciler.errors.error_cause`` gives it."""
        ...

    def managed_objects(self, counts: Mapping[str, int]) -> None:
        """What this instance owns after a pass, by kind (OVN table or Kubernetes kind)."""
        ...

    def source_up(self, up: bool) -> None: ...
    def leader(self, held: bool) -> None: ...
    def vnf_health(self, health: Mapping[tuple[str, str], bool | None]) -> None:
        """Every VNF instance's health as OVN reported it at the end of a pass, by
        ``(vnf, node)``: True healthy, False not, None when OVN cannot tell (no health check,
        no binding steers through it)."""
        ...

    def nf_ids_used(self, used: Mapping[str, int]) -> None:
        """Network_Function / Network_Function_Group ids in use in the NB at the end of a pass
        (ours and everyone else's; at most 255 each). Empty when the NB has no such tables."""
        ...

    def unbound_ports(self, unbound: Mapping[tuple[str, str], int]) -> None:
        """Data ports of running VNF VMs that OVN has not bound, counted by ``(vnf, node)``
        (``reconciler.core.steering.port_binding.unbound_ports``); empty when none."""
        ...

    def transitions(
        self, held: InstanceSeconds, rollouts: Rollouts, allowances: InstanceSeconds | None = None
    ) -> None:
        """After a pass: every VNF instance steering waits for, by ``(vnf, node)``, with the
        seconds it has waited (``reconciler.core.steering.network_function.gating``), the
        rolling updates under way (the plan's ``rollouts``,
        ``reconciler.core.transitions.rollout``), and each waited-for instance's boot allowance
        (seconds; ``None``: not known)."""
        ...

    def worker(self, thread: str, up: bool) -> None:
        """A worker thread of the loop (``source-poller``, ``watch-pods``, ``lease``, the
        metrics server, ...) started (``True``) or died (``False``)."""
        ...


class NoopReporter:
    """A :class:`Reporter` that ignores everything (no metrics wanted)."""

    def pass_finished(self, result: str, trigger: str, seconds: float) -> None:
        pass

    def reconciled(self, revision: str | None) -> None:
        pass

    def changes_applied(self, changes: Sequence[Change]) -> None:
        pass

    def drift_detected(self) -> None:
        pass

    def error(self, cause: str) -> None:
        pass

    def managed_objects(self, counts: Mapping[str, int]) -> None:
        pass

    def source_up(self, up: bool) -> None:
        pass

    def leader(self, held: bool) -> None:
        pass

    def vnf_health(self, health: Mapping[tuple[str, str], bool | None]) -> None:
        pass

    def nf_ids_used(self, used: Mapping[str, int]) -> None:
        pass

    def unbound_ports(self, unbound: Mapping[tuple[str, str], int]) -> None:
        pass

    def transitions(
        self, held: InstanceSeconds, rollouts: Rollouts, allowances: InstanceSeconds | None = None
    ) -> None:
        pass

    def worker(self, thread: str, up: bool) -> None:
        pass
