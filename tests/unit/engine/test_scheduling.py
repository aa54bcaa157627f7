"""When the loop reconciles: debounce, backoff, the periodic tick, full-resync timing and the
OVN-lag retries, decided over a clock the test moves by hand (no sleeping)."""

from __future__ import annotations

import itertools
import random
import threading
from dataclasses import replace

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.engine.scheduling import OvnLagRetry, ResyncPlanner, Scheduler, Timing
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.fakes import FakeClock

TIMING = Timing(interval=60.0, jitter=0.1, debounce=0.2, debounce_max=2.0,
                backoff_base=1.0, backoff_max=8.0)  # fmt: skip


def make(timing: Timing = TIMING) -> tuple[Scheduler, FakeClock]:
    clock = FakeClock()
    scheduler = Scheduler(timing, clock, random.Random(1))
    scheduler.start()
    return scheduler, clock


def drive(
    scheduler: Scheduler, clock: FakeClock, events: list[tuple[float, str]], until: float
) -> list[tuple[float, str]]:
    """Play ``events`` (offsets from now, reason) as the loop would see them, every pass
    succeeding at once; the passes that start, as (offset, trigger)."""
    start = clock.now
    pending = sorted(events)
    passes: list[tuple[float, str]] = []
    while clock.now - start <= until:
        while pending and pending[0][0] <= clock.now - start:
            scheduler.request(pending.pop(0)[1])
        trigger, wait = scheduler.next_pass()
        if trigger is not None:
            passes.append((round(clock.now - start, 6), trigger))
            assert len(passes) < 100, "the scheduler keeps saying a pass is due"
            scheduler.succeeded()
            continue
        step = wait
        if pending:
            step = min(step, pending[0][0] - (clock.now - start))
        clock.advance(max(step, 1e-6))
    return passes


def test_a_burst_of_requests_is_one_pass_a_debounce_after_the_last() -> None:
    scheduler, clock = make()
    burst = [(i * 0.001, "pod") for i in range(500)]

    passes = drive(scheduler, clock, burst, until=5.0)

    assert passes == [(pytest.approx(0.499 + 0.2), "pod")]


def test_a_lone_request_is_handled_a_debounce_later_with_every_reason() -> None:
    scheduler, clock = make()
    passes = drive(scheduler, clock, [(0.0, "pod"), (0.05, "vm"), (0.1, "git")], until=1.0)
    assert passes == [(pytest.approx(0.3), "git,pod,vm")]


def test_a_steady_stream_of_events_cannot_starve_the_loop() -> None:
    """Events every 0.1 s never leave a quiet debounce window; ``debounce_max`` still closes
    it."""
    scheduler, clock = make()
    stream = [(i * 0.1, "pod") for i in range(50)]

    passes = drive(scheduler, clock, stream, until=5.0)

    assert 2 <= len(passes) <= 3
    starts = [0.0, *(t for t, _ in passes)]
    assert all(b - a <= TIMING.debounce_max + 0.1 for a, b in itertools.pairwise(starts))


def test_backoff_doubles_is_capped_and_resets_on_success() -> None:
    scheduler, _ = make()
    delays = [scheduler.failed() for _ in range(6)]
    for delay, expected in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert expected * 0.8 <= delay <= expected * 1.2
    scheduler.succeeded()
    assert scheduler.failures == 0 and scheduler.not_before == 0.0
    assert 0.8 <= scheduler.failed() <= 1.2


def test_events_do_not_bypass_the_backoff() -> None:
    scheduler, clock = make()
    for _ in range(3):
        scheduler.failed()  # about 4 s
    resume = scheduler.not_before - clock.now

    passes = drive(scheduler, clock, [(0.0, "pod"), (0.5, "pod")], until=resume + 1)

    assert passes == [(pytest.approx(resume), "pod")]


def test_after_a_failure_the_retry_comes_when_the_backoff_ends_not_at_the_next_tick() -> None:
    scheduler, clock = make()
    delay = scheduler.failed()
    assert drive(scheduler, clock, [], until=delay + 0.5) == [(pytest.approx(delay), "retry")]


