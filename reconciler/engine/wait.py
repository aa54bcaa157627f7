"""``apply --wait``: reconcile until every VNF instance is healthy and nothing waits.

Helm's ``--wait`` and ``kubectl rollout status`` for osc-gitops: after the writes, run the same
pipeline again whenever something that could let the apply go further changed (northd changed
a function group's active function, a rollout step was written, a rollout's time limit came)
until

- no steering is held (``reconciler.core.transitions.hold``),
- no rolling update is under way (``reconciler.core.transitions.rollout``),
- every VNF instance OVN can judge (a health check, a function group) is healthy, and
- no data port of a running VNF VM is unbound (``HealthIndex.unbound``: a VM whose ports OVN
  never binds would otherwise only show as "probe failing"),

or the timeout passes. Between passes it waits on the NB (``OvnNorthbound.watch_health``),
never longer than a second (a VM's status or a change nobody announces is seen then).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.facts import HEALTHY
from reconciler.core.model.observed import Observed
from reconciler.core.planning.incremental import IncrementalPlanner
from reconciler.core.steering import HealthIndex
from reconciler.core.transitions.rollout import why_unready
from reconciler.core.views.protection import pod_names, unprotected
from reconciler.engine.pipeline import PassListener, Pipeline, Reconciled, SilentListener
from reconciler.engine.providers import KubeProvider, OvnProvider
from reconciler.engine.transitions import TransitionReport, Transitions, VmActions

__all__ = ["WaitOutcome", "reconcile_until_ready", "unready", "wait_until_ready"]

POLL = 1.0
"""Longest wait between passes when nothing is announced."""


@dataclass
class WaitOutcome:
    done: bool
    seconds: float
    passes: int
    last: Reconciled
    """The last pass."""
    report: TransitionReport
    """What waited after it."""
    unready: list[str] = field(default_factory=list)
    """What is not ready, one line each (``firewall-node-2: probe failing ...``)."""


def unready(
    report: TransitionReport, observed: Observed, desired: Desired | None = None
) -> list[str]:
    """Everything that keeps an apply from being done, for humans, one line each: each VNF VM
    OVN does not count healthy (why, what it does to traffic, what to check), each data port
    OVN has not bound, each binding whose steering is held (on which nodes, until which VMs are
    healthy, and with ``desired`` the pods NOT protected meanwhile: their traffic flows
    unsteered), each rollout and what it waits for. A line's text before its first ``": "``
    names what it is about (what a log of state changes keys on)."""
    lines: list[str] = []
    vms = {o.name: o for o in observed.kube_objects if o.kind == "VirtualMachine"}
    explained: set[str] = set()
    health = HealthIndex(observed)
    for member in health.members.values():
        if member.checkable and member.health != HEALTHY:
            lines.append(f"{member.vm}: {why_unready(member, vms.get(member.vm))}")
            explained.add(member.vm)
    for port in health.unbound:
        lines.append(f"{port.vm.partition('/')[2]} port {port.port}: not bound ({port.side}): "
                     f"{port.cause}")  # fmt: skip
    holds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for hold in report.held:
        holds[str(hold["binding"])].append(hold)
    pods = (
        unprotected(desired, observed, {(b, str(h["node"])) for b, hs in holds.items() for h in hs})
        if desired is not None and holds
        else {}
    )
    for binding, entries in sorted(holds.items()):
        nodes = ", ".join(sorted({str(h["node"]) for h in entries}))
        waits = sorted({str(vm) for h in entries for vm in h.get("waiting_for") or ()})
        until = " and ".join(waits) or "its VNF instances"
        verb = "is" if len(waits) == 1 else "are"
        why = sorted({str(h.get("why")) for h in entries if h.get("why")})
        unexplained = f" ({'; '.join(why)})" if why and not explained.issuperset(waits) else ""
        who = pods.get(binding, ())
        effect = (
            f"{pod_names(who)} {'is' if len(who) == 1 else 'are'} NOT protected meanwhile "
            "(their traffic flows unsteered)"
            if who
            else "its pods' traffic flows unsteered meanwhile"
        )
        lines.append(
            f"Binding/{binding} held on {nodes}: steered once {until} {verb} "
            f"healthy{unexplained}; {effect}"
        )
    for rollout in report.rollouts:
        lines.append(str(rollout.get("summary")))
    lines.extend(f"  {line}" for line in report.waiting)
    return lines


def wait_until_ready(
    pipeline: Pipeline,
    desired: Desired,
    revision: str | None,
    transitions: Transitions,
    first: Reconciled,
    observed: Observed,
    listener: PassListener,
    *,
    timeout: float,
    wake: threading.Event | None = None,
    progress: Callable[[float, list[str]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> WaitOutcome:
    """Run ``pipeline`` until ready or ``timeout`` seconds passed (module docstring).

    ``first``/``observed``: the apply that was just made and the live state it ended with.
    ``wake``: set when the NB changed (:func:`health_wake`, made before ``first`` so that no
    change is missed). ``progress(elapsed, unready lines)`` is called after every pass."""
    started = clock()
    wake = wake if wake is not None else threading.Event()
    outcome, live, passes = first, observed, 1
    while True:
        report = transitions.after_pass(outcome.report.plan, live, desired)
        lines = unready(report, live, desired)
        elapsed = clock() - started
        if progress is not None:
            progress(elapsed, lines)
        if not lines and not report.steps:
            return WaitOutcome(True, elapsed, passes, outcome, report)
        if elapsed >= timeout:
            return WaitOutcome(False, elapsed, passes, outcome, report, lines)
        if not report.steps:
            limit = min(POLL, timeout - elapsed)
            if report.recheck_at is not None:
                limit = min(limit, max(0.0, report.recheck_at - transitions.clock()) + 0.05)
            wake.wait(limit)
        wake.clear()
        settled = _Settled(listener)
        outcome = pipeline.run(desired, revision, settled)
        live = settled.last or outcome.observed
        passes += 1


class _Settled:
    """Passes the pipeline's events on, keeping the live state each pass ended with."""

    def __init__(self, inner: PassListener) -> None:
        self.inner = inner
        self.last: Observed | None = None

    def observed(self, observed: Observed) -> None:
        self.inner.observed(observed)

    def applying(self, plan: object) -> None:
        self.inner.applying(plan)  # type: ignore[arg-type]

    def applied(self, report: object, observed: Observed) -> None:
        self.inner.applied(report, observed)  # type: ignore[arg-type]

    def settled(self, observed: Observed) -> None:
        self.last = observed
        self.inner.settled(observed)


