"""``osc-gitops run``: the long-running reconcile loop (and ``--once``, the CronJob mode).

This module runs the threads and the passes. *When* a pass is due is decided in
``reconciler.engine.scheduling``, *what* a pass does is the pipeline
(``reconciler.engine.pipeline``), *which manifests* it reconciles the source tracker
(``reconciler.engine.sources``), and what it reports goes through ``reconciler.engine.reporting``.

One main thread reconciles; helper threads only *request* reconciles:

- pod and VirtualMachine watches (:meth:`KubeProvider.watch`) -> ``request("pod"|"vm")``;
- a source poller (git fetch every ``git_interval``, or at once on SIGHUP) -> ``request("git")``
  when a new commit passed validation;
- the Lease renewer -> ``request("leader")`` when this replica becomes the leader;
- the periodic timer (``interval`` with +-``jitter``) lives in the main thread.

Requests are *debounced* (``scheduling.Scheduler``): the first one opens a window that closes
``debounce`` seconds after the last request (at most ``debounce_max`` after the first), so a
burst of pod events is a handful of reconciles, while a single labelled pod is steered about
``debounce`` seconds later.

Safety rules, each covered by a test in ``tests/unit/engine`` (with in-memory fakes) and
``tests/functional/loop`` (with real servers):

- **Last good commit.** An invalid revision is refused whole and the last good one keeps being
  reconciled; an unreachable source keeps the last good commit. Both are reported, neither stops
  the loop (``reconciler.engine.sources``).
- **Leader election.** With ``--leader-elect`` only the replica holding the Lease writes. Right
  before each apply the Lease is renewed on the server, and every single write first checks
  that the renewal is still fresh; otherwise the reconcile is aborted before that write
  (``reconciler.engine.guard``).
- **SIGTERM/SIGINT** only set a flag. Writes check it before they start, so the OVN transaction
  (one atomic commit) is either not started or runs to completion; then the loop releases the
  Lease and exits 0. Nothing is ever half-written.
- **Backoff.** Failed reconciles are retried after ``backoff_base * 2**(n-1)`` seconds (capped at
  ``backoff_max``, with jitter); events do not bypass it. ``--once`` retries nothing: it logs
  how its one pass ended and exits 1.
- **Full resync.** Between full compiles (every ``full_resync`` seconds) passes re-plan only
  what changed (``reconciler.core.planning.incremental``).
- **A dying thread is never healthy.** Every helper thread runs supervised
  (:meth:`Loop._supervised`): one that raises or returns while the loop runs is logged as one
  JSON line (``worker thread died``, with its traceback as a list), turns its
  ``osc_gitops_worker_up{thread=…}`` to 0 and makes ``/healthz`` fail (``dead_threads`` in
  the body), so the kubelet restarts the process instead of a loop that silently stopped
  following git or pods. The source poller itself catches every error of one poll, so only a
  bug outside a poll can end it.

Every timing decision reads an injected clock (default ``time.monotonic``), so the rules above
are tested without sleeping.

What a pass reports: the JSON log lines (``reporting.logs``), a :class:`Reporter` (Prometheus
in ``run``), the status file (``reporting.status.StatusBook``) and, for a node agent or the
central owner of an interconnect cluster, the status it publishes for ``status --all-nodes``
(:class:`StatusPublisher`, ``reporting.fleet``).

The loop reconciles the scope of its config (``reconciler.core.planning.slicing``): a node agent's
loop watches only its node's pods (the adapter's field selector) and never writes Kubernetes; a
``--kubernetes-only`` loop watches no pods at all.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import signal
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.core.compiling import diff as diff_mod
from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed, OvnRow
from reconciler.core.model.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER
from reconciler.core.model.plan import Plan
from reconciler.core.planning.slicing import CentralScope, NodeScope, Scope
from reconciler.core.planning.zoned import SLICE_FIELDS, SLICE_LIMIT, encode_slice
from reconciler.engine import gc_tuning
from reconciler.engine.apply import ApplyReport
from reconciler.engine.guard import LoopGuard
from reconciler.engine.notifications import Outbox, load_told, save_told
from reconciler.engine.pipeline import Pipeline
from reconciler.engine.providers import (
    KubeProvider,
    LeaseProvider,
    NoopReporter,
    Notifier,
    OvnProvider,
    Reporter,
    StatusPublisher,
)
from reconciler.engine.reporting.fleet import status_record
from reconciler.engine.reporting.health import OvnHealthReport
from reconciler.engine.reporting.logs import LOGGER, reconcile_id
from reconciler.engine.reporting.status import StatusBook
from reconciler.engine.scheduling import Clock, OvnLagRetry, ResyncPlanner, Scheduler, Timing
from reconciler.engine.sources import ManifestSource, SourceTracker
from reconciler.engine.transitions import TransitionReport, Transitions, VmActions
from reconciler.errors import Aborted, OscError, error_cause

log = logging.getLogger(LOGGER)

EXIT_OK, EXIT_ERROR = 0, 1
ONCE = "once"
"""The trigger of ``run --once``'s single pass: a failure ends the process instead of being
retried after a backoff."""


@dataclass
class LoopConfig:
    """The loop's settings (``osc-gitops run``'s flags); times in seconds."""

    options: CompileOptions
    # The scheduler's settings (``timing``) default as :class:`Timing` has them.
    interval: float = Timing.interval
    jitter: float = Timing.jitter
    debounce: float = Timing.debounce
    debounce_max: float = Timing.debounce_max
    git_interval: float = 30.0
    backoff_base: float = Timing.backoff_base
    backoff_max: float = Timing.backoff_max
    allow_empty: bool = False
    watch: bool = True
    status_file: Path | None = None
    full_resync: float = 600.0
    """Seconds between full compiles. In between, passes re-plan only the nodes whose pods, pod LSPs
    or owned rows changed (``reconciler.core.planning.incremental``), fed by the watch-driven
    caches; a full compile is the safety net, like controller-runtime's ``SyncPeriod``. 0:
    always."""
    lag_retries: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.8)
    """Delays of the quick re-reconciles scheduled while scheduled pods have no OVN port yet
    (OVN-Kubernetes writes the port a few ms after the pod event; our IDL follows it)."""
    scope: Scope = field(default_factory=CentralScope)
    """What this loop reconciles: everything, one node's OVN slice, or the Kubernetes side."""
    told_file: Path | None = None
    """``run --once``: where it keeps what it told the security managers between runs
    (``reconciler.engine.notifications.Outbox.told``); the long-running loop tells everything
    once at start and keeps the rest in memory."""

    @property
    def instance(self) -> str:
        return self.options.instance

    @property
    def timing(self) -> Timing:
        """The scheduler's settings: the fields of :class:`Timing`, as this config has them."""
        return Timing(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Timing)})