def test_the_periodic_tick_comes_every_interval_with_jitter() -> None:
    scheduler, clock = make()
    passes = drive(scheduler, clock, [], until=200.0)
    assert [trigger for _, trigger in passes] == ["interval"] * 3
    gaps = [b - a for a, b in itertools.pairwise([0.0, *(t for t, _ in passes)])]
    assert all(54.0 <= gap <= 66.0 for gap in gaps)
    assert scheduler.next_pass()[1] <= 1.0, "an idle loop still looks again every second"


# ---------------------------------------------------------------------------- full resync

DESIRED = desired(sg("web", "app=web"), vnf("firewall"), binding("web-fw", "web", "firewall", 10))
OBSERVED = cluster(
    [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "db-1", "node-2", {"app": "db"})]
)


def test_a_full_compile_every_full_resync_seconds_and_incremental_in_between() -> None:
    clock = FakeClock()
    planner = ResyncPlanner(full_resync=600.0, clock=clock)
    modes = []
    for advance in (0, 10, 300, 289, 1, 10):  # t = 0, 10, 310, 599, 600, 610
        clock.advance(advance)
        planner.plan(DESIRED, OBSERVED, CompileOptions())
        modes.append(planner.last_mode)
        if planner.last_mode == "full":
            assert planner.settle_due
            planner.settle_due = False
    assert modes == ["full", "cached", "cached", "cached", "full", "cached"]


def test_a_pod_change_between_resyncs_is_planned_incrementally() -> None:
    clock = FakeClock()
    planner = ResyncPlanner(full_resync=600.0, clock=clock)
    planner.plan(DESIRED, OBSERVED, CompileOptions())
    planner.settle_due = False
    pods = (OBSERVED.pods[0], replace(OBSERVED.pods[1], labels={"app": "web"}))  # db-1 joins
    clock.advance(5)
    planner.plan(DESIRED, replace(OBSERVED, pods=pods), CompileOptions())
    assert planner.last_mode == "incremental" and not planner.settle_due


def test_full_resync_zero_compiles_everything_every_time() -> None:
    planner = ResyncPlanner(full_resync=0.0, clock=FakeClock())
    for _ in range(3):
        planner.plan(DESIRED, OBSERVED, CompileOptions())
        assert planner.last_mode == "full"


# ---------------------------------------------------------------------------- OVN lag


def test_pods_without_an_ovn_port_yet_are_looked_at_again_a_few_times() -> None:
    asked = threading.Semaphore(0)
    reasons: list[str] = []

    def request(reason: str) -> None:
        reasons.append(reason)
        asked.release()

    lag = OvnLagRetry((0.001, 0.002), request)
    lagging = replace(OBSERVED, pod_ports=OBSERVED.pod_ports[:1])  # db-1 has no port yet
    for _ in range(3):
        lag.check(lagging)
    assert asked.acquire(timeout=2) and asked.acquire(timeout=2)
    assert reasons == ["ovn-lag", "ovn-lag"], "no more than len(delays) retries"

    lag.check(OBSERVED)  # the port appeared: the retries are armed again
    assert lag.attempt == 0


def test_a_pod_event_that_brings_a_pod_without_its_port_is_looked_at_again() -> None:
    """After a check that found every port, a pod event (same ports, the changed pods new
    objects) only looks at the changed pods: one scheduled without its port still counts."""
    reasons: list[str] = []
    lag = OvnLagRetry((0.001,), reasons.append)
    lag.check(OBSERVED)
    assert lag.attempt == 0
    relabelled = replace(
        OBSERVED, pods=(*OBSERVED.pods[:-1], replace(OBSERVED.pods[-1], labels={"x": "y"}))
    )
    lag.check(relabelled)
    assert lag.attempt == 0, "a relabelled pod keeps its port"
    stranger = replace(OBSERVED.pods[-1], name="new-1", uid="uid-new-1")
    lag.check(replace(relabelled, pods=(*relabelled.pods[:-1], stranger)))
    assert lag.attempt == 1, "a new pod at the same place in the tuple has no port yet"