def health_wake(ovn: object) -> threading.Event:
    """An event set whenever northd changes a function group of the NB ``ovn`` reads
    (``OvnNorthbound.watch_health``); never set for an adapter without it (the wait polls)."""
    wake = threading.Event()
    watch = getattr(ovn, "watch_health", None)
    if callable(watch):
        watch(wake.set)
    return wake


def reconcile_until_ready(
    desired: Desired,
    kube: KubeProvider,
    ovn: OvnProvider,
    options: CompileOptions,
    *,
    timeout: float = 300.0,
    revision: str | None = None,
) -> tuple[Reconciled, WaitOutcome]:
    """``apply --wait`` as a library call (``reconciler.engine.pipeline.reconcile`` plus the
    wait): the first pass and how the wait ended."""
    pipeline = Pipeline(kube, ovn, options, planner=IncrementalPlanner())
    settled = _Settled(SilentListener())
    wake = health_wake(ovn)
    first = pipeline.run(desired, revision, settled)
    writes = isinstance(kube, VmActions)
    transitions = Transitions(kube if writes else None, instance=options.instance)  # type: ignore[arg-type]
    try:
        outcome = wait_until_ready(
            pipeline, desired, revision, transitions,
            first, settled.last or first.observed, settled, timeout=timeout, wake=wake,
        )  # fmt: skip
    finally:
        transitions.release()
    return first, outcome