@dataclass
class PassResult:
    """How one pass ended (``cause``: the error's metric label)."""

    result: str  # applied | unchanged | error | refused | source-unreachable | standby
    changes: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    cause: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.result in ("applied", "unchanged")


class ManagedCounts:
    """Objects we own by kind, recounted only when the caches hand back new tuples.

    ``ovn_only``: count OVN rows only (a node agent reads its node's VirtualMachines and NADs,
    but the central owner owns them)."""

    def __init__(self, ovn_only: bool = False) -> None:
        self.ovn_only = ovn_only
        self._key: tuple[OvnRow, ...] | None = None
        self._counts: dict[str, int] = {}

    def of(self, observed: Observed) -> dict[str, int]:
        # The OVN rows (tens of thousands) are recounted only when the reader hands back a new
        # tuple; the Kubernetes objects (a few per node) are counted every time, because
        # ``observe`` builds their tuple anew from the cache's lists.
        if self._key is None or observed.ovn_rows is not self._key:
            counts: dict[str, int] = {}
            for row in observed.ovn_rows:
                counts[row.table] = counts.get(row.table, 0) + 1
            self._key, self._counts = observed.ovn_rows, counts
        counts = dict(self._counts)
        for obj in () if self.ovn_only else observed.kube_objects:
            counts[obj.kind] = counts.get(obj.kind, 0) + 1
        return counts


