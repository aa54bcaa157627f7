"""``osc-gitops run``: the long-running reconcile loop (and ``--once``, the CronJob mode).

One main thread reconciles; helper threads only *request* reconciles:

- pod and VirtualMachine watches (``KubeCluster.watch``) -> ``request("pod"|"vm")``;
- a source poller (git fetch every ``git_interval``, or at once on SIGHUP) -> ``request("git")``
  when a new commit passed validation;
- the periodic timer (``interval`` with +-``jitter``) lives in the main thread.

Requests are *debounced*: the first one opens a window that closes ``debounce`` seconds after
the last request (at most ``debounce_max`` after the first), so a burst of 500 pod events is a
handful of reconciles, while a single labelled pod is steered ~``debounce`` seconds later.

Safety rules, each covered by a test in ``tests/gitops``:

- **Last good commit.** A commit whose manifests do not load is refused whole (its errors are
  logged and written to the status file with ``file:line`` relative to the repository root);
  an unreachable source keeps the last good commit. Both are reported, neither stops the loop.
- **Leader election.** With ``--leader-elect`` only the replica holding the Lease writes. Right
  before each apply the Lease is renewed on the server (:meth:`LeaseLock.confirm`), and every
  single write (Kubernetes create/update/delete, the OVN transaction) first checks that the
  renewal is still fresh; otherwise the reconcile is aborted before that write.
- **SIGTERM/SIGINT** only set a flag. Writes check it before they start, so the OVN transaction
  (one atomic commit) is either not started or runs to completion; then the loop releases the
  Lease and exits 0. Nothing is ever half-written.
- **Backoff.** Failed reconciles are retried after ``backoff_base * 2**(n-1)`` seconds (capped at
  ``backoff_max``, with jitter); events do not bypass it.

Logs are JSON lines on stderr (:class:`JsonFormatter`), each carrying the ``reconcile_id`` of
the reconcile that wrote it.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from reconciler.core import diff as diff_mod
from reconciler.core.compile import CompileOptions
from reconciler.core.incremental import IncrementalPlanner
from reconciler.core.model import Desired
from reconciler.core.observed import Observed
from reconciler.core.plan import Plan
from reconciler.engine import gc_tuning
from reconciler.engine import status as status_mod
from reconciler.engine.pipeline import (
    NotConverged,
    apply_plan,
    guard_empty,
    observe,
)
from reconciler.errors import Aborted, OscError, UserError, ValidationFailed, error_cause

log = logging.getLogger("osc_gitops.loop")

EXIT_OK, EXIT_ERROR = 0, 1

reconcile_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "reconcile_id", default=None
)


# ------------------------------------------------------------------------------------- logging

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg``, ``reconcile_id`` and
    every ``extra=`` field; exceptions as a single ``error`` string (no multi-line traces)."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = reconcile_id.get()
        if rid:
            data["reconcile_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            data["error"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        return json.dumps(data, default=str, ensure_ascii=False)


def setup_logging(fmt: str = "json", level: str = "info") -> None:
    """Route every logger to stderr, JSON lines (or plain text for humans)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes", "ovsdbapp", "git"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


# ------------------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class Snapshot:
    """Manifests of one revision: ``directory`` to load, ``revision`` (commit) if known,
    ``root`` to make error paths relative."""

    directory: Path
    revision: str | None = None
    root: Path | None = None
    fingerprint: str | None = None
    """For a local folder: changes whenever a file or directory under it does (see
    :func:`folder_fingerprint`); the same value means the manifests need no reload."""


