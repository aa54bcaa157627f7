"""The status file behind ``osc-gitops status``: what was last applied, when, and how it went.

Decision: a small JSON file (``<cache-dir>/status/<instance>.json``), written atomically
(temp file + rename) after every apply/run attempt. Why not only the ``osc.io/revision`` values
on the owned rows? Rows record successes only, and only for rows that *changed*: a commit that
changes nothing rewrites no row, so the rows would keep showing an older commit. The file also
records refusals (invalid commit), an unreachable source, and the last good commit. The same
facts are exported as metrics (``osc_gitops_applied_revision_info``, ``..._last_success_...``)
for when the file is out of reach (a CronJob's ``emptyDir``).

This module is the one place that turns outcomes into the file: :func:`record_apply` for
``osc-gitops apply``, :class:`StatusBook` for the loop (``run``), which also reports refused
commits and an unreachable source over the result of the pass.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reconciler.core.model.plan import Plan
from reconciler.core.views.traffic import SILENT, node_traffic
from reconciler.engine.reporting.logs import LOGGER
from reconciler.errors import UserError

log = logging.getLogger(LOGGER)

RESULTS = ("applied", "unchanged", "error", "refused", "source-unreachable", "standby", "bound")


@dataclass
class Status:
    """One instance's latest outcome. ``revision`` = the commit the live state matches (the
    last good one), ``attempted`` = the last commit seen (differs when it was refused)."""

    instance: str
    result: str = "unknown"
    message: str = ""
    revision: str | None = None
    revision_applied_at: str | None = None
    attempted: str | None = None
    source: str | None = None
    ref: str | None = None
    updated_at: str | None = None
    changes: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    vnf_instances: list[dict[str, Any]] = field(default_factory=list)
    """Each VNF instance's health as OVN reported it at the end of the last pass:
    ``{vnf, node, health ("healthy" | "not healthy" | "unknown"), detail}``
    (``reconciler.core.transitions.health``)."""
    held: list[dict[str, Any]] = field(default_factory=list)
    """Steering held until OVN reports its VNF instance healthy, after the last pass:
    ``{binding, node, reason, since}`` (``reconciler.core.steering.network_function.gating``;
    ``since``: epoch seconds)."""
    rollouts: list[dict[str, Any]] = field(default_factory=list)
    """Rolling updates under way: ``{vnf, summary, nodes_updated, nodes_total, halted}``
    (``reconciler.core.transitions.rollout``; ``halted``: why it stopped, or null)."""
    unbound: list[dict[str, Any]] = field(default_factory=list)
    """Data ports of running VNF VMs that OVN has not bound after the last pass:
    ``{vnf, node, vm, port, side, cause}`` (``reconciler.core.steering.HealthIndex.unbound``).
    ``osc-gitops status`` exits 1 while there are any."""
    binder: dict[str, Any] | None = None
    """The node binder's last state when it runs in this process (``run --node --ovs-db``,
    ``bind``): what it bound and skipped, and the traffic per VNF instance
    (``reconciler.engine.binder``)."""
    traffic: list[dict[str, Any]] = field(default_factory=list)
    """Per VNF instance, whether pod traffic crossed it in the last minute, as the node binders
    count it: ``{vnf, node, instance, verdict ("crossed" | "quiet" | "silent-while-pods-talked"
    | "unknown"), crossed_last_minute, pods_talked, text}`` (``reconciler.core.views.traffic.
    node_traffic``), those that saw nothing while pods talked first. Filled by ``status`` when
    shown: from :attr:`binder`, else from the binders' Leases."""
    traffic_problem: str = ""
    """Why :attr:`traffic` could not be read (the binders' Leases), empty otherwise."""
    security_managers: list[dict[str, Any]] = field(default_factory=list)
    """Each security manager notified: ``{manager, pending, up, delivered, failed, rejected,
    failing_since, last_error, last_delivered_at, retry_in}`` (``reconciler.engine.
    notifications.Outbox.status``; ``up`` false: its last delivery failed and is retried)."""
    live_rollouts: list[dict[str, Any]] | None = None
    """The VnfDeployments' rollouts as their VirtualMachines say them now (``status`` reads
    them from the cluster: ``LiveRollout.to_json``); ``None``: not read (never in the file)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.live_rollouts is None:
            del data["live_rollouts"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Status:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


HEARTBEAT_SECONDS = 60.0
"""How stale ``updated_at`` may get while passes change nothing else."""


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def status_path(cache_dir: str | Path, instance: str) -> Path:
    return Path(cache_dir) / "status" / f"{instance}.json"


def write(path: Path, status: Status) -> None:
    """Atomic write; errors are the caller's to log (a status file must never stop a loop)."""
    status.updated_at = now_iso()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".status-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(status.to_json(), fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: Path) -> Status:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"no status at {path}: nothing was applied with this --cache-dir and --instance yet"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read status file {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UserError(f"{path} is not an osc-gitops status file: {exc}") from exc
    if not isinstance(data, dict) or "instance" not in data:
        raise UserError(f"{path} is not an osc-gitops status file")
    return Status.from_json(data)


