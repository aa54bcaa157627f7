"""After each pass: carry the rolling updates one step further, and keep the books of what waits.

The plan of a pass already holds back what may not be written yet
(``reconciler.core.transitions.hold``: steering onto an instance OVN has not seen healthy, template
updates of VMs the rollout has not selected). What is left is imperative and happens here, after
the pass's writes:

- the rollout's steps (``reconciler.core.transitions.rollout.next_steps``): annotate the VMs
  selected or moved to their next phase, restart a VM once its new template is written (KubeVirt's
  ``restart`` subresource). They are Kubernetes writes: the loop's write guard is asked first
  (a replica that lost its Lease writes nothing), and a node agent, which never writes
  Kubernetes, takes none;
- how long each VNF instance has held steering (metrics, status), and when the next pass is due
  because a time limit flips a decision (the rollout's detection window or deadline, the
  owner's renewal): the loop sets a timer for it; a change of health wakes it through the NB;
- who owns each rollout (issue 33): this process names itself on the VMs it rolls (``owner``,
  ``<instance> on <host> (pid N)``), renews that, and clears it on :meth:`Transitions.release`;
  it takes no step for a rollout another process owns while that one is alive: its
  ``rollout.osc.io/renewed`` changed within ``STALE`` seconds of *this* process's clock (so no
  clock skew between hosts matters), the way client-go judges a Lease.

:class:`Transitions` is shared by the loop (``osc-gitops run``) and ``apply --wait``
(``reconciler.engine.wait``).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Plan
from reconciler.core.transitions.rollout import (
    OWNER,
    OWNER_SINCE,
    PHASE,
    RENEWED,
    STALE,
    Step,
    Steps,
    boot_allowance,
    next_steps,
    owner_name,
    owners_of,
    parse_time,
)
from reconciler.core.views.protection import unprotected
from reconciler.engine.guard import WriteGuard
from reconciler.engine.reporting.logs import LOGGER

log = logging.getLogger(LOGGER)

__all__ = ["TransitionReport", "Transitions", "VmActions"]

WallClock = Callable[[], float]

SILENT_FOR_SURE = 600.0
"""An owner whose last renewal is this old by the wall clock is gone at once, even to a process
that has just started (any clock skew between hosts is far smaller)."""


@runtime_checkable
class VmActions(Protocol):
    """The Kubernetes writes a rollout makes (``reconciler.adapters.kube``)."""

    def annotate(
        self, kind: str, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> object:
        """Set (``None``: remove) these annotations, nothing else."""
        ...

    def restart_vm(self, namespace: str, name: str) -> object:
        """KubeVirt's ``restart`` of a VirtualMachine."""
        ...


@dataclass(frozen=True)
class TransitionReport:
    """What waits after a pass, and what this step wrote."""

    held: tuple[dict[str, Any], ...] = ()
    """The plan's held steering (JSON form), each with ``since`` (epoch seconds this process
    first saw it held)."""
    rollouts: tuple[dict[str, Any], ...] = ()
    """The plan's rollouts (JSON form)."""
    steps: tuple[Step, ...] = ()
    waiting: tuple[str, ...] = ()
    recheck_at: float | None = None
    """Wall-clock time when the next pass is due even if nothing changes."""
    owned_by: tuple[tuple[str, str, str | None], ...] = ()
    """``(vnf, owner, since)`` of rollouts another live process owns (this one waits)."""
    allowances: dict[tuple[str, str], float] = field(default_factory=dict)
    """``(vnf, node)`` of an instance steering waits for -> its boot allowance (seconds,
    ``rollout.boot_allowance``): held longer, its pods are unprotected for longer than a boot."""

    @property
    def busy(self) -> bool:
        """Steering is held or a rollout is under way: later passes have work."""
        return bool(self.held or self.rollouts)

    @property
    def halted(self) -> list[str]:
        return [str(r["halted"]) for r in self.rollouts if r.get("halted")]

    def held_instances(self, now: float) -> dict[tuple[str, str], float]:
        """``(vnf, node)`` of every VNF instance that steering waits for -> seconds it has."""
        out: dict[tuple[str, str], float] = {}
        for hold in self.held:
            for vnf in hold.get("vnfs") or ():
                key = (str(vnf), str(hold["node"]))
                out[key] = max(out.get(key, 0.0), now - float(hold.get("since") or now))
        return out

    def status_json(self) -> dict[str, Any]:
        """For the status file and the published agent status."""
        return {
            "held": [
                {
                    k: h.get(k)
                    for k in ("binding", "node", "reason", "since", "unprotected", "allowance")
                }
                for h in self.held
            ],
            "rollouts": [
                {k: r.get(k) for k in ("vnf", "summary", "nodes_updated", "nodes_total", "halted")}
                for r in self.rollouts
            ],
        }


def _with_unprotected(
    held: tuple[dict[str, Any], ...], desired: Desired, observed: Observed
) -> tuple[dict[str, Any], ...]:
    """Each hold with the pods (``namespace/pod``) its binding does not protect on its node
    because of it: their traffic flows unsteered until the VNF instance is healthy."""
    pods = unprotected(desired, observed, {(str(h["binding"]), str(h["node"])) for h in held})
    return tuple(
        {
            **h,
            "unprotected": [p.ref for p in pods.get(str(h["binding"]), ()) if p.node == h["node"]],
        }
        for h in held
    )


