"""The reconcile pipeline: observe -> plan -> empty guard -> apply -> verify. The only one.

``osc-gitops apply`` (through :func:`reconcile`) and every pass of the loop
(``reconciler.engine.loop``) run this same :class:`Pipeline`; they differ only in what they hand
it:

- the **planner**: a full compile every time (``reconciler.core.planning.FullPlanner``) for the
  CLI, the incremental planner with a periodic full resync for the loop;
- the **write guard** (``reconciler.engine.guard``): none for the CLI, "not shutting down and
  still the leader" for the loop;
- a **listener** told about each step, with which the loop keeps its books (readiness, drift,
  the revision applied, metrics); the CLI needs none;
- the **scope** (``reconciler.core.slicing``): everything (the default), one node's OVN slice
  (``--node``), or the Kubernetes side only (``--kubernetes-only``). It decides what is read
  (``reconciler.engine.scoped``), the view the planner sees, and the part of each plan carried
  out; an agent's Kubernetes writer refuses every write.

Effects happen only through the providers (``reconciler.engine.providers``): the algorithm does
not know about ``kubernetes`` or ``ovsdbapp``. Writes go in the safe order of
``reconciler.engine.apply``; afterwards the live state is read and planned again, and that plan
must be empty, else :class:`NotConverged`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

from reconciler.core.compile import CompileOptions
from reconciler.core.model import Desired
from reconciler.core.observed import Observed
from reconciler.core.plan import Plan
from reconciler.core.planning import FullPlanner
from reconciler.core.slicing import CentralScope, Scope
from reconciler.core.transitions import only_progress
from reconciler.engine.apply import ApplyReport, apply_plan
from reconciler.engine.guard import GuardedKube, GuardedOvn, WriteGuard
from reconciler.engine.providers import (
    KubeProvider,
    KubeWriter,
    Notifier,
    OvnProvider,
    OvnWriter,
)
from reconciler.engine.scoped import observe, observe_in, writer_for
from reconciler.errors import InternalError, UserError

__all__ = [
    "ApplyReport",
    "EmptyDesiredRefused",
    "NotConverged",
    "PassListener",
    "Pipeline",
    "Planner",
    "Reconciled",
    "guard_empty",
    "observe",
    "reconcile",
    "with_meta",
]


class NotConverged(InternalError):
    """Apply finished but a fresh plan is not empty (someone else wrote meanwhile, or a bug of
    ours: the traceback is kept)."""

    cause = "not-converged"

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        items = ", ".join(f"{c.action} {c.kind} {c.key}" for c in plan.changes[:10])
        more = f" and {len(plan.changes) - 10} more" if len(plan.changes) > 10 else ""
        super().__init__(f"apply did not converge: a fresh plan still has {items}{more}")


class EmptyDesiredRefused(UserError):
    """An empty manifest set would prune everything we own (pass --allow-empty to mean it)."""

    cause = "empty-refused"


def guard_empty(desired: Desired, the_plan: Plan, allow_empty: bool) -> None:
    """Argo CD's ``allowEmpty`` lesson: an empty manifest set (a bad checkout, a wrong --path)
    must never prune everything we own unless the user said so."""
    deletes = the_plan.summary()["delete"]
    if desired.is_empty and deletes and not allow_empty:
        raise EmptyDesiredRefused(
            f"no manifests were found, and applying that would delete all {deletes} objects "
            "osc-gitops owns; pass --allow-empty if that is really what you want"
        )


def with_meta(the_plan: Plan, **meta: Any) -> Plan:
    return replace(the_plan, meta={**the_plan.meta, **meta})


class Planner(Protocol):
    """Desired + observed -> plan. ``full`` asks a planner with memory to compile everything
    (a planner without memory always does)."""

    def plan(
        self, desired: Desired, observed: Observed, options: CompileOptions, *, full: bool = False
    ) -> Plan: ...


class PassListener(Protocol):
    """What the pipeline tells its caller as it goes, in this order. A listener may raise to
    stop the pass (the exception propagates from :meth:`Pipeline.run`)."""

    def observed(self, observed: Observed) -> None:
        """The first read succeeded."""
        ...

    def applying(self, plan: Plan) -> None:
        """The plan is not empty and passed the empty guard; nothing is written yet."""
        ...

    def applied(self, report: ApplyReport, observed: Observed) -> None:
        """Every write succeeded (``observed``: the read the plan was made from); the verify
        read comes next."""
        ...

    def settled(self, observed: Observed) -> None:
        """The live state at the end of the pass: the first read when the plan was empty, else
        the verify read (called before :class:`NotConverged` is raised)."""
        ...


class SilentListener:
    """A :class:`PassListener` that ignores everything."""

    def observed(self, observed: Observed) -> None:
        pass

    def applying(self, plan: Plan) -> None:
        pass

    def applied(self, report: ApplyReport, observed: Observed) -> None:
        pass

    def settled(self, observed: Observed) -> None:
        pass


@dataclass(frozen=True)
class Reconciled:
    """The outcome of a pass that converged. ``report.plan.empty`` means nothing was written;
    ``observed`` is the first read (what the plan was made from)."""

    report: ApplyReport
    observed: Observed
    after: Plan | None = None
    """The verify plan after a write (``None`` when nothing was written): empty, or holding only
    steering that northd reported ready meanwhile (``core.transitions.only_progress``)."""

    @property
    def changed(self) -> bool:
        return not self.report.plan.empty


class Pipeline:
    """One observe -> plan -> empty guard -> apply -> verify, with its collaborators fixed.

    Stateless between runs (any memory lives in the planner), so one instance serves every pass
    of a loop."""

    def __init__(
        self,
        kube: KubeProvider,
        ovn: OvnProvider,
        options: CompileOptions,
        *,
        planner: Planner | None = None,
        guard: WriteGuard | None = None,
        notify: Notifier | None = None,
        allow_empty: bool = False,
        scope: Scope | None = None,
    ) -> None:
        self.kube = kube
        self.ovn = ovn
        self.scope: Scope = scope if scope is not None else CentralScope()
        self.options = options
        self.compile_options = self.scope.options(options)
        """What the planner compiles with (a node agent's marks its rows)."""
        self.planner: Planner = planner if planner is not None else FullPlanner()
        self.guard = guard
        self.notify = notify
        self.allow_empty = allow_empty

    def run(
        self,
        desired: Desired,
        revision: str | None = None,
        listener: PassListener | None = None,
    ) -> Reconciled:
        """Reconcile the live state to ``desired``; ``revision`` (the commit) is recorded on
        every object written. Raises what a step raises: an adapter's ``EndpointError``,
        :class:`EmptyDesiredRefused`, ``Aborted`` from the guard, :class:`NotConverged`."""
        events = listener if listener is not None else SilentListener()
        scope = self.scope
        instance = self.options.instance
        compiled_desired = scope.desired(desired)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        view = scope.view(observe_in(scope, self.kube, self.ovn, instance))
        observed = view.observed
        timings["observe"] = time.perf_counter() - started
        events.observed(observed)
        started = time.perf_counter()
        planned = self.planner.plan(compiled_desired, observed, self.compile_options)
        first = scope.restrict(planned, view)
        timings["plan"] = time.perf_counter() - started
        guard_empty(desired, first, self.allow_empty)
        if first.empty:
            events.settled(observed)
            return Reconciled(ApplyReport(first, seconds=timings), observed)

        events.applying(first)
        kube: KubeWriter = writer_for(scope, self.kube)
        ovn: OvnWriter = self.ovn
        if self.guard is not None:
            self.guard.before_apply()
            kube, ovn = GuardedKube(kube, self.guard), GuardedOvn(ovn, self.guard)
        report = apply_plan(first, kube, ovn, desired=desired, revision=revision,
                            notify=self.notify)  # fmt: skip
        events.applied(report, observed)

        started = time.perf_counter()
        after_view = scope.view(observe_in(scope, self.kube, self.ovn, instance))
        after = after_view.observed
        second = scope.restrict(
            self.planner.plan(compiled_desired, after, self.compile_options), after_view
        )
        timings["verify"] = time.perf_counter() - started
        report.seconds = {**timings, **report.seconds}
        events.settled(after)
        if not second.empty and not only_progress(first, second):
            raise NotConverged(second)
        return Reconciled(report, observed, second)


def reconcile(
    desired: Desired,
    kube: KubeProvider,
    ovn: OvnProvider,
    options: CompileOptions,
    *,
    revision: str | None = None,
    notify: Notifier | None = None,
    allow_empty: bool = False,
    scope: Scope | None = None,
) -> ApplyReport:
    """One full reconcile, as ``osc-gitops apply`` does it: every plan a full compile."""
    pipeline = Pipeline(kube, ovn, options, notify=notify, allow_empty=allow_empty, scope=scope)
    return pipeline.run(desired, revision).report