def render_text(status: Status) -> str:
    lines = [
        f"instance:        {status.instance}",
        f"result:          {status.result}" + (f" — {status.message}" if status.message else ""),
        f"applied commit:  {status.revision or '(none)'}",
        f"applied at:      {status.revision_applied_at or '(never)'}",
    ]
    if status.attempted and status.attempted != status.revision:
        lines.append(f"latest commit:   {status.attempted} (not applied: {status.result})")
    if status.source:
        lines.append(
            f"source:          {status.source}" + (f" @ {status.ref}" if status.ref else "")
        )
    if status.changes:
        summary = ", ".join(f"{k} {v}" for k, v in sorted(status.changes.items()))
        lines.append(f"last changes:    {summary}")
    lines.append(f"updated at:      {status.updated_at or '(unknown)'}")
    lines.extend(f"  {e}" for e in status.errors[:50])
    lines.extend(traffic_lines(status))
    if status.vnf_instances:
        lines.append("VNF instances (health as OVN reported it):")
        for inst in status.vnf_instances:
            detail = f" ({inst['detail']})" if inst.get("detail") else ""
            lines.append(f"  {inst['vnf']} on {inst['node']}: {inst['health']}{detail}")
    lines.extend(transition_lines(status))
    lines.extend(unbound_lines(status))
    lines.extend(binder_lines(status))
    lines.extend(manager_lines(status))
    return "\n".join(lines) + "\n"


def unbound_lines(status: Status) -> list[str]:
    """The unbound data ports of running VNF VMs, for humans."""
    if not status.unbound:
        return []
    lines = ["Unbound VNF ports (the VM runs, OVN has not bound its port; steering waits):"]
    for port in status.unbound:
        lines.append(f"  ! {port['vm']} {port['side']} port {port['port']} on {port['node']}: "
                     f"{port['cause']}")  # fmt: skip
    return lines


def binder_lines(status: Status) -> list[str]:
    """The node binder's state and the traffic through each VNF instance it counts."""
    record = status.binder
    if not record:
        return []
    head = f"Node binder on {record.get('node')} ({record.get('ovs_db')}): "
    head += "ok" if record.get("ok") else f"failing: {record.get('error')}"
    lines = [head]
    lines.extend(f"  bound {b['vm']} {b['nic']} -> {b['port']} ({b['interface']})"
                 for b in record.get("bound") or [])  # fmt: skip
    lines.extend(f"  waiting {w['vm']} {w['nic']} ({w['port']}): no virt-launcher pod or OVS "
                 "interface yet" for w in record.get("waiting") or [])  # fmt: skip
    lines.extend(f"  skipped ({s['reason']}) {s['subject']}: {s['detail']}"
                 for s in record.get("skipped") or [])  # fmt: skip
    return lines


def traffic_lines(status: Status) -> list[str]:
    """Per VNF instance, whether traffic crossed it in the last minute (:attr:`Status.traffic`,
    else what this process's binder counted), those that saw nothing while pods talked first:
    what an operator must look at before anything else."""
    traffic = status.traffic or [t.to_json() for t in node_traffic(status.binder)]
    if not traffic and not status.traffic_problem:
        return []
    lines = ["Traffic per VNF instance (the node binders' last minute):"]
    for t in traffic:
        mark = "!" if t.get("verdict") == SILENT else " "
        lines.append(f"  {mark} {t.get('instance')} on {t.get('node')}: {t.get('verdict')}: "
                     f"{t.get('text')}")  # fmt: skip
    if status.traffic_problem:
        lines.append(f"    not known: {status.traffic_problem}")
    return lines


def manager_lines(status: Status) -> list[str]:
    """``status``'s security managers, for humans."""
    if not status.security_managers:
        return []
    lines = ["Security managers (notifications: deployed, removed, members):"]
    for m in status.security_managers:
        state = {True: "up", False: "FAILING", None: "not tried yet"}[m.get("up")]
        line = (
            f"  {m['manager']}: {state}, {m.get('delivered', 0)} delivered, "
            f"{m.get('pending', 0)} pending"
        )
        if m.get("rejected"):
            line += f", {m['rejected']} refused by it"
        if m.get("up") is False:
            line += f", failing since {m.get('failing_since')}, retried"
            if m.get("retry_in") is not None:
                line += f" in {m['retry_in']:.1f} s"
            line += f": {m.get('last_error', '')}"
        lines.append(line)
    return lines