@dataclass
class Transitions:
    """Rollout steps and held-steering books across passes (one per loop or ``--wait``)."""

    kube: VmActions | None
    """Where the rollout writes; ``None``: this process never writes Kubernetes (a node
    agent), so it reports rollouts but takes no step."""
    guard: WriteGuard | None = None
    clock: WallClock = time.time
    instance: str = "osc-gitops"
    owner: str = ""
    """Who this process is on the VMs it rolls; default ``<instance> on <host> (pid N)``."""
    local_clock: WallClock = time.monotonic
    """How long another owner has been silent is measured on this clock (never the wall
    clock of another host)."""
    _since: dict[tuple[str, str], float] = field(default_factory=dict)
    _seen: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Another owner -> (its ``renewed`` value, when this process first saw that value)."""
    _mine: set[str] = field(default_factory=set)
    """VMs (``namespace/name``) this process named itself owner of, as last seen."""

    def __post_init__(self) -> None:
        if not self.owner:
            self.owner = owner_name(self.instance, socket.gethostname(), os.getpid())

    def _alive(self, observed: Observed) -> set[str]:
        """The other owners of VMs being rolled whose ``renewed`` changed within ``STALE``
        seconds, as this process saw it."""
        now = self.local_clock()
        alive: set[str] = set()
        current = owners_of(observed)
        for who, renewed in current.items():
            if who == self.owner:
                continue
            seen = self._seen.get(who)
            if seen is None or seen[0] != renewed:
                self._seen[who] = (renewed, now)
                seen = self._seen[who]
            age = self.clock() - (parse_time(renewed) or 0.0)  # wall clocks: a coarse bound
            if now - seen[1] < STALE and age < SILENT_FOR_SURE:
                alive.add(who)
        self._seen = {k: v for k, v in self._seen.items() if k in current}
        return alive

    def after_pass(
        self, plan: Plan, observed: Observed, desired: Desired | None = None
    ) -> TransitionReport:
        """Take the rollout steps the pass's outcome allows and report what waits.

        ``plan``: what the pass applied (or found nothing to apply in); ``observed``: the live
        state it ended with (after its writes); ``desired``: its manifests (each hold then
        names the pods it leaves NOT protected, ``unprotected``)."""
        now = self.clock()
        held = self._held(plan, now)
        allowances: dict[tuple[str, str], float] = {}
        if held and desired is not None:
            held = _with_unprotected(held, desired, observed)
            for hold in held:
                for vnf in hold.get("vnfs") or ():
                    if vnf in desired.vnfs:
                        allowance = boot_allowance(desired.vnfs[vnf])
                        allowances[(str(vnf), str(hold["node"]))] = allowance
            held = tuple(
                {**h, "allowance": max((allowances.get((str(v), str(h["node"])), 0.0)
                                        for v in h.get("vnfs") or ()), default=None)}
                for h in held
            )  # fmt: skip
        rollouts = list(plan.rollouts)
        steps = Steps()
        if rollouts:
            if self.kube is not None:
                alive = self._alive(observed)
                steps = next_steps(rollouts, observed, now, owner=self.owner, alive=alive)
                for step in steps.steps:
                    self._take(step)
                self._mine = {
                    f"{o.namespace}/{o.name}"
                    for o in observed.kube_objects
                    if o.kind == "VirtualMachine" and o.state.get(OWNER) == self.owner
                } | {s.vm for s in steps.steps if s.annotations.get(OWNER) == self.owner}
                self._mine -= {
                    s.vm for s in steps.steps if PHASE in s.annotations and not s.annotations[PHASE]
                }
            else:
                steps = next_steps(rollouts, observed, now)
                waiting = (
                    *steps.waiting,
                    "rolling updates are carried out by a process that reads OVN's health "
                    "(not a node agent, not --kubernetes-only)",
                )
                steps = Steps((), steps.recheck_at, waiting)
        return TransitionReport(
            held=held,
            rollouts=tuple(r.to_json() for r in plan.rollouts),
            steps=steps.steps,
            waiting=steps.waiting,
            recheck_at=steps.recheck_at,
            owned_by=steps.owned_by,
            allowances=allowances,
        )

    def release(self) -> None:
        """This process stops rolling (``apply --wait`` ends, the loop stops): its name leaves
        the VMs it was rolling, so another process takes their rollout over at once (their
        phase stays: it goes on from where it is). Errors are logged, never raised."""
        if self.kube is None or not self._mine:
            return
        lease = getattr(self.guard, "lease", None)  # shutting down is no reason to skip this,
        if lease is not None and not lease.held():  # a lost Lease is: another replica leads
            return
        for vm in sorted(self._mine):
            namespace, _, name = vm.partition("/")
            try:
                self.kube.annotate("VirtualMachine", namespace, name,
                                   dict.fromkeys((OWNER, OWNER_SINCE, RENEWED)))  # fmt: skip
                log.info("rollout released", extra={"vm": vm, "owner": self.owner})
            except Exception as exc:  # shutting down: never fail the exit for this
                log.warning("could not release the rollout of %s: %s", vm, exc)
        self._mine = set()

    def _held(self, plan: Plan, now: float) -> tuple[dict[str, Any], ...]:
        current = {(h.binding, h.node) for h in plan.held}
        self._since = {k: v for k, v in self._since.items() if k in current}
        out = []
        for hold in plan.held:
            since = self._since.setdefault((hold.binding, hold.node), now)
            out.append({**hold.to_json(), "since": since})
        return tuple(out)

    def _take(self, step: Step) -> None:
        assert self.kube is not None
        namespace, _, name = step.vm.partition("/")
        if self.guard is not None:
            self.guard.before_write(f"{step.action} {step.vm}")
        if step.action == "restart":
            self.kube.restart_vm(namespace, name)
        else:
            self.kube.annotate("VirtualMachine", namespace, name, step.annotations)
        log.info(
            "rollout step",
            extra={"vm": step.vm, "action": step.action, "why": step.why,
                   "annotations": {k: v for k, v in step.annotations.items() if v}},
        )  # fmt: skip
