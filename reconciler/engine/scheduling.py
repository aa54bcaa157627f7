"""When the loop reconciles, and how much of the plan it redoes: decisions over a clock.

Nothing here sleeps or starts a pass; the loop (``reconciler.engine.loop``) asks and then waits.
Every decision reads an injected clock (``time.monotonic`` in production), so debounce, backoff
and full-resync timing are unit-tested with a clock the test moves by hand.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from operator import is_not
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Plan
from reconciler.core.planning.incremental import IncrementalPlanner
from reconciler.engine.reporting.logs import LOGGER

log = logging.getLogger(LOGGER)

Clock = Callable[[], float]


@dataclass(frozen=True)
class Timing:
    """The loop's timing settings, in seconds (see ``reconciler.engine.loop.LoopConfig``)."""

    interval: float = 60.0
    jitter: float = 0.1
    """Fraction of ``interval`` the periodic tick varies by, so replicas do not align."""
    debounce: float = 0.2
    debounce_max: float = 2.0
    backoff_base: float = 1.0
    backoff_max: float = 300.0


class Scheduler:
    """When the next pass is due.

    - **Debounce.** The first request opens a window that closes ``debounce`` after the last
      request, at most ``debounce_max`` after the first: a burst is one pass, a lone event is
      handled ``debounce`` later.
    - **Backoff.** After ``n`` failed passes in a row, no pass (not even a requested one) before
      ``backoff_base * 2**(n-1)`` (capped at ``backoff_max``, +-20% jitter); a success resets
      it. Without requests, the retry comes when the backoff ends.
    - **Periodic.** Otherwise a pass every ``interval`` (+-``jitter``).

    Bookkeeping only: it never sleeps and holds no lock (the loop calls it under its condition
    variable and waits as long as :meth:`next_pass` says)."""

    def __init__(self, timing: Timing, clock: Clock, rng: random.Random) -> None:
        self.timing = timing
        self.clock = clock
        self.rng = rng
        self.failures = 0
        """Consecutive failed passes."""
        self.not_before = 0.0
        """No pass before this time: the backoff."""
        self.next_periodic = 0.0
        self._requests: list[tuple[float, str]] = []

    def request(self, reason: str) -> None:
        self._requests.append((self.clock(), reason))

    def start(self) -> None:
        """Arm the periodic tick one ``interval`` (+-jitter) from now."""
        self.next_periodic = self._periodic_after(self.clock())

    def next_pass(self) -> tuple[str | None, float]:
        """``(trigger, 0)`` when a pass is due now (the requests it answers are consumed; the
        trigger names their reasons, or ``retry``/``interval``), else ``(None, seconds to wait
        before asking again)``."""
        timing = self.timing
        now = self.clock()
        if self._requests:
            first = self._requests[0][0]
            last = self._requests[-1][0]
            close = min(last + timing.debounce, first + timing.debounce_max)
            close = max(close, self.not_before)
            if now >= close:
                reasons = sorted({r for _, r in self._requests})
                self._requests.clear()
                return ",".join(reasons), 0.0
            return None, close - now
        # after a failure the retry is due when the backoff ends, not at the next tick
        due = self.not_before if self.failures else self.next_periodic
        if now >= due:
            trigger = "retry" if self.failures else "interval"
            self.next_periodic = self._periodic_after(now)
            return trigger, 0.0
        return None, min(due - now, 1.0)

    def failed(self) -> float:
        """A pass failed: back off; returns the delay before the next pass."""
        timing = self.timing
        self.failures += 1
        delay = min(timing.backoff_max, timing.backoff_base * 2 ** (self.failures - 1))
        delay *= self.rng.uniform(0.8, 1.2)
        self.not_before = self.clock() + delay
        return delay

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before = 0.0

    def _periodic_after(self, now: float) -> float:
        spread = self.timing.interval * self.timing.jitter
        return now + self.timing.interval + self.rng.uniform(-spread, spread)


class ResyncPlanner:
    """The loop's planner: the incremental planner, with a full compile whenever the last one is
    ``full_resync`` seconds old (the safety net against anything the incremental path missed,
    like controller-runtime's ``SyncPeriod``; 0: every plan is a full compile)."""

    def __init__(self, full_resync: float, clock: Clock) -> None:
        self.full_resync = full_resync
        self.clock = clock
        self.incremental = IncrementalPlanner()
        self.last_full = float("-inf")
        self.settle_due = False
        """A full compile rebuilt the planner's memory since the loop last settled the heap
        (``reconciler.engine.gc_tuning``); the loop resets it."""

    @property
    def last_mode(self) -> str:
        """How the last plan was made: ``full``, ``incremental`` or ``cached``."""
        return self.incremental.last_mode

    def reset(self) -> None:
        """Forget everything: the next plan is a full compile."""
        self.incremental.reset()

    def plan(
        self, desired: Desired, observed: Observed, options: CompileOptions, *, full: bool = False
    ) -> Plan:
        planner = self.incremental
        now = self.clock()
        due = full or now - self.last_full >= self.full_resync
        the_plan = planner.plan(desired, observed, options, full=due)
        if planner.last_mode == "full":
            self.last_full = now
            self.settle_due = True
        log.debug(
            "planned",
            extra={
                "mode": planner.last_mode,
                "nodes": sorted(planner.last_dirty_nodes)[:20],
                "reason": planner.last_full_reason if planner.last_mode == "full" else None,
            },
        )
        return the_plan


class OvnLagRetry:
    """Scheduled pods without an OVN port yet: OVN-Kubernetes (and our IDL copy of the NB) is a
    few ms behind the pod event; request a pass again shortly, a few times (``delays``)."""

    def __init__(self, delays: tuple[float, ...], request: Callable[[str], None]) -> None:
        self.delays = delays
        self.request = request
        self.attempt = 0
        self._key: tuple[Any, Any] | None = None
        self._missing = False
        self._ports: set[str] = set()
        """The pod LSP names of ``self._key[1]``."""

    def check(self, observed: Observed) -> None:
        pods, ports = key = (observed.pods, observed.pod_ports)
        last = self._key
        if last is not None and pods is last[0] and ports is last[1]:
            missing = self._missing  # the caches handed back the same tuples
        elif (
            last is not None
            and ports is last[1]
            and not self._missing
            and len(pods) == len(last[0])
        ):
            # A pod event: the same ports, every pod of the last check had its port, so only
            # the pods the cache hands back as new objects can lack one (no scan of every
            # pod on each pass).
            changed = compress(pods, map(is_not, pods, last[0]))
            missing = any(p.node and p.lsp_name not in self._ports for p in changed)
            self._key, self._missing = key, missing
        else:
            self._ports = {p.name for p in ports}
            missing = any(p.node and p.lsp_name not in self._ports for p in pods)
            self._key, self._missing = key, missing
        if missing and self.attempt < len(self.delays):
            delay = self.delays[self.attempt]
            self.attempt += 1
            timer = threading.Timer(delay, self.request, args=("ovn-lag",))
            timer.daemon = True
            timer.start()
        elif not missing:
            self.attempt = 0