def transition_lines(status: Status) -> list[str]:
    """``status``'s held steering and rolling updates, for humans."""
    lines: list[str] = []
    if status.held:
        lines.append(
            "Held steering (switched on once OVN reports the VNF instance healthy; until then "
            "no ACL steers these pods: their traffic flows unsteered):"
        )
        now = time.time()
        for hold in status.held:
            since, allowance = hold.get("since"), hold.get("allowance")
            age = f", for {now - float(since):.0f} s" if since else ""
            if since and allowance:
                past = now - float(since) > float(allowance)
                age += (f", past its boot allowance of {float(allowance):.0f} s" if past
                        else f" of a {float(allowance):.0f} s boot allowance")  # fmt: skip
            lines.append(f"  ~ held: Binding/{hold['binding']} on {hold['node']}: "
                         f"{hold['reason']}{age}")  # fmt: skip
            pods = hold.get("unprotected") or []
            if pods:
                lines.append(f"      NOT protected: {', '.join(pods)}")
    if status.live_rollouts is not None:
        live = [r for r in status.live_rollouts if r.get("in_progress") or r.get("halted")]
        if live:
            lines.append("Rolling updates (live, from the cluster's VirtualMachines):")
            lines.extend(f"  {rollout['summary']}" for rollout in live)
    elif status.rollouts:
        lines.append(f"Rolling updates (as of the last pass, {status.updated_at}):")
        lines.extend(f"  {rollout['summary']}" for rollout in status.rollouts)
    return lines


def halted(status: Status) -> list[str]:
    """Why each halted rolling update stopped (``osc-gitops status`` exits 1 for them)."""
    rollouts = status.rollouts if status.live_rollouts is None else status.live_rollouts
    return [str(r["halted"]) for r in rollouts if r.get("halted")]


def _held(status: Status) -> list[str]:
    """Steering held until a VNF instance is healthy: its pods are not protected."""
    out = []
    for hold in status.held:
        pods = hold.get("unprotected") or []
        who = f": {', '.join(pods)} NOT protected" if pods else ""
        out.append(f"Binding/{hold['binding']} on {hold['node']} held ({hold['reason']}){who}")
    return out


def _rolling(status: Status) -> list[str]:
    """A rolling update under way (halted ones are failures, :func:`failures`)."""
    if status.live_rollouts is not None:
        rollouts = [r for r in status.live_rollouts if r.get("in_progress")]
    else:
        rollouts = list(status.rollouts)
    return [f"mid-rollout: {r['summary']}" for r in rollouts if not r.get("halted")]


PENDING: tuple[Callable[[Status], list[str]], ...] = (_held, _rolling)
"""What keeps the live state from being what the manifests say although the last pass
succeeded, one check per cause, each one line per case (held steering, a rollout under way;
a cause more is one more function here)."""


def pending(status: Status) -> list[str]:
    """Every case of :data:`PENDING` (``osc-gitops status`` exits 3 while there is one)."""
    return [line for check in PENDING for line in check(status)]


def _last_run(status: Status) -> list[str]:
    ok = status.result in ("applied", "unchanged", "bound")
    return [] if ok else [f"last run: {status.result}"]


def _halted(status: Status) -> list[str]:
    return [f"rolling update halted: {why}" for why in halted(status)]


def _unbound(status: Status) -> list[str]:
    """A running VNF VM's data port OVN has not bound: its steering waits, and it will not bind
    by itself (the node binder, ovs-cni): a failure."""
    return [f"unbound: {p['vm']} {p['side']} port {p['port']} on {p['node']}: {p['cause']}"
            for p in status.unbound]  # fmt: skip


FAILING: tuple[Callable[[Status], list[str]], ...] = (_last_run, _halted, _unbound)
"""What makes the status a failure (``osc-gitops status`` exits 1), one check per cause, each
one line per case: the last pass did not succeed, a rolling update is halted, a VNF port is
unbound."""


def failures(status: Status) -> list[str]:
    """Every case of :data:`FAILING`."""
    return [line for check in FAILING for line in check(status)]


