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
  because a time limit flips a decision (the rollout's detection window or deadline): the loop
  sets a timer for it; a change of health wakes it through the NB.

:class:`Transitions` is shared by the loop (``osc-gitops run``) and ``apply --wait``
(``reconciler.engine.wait``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Plan
from reconciler.core.transitions.rollout import Step, Steps, next_steps
from reconciler.engine.guard import WriteGuard
from reconciler.engine.reporting.logs import LOGGER

log = logging.getLogger(LOGGER)

__all__ = ["TransitionReport", "Transitions", "VmActions"]

WallClock = Callable[[], float]


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
                {k: h.get(k) for k in ("binding", "node", "reason", "since")} for h in self.held
            ],
            "rollouts": [
                {k: r.get(k) for k in ("vnf", "summary", "nodes_updated", "nodes_total", "halted")}
                for r in self.rollouts
            ],
        }


@dataclass
class Transitions:
    """Rollout steps and held-steering books across passes (one per loop or ``--wait``)."""

    kube: VmActions | None
    """Where the rollout writes; ``None``: this process never writes Kubernetes (a node
    agent), so it reports rollouts but takes no step."""
    guard: WriteGuard | None = None
    clock: WallClock = time.time
    _since: dict[tuple[str, str], float] = field(default_factory=dict)

    def after_pass(self, plan: Plan, observed: Observed) -> TransitionReport:
        """Take the rollout steps the pass's outcome allows and report what waits.

        ``plan``: what the pass applied (or found nothing to apply in); ``observed``: the live
        state it ended with (after its writes)."""
        now = self.clock()
        held = self._held(plan, now)
        rollouts = list(plan.rollouts)
        steps = Steps()
        if rollouts:
            steps = next_steps(rollouts, observed, now)
            if self.kube is not None:
                for step in steps.steps:
                    self._take(step)
            else:
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
        )

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
