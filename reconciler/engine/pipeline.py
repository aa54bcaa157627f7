"""The reconcile pipeline: observe -> plan -> empty guard -> apply -> verify. The only one.

``osc-gitops apply`` (through :func:`reconcile`) and every pass of the loop
(``reconciler.engine.loop``) run this same :class:`Pipeline`; ``osc-gitops plan`` runs its first
half (:meth:`Pipeline.preview`, or :func:`preview` of a snapshot file): the same read, the same
scope and the same planning step, nothing written. They differ only in what they hand it:

- the **planner**: a full compile every time (``reconciler.core.planning.full.FullPlanner``) for the
  CLI, the incremental planner with a periodic full resync for the loop;
- the **write guard** (``reconciler.engine.guard``): none for the CLI, "not shutting down and
  still the leader" for the loop;
- a **listener** told about each step, with which the loop keeps its books (readiness, drift,
  the revision applied, metrics); the CLI needs none;
- the **scope** (``reconciler.core.planning.slicing``): everything (the default), one node's OVN
  slice (``--node``), or the Kubernetes side only (``--kubernetes-only``). It decides what is read
  (``reconciler.engine.scoped``), the view the planner sees, and the part of each plan carried
  out; an agent's Kubernetes writer refuses every write.

Effects happen only through the providers (``reconciler.engine.providers``): the algorithm does
not know about ``kubernetes`` or ``ovsdbapp``. Writes go in the safe order of
``reconciler.engine.apply``; afterwards what we write (the NB, our Kubernetes objects) is read
again (pods, nodes and NetworkPolicies, which we never write, are the first read's:
``reconciler.engine.scoped.observe_verify``) and planned again, and that plan must be empty (but
for held steering northd reported ready meanwhile, or a plan following a health verdict northd
changed meanwhile: ``reconciler.core.transitions.hold``), else :class:`NotConverged`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Protocol

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.compiling.notices import MemberKey, MemberNotice, member_notices, wanted
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Plan
from reconciler.core.planning.full import (
    CompiledPlan,
    FullPlanner,
    compile_plan,
    owned_namespaces,
    owned_only,
)
from reconciler.core.planning.slicing import CentralScope, Scope, ScopedView
from reconciler.core.transitions.health import plan_report
from reconciler.core.transitions.hold import only_progress, with_health_of
from reconciler.engine.apply import ApplyReport, apply_plan
from reconciler.engine.guard import GuardedKube, GuardedOvn, WriteGuard
from reconciler.engine.providers import (
    KubeProvider,
    KubeWriter,
    NotificationSink,
    Notifier,
    OvnProvider,
    OvnWriter,
)
from reconciler.engine.scoped import (
    observe,
    observe_in,
    observe_verify,
    require_node,
    writer_for,
)
from reconciler.errors import InternalError, UserError

__all__ = [
    "ApplyReport",
    "EmptyDesiredRefused",
    "NotConverged",
    "PassListener",
    "Pipeline",
    "Planner",
    "Preview",
    "Reconciled",
    "guard_empty",
    "observe",
    "preview",
    "reconcile",
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


class Planner(Protocol):
    """Desired + observed -> plan. ``full`` asks a planner with memory to compile everything
    (a planner without memory always does)."""

    def plan(
        self, desired: Desired, observed: Observed, options: CompileOptions, *, full: bool = False
    ) -> Plan: ...


def scoped_plan(
    planner: Planner,
    scope: Scope,
    desired: Desired,
    view: ScopedView,
    options: CompileOptions,
) -> Plan:
    """The planning step of every pass, verify and preview: ``planner``'s plan of ``desired``
    (already the scope's: :meth:`Scope.desired`) from what the scope sees, restricted to the
    part the scope carries out."""
    return scope.restrict(planner.plan(desired, view.observed, options), view)


class _Compiling:
    """A full compile that keeps the last :class:`CompiledPlan`: a preview shows, beside its
    changes, what it compiled (VNF instances, NF ids)."""

    compiled: CompiledPlan | None = None

    def plan(
        self, desired: Desired, observed: Observed, options: CompileOptions, *, full: bool = False
    ) -> Plan:
        self.compiled = compile_plan(desired, observed, options, potential=False)
        return self.compiled.plan


@dataclass(frozen=True)
class Preview:
    """What a pass would change (``osc-gitops plan``), and the live state it was planned from,
    as the scope sees it."""

    plan: Plan
    observed: Observed


def preview(
    desired: Desired,
    observed: Observed,
    options: CompileOptions,
    *,
    scope: Scope | None = None,
    revision: str | None = None,
) -> Preview:
    """What a pass would change, from the live state ``observed`` (``osc-gitops plan``; a
    snapshot file, or :meth:`Pipeline.preview`'s read): always a full compile, with each VNF
    instance's health as OVN reports it and the NF id budget beside the changes (plan facts,
    where the scope reads OVN), and ``revision`` (the commit) when given."""
    scope = scope if scope is not None else CentralScope()
    require_node(scope, observed)
    planner = _Compiling()
    view = scope.view(observed)
    the_plan = scoped_plan(planner, scope, scope.desired(desired), view, scope.options(options))
    if scope.reads_ovn:
        assert planner.compiled is not None
        compiled = planner.compiled
        report = plan_report(compiled.target, view.observed, compiled.health)
        the_plan = replace(the_plan, **report)
    if revision:
        the_plan = replace(the_plan, revision=revision)
    return Preview(the_plan, view.observed)


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
    """The verify plan after a write (``None`` when nothing was written): empty, holding only
    steering that northd reported ready meanwhile (``core.transitions.only_progress``), or
    following a verdict northd changed meanwhile (``core.transitions.with_health_of``)."""

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
        notices: NotificationSink | None = None,
    ) -> None:
        self.kube = kube
        self.ovn = ovn
        self.scope: Scope = scope if scope is not None else CentralScope()
        self.options = options
        self.compile_options = self.scope.options(options)
        """What the planner compiles with (a node agent's marks its rows)."""
        self.planner: Planner = planner if planner is not None else FullPlanner()
        self.guard = guard
        self.notices = notices
        """Where the security managers' notifications go (the outbox): events, and after every
        pass of a scope that reads pods the members each manager should hold."""
        self.notify: Notifier | None = notify if notify is not None else (
            notices.send if notices is not None else None
        )  # fmt: skip
        self.allow_empty = allow_empty
        self._told: tuple[tuple[object, ...], dict[MemberKey, MemberNotice]] | None = None

    def observe(self) -> Observed:
        """Read what the scope plans from (the OVN read waits for the initial sync)."""
        return observe_in(self.scope, self.kube, self.ovn, self.options.instance)

    def preview(self, desired: Desired, revision: str | None = None) -> Preview:
        """What :meth:`run` would change now, nothing written (:func:`preview` of a fresh
        read)."""
        return preview(desired, self.observe(), self.options, scope=self.scope, revision=revision)

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
        compiled_desired = scope.desired(desired)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        read = self.observe()
        require_node(scope, read)
        view = scope.view(read)
        observed = view.observed
        # what the loop, --wait and the metrics see: our objects only (the planner filters
        # itself and warns about the others: reconciler.core.planning.full.owned_only)
        namespaces = owned_namespaces(desired, self.options)
        ours = owned_only(observed, namespaces)
        timings["observe"] = time.perf_counter() - started
        events.observed(ours)
        started = time.perf_counter()
        first = scoped_plan(self.planner, scope, compiled_desired, view, self.compile_options)
        timings["plan"] = time.perf_counter() - started
        guard_empty(desired, first, self.allow_empty)
        if first.empty:
            self._tell_members(desired, view)
            events.settled(ours)
            return Reconciled(ApplyReport(first, seconds=timings), ours)

        events.applying(first)
        kube: KubeWriter = writer_for(scope, self.kube)
        ovn: OvnWriter = self.ovn
        if self.guard is not None:
            self.guard.before_apply()
            kube, ovn = GuardedKube(kube, self.guard), GuardedOvn(ovn, self.guard)
        report = apply_plan(first, kube, ovn, desired=desired, revision=revision,
                            notify=self.notify)  # fmt: skip
        self._tell_members(desired, view)
        events.applied(report, ours)

        started = time.perf_counter()
        # our NB rows and Kubernetes objects read again; pods, nodes, NetworkPolicies: the first
        # read's (we never write them: reconciler.engine.scoped.observe_verify says why)
        after_view = scope.view(observe_verify(scope, self.kube, self.ovn, self.options.instance,
                                               read))  # fmt: skip
        after = after_view.observed
        second = scoped_plan(self.planner, scope, compiled_desired, after_view,
                             self.compile_options)  # fmt: skip
        timings["verify"] = time.perf_counter() - started
        report.seconds = {**timings, **report.seconds}
        events.settled(owned_only(after, namespaces))
        if (
            not second.empty
            and not only_progress(first, second)
            and not self._health_news(first, compiled_desired, observed, after_view)
        ):
            raise NotConverged(second)
        return Reconciled(report, ours, second)

    def _tell_members(self, desired: Desired, view: ScopedView) -> None:
        """Hand the outbox what every security manager should hold after this pass: the
        members per (binding, VNF, node) of the pods this scope reads (a node agent: its node;
        a central run: every node but those agents hold; ``--kubernetes-only`` reads no pods
        and tells none). Computed again only when the manifests or the pods, ports or nodes
        read are new objects (the loop's caches keep them while nothing changed)."""
        if self.notices is None or not self.scope.reads_pods:
            return
        observed = view.observed
        sources = (desired, observed.pods, observed.pod_ports, observed.nodes, view.held)
        if self._told is not None and all(
            a is b for a, b in zip(self._told[0], sources, strict=True)
        ):
            return
        notices = member_notices(desired, observed, view.held) if wanted(desired) else {}
        self._told = (sources, notices)
        self.notices.members(notices)

    def _health_news(
        self, first: Plan, desired: Desired, before: Observed, after: ScopedView
    ) -> bool:
        """Whether the verify plan differs only because northd changed a verdict during the
        apply: planned again with the verdicts of the first read, nothing is left (but held
        steering)."""
        if after.observed.nf_active == before.nf_active:
            return False
        same = replace(after, observed=with_health_of(after.observed, before))
        again = scoped_plan(FullPlanner(), self.scope, desired, same, self.compile_options)
        return again.empty or only_progress(first, again)


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
    notices: NotificationSink | None = None,
) -> ApplyReport:
    """One full reconcile, as ``osc-gitops apply`` does it: every plan a full compile."""
    pipeline = Pipeline(kube, ovn, options, notify=notify, allow_empty=allow_empty, scope=scope,
                        notices=notices)  # fmt: skip
    return pipeline.run(desired, revision).report
