"""Traffic counted per VNF instance, from the OVS statistics of its NICs, and how to tell a
quiet VNF from one that saw nothing while its pods talked.

What the counters mean (OVS counts from the switch's side: ``tx`` = sent by OVS into the VNF,
``rx`` = received by OVS from the VNF), for a bump-in-the-wire VNF on Network Function ports:

- into ``out`` (``tx`` of the ``out`` NIC): what OVN steers into the function's *out* port:
  requests towards a protected pod (a to-lport ACL) and the replies of a protected pod's own
  flows (from-lport). **OVN's health probe never takes this way** (northd sends it out of the
  function's *in* port and expects it back on the *out* port), nor does anything the guest
  sends itself. So this count is pod traffic only, and it is what "traffic crossed the
  instance" is judged on;
- into ``in`` (``tx`` of ``in``): a protected pod's own requests (from-lport) and the replies
  towards it, *plus one health probe per check interval*;
- ``rx`` of either: what left the VNF (what it passed on, and anything the guest sends).

A steered flow that crosses in both directions always shows on ``out``; a one-way flow only
from a protected pod (UDP without replies) shows on ``in`` only, mixed with the probes: the
per-direction counters (metrics) still show it, the verdict does not.

The verdict for one instance over the last minute (:func:`verdict`):

- ``crossed``: pod traffic went through it;
- ``quiet``: nothing crossed, and the pods steered through it on its node sent nothing either;
- ``silent-while-pods-talked``: nothing crossed while pods steered through it talked: what an
  operator must look at first (steering that does not reach the VNF: unbound ports, a VNF
  that drops, the traffic not matching the Binding's ports/protocols, or OVN's bypass);
- ``unknown``: not enough samples yet (less than a minute of history), or no binder counts it.

Pure: samples carry the times they were taken; nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.model.naming import binder_lease, vm_name

__all__ = [
    "COUNTERS",
    "CROSSED",
    "QUIET",
    "SILENT",
    "UNKNOWN",
    "WINDOW_SECONDS",
    "CounterHistory",
    "InstanceTraffic",
    "NodeTraffic",
    "instance_traffic",
    "node_traffic",
    "uncounted",
    "verdict",
    "verdict_text",
]

WINDOW_SECONDS = 60.0
COUNTERS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes")
CROSSED, QUIET, SILENT, UNKNOWN = "crossed", "quiet", "silent-while-pods-talked", "unknown"


@dataclass
class CounterHistory:
    """Samples of cumulative packet counts by key (an interface's iface-id), kept for a
    little more than ``window`` seconds: enough to say how many packets the last window saw."""

    window: float = WINDOW_SECONDS
    samples: deque[tuple[float, dict[str, int]]] = field(default_factory=deque)

    def add(self, at: float, totals: Mapping[str, int]) -> None:
        self.samples.append((at, dict(totals)))
        while len(self.samples) > 2 and self.samples[1][0] <= at - self.window:
            self.samples.popleft()

    def delta(self, key: str) -> int | None:
        """Packets counted for ``key`` over the last window: the newest sample minus the
        newest one at least ``window`` old (an interface that appeared within the window
        counts from zero). With less than a window of history, what the samples so far show
        when it is more than nothing (a lower bound: enough to say "crossed", never "nothing
        crossed"); ``None`` when it cannot say."""
        if not self.samples:
            return None
        now, newest = self.samples[-1]
        if key not in newest:
            return None
        complete, base = False, None
        for when, totals in self.samples:
            if when > now - self.window:
                break
            complete, base = True, totals.get(key)
        if complete:
            return max(0, newest[key] - (base or 0))
        first = next(((w, t[key]) for w, t in self.samples if key in t), None)
        if first is None or first[0] >= now:
            return None
        return max(0, newest[key] - first[1]) or None


@dataclass(frozen=True)
class InstanceTraffic:
    """One VNF instance's counters and what crossed it in the last window."""

    vnf: str
    node: str
    instance: str
    """The VirtualMachine (``<vnf>-<node>``, ``<vnf>-<node>-b`` for a standby)."""
    ports: dict[str, dict[str, int]]
    """``in``/``out`` -> the OVS counters of that NIC (:data:`COUNTERS`)."""
    crossed_last_minute: int | None
    """Pod packets OVN sent into the instance's ``out`` port in the last window (``None``:
    not known yet)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "vnf": self.vnf, "node": self.node, "instance": self.instance,
            "ports": self.ports, "crossed_last_minute": self.crossed_last_minute,
        }  # fmt: skip


def instance_traffic(
    nics: Iterable[tuple[str, str, str, str, str]],
    counters: Mapping[str, Mapping[str, int]],
    history: CounterHistory,
) -> list[InstanceTraffic]:
    """Per instance, from its NICs ``(vnf, node, instance, side, port)`` and the latest OVS
    counters by OVN port; ``history`` holds the ``tx_packets`` samples by port."""
    by_instance: dict[tuple[str, str, str], dict[str, str]] = {}
    for vnf, node, instance, side, port in nics:
        by_instance.setdefault((vnf, node, instance), {})[side] = port
    out = []
    for (vnf, node, instance), sides in sorted(by_instance.items()):
        ports = {
            side: {k: int((counters.get(port) or {}).get(k, 0)) for k in COUNTERS}
            for side, port in sorted(sides.items())
        }
        crossed = history.delta(sides["out"]) if "out" in sides else None
        out.append(InstanceTraffic(vnf, node, instance, ports, crossed))
    return out


def verdict(crossed: int | None, pods_talked: int | None) -> str:
    """:data:`CROSSED`, :data:`QUIET`, :data:`SILENT` or :data:`UNKNOWN` (see the module
    docstring); ``pods_talked``: packets the pods steered through the instance sent and
    received in the same window (``None``: unknown)."""
    if crossed:
        return CROSSED
    if crossed is None or pods_talked is None:
        return UNKNOWN
    return SILENT if pods_talked > 0 else QUIET


def verdict_text(
    kind: str, crossed: int | None, pods_talked: int | None, pods: Sequence[str] = ()
) -> str:
    """One line for people."""
    if kind == CROSSED:
        return f"traffic crossed it in the last minute ({crossed} pod packets into its out port)"
    if kind == QUIET:
        return "no traffic in the last minute, and its steered pods sent none either"
    if kind == SILENT:
        who = f" ({', '.join(pods[:5])}{', …' if len(pods) > 5 else ''})" if pods else ""
        return (
            f"NOTHING crossed it in the last minute while its steered pods{who} sent and "
            f"received {pods_talked} packets: their traffic does not reach the VNF"
        )
    return "traffic unknown (no binder counts it, or less than a minute of samples)"


@dataclass(frozen=True)
class BinderReport:
    """What a node's binder published (its Lease ``osc-gitops-binder-<node>``), as ``explain``
    reads it: the record (``reconciler.engine.binder.Binder.record``) when there is one, and
    whether its heartbeat is fresh."""

    node: str
    record: Mapping[str, Any] | None = None
    fresh: bool = False
    problem: str = ""
    """Why nothing can be said (the Leases could not be read), empty otherwise."""


NO_BINDER = (
    "the CNI did not set iface-id: ovs-cni older than commit 42291151 (v0.39.0, the latest "
    "release, and every release before it) reads the OVN port only from CNI_ARGS, which "
    "Multus and KubeVirt never fill with it, and no binder runs on {node}"
)


def unbound_cause(port: str, node: str, vm: str, binder: BinderReport | None) -> str:
    """Why OVN has not bound ``port`` of VM ``vm`` (``namespace/name``) on ``node``, from what
    the node's binder reports (``None``: its Leases were not read)."""
    if binder is None:
        return (
            "the CNI did not set iface-id (ovs-cni up to v0.39.0 never does); whether a binder "
            f"runs on {node} was not looked up"
        )
    if binder.problem:
        return (
            f"the CNI did not set iface-id (ovs-cni up to v0.39.0 never does); whether a binder "
            f"runs on {node} is unknown: {binder.problem}"
        )
    record = binder.record
    if record is None or not binder.fresh:
        why = NO_BINDER.format(node=node)
        if record is not None:
            why += f" (its Lease {node} stopped being renewed)"
        return why
    if not record.get("ok"):
        return f"the binder on {node} fails: {record.get('error')}"
    namespace, _, name = vm.partition("/")
    for skip in record.get("skipped") or ():
        subject = str(skip.get("subject", ""))
        if (
            subject == f"VirtualMachine {vm}"
            or subject.startswith(f"VirtualMachine {vm} ")
            or subject.startswith(f"pod {namespace}/virt-launcher-{name}-")
        ):
            return f"the binder on {node} skipped it ({skip.get('reason')}): {skip.get('detail')}"
    for bound in record.get("bound") or ():
        if bound.get("port") == port:
            return (
                f"the binder on {node} set iface-id={port} on OVS interface "
                f"{bound.get('interface')}, but OVN has not bound it yet: see ovn-controller "
                f"on {node} (its log, the chassis' registration in the Southbound DB)"
            )
    for waiting in record.get("waiting") or ():
        if waiting.get("port") == port:
            return (
                f"the binder on {node} waits: no OVS interface (or virt-launcher pod) for its "
                f"NIC {waiting.get('nic')} yet: has the VM's virt-launcher pod started and its "
                "CNI run?"
            )
    return (
        f"the binder on {node} does not know the NIC yet (its VM or pod is newer than its last "
        "pass)"
    )


def instance_traffic_line(
    binder: BinderReport | None, instance: str, pods: Sequence[str]
) -> tuple[str, str]:
    """``(verdict, text)`` for one VNF instance (its VM name) from its node's binder record,
    ``pods`` being the LSPs of the pods steered through it there."""
    record = binder.record if binder is not None and binder.fresh else None
    if record is None:
        return UNKNOWN, "traffic unknown (no binder counts it on this node)"
    traffic = next((t for t in record.get("traffic") or () if t.get("instance") == instance), None)
    if traffic is None:
        return UNKNOWN, "traffic unknown (the binder does not count this instance)"
    crossed = traffic.get("crossed_last_minute")
    talking = record.get("pods_talking") or {}
    who = [p for p in pods if talking.get(p)]
    # as node_traffic: the pods' counters are known once the binder sampled them
    sampled = record.get("traffic_sampled_at") is not None
    pods_talked = sum(int(talking[p]) for p in who) if sampled else None
    kind = verdict(crossed, pods_talked)
    return kind, verdict_text(kind, crossed, pods_talked, who)


@dataclass(frozen=True)
class NodeTraffic:
    """One VNF instance's traffic as its node's binder published it, judged without a plan
    (``status``, ``status --all-nodes``): "its pods talked" is read as "pods on its node
    talked", since only the plan knows which pods are steered through it (``explain`` does)."""

    vnf: str
    node: str
    instance: str
    verdict: str
    crossed_last_minute: int | None
    pods_talked: int | None
    """Packets the node's pod interfaces sent and received in the same window (``None``:
    not known yet)."""
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "vnf": self.vnf, "node": self.node, "instance": self.instance,
            "verdict": self.verdict, "crossed_last_minute": self.crossed_last_minute,
            "pods_talked": self.pods_talked, "text": self.text,
        }  # fmt: skip


def node_traffic(record: Mapping[str, Any] | None, node: str = "") -> list[NodeTraffic]:
    """Per VNF instance a binder counts (its published ``record``, ``None``: no binder), the
    verdict over the last minute, those that saw nothing while pods talked first."""
    if not record:
        return []
    talking = record.get("pods_talking") or {}
    sampled = record.get("traffic_sampled_at") is not None
    pods_talked = sum(int(v) for v in talking.values()) if sampled else None
    out = []
    for entry in record.get("traffic") or ():
        where = str(entry.get("node") or record.get("node") or node)
        crossed = entry.get("crossed_last_minute")
        crossed = int(crossed) if isinstance(crossed, int) else None
        kind = verdict(crossed, pods_talked)
        if kind == CROSSED:
            text = verdict_text(kind, crossed, pods_talked)
        elif kind == QUIET:
            text = f"no traffic in the last minute, and no pod on {where} talked either"
        elif kind == SILENT:
            text = (
                f"NOTHING crossed it in the last minute while {len(talking)} pod(s) on {where} "
                f"sent and received {pods_talked} packets: is their traffic steered? "
                "(osc-gitops explain a pod its Binding selects)"
            )
        else:
            text = "traffic not known yet (less than a minute of samples)"
        out.append(NodeTraffic(
            str(entry.get("vnf", "")), where, str(entry.get("instance", "")), kind, crossed,
            pods_talked, text,
        ))  # fmt: skip
    return sorted(out, key=lambda t: (t.verdict != SILENT, t.node, t.instance))


def uncounted(
    instances: Iterable[Mapping[str, Any]], counted: Sequence[NodeTraffic]
) -> list[NodeTraffic]:
    """An ``unknown`` entry for each VNF instance (``{vnf, node}``: a status's
    ``vnf_instances``) whose node's binder counts nothing of that VNF (no fresh binder Lease
    there, or its VM has no bound NIC yet): nothing can be said of its traffic, and an operator
    should know that rather than see nothing."""
    seen = {(t.vnf, t.node) for t in counted}
    out = []
    for inst in instances:
        vnf, node = str(inst.get("vnf", "")), str(inst.get("node", ""))
        if not vnf or not node or (vnf, node) in seen:
            continue
        seen.add((vnf, node))
        out.append(NodeTraffic(
            vnf, node, vm_name(vnf, node), UNKNOWN, None, None,
            f"traffic unknown: no binder on {node} counts it (no fresh Lease "
            f"{binder_lease(node)}, or its NICs are not bound yet)",
        ))  # fmt: skip
    return out