def record_apply(
    path: Path,
    instance: str,
    *,
    revision: str | None,
    plan: Plan,
    source: str,
    ref: str | None,
    vnf_instances: list[dict[str, Any]] | None = None,
    transitions: dict[str, Any] | None = None,
    unbound: list[dict[str, Any]] | None = None,
    security_managers: list[dict[str, Any]] | None = None,
) -> None:
    """After ``osc-gitops apply`` converged: the live state matches ``revision``, and its VNF
    instances were as ``vnf_instances`` says (none given: none known). Raises ``OSError`` when
    the file cannot be written (the caller warns; the apply stands)."""
    try:
        st = read(path) if path.exists() else Status(instance=instance)
    except UserError:
        st = Status(instance=instance)
    st.result = "applied" if plan.changes else "unchanged"
    st.message, st.errors = "", []
    st.revision = st.attempted = revision
    st.revision_applied_at = now_iso()
    st.source = source
    st.ref = ref
    st.changes = plan.summary()
    st.vnf_instances = list(vnf_instances or [])
    st.held = list((transitions or {}).get("held") or [])
    st.rollouts = list((transitions or {}).get("rollouts") or [])
    st.unbound = list(unbound or [])
    st.security_managers = list(security_managers or [])
    write(path, st)


class StatusBook:
    """The loop's status: kept in memory across passes, written after each one (if ``path``).

    Starts from the file a previous run left (so ``revision`` is the last commit applied even
    before the first pass: the loop falls back to it when the source is unreachable at start).
    """

    def __init__(self, path: Path | None, instance: str, source: str) -> None:
        self.path = path
        self.status = Status(instance=instance, source=source)
        self._written: dict[str, Any] | None = None
        self._written_at = float("-inf")
        if path is not None and path.exists():
            try:
                self.status = read(path)
                self.status.source = source
            except UserError as exc:
                log.warning("ignoring unreadable status file: %s", exc)

    def vnf_health(self, instances: list[dict[str, Any]]) -> None:
        """Each VNF instance's health at the end of a pass (written with the pass's outcome)."""
        self.status.vnf_instances = instances

    def unbound(self, ports: list[dict[str, Any]]) -> None:
        """The unbound VNF ports at the end of a pass (written with its outcome)."""
        self.status.unbound = ports

    def binder(self, record: dict[str, Any]) -> None:
        """The node binder's latest state (written with the next pass's outcome)."""
        self.status.binder = record

    def transitions(self, report: dict[str, Any]) -> None:
        """Held steering and rolling updates after a pass (written with its outcome)."""
        self.status.held = list(report.get("held") or [])
        self.status.rollouts = list(report.get("rollouts") or [])

    def security_managers(self, managers: list[dict[str, Any]], *, save: bool = False) -> None:
        """The security managers' state (written with the pass's outcome, or now: ``save``)."""
        self.status.security_managers = managers
        if save and self.path is not None:
            try:
                write(self.path, self.status)
            except OSError as exc:
                log.warning("cannot write status file", extra={"error": str(exc)})

    def refused(self, revision: str | None, errors: list[str]) -> None:
        """A revision's manifests are invalid: shown until a pass says otherwise."""
        self.status.attempted = revision
        self.status.errors = errors

    def record(
        self,
        result: str,
        *,
        message: str | None,
        changes: dict[str, int],
        applied_revision: str | None,
        latest_seen: str | None,
        refused: list[str] | None,
        source_error: str | None,
    ) -> None:
        """The outcome of one pass (not ``standby``: a standby replica has nothing to say).

        ``applied_revision``: what the live state was reconciled to; ``latest_seen``: the newest
        revision the source showed, and ``refused`` its errors if it was refused (reported over
        the pass's own result until it is fixed); ``source_error``: the source is unreachable
        (reported over everything else, since it hides newer commits)."""
        st = self.status
        ok = result in ("applied", "unchanged")
        st.result, st.message = result, message or ""
        if ok:
            if result == "applied" or st.revision != applied_revision:
                st.revision_applied_at = now_iso()
            st.revision = applied_revision
            st.changes = changes or st.changes
            st.errors = []
        st.attempted = latest_seen
        if refused is not None:
            st.result, st.errors = "refused", refused
            st.message = f"commit {latest_seen} refused; live state at {st.revision}"
        if source_error:
            st.result = "source-unreachable"
            st.message = f"{source_error}; reconciling the last good commit {st.revision}" + (
                f" ({message})" if message and not ok else ""
            )
        if self.path is not None:
            # A no-op pass changes nothing but ``updated_at``: rewrite the file for it at most
            # once a minute (a heartbeat), so the warm loop's no-op pass does no file I/O.
            content = {k: v for k, v in st.to_json().items() if k != "updated_at"}
            now = time.monotonic()
            if content == self._written and now - self._written_at < HEARTBEAT_SECONDS:
                return
            try:
                write(self.path, st)
            except OSError as exc:
                log.warning("cannot write status file", extra={"error": str(exc)})
                return
            self._written, self._written_at = content, now