# ------------------------------------------------------------------------------------- the loop


class Loop:
    """The reconciler as a service. Construct, then :meth:`run` (blocking) or
    :meth:`run_once`; :meth:`shutdown` (any thread, or SIGTERM) stops it.

    ``settle`` runs after a pass whose full compile rebuilt the planner's memory
    (``reconciler.engine.gc_tuning``); ``clock`` and ``rng`` drive every timing decision.
    ``publisher``: where this replica publishes its state after each pass it did not sit out
    (a node agent's or the central owner's status Lease)."""

    def __init__(
        self,
        config: LoopConfig,
        source: ManifestSource,
        kube: KubeProvider,
        ovn: OvnProvider,
        *,
        lease: LeaseProvider | None = None,
        reporter: Reporter | None = None,
        notify: Notifier | None = None,
        outbox: Outbox | None = None,
        publisher: StatusPublisher | None = None,
        stopping: threading.Event | None = None,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        settle: Callable[[], None] = gc_tuning.settle,
        wall_clock: Clock = time.time,
    ) -> None:
        self.config = config
        self.kube = kube
        self.lease = lease
        self.reporter: Reporter = reporter if reporter is not None else NoopReporter()
        self.stopping = stopping if stopping is not None else threading.Event()
        self.clock = clock
        self.settle = settle
        self._cond = threading.Condition()
        self.schedule = Scheduler(config.timing, clock, rng if rng is not None else random.Random())
        self.status_book = StatusBook(config.status_file, config.instance, source.description)
        self.sources = SourceTracker(source, self.reporter, self.request, self.status_book.refused)
        self.planner = ResyncPlanner(config.full_resync, clock)
        self.pipeline = Pipeline(
            kube,
            ovn,
            config.options,
            planner=self.planner,
            guard=LoopGuard(self.stopping, lease),
            notify=notify,
            allow_empty=config.allow_empty,
            scope=config.scope,
            notices=outbox,
        )
        self.outbox = outbox
        """The security managers' notifications (delivered by its own threads, workers like the
        others: their death fails ``/healthz``; its state goes into the status after each pass,
        its attempts into the metrics as they happen)."""
        if outbox is not None:
            outbox.on_thread = self._outbox_thread
        self.lag = OvnLagRetry(config.lag_retries, self.request)
        self.managed = ManagedCounts(ovn_only=not config.scope.writes_kubernetes)
        self.publisher = publisher
        self.last_counts: dict[str, int] = {}
        self._published: tuple[tuple[dict[str, Any], str | None], float] | None = None
        self.last_observed: Observed | None = None
        """The live state at the end of the last pass, as the scope sees it."""
        self._slice: tuple[tuple[Any, ...], str | None] | None = None
        """What this replica owned at the end of its last pass, by kind (for its status)."""
        self.ovn_report = OvnHealthReport(self.reporter, self.status_book)
        self.ovn = ovn
        self.transitions = self._transitions(config, kube, lease, wall_clock)
        """Rolling updates' steps and held steering, after each pass (``engine.transitions``)."""
        self.last_transitions = TransitionReport()
        self._recheck: threading.Timer | None = None
        diff_mod.warm_up()
        self.applied_revision: str | None = None
        """The revision the live state was last reconciled to."""
        self.ready = False
        """The first observation succeeded (readiness)."""
        self._in_pass_since: float | None = None
        self._threads: list[threading.Thread] = []
        self.dead_workers: dict[str, str] = {}
        """Worker threads that died while the loop ran, with why (``/healthz`` fails)."""
        self.passes = 0
        self.applies = 0
        self.last: PassResult | None = None

    def _transitions(
        self, config: LoopConfig, kube: KubeProvider, lease: LeaseProvider | None, wall: Clock
    ) -> Transitions:
        """A rollout restarts a VM only after OVN saw the previous one healthy: a scope that
        reads no NB (``--kubernetes-only``) cannot tell, so it reports rollouts but takes no
        step; the steps it takes name this process (the loop's instance) as the owner."""
        writes_kube = (
            config.scope.writes_kubernetes
            and config.scope.reads_ovn
            and isinstance(kube, VmActions)
        )
        return Transitions(
            kube if writes_kube else None,  # type: ignore[arg-type]
            guard=LoopGuard(self.stopping, lease),
            clock=wall,
            instance=config.instance,
        )

    # ---------------------------------------------------------------- triggering

    def request(self, reason: str) -> None:
        """Ask for a reconcile (thread-safe, cheap: called for every watch event)."""
        with self._cond:
            self.schedule.request(reason)
            self._cond.notify_all()

    def shutdown(self, *_: Any) -> None:
        """Stop after the current step; writes not yet started are skipped."""
        self.stopping.set()
        with self._cond:
            self._cond.notify_all()

    def reload(self, *_: Any) -> None:
        """SIGHUP: fetch the source now and reconcile (in a thread of its own, which logs any
        error as JSON and ends: the poller keeps polling)."""
        threading.Thread(target=self._reload, daemon=True, name="sighup-reload").start()

    def _reload(self) -> None:
        try:
            self._poll_source(True)
        except Exception as exc:
            self.reporter.error(error_cause(exc))
            log.error("reload (SIGHUP) failed", exc_info=exc,
                      extra={"source": self.sources.source.description})  # fmt: skip

    def refresh_source(self) -> bool:
        """Fetch + validate; returns True when the desired state changed. Never raises."""
        return self.sources.refresh(last_applied=self.status_book.status.revision)

    def _poll_source(self, forced: bool = False) -> None:
        if self.refresh_source() or forced:
            self.request("sighup" if forced else "git")

    def _poller(self) -> None:
        while not self.stopping.wait(self.config.git_interval):
            try:
                self._poll_source()
            except Exception as exc:  # never the end of the thread: the next poll retries
                self.reporter.error(error_cause(exc))
                log.error("source poll failed", exc_info=exc,
                          extra={"source": self.sources.source.description})  # fmt: skip

    # ---------------------------------------------------------------- one reconcile

    def reconcile_pass(self, trigger: str = "manual") -> PassResult:
        """Observe, plan, (confirm the lease), apply, verify: one reconcile, never raises."""
        token = reconcile_id.set(uuid.uuid4().hex[:12])
        started = time.perf_counter()
        self._in_pass_since = self.clock()
        try:
            result = self._pass(trigger)
        except Exception as exc:
            # After a failed pass (half-applied, lost connection) trust nothing remembered.
            self.planner.reset()
            cause = error_cause(exc)
            result = PassResult("error", error=str(exc), cause=cause)
            self.reporter.error(cause)
            level = logging.WARNING if isinstance(exc, Aborted) else logging.ERROR
            traced = not isinstance(exc, OscError) or exc.show_traceback
            log.log(
                level,
                "reconcile failed",
                exc_info=exc if traced else None,
                extra={"error": str(exc), "cause": cause, "trigger": trigger},
            )
        finally:
            self._in_pass_since = None
        result.seconds = time.perf_counter() - started
        if self.planner.settle_due:
            # A full compile rebuilt the planner's memory: freeze what survived so the
            # collector stops walking it on every later pass (reconciler.engine.gc_tuning).
            self.planner.settle_due = False
            self.settle()
        self._record(result, trigger)
        reconcile_id.reset(token)
        return result

    def _pass(self, trigger: str) -> PassResult:
        if self.lease is not None and not self.lease.held():
            log.debug("standby: not the leader", extra={"trigger": trigger})
            return PassResult("standby")
        if not self.sources.source.polls:
            self.refresh_source()
        current = self.sources.current()
        if current.desired is None:
            if current.source_error:
                return PassResult("source-unreachable", error=current.source_error, cause="git")
            errors = "; ".join(self.status_book.status.errors[:3])
            return PassResult("refused", error=f"no valid manifests yet: {errors}",
                              cause="manifests")  # fmt: skip
        revision = current.revision
        outcome = self.pipeline.run(current.desired, revision, _PassEvents(self, revision, trigger))
        self._after_transitions(
            outcome.report.plan, self.last_observed or outcome.observed, current.desired
        )
        if outcome.after is not None and not outcome.after.empty:
            self.request("ovn-health")  # northd reported held steering ready meanwhile
        if outcome.changed:
            result = PassResult("applied", changes=outcome.report.plan.summary())
        else:
            self.lag.check(outcome.observed)
            self.applied_revision = revision
            result = PassResult("unchanged")
        if current.source_error:
            result.error = (
                f"source unreachable, reconciled last good {revision}: {current.source_error}"
            )
        return result

    def _after_transitions(
        self, plan: Plan, observed: Observed, desired: Desired | None = None
    ) -> None:
        """The rollouts' steps and the held-steering books after a pass; a step written, or a
        time limit ahead, asks for the next pass (a change of health asks through the NB)."""
        report = self.transitions.after_pass(plan, observed, desired)
        self.last_transitions = report
        self.reporter.transitions(report.held_instances(self.transitions.clock()),
                                  report.rollouts, report.allowances)  # fmt: skip
        self.status_book.transitions(report.status_json())
        if report.steps:
            self.request("rollout")
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None
        if report.recheck_at is not None:
            delay = max(0.0, report.recheck_at - self.transitions.clock()) + 0.05
            self._recheck = threading.Timer(delay, self.request, args=("rollout",))
            self._recheck.daemon = True
            self._recheck.start()

    def _on_ovn_health(self) -> None:
        """northd changed a function group's active function: a pass, if anything waits for
        one (held steering, a rollout) or a pass is running (its plan may be holding what
        this makes ready); otherwise health is only reported by the next pass."""
        if self.last_transitions.busy or self._in_pass_since is not None:
            self.request("ovn-health")

    def _record(self, result: PassResult, trigger: str) -> None:
        self.passes += 1
        self.last = result
        if result.result == "error" and trigger != ONCE:
            with self._cond:
                delay = self.schedule.failed()
            log.info("retrying after backoff", extra={"seconds": round(delay, 2)})
        elif result.result not in ("standby", "error"):
            with self._cond:
                self.schedule.succeeded()
        self.reporter.pass_finished(result.result, trigger, result.seconds)
        if result.ok:
            self.reporter.reconciled(self.applied_revision)
        if result.result == "standby":
            return
        if self.outbox is not None:
            self.status_book.security_managers(self.outbox.status())
        sources = self.sources
        self.status_book.record(
            result.result,
            message=result.error,
            changes=result.changes,
            applied_revision=self.applied_revision,
            latest_seen=sources.latest_seen,
            refused=sources.refused_errors(sources.latest_seen),
            source_error=sources.source_error,
        )
        self.publish_status()

    def publish_status(self) -> None:
        """Publish this replica's state after a pass it did not sit out: when it changed, and
        otherwise about once per ``interval`` as a heartbeat (a burst of pod events must not
        become a burst of Lease writes). A status that cannot be published is logged and
        counted, never a reason to stop reconciling."""
        if self.publisher is None:
            return
        scope = self.config.scope
        record = status_record(
            self.status_book.status,
            role="agent" if isinstance(scope, NodeScope) else "central",
            node=scope.node if isinstance(scope, NodeScope) else None,
            rows=self.last_counts,
        )
        observed = self._encoded_slice() if isinstance(scope, NodeScope) else None
        content = ({k: v for k, v in record.items() if k != "updated_at"}, observed)
        now = self.clock()
        last = self._published
        if last is not None and last[0] == content and now - last[1] < 0.9 * self.config.interval:
            return
        try:
            self.publisher.publish(record, observed)
            self._published = (content, now)
        except OscError as exc:
            self.reporter.error(error_cause(exc))
            where = self.publisher.where
            log.warning("cannot publish the status", extra={"error": str(exc), "where": where})

    def _encoded_slice(self) -> str | None:
        """A node agent's view of its zone, encoded for ``snapshot --all-nodes``
        (``reconciler.core.planning.zoned``); encoded again only when a part of it changed, and
        ``None`` when too big to publish."""
        observed = self.last_observed
        if observed is None:
            return None
        key = tuple(getattr(observed, name) for name in SLICE_FIELDS)
        last = self._slice
        if last is not None and all(a is b or a == b for a, b in zip(last[0], key, strict=True)):
            return last[1]
        text: str | None = encode_slice(observed)
        if text is not None and len(text) > SLICE_LIMIT:
            log.warning("observed slice too big to publish", extra={"bytes": len(text)})
            text = None
        self._slice = (key, text)
        return text

    # ---------------------------------------------------------------- probes

    def health(self) -> tuple[bool, dict[str, Any]]:
        since = self._in_pass_since
        limit = max(120.0, 4 * self.config.interval)
        stuck = since is not None and self.clock() - since > limit
        dead = sorted(self.dead_workers)
        detail: dict[str, Any] = {"stuck": stuck}
        if dead:
            detail["dead_threads"] = dead
        return (not stuck and not dead, detail)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        leader = self.lease.held() if self.lease is not None else True
        ready = self.ready or (self.lease is not None and not leader)
        return (ready, {"leader": leader, "revision": self.applied_revision})

    # ---------------------------------------------------------------- running

    def run_once(self) -> int:
        """CronJob mode: one reconcile, exit code as ``apply`` (0 ok, 1 error/refused)."""
        self.refresh_source()
        if self.lease is not None:
            self.lease.try_acquire_or_renew()
            if not self.lease.held():
                log.info("another replica holds the lease; nothing to do")
                return EXIT_OK
        if self.outbox is not None and self.config.told_file is not None:
            self.outbox.remember(load_told(self.config.told_file))
        result = self.reconcile_pass(ONCE)
        if self.outbox is not None:  # one pass, then the process exits: deliver what it told
            self.outbox.flush(2 * self.outbox.settings.timeout, retry=False)
            if self.config.told_file is not None:
                try:
                    save_told(self.config.told_file, self.outbox.told())
                except OSError as exc:
                    log.warning("cannot write what the security managers were told",
                                extra={"error": str(exc)})  # fmt: skip
            self.status_book.security_managers(self.outbox.status(), save=True)
            self.outbox.close()
        failed = bool(
            not result.ok or self.sources.latest_refused or self.sources.source_error is not None
        )
        # Say how the one pass ended and that the process exits: nothing is retried (the
        # error, if any, was logged with its cause just before; the next CronJob run starts
        # afresh).
        if failed:
            log.error("run --once: the pass did not reconcile; exiting with code 1, no retry",
                      extra={"result": result.result})  # fmt: skip
        else:
            log.info("run --once: reconciled; exiting with code 0", extra={"result": result.result})
        return EXIT_ERROR if failed else EXIT_OK

    def _start_thread(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(
            target=self.supervised, args=(name, target, *args), name=name, daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def supervised(self, name: str, target: Callable[..., None], *args: Any) -> None:
        """Run a worker thread's ``target``; its end while the loop runs is a death (module
        docstring): recorded, counted, logged, and /healthz fails from then on."""
        self.reporter.worker(name, True)
        try:
            target(*args)
        except BaseException as exc:
            self.worker_died(name, exc)
            return
        if not self.stopping.is_set():
            self.worker_died(name, None)

    def _outbox_thread(self, name: str, alive: bool, exc: BaseException | None) -> None:
        """A security manager's delivery thread started, or died before the outbox closed."""
        if alive:
            self.reporter.worker(name, True)
        else:
            self.worker_died(name, exc)

    def worker_died(self, name: str, exc: BaseException | None) -> None:
        """Record that the worker thread ``name`` ended while it should run (``exc``: why)."""
        reason = f"{type(exc).__name__}: {exc}" if exc is not None else "returned"
        self.dead_workers[name] = reason
        self.reporter.worker(name, False)
        self.reporter.error(error_cause(exc) if exc is not None else "other")
        trace = "".join(traceback.format_exception(exc)) if exc is not None else ""
        log.error(
            "worker thread died; /healthz fails from now on so that the process is restarted",
            extra={"worker": name, "reason": reason, "traceback": trace.splitlines()},
        )

    def _on_pod(self, etype: str, obj: dict[str, Any]) -> None:
        self.request("pod")

    def _on_vm(self, etype: str, obj: dict[str, Any]) -> None:
        self.request("vm")

    def start_watches(self) -> None:
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{OWNER}={self.config.instance}"
        if self.config.scope.reads_pods:
            self._start_thread("watch-pods", self.kube.watch, "Pod", self._on_pod, self.stopping)
        self._start_thread(
            "watch-vms", self.kube.watch, "VirtualMachine", self._on_vm, self.stopping, selector
        )

    def _wait_for_work(self) -> str | None:
        """Block until a pass is due; its trigger, or None once stopping."""
        with self._cond:
            while not self.stopping.is_set():
                trigger, wait = self.schedule.next_pass()
                if trigger is not None:
                    return trigger
                self._cond.wait(wait)
        return None

    def run(self, *, install_signals: bool = False) -> int:
        """Serve until :meth:`shutdown`/SIGTERM; exit code 0 after a clean shutdown."""
        if install_signals:
            signal.signal(signal.SIGTERM, self.shutdown)
            signal.signal(signal.SIGINT, self.shutdown)
            signal.signal(signal.SIGHUP, self.reload)
        log.info(
            "starting",
            extra={
                "source": self.sources.source.description,
                "instance": self.config.instance,
                "identity": self.lease.identity if self.lease is not None else None,
            },
        )
        self.refresh_source()
        if self.lease is not None:
            self.lease.on_change.append(self._on_leadership)
            self._start_thread("lease", self.lease.run, self.stopping)
        else:
            self.reporter.leader(True)
        if self.sources.source.polls:
            self._start_thread("source-poller", self._poller)
        if self.config.watch:
            self.start_watches()
        watch_health = getattr(self.ovn, "watch_health", None)
        if callable(watch_health):
            watch_health(self._on_ovn_health)
        self.request("start")
        with self._cond:
            self.schedule.start()
        try:
            while (trigger := self._wait_for_work()) is not None:
                self.reconcile_pass(trigger)
        finally:
            if self._recheck is not None:
                self._recheck.cancel()
            # another process may go on with a rollout this one rolled, at once (before the
            # stop flag: the write guard refuses every write after it)
            self.transitions.release()
            self.stopping.set()
            if self.lease is not None:
                self.lease.release()
            for thread in self._threads:
                thread.join(timeout=5)
            if self.outbox is not None:
                self.outbox.close()
            log.info("stopped", extra={"passes": self.passes, "applies": self.applies})
        return EXIT_OK

    def _on_leadership(self, held: bool) -> None:
        self.reporter.leader(held)
        if held:
            self.request("leader")


class _PassEvents:
    """The loop's books, kept as the pipeline goes (see :class:`PassListener`)."""

    def __init__(self, loop: Loop, revision: str | None, trigger: str) -> None:
        self.loop = loop
        self.revision = revision
        self.trigger = trigger

    def observed(self, observed: Observed) -> None:
        self.loop.ready = True

    def applying(self, plan: Plan) -> None:
        if self.revision == self.loop.applied_revision:
            self.loop.reporter.drift_detected()

    def applied(self, report: ApplyReport, observed: Observed) -> None:
        loop = self.loop
        loop.applies += 1
        loop.reporter.changes_applied(report.plan.changes)
        log.info(
            "applied",
            extra={
                "revision": self.revision,
                "changes": report.plan.summary(),
                "trigger": self.trigger,
                "identity": loop.lease.identity if loop.lease is not None else None,
                "ovn_transaction_ms": round(report.seconds.get("ovn_transaction", 0) * 1000, 1),
            },
        )
        for error in report.notification_errors:
            log.warning("security manager notification failed", extra={"error": error})
        loop.applied_revision = self.revision
        loop.lag.check(observed)  # after the commit: not on the event's latency path

    def settled(self, observed: Observed) -> None:
        counts = self.loop.managed.of(observed)
        self.loop.last_counts = counts
        self.loop.last_observed = observed
        self.loop.reporter.managed_objects(counts)
        self.loop.ovn_report.settled(observed)
