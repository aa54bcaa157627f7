"""Status across nodes: what each node agent and the central owner publish, and how
``osc-gitops status --all-nodes`` judges it.

**The published record** (format version 1, JSON in the Lease annotation ``osc.io/agent-status``,
``reconciler.adapters.kube.status_lease``)::

    {"format_version": 1, "role": "agent" | "central", "node": "node-1" | null,
     "instance": "osc-gitops", "result": "applied" | "unchanged" | "error" | ...,
     "message": "", "revision": "<commit the live state matches>", "revision_applied_at": "...",
     "attempted": "<newest commit seen>", "updated_at": "2026-11-20T10:00:00Z",
     "changes": {"create": 0, "update": 0, "delete": 0},
     "rows": {"ACL": 4, "Port_Group": 2, ...}, "vnf_instances": [{"vnf", "node", "health",
     "detail"}], "held": [...], "rollouts": [...],
     "unbound": [{"vnf", "node", "vm", "port", "side", "cause"}]}

``rows`` counts what the publisher owns (an agent: its node's OVN rows; the central owner: its
VirtualMachines and NADs). Fields are added, never renamed, within a format version.

**The judgement** (:func:`judge`): one line per node that runs OVN (a Node with a pod subnet),
in one of these states, and the command exits 1 unless every node is ``ok`` and no node
published an unbound VNF port (``unbound``: a running VNF VM's data port OVN has not bound,
listed before the table, as ``status`` lists and exits 1 for its own):

- ``ok``: its last pass applied or found nothing to change, at the central revision;
- ``failed``: its last pass did not succeed (the message says why, e.g. its NB is down);
- ``lagging``: it succeeded at another revision than the central owner's;
- ``stale``: its heartbeat is older than the duration it announced (the agent stopped);
- ``missing``: no status published at all (no agent ran on that node yet).

The central owner's revision is the one it published (``osc-gitops-central``); without it
(no central owner yet, or a central-NB cluster) agents are compared with each other: every
revision but the most common one lags.

**Traffic per VNF instance.** Where a node's binder publishes (its Lease
``osc-gitops-binder-<node>``, fresh), its line carries, per VNF instance it counts, whether pod
traffic crossed it in the last minute (``reconciler.core.views.traffic.node_traffic``); the text
lists the instances that saw nothing while pods on their node talked before the table. It does
not change the exit code (a quiet VNF is no failure; ``explain`` tells which pods it steers).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from reconciler.core.model.target import OVN_TABLES
from reconciler.core.views.traffic import SILENT, NodeTraffic, node_traffic, uncounted
from reconciler.engine.reporting.status import Status, now_iso

__all__ = [
    "FORMAT_VERSION",
    "OK_RESULTS",
    "Heartbeat",
    "NodeLine",
    "Verdict",
    "judge",
    "render_text",
    "status_record",
]

FORMAT_VERSION = 1
OK_RESULTS = frozenset({"applied", "unchanged"})
State = Literal["ok", "failed", "lagging", "stale", "missing"]
Role = Literal["agent", "central"]


def status_record(
    status: Status,
    *,
    role: Role,
    node: str | None,
    rows: Mapping[str, int],
) -> dict[str, Any]:
    """The record a publisher writes after a pass (see the module docstring)."""
    owned = {
        kind: count
        for kind, count in sorted(rows.items())
        if (kind in OVN_TABLES) == (role == "agent")
    }
    return {
        "format_version": FORMAT_VERSION,
        "role": role,
        "node": node,
        "instance": status.instance,
        "result": status.result,
        "message": status.message,
        "revision": status.revision,
        "revision_applied_at": status.revision_applied_at,
        "attempted": status.attempted,
        "updated_at": now_iso(),
        "changes": dict(status.changes),
        "rows": owned,
        "vnf_instances": list(status.vnf_instances),
        # steering held until a VNF instance is healthy (a node agent's), rollouts (central)
        "held": [{k: h.get(k) for k in ("binding", "node", "reason")} for h in status.held],
        "rollouts": list(status.rollouts),
        # data ports of running VNF VMs OVN has not bound (an agent's: its zone's NB)
        "unbound": list(status.unbound),
    }


@dataclass(frozen=True)
class Heartbeat:
    """A published record as read back, with its heartbeat (the Lease's renew time)."""

    record: Mapping[str, Any] | None
    renewed_at: dt.datetime | None = None
    duration: float | None = None
    problem: str = ""
    """Why ``record`` is ``None`` although something was published."""


@dataclass(frozen=True)
class NodeLine:
    """One node's line of ``status --all-nodes``."""

    node: str
    state: State
    detail: str
    record: Mapping[str, Any] | None = None
    age: float | None = None
    """Seconds since the last heartbeat."""
    traffic: tuple[NodeTraffic, ...] = ()
    """Per VNF instance its binder counts: whether pod traffic crossed it in the last minute
    (empty: no fresh binder Lease)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "state": self.state,
            "detail": self.detail,
            "heartbeat_age_seconds": None if self.age is None else round(self.age, 1),
            "status": dict(self.record) if self.record is not None else None,
            "traffic": [t.to_json() for t in self.traffic],
        }


@dataclass(frozen=True)
class Verdict:
    """``status --all-nodes``: the central owner's record, one line per node, and whether all
    is well (exit 0) or not (exit 1)."""

    central: Mapping[str, Any] | None
    reference: str | None
    """The revision every node should be at (see the module docstring)."""
    lines: list[NodeLine] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def unbound(self) -> list[Mapping[str, Any]]:
        """The unbound VNF ports the nodes published (their records' ``unbound``)."""
        return [
            port
            for line in self.lines
            if line.record is not None and line.state != "stale"
            for port in line.record.get("unbound") or ()
            if isinstance(port, Mapping)
        ]

    @property
    def ok(self) -> bool:
        return (
            all(line.state == "ok" for line in self.lines)
            and (self.central is None or self.central.get("result") in OK_RESULTS)
            and not self.unbound
        )

    def to_json(self) -> dict[str, Any]:
        counts = Counter(line.state for line in self.lines)
        return {
            "format_version": FORMAT_VERSION,
            "ok": self.ok,
            "central": dict(self.central) if self.central is not None else None,
            "revision": self.reference,
            "summary": {state: counts[state] for state in sorted(counts)},
            "nodes": [line.to_json() for line in self.lines],
            "unbound": [dict(port) for port in self.unbound],
            "notes": list(self.notes),
        }


def _reference(
    central: Mapping[str, Any] | None, records: Iterable[Mapping[str, Any]]
) -> str | None:
    if central is not None and central.get("revision"):
        return str(central["revision"])
    revisions = Counter(
        str(r["revision"]) for r in records if r.get("revision") and r.get("result") in OK_RESULTS
    )
    if not revisions:
        return None
    return sorted(revisions.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def judge(
    nodes: Iterable[str],
    heartbeats: Mapping[str, Heartbeat],
    central: Heartbeat | None,
    now: dt.datetime,
    binders: Mapping[str, Heartbeat] | None = None,
) -> Verdict:
    """Judge every node of ``nodes`` (the nodes that run OVN) from what was published;
    ``binders``: what each node's binder published (its traffic per VNF instance)."""
    verdict = _judge(nodes, heartbeats, central, now)
    if binders:
        verdict.lines[:] = [replace(line, traffic=_traffic(line, binders, now))
                            for line in verdict.lines]  # fmt: skip
    return verdict


def _traffic(
    line: NodeLine, binders: Mapping[str, Heartbeat], now: dt.datetime
) -> tuple[NodeTraffic, ...]:
    """What the node's binder counts, and ``unknown`` for its VNF instances it does not."""
    counted = node_traffic(_fresh(binders.get(line.node), now), line.node)
    instances = (line.record or {}).get("vnf_instances") or ()
    return (*counted, *uncounted([i for i in instances if i.get("node") == line.node], counted))


def _fresh(beat: Heartbeat | None, now: dt.datetime) -> Mapping[str, Any] | None:
    """A binder's record while its heartbeat is fresh, else ``None`` (it says nothing)."""
    if beat is None or beat.record is None or beat.renewed_at is None:
        return None
    age = (now - beat.renewed_at).total_seconds()
    return beat.record if beat.duration is None or age <= beat.duration else None


def _judge(
    nodes: Iterable[str],
    heartbeats: Mapping[str, Heartbeat],
    central: Heartbeat | None,
    now: dt.datetime,
) -> Verdict:
    wanted = sorted(set(nodes))
    central_record = central.record if central is not None else None
    records = [hb.record for n, hb in heartbeats.items() if n in wanted and hb.record is not None]
    reference = _reference(central_record, records)
    lines: list[NodeLine] = []
    for node in wanted:
        beat = heartbeats.get(node)
        if beat is None:
            lines.append(NodeLine(node, "missing", "no status published (no agent ran here yet)"))
            continue
        age = (now - beat.renewed_at).total_seconds() if beat.renewed_at is not None else None
        record = beat.record
        if record is None:
            lines.append(NodeLine(node, "failed", beat.problem or "unreadable status", None, age))
            continue
        result = str(record.get("result", "unknown"))
        revision = record.get("revision")
        if beat.duration is not None and age is not None and age > beat.duration:
            detail = f"no heartbeat for {age:.0f}s (expected every {beat.duration:.0f}s or less)"
            lines.append(NodeLine(node, "stale", detail, record, age))
        elif result not in OK_RESULTS:
            message = str(record.get("message") or "")
            lines.append(NodeLine(node, "failed", f"{result}: {message}".rstrip(": "), record, age))
        elif reference is not None and revision != reference:
            detail = f"at {revision or '(none)'}, the central owner is at {reference}"
            lines.append(NodeLine(node, "lagging", detail, record, age))
        else:
            lines.append(NodeLine(node, "ok", "", record, age))
    notes = []
    extra = sorted(set(heartbeats) - set(wanted))
    if extra:
        notes.append(
            f"ignored the status of {len(extra)} node(s) that no longer run OVN or are gone: "
            + ", ".join(extra[:10])
        )
    if central is None:
        notes.append(
            "no central owner status (osc-gitops-central): nodes are compared with each other"
        )
    elif central_record is None:
        notes.append(f"the central owner's status is unreadable: {central.problem}")
    return Verdict(central_record, reference, lines, notes)


def _short(revision: Any) -> str:
    text = str(revision or "-")
    return text[:12]


def _health(record: Mapping[str, Any] | None) -> str:
    if not record:
        return "-"
    instances = record.get("vnf_instances") or []
    if not instances:
        return "-"
    parts = []
    for inst in instances:
        health = inst.get("health", "unknown")
        parts.append(f"{inst.get('vnf')}:{'ok' if health == 'healthy' else health}")
    return ",".join(parts)


def render_text(verdict: Verdict) -> str:
    """One line per node, with a header and the central owner's line first."""
    out: list[str] = []
    central = verdict.central
    if central is not None:
        out.append(
            f"central owner: {central.get('result', 'unknown')} at revision "
            f"{central.get('revision') or '(none)'} (updated {central.get('updated_at') or '?'})"
            + (f": {central['message']}" if central.get("message") else "")
        )
    header = ("NODE", "STATE", "RESULT", "REVISION", "UPDATED", "ROWS", "VNFS", "DETAIL")
    rows = [header]
    for line in verdict.lines:
        record = line.record or {}
        count = sum(int(v) for v in (record.get("rows") or {}).values()) if record else None
        rows.append(
            (
                line.node,
                line.state,
                str(record.get("result", "-")),
                _short(record.get("revision")),
                str(record.get("updated_at") or "-"),
                "-" if count is None else str(count),
                _health(record),
                line.detail,
            )
        )
    if verdict.unbound:
        out.append("Unbound VNF ports (the VM runs, OVN has not bound its port; steering waits):")
        out.extend(f"  ! {p.get('vm')} {p.get('side')} port {p.get('port')} on {p.get('node')}: "
                   f"{p.get('cause')}" for p in verdict.unbound)  # fmt: skip
        out.append("")
    silent = [t for line in verdict.lines for t in line.traffic if t.verdict == SILENT]
    if silent:
        out.append("VNF instances that saw NOTHING while pods on their node talked:")
        out.extend(f"  ! {t.instance} on {t.node}: {t.text}" for t in silent)
        out.append("")
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        out.append("  ".join([*cells, row[-1]]).rstrip())
    counts = Counter(line.state for line in verdict.lines)
    summary = ", ".join(f"{counts[s]} {s}" for s in ("ok", "failed", "lagging", "stale", "missing")
                        if counts[s])  # fmt: skip
    traffic = [t for line in verdict.lines for t in line.traffic if t.verdict != SILENT]
    if traffic:
        out.append("")
        out.append("Traffic per VNF instance (the node binders' last minute):")
        out.extend(f"  {t.instance} on {t.node}: {t.verdict}: {t.text}" for t in traffic)
    out.append("")
    out.append(f"{len(verdict.lines)} node(s): {summary or 'none'}")
    out.extend(f"note: {note}" for note in verdict.notes)
    return "\n".join(out) + "\n"