def folder_fingerprint(root: Path) -> str:
    """A digest of every path under ``root`` with its inode, size and mtime (links followed,
    loops cut). Re-reading 400 manifests costs ~1 s; this ~5 ms. A ConfigMap update swaps the
    ``..data`` link to a new directory, so every file's inode changes with it."""
    entries: list[tuple[str, int, int, int, int]] = []
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        current = stack.pop()
        try:
            st = os.stat(current)
        except OSError:
            entries.append((current, -1, -1, -1, -1))
            continue
        entries.append((current, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
        if not os.path.isdir(current) or (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            names = sorted(os.listdir(current))
        except OSError:
            entries.append((current + "/", -1, -1, -1, -1))
            continue
        stack.extend(os.path.join(current, name) for name in names)
    entries.sort()
    return hashlib.sha256(repr(entries).encode()).hexdigest()


class ManifestSource(Protocol):
    description: str
    polls: bool
    """True for remote sources (fetched by the poller thread), False for a local folder
    (re-read at the start of every reconcile)."""

    def fetch(self) -> Snapshot: ...
    def cached(self, revision: str) -> Snapshot | None: ...


class LocalSource:
    """A folder on disk (a ConfigMap mount, a git-sync sidecar's checkout, a CI workspace)."""

    polls = False

    def __init__(self, path: str | Path, revision: str | None = None) -> None:
        self.path = Path(path)
        self.revision = revision
        self.description = str(path)

    def fetch(self) -> Snapshot:
        return Snapshot(self.path, self.revision, fingerprint=folder_fingerprint(self.path))

    def cached(self, revision: str) -> Snapshot | None:
        return None


class GitManifestSource:
    """:class:`reconciler.adapters.git.GitSource` as a :class:`ManifestSource`."""

    polls = True

    def __init__(self, source: Any) -> None:  # reconciler.adapters.git.GitSource
        self.source = source
        self.description = f"{source.settings.display_url}@{source.settings.ref}"

    def fetch(self) -> Snapshot:
        checkout = self.source.sync()
        return Snapshot(checkout.directory, checkout.commit, checkout.root)

    def cached(self, revision: str) -> Snapshot | None:
        root = self.source.checkouts / revision
        if not root.is_dir():
            return None
        return Snapshot(root / self.source.settings.path, revision, root)


# ------------------------------------------------------------------------------------- config


@dataclass
class LoopConfig:
    options: CompileOptions
    interval: float = 60.0
    jitter: float = 0.1
    debounce: float = 0.2
    debounce_max: float = 2.0
    git_interval: float = 30.0
    backoff_base: float = 1.0
    backoff_max: float = 300.0
    allow_empty: bool = False
    watch: bool = True
    status_file: Path | None = None
    full_resync: float = 600.0
    """Seconds between full compiles. In between, passes re-plan only the nodes whose pods, pod LSPs
    or owned rows changed (``reconciler.core.incremental``), fed by the watch-driven caches; a full
    compile is the safety net, like controller-runtime's ``SyncPeriod``. 0: always."""
    lag_retries: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.8)
    """Delays of the quick re-reconciles scheduled while scheduled pods have no OVN port yet
    (OVN-Kubernetes writes the port a few ms after the pod event; our IDL follows it)."""

    @property
    def instance(self) -> str:
        return self.options.instance


@dataclass
class PassResult:
    result: str  # applied | unchanged | error | refused | source-unreachable | standby | aborted
    changes: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    cause: str | None = None
    seconds: float = 0.0


# ------------------------------------------------------------------------------------- guards


class _Guarded:
    """Wraps a provider so that every write first calls ``guard`` (which raises
    :class:`Aborted`); reads pass through untouched."""

    _WRITES = frozenset({"create", "replace_managed", "delete", "apply"})

    def __init__(self, inner: Any, guard: Callable[[str], None]) -> None:
        self._inner = inner
        self._guard = guard

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._WRITES:
            return attr

        def guarded(*args: Any, **kwargs: Any) -> Any:
            self._guard(name)
            return attr(*args, **kwargs)

        return guarded


# ------------------------------------------------------------------------------------- the loop


class Loop:
    """The reconciler as a service. Construct, then :meth:`run` (blocking) or
    :meth:`run_once`; :meth:`shutdown` (any thread, or SIGTERM) stops it."""

    def __init__(
        self,
        config: LoopConfig,
        source: ManifestSource,
        kube: Any,
        ovn: Any,
        *,
        lease: Any = None,
        metrics: Any = None,
        notify: Callable[[str, dict[str, Any]], None] | None = None,
        stopping: threading.Event | None = None,
    ) -> None:
        self.config = config
        self.source = source
        self.kube = kube
        self.ovn = ovn
        self.lease = lease
        self.metrics = metrics
        self.notify = notify
        self.stopping = stopping if stopping is not None else threading.Event()
        self._cond = threading.Condition()
        self._requests: list[tuple[float, str]] = []
        self._source_lock = threading.Lock()
        self._desired: Desired | None = None
        self._revision: str | None = None  # last good (validated) revision
        self._fingerprint: str | None = None  # of the local folder last loaded
        self._applied_revision: str | None = None  # revision the live state was reconciled to
        self._refused: dict[str, list[str]] = {}
        self._source_error: str | None = None
        self._latest_seen: str | None = None
        self._failures = 0
        self._not_before = 0.0
        self._lag_attempt = 0
        self._heartbeat = time.monotonic()
        self._in_pass_since: float | None = None
        self._ready = False
        self._threads: list[threading.Thread] = []
        self.planner = IncrementalPlanner()
        diff_mod.warm_up()
        self._last_full = float("-inf")
        self._settle = False
        self._lag_key: tuple[Any, Any] | None = None
        self._lag_missing = False
        self.passes = 0
        self.applies = 0
        self.last: PassResult | None = None
        self.status = status_mod.Status(instance=config.instance, source=source.description)
        if config.status_file and config.status_file.exists():
            try:
                self.status = status_mod.read(config.status_file)
                self.status.source = source.description
            except UserError as exc:
                log.warning("ignoring unreadable status file: %s", exc)

    # ---------------------------------------------------------------- triggering

    def request(self, reason: str) -> None:
        """Ask for a reconcile (thread-safe, cheap: called for every watch event)."""
        with self._cond:
            self._requests.append((time.monotonic(), reason))
            self._cond.notify_all()

    def shutdown(self, *_: Any) -> None:
        """Stop after the current step; writes not yet started are skipped."""
        self.stopping.set()
        with self._cond:
            self._cond.notify_all()

    def reload(self, *_: Any) -> None:
        """SIGHUP: fetch the source now and reconcile."""
        threading.Thread(target=self._poll_source, args=(True,), daemon=True).start()

    # ---------------------------------------------------------------- source

    def _relative(self, text: str, snap: Snapshot) -> str:
        if snap.root is not None:
            text = text.replace(str(snap.root) + os.sep, "")
        return text

    def refresh_source(self) -> bool:
        """Fetch + validate; returns True when the desired state changed. Never raises."""
        from reconciler.manifests.load import load_path

        with self._source_lock:
            try:
                snap = self.source.fetch()
            except Exception as exc:  # GitSourceError and anything the fetch may throw
                message = str(exc)
                first = self._source_error is None
                self._source_error = message
                if self.metrics:
                    self.metrics.source_ok.set(0)
                    self.metrics.errors.labels(error_cause(exc)).inc()
                (log.warning if first else log.info)(
                    "source unreachable, keeping the last good revision",
                    extra={"error": message, "revision": self._revision},
                )
                if first:
                    self.request("source-down")  # records and reports it in the status
                if self._desired is None:
                    return self._fall_back_to_cached()
                return False
            if self._source_error is not None:
                log.info("source reachable again", extra={"source": self.source.description})
            self._source_error = None
            if self.metrics:
                self.metrics.source_ok.set(1)
            self._latest_seen = snap.revision
            if snap.revision is not None and snap.revision in self._refused:
                return False  # already refused; errors were reported when it arrived
            if self.source.polls and snap.revision is not None and snap.revision == self._revision:
                return False
            if snap.fingerprint is not None and snap.fingerprint == self._fingerprint:
                return False  # the folder did not change since it was last loaded
            self._fingerprint = snap.fingerprint
            try:
                desired = load_path(snap.directory)
            except ValidationFailed as failed:
                errors = [self._relative(str(i), snap) for i in failed.issues]
                self._refuse(snap.revision, errors)
                return False
            except UserError as exc:  # PathNotFound: --path missing in that commit
                self._refuse(snap.revision, [self._relative(str(exc), snap)])
                return False
            changed = snap.revision != self._revision or self._desired != desired
            if not changed and self._desired is not None:
                desired = self._desired  # keep the object: the planner keys on its identity
            self._desired, self._revision = desired, snap.revision
            if changed and self.source.polls:
                log.info("new revision", extra={"revision": snap.revision})
            return changed

    def _refuse(self, revision: str | None, errors: list[str]) -> None:
        key = revision or "(local)"
        if self._refused.get(key) != errors:
            log.error(
                "manifests invalid, revision refused; keeping the last good one",
                extra={"revision": revision, "kept": self._revision, "errors": errors},
            )
            self.request("refused")  # reconcile the last good one, report in the status
        if revision is not None:
            self._refused[revision] = errors
        if self.metrics:
            self.metrics.errors.labels("manifests").inc()
        self.status.attempted = revision
        self.status.errors = errors

    def _fall_back_to_cached(self) -> bool:
        """At start with an unreachable source: the commit the status file says was applied
        (if its export is still in the cache) is the last good one."""
        from reconciler.manifests.load import load_path

        revision = self.status.revision
        snap = self.source.cached(revision) if revision else None
        if snap is None:
            return False
        try:
            self._desired = load_path(snap.directory)
        except UserError:
            return False
        self._revision = revision
        log.info("using the cached last good revision", extra={"revision": revision})
        return True

    def _poll_source(self, forced: bool = False) -> None:
        if self.refresh_source() or forced:
            self.request("sighup" if forced else "git")

    def _poller(self) -> None:
        while not self.stopping.wait(self.config.git_interval):
            self._poll_source()

    # ---------------------------------------------------------------- one reconcile

    def _guard(self, what: str) -> None:
        if self.stopping.is_set():
            raise Aborted(f"shutting down: {what} not started")
        if self.lease is not None and not self.lease.held():
            raise Aborted(f"lost {self.lease.where}: {what} not started")

    def reconcile_pass(self, trigger: str = "manual") -> PassResult:
        """Observe, plan, (confirm the lease), apply, verify: one reconcile, never raises."""
        rid = uuid.uuid4().hex[:12]
        token = reconcile_id.set(rid)
        started = time.perf_counter()
        self._in_pass_since = time.monotonic()
        try:
            result = self._pass(trigger)
        except Exception as exc:
            # After a failed pass (half-applied, lost connection) trust nothing remembered.
            self.planner.reset()
            cause = error_cause(exc)
            result = PassResult("error", error=str(exc), cause=cause)
            if self.metrics:
                self.metrics.errors.labels(cause).inc()
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
            self._heartbeat = time.monotonic()
        result.seconds = time.perf_counter() - started
        if self._settle:
            # A full compile rebuilt the planner's memory: freeze what survived so the
            # collector stops walking it on every later pass (reconciler.engine.gc_tuning).
            self._settle = False
            gc_tuning.settle()
        self._record(result, trigger)
        reconcile_id.reset(token)
        return result

    def _pass(self, trigger: str) -> PassResult:
        if self.lease is not None and not self.lease.held():
            log.debug("standby: not the leader", extra={"trigger": trigger})
            return PassResult("standby")
        if not self.source.polls:
            self.refresh_source()
        with self._source_lock:
            desired, revision = self._desired, self._revision
            source_error = self._source_error
        if desired is None:
            if source_error:
                return PassResult("source-unreachable", error=source_error, cause="git")
            errors = "; ".join(self.status.errors[:3])
            return PassResult("refused", error=f"no valid manifests yet: {errors}",
                              cause="manifests")  # fmt: skip
        options = self.config.options
        observed = observe(self.kube, self.ovn, options.instance)
        self._ready = True
        first = self._plan(desired, observed)
        guard_empty(desired, first, self.config.allow_empty)
        if first.empty:
            self._schedule_lag_retry(observed)
            self._applied_revision = revision
            self._set_managed(observed)
            return self._final(PassResult("unchanged"), revision, source_error)
        if revision == self._applied_revision and self.metrics:
            self.metrics.drift.inc()
        if self.stopping.is_set():
            raise Aborted("shutting down: apply not started")
        if self.lease is not None and not self.lease.confirm():
            raise Aborted(f"{self.lease.where} is no longer held: apply not started")
        kube = _Guarded(self.kube, self._guard)
        ovn = _Guarded(self.ovn, self._guard)
        report = apply_plan(
            first, kube, ovn, desired=desired, revision=revision, notify=self.notify
        )
        self.applies += 1
        counts = first.summary()
        if self.metrics:
            for change in first.changes:
                self.metrics.changes_applied.labels(change.kind, change.action).inc()
        log.info(
            "applied",
            extra={
                "revision": revision,
                "changes": counts,
                "trigger": trigger,
                "identity": getattr(self.lease, "identity", None),
                "ovn_transaction_ms": round(report.seconds.get("ovn_transaction", 0) * 1000, 1),
            },
        )
        for error in report.notification_errors:
            log.warning("security manager notification failed", extra={"error": error})
        self._applied_revision = revision
        self._schedule_lag_retry(observed)  # after the commit: not on the event's latency path
        second_observed = observe(self.kube, self.ovn, options.instance)
        second = self._plan(desired, second_observed)
        self._set_managed(second_observed)
        if not second.empty:
            raise NotConverged(second)
        return self._final(PassResult("applied", changes=counts), revision, source_error)

    def _plan(self, desired: Desired, observed: Observed) -> Plan:
        """The incremental planner, with a full compile every ``full_resync`` seconds."""
        now = time.monotonic()
        due = now - self._last_full >= self.config.full_resync
        the_plan = self.planner.plan(desired, observed, self.config.options, full=due)
        if self.planner.last_mode == "full":
            self._last_full = now
            self._settle = True
        log.debug(
            "planned",
            extra={
                "mode": self.planner.last_mode,
                "nodes": sorted(self.planner.last_dirty_nodes)[:20],
                "reason": self.planner.last_full_reason
                if self.planner.last_mode == "full"
                else None,
            },
        )
        return the_plan

    def _final(self, result: PassResult, revision: str | None, source_error: str | None
               ) -> PassResult:  # fmt: skip
        if source_error and result.result in ("applied", "unchanged"):
            result.error = f"source unreachable, reconciled last good {revision}: {source_error}"
        return result

    def _schedule_lag_retry(self, observed: Observed) -> None:
        """Scheduled pods without an OVN port yet: OVN-Kubernetes (and our IDL copy of the
        NB) is a few ms behind the pod event; look again shortly, a few times."""
        key = (observed.pods, observed.pod_ports)
        last = self._lag_key
        if last is not None and key[0] is last[0] and key[1] is last[1]:
            missing = self._lag_missing  # the caches handed back the same tuples
        else:
            ports = {p.name for p in observed.pod_ports}
            missing = any(p.node and p.lsp_name not in ports for p in observed.pods)
            self._lag_key, self._lag_missing = key, missing
        delays = self.config.lag_retries
        if missing and self._lag_attempt < len(delays):
            delay = delays[self._lag_attempt]
            self._lag_attempt += 1
            timer = threading.Timer(delay, self.request, args=("ovn-lag",))
            timer.daemon = True
            timer.start()
        elif not missing:
            self._lag_attempt = 0

    def _set_managed(self, observed: Observed) -> None:
        if not self.metrics:
            return
        counts: dict[str, int] = {}
        for row in observed.ovn_rows:
            counts[row.table] = counts.get(row.table, 0) + 1
        for obj in observed.kube_objects:
            counts[obj.kind] = counts.get(obj.kind, 0) + 1
        self.metrics.set_managed(counts)

    def _record(self, result: PassResult, trigger: str) -> None:
        self.passes += 1
        self.last = result
        ok = result.result in ("applied", "unchanged")
        if result.result == "error":
            self._failures += 1
            delay = min(self.config.backoff_max,
                        self.config.backoff_base * 2 ** (self._failures - 1))  # fmt: skip
            delay *= random.uniform(0.8, 1.2)
            self._not_before = time.monotonic() + delay
            log.info("retrying after backoff", extra={"seconds": round(delay, 2)})
        elif result.result != "standby":
            self._failures = 0
            self._not_before = 0.0
        if self.metrics:
            self.metrics.reconcile_duration.labels(result.result).observe(result.seconds)
            self.metrics.reconciles.labels(result.result, trigger).inc()
            if ok:
                self.metrics.last_success.set(time.time())
                if self._applied_revision:
                    self.metrics.revision.info({"revision": self._applied_revision})
        if result.result == "standby":
            return
        st = self.status
        st.result, st.message = result.result, result.error or ""
        if ok:
            if result.result == "applied" or st.revision != self._applied_revision:
                st.revision_applied_at = status_mod.now_iso()
            st.revision = self._applied_revision
            st.changes = result.changes or st.changes
            st.errors = []
        st.attempted = self._latest_seen
        refused = self._refused.get(self._latest_seen or "")
        if refused is not None:  # the newest commit is invalid: say so until it is fixed
            st.result, st.errors = "refused", refused
            st.message = f"commit {self._latest_seen} refused; live state at {st.revision}"
        if self._source_error:  # reported over everything else: it hides newer commits
            st.result = "source-unreachable"
            st.message = f"{self._source_error}; reconciling the last good commit {st.revision}" + (
                f" ({result.error})" if result.error and not ok else ""
            )
        if self.config.status_file:
            try:
                status_mod.write(self.config.status_file, st)
            except OSError as exc:
                log.warning("cannot write status file", extra={"error": str(exc)})

    # ---------------------------------------------------------------- probes

    def health(self) -> tuple[bool, dict[str, Any]]:
        stuck = self._in_pass_since is not None and (
            time.monotonic() - self._in_pass_since > max(120.0, 4 * self.config.interval)
        )
        return (not stuck, {"stuck": stuck})

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        leader = self.lease.held() if self.lease is not None else True
        ready = self._ready or (self.lease is not None and not leader)
        return (ready, {"leader": leader, "revision": self._applied_revision})

    # ---------------------------------------------------------------- running

    def run_once(self) -> int:
        """CronJob mode: one reconcile, exit code as ``apply`` (0 ok, 1 error/refused)."""
        self.refresh_source()
        if self.lease is not None:
            self.lease.try_acquire_or_renew()
            if not self.lease.held():
                log.info("another replica holds the lease; nothing to do")
                return EXIT_OK
        result = self.reconcile_pass("once")
        if self._latest_seen is not None and self._latest_seen in self._refused:
            return EXIT_ERROR
        if self._source_error is not None:
            return EXIT_ERROR
        return EXIT_OK if result.result in ("applied", "unchanged") else EXIT_ERROR

    def _start_thread(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _on_pod(self, etype: str, obj: dict[str, Any]) -> None:
        self.request("pod")

    def _on_vm(self, etype: str, obj: dict[str, Any]) -> None:
        self.request("vm")

    def start_watches(self) -> None:
        from reconciler.core.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER

        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{OWNER}={self.config.instance}"
        self._start_thread("watch-pods", self.kube.watch, "Pod", self._on_pod, self.stopping)
        self._start_thread(
            "watch-vms", self.kube.watch, "VirtualMachine", self._on_vm, self.stopping, selector
        )

    def _next_periodic(self) -> float:
        spread = self.config.interval * self.config.jitter
        return time.monotonic() + self.config.interval + random.uniform(-spread, spread)

    def _wait_for_work(self, next_periodic: float) -> tuple[str, float] | None:
        """Block until something should be reconciled; returns (trigger, next_periodic)."""
        cfg = self.config
        with self._cond:
            while not self.stopping.is_set():
                now = time.monotonic()
                if self._requests:
                    first = self._requests[0][0]
                    last = self._requests[-1][0]
                    close = min(last + cfg.debounce, first + cfg.debounce_max)
                    close = max(close, self._not_before)
                    if now >= close:
                        reasons = sorted({r for _, r in self._requests})
                        self._requests.clear()
                        return ",".join(reasons), next_periodic
                    self._cond.wait(close - now)
                    continue
                # after a failure the retry is due when the backoff ends, not at the next tick
                due = self._not_before if self._failures else next_periodic
                if now >= due:
                    trigger = "retry" if self._failures else "interval"
                    return trigger, self._next_periodic()
                self._cond.wait(min(due - now, 1.0))
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
                "source": self.source.description,
                "instance": self.config.instance,
                "identity": getattr(self.lease, "identity", None),
            },
        )
        self.refresh_source()
        if self.lease is not None:
            self.lease.on_change.append(self._on_leadership)
            self._start_thread("lease", self.lease.run, self.stopping)
        elif self.metrics:
            self.metrics.leader.set(1)
        if self.source.polls:
            self._start_thread("source-poller", self._poller)
        if self.config.watch:
            self.start_watches()
        self.request("start")
        next_periodic = self._next_periodic()
        try:
            while True:
                work = self._wait_for_work(next_periodic)
                if work is None:
                    break
                trigger, next_periodic = work
                self.reconcile_pass(trigger)
                self._heartbeat = time.monotonic()
        finally:
            self.stopping.set()
            if self.lease is not None:
                self.lease.release()
            for thread in self._threads:
                thread.join(timeout=5)
            log.info("stopped", extra={"passes": self.passes, "applies": self.applies})
        return EXIT_OK

    def _on_leadership(self, held: bool) -> None:
        if self.metrics:
            self.metrics.leader.set(1 if held else 0)
        if held:
            self.request("leader")
