"""The loop's rules against in-memory fakes: last good commit, unreachable source, leader
election, shutdown, drift, backoff, full resync, and the threads of ``run``."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from reconciler.engine.loop import EXIT_ERROR, EXIT_OK
from reconciler.engine.sources import LocalSource
from tests.support.fakes import FakeLease, FakeSource
from tests.unit.engine.scenario import (
    INVALID,
    POLICIES,
    WITHOUT_BINDING,
    Harness,
    write_policies,
)


def published(tmp: Path, *revisions: tuple[str, str]) -> FakeSource:
    source = FakeSource()
    for revision, text in revisions:
        source.publish(revision, write_policies(tmp / revision, text))
    return source


# ------------------------------------------------------------------------------ last good commit


def test_an_invalid_commit_is_refused_and_the_last_good_one_keeps_being_reconciled(
    tmp_path: Path,
) -> None:
    source = published(tmp_path, ("c1", POLICIES))
    h = Harness(source, tmp_path)
    assert h.loop.refresh_source()
    assert h.loop.reconcile_pass("start").result == "applied"
    assert h.status()["revision"] == "c1" and h.revisions_live() == {"c1"}

    source.publish("c2", write_policies(tmp_path / "c2", INVALID))
    assert not h.loop.refresh_source(), "a refused commit changes nothing"
    assert ("manifests",) in h.reporter.of("error")
    assert h.loop.reconcile_pass("git").result == "unchanged"
    status = h.status()
    assert status["result"] == "refused"
    assert (status["revision"], status["attempted"]) == ("c1", "c2")
    assert status["message"] == "commit c2 refused; live state at c1"
    assert status["errors"] and all(e.startswith("c2/policies.yaml:") for e in status["errors"])

    # someone edits our rows: repaired from the last good commit, still reported as refused
    table, key = next(iter(h.ovn.rows))
    h.ovn.drift(table, key, external_ids={"osc.io/owner": "osc-gitops"})
    assert h.loop.reconcile_pass("interval").result == "applied"
    assert h.revisions_live() == {"c1"}
    assert h.status()["result"] == "refused"

    source.publish("c3", write_policies(tmp_path / "c3", WITHOUT_BINDING))
    assert h.loop.refresh_source()
    assert h.loop.reconcile_pass("git").result == "applied"
    status = h.status()
    assert (status["result"], status["revision"], status["errors"]) == ("applied", "c3", [])


def test_without_any_valid_commit_nothing_is_written(tmp_path: Path) -> None:
    h = Harness(published(tmp_path, ("c1", INVALID)), tmp_path)
    h.loop.refresh_source()
    result = h.loop.reconcile_pass("start")
    assert (result.result, result.cause) == ("refused", "manifests")
    assert result.error is not None and result.error.startswith("no valid manifests yet: c1/")
    assert h.journal == []
    assert h.loop.run_once() == EXIT_ERROR


def test_an_unreachable_source_keeps_the_last_good_commit(tmp_path: Path) -> None:
    source = published(tmp_path, ("c1", POLICIES))
    h = Harness(source, tmp_path)
    h.loop.refresh_source()
    h.loop.reconcile_pass("start")

    source.down = "fake://policies: connection refused"
    assert not h.loop.refresh_source()
    assert h.reporter.of("source_up")[-1] == (False,) and ("git",) in h.reporter.of("error")
    assert h.loop.schedule.next_pass()[0] is None, "a pass is requested (debounced) to report it"
    assert h.loop.reconcile_pass("source-down").result == "unchanged"
    status = h.status()
    assert status["result"] == "source-unreachable" and status["revision"] == "c1"
    assert "connection refused; reconciling the last good commit c1" in status["message"]
    assert h.loop.run_once() == EXIT_ERROR

    # a restart while the source is still down: the status file names the last good commit
    again = Harness(source, tmp_path)
    assert again.loop.refresh_source(), "falls back to the cached commit c1"
    assert again.loop.reconcile_pass("start").result == "applied"
    assert again.revisions_live() == {"c1"}


# ------------------------------------------------------------------------------ leader election


def test_a_standby_replica_never_writes_and_reports_nothing_in_the_status(tmp_path: Path) -> None:
    h = Harness(published(tmp_path, ("c1", POLICIES)), tmp_path, lease=FakeLease(False))
    h.loop.refresh_source()
    assert h.loop.reconcile_pass("interval").result == "standby"
    assert h.journal == [] and not (tmp_path / "status.json").exists()
    assert h.reporter.of("pass_finished") == [("standby", "interval")]
    assert h.loop.readiness() == (True, {"leader": False, "revision": None})


def test_a_lease_that_cannot_be_confirmed_aborts_the_apply_before_any_write(
    tmp_path: Path,
) -> None:
    lease = FakeLease(held=True)
    h = Harness(published(tmp_path, ("c1", POLICIES)), tmp_path, lease=lease)
    h.loop.refresh_source()
    lease.available = False  # another replica renewed it: our confirm fails

    result = h.loop.reconcile_pass("pod")

    assert (result.result, result.cause) == ("error", "aborted")
    assert result.error == "Lease osc-gitops/osc-gitops is no longer held: apply not started"
    assert lease.confirms == 1 and h.journal == []
    assert h.loop.schedule.failures == 1, "an aborted pass backs off like any failure"


def test_losing_the_lease_mid_apply_stops_before_the_next_write(tmp_path: Path) -> None:
    lease = FakeLease(held=True)
    h = Harness(published(tmp_path, ("c1", POLICIES)), tmp_path, lease=lease)
    h.loop.refresh_source()
    h.kube.journal.after_write.append(lambda entry: lease.take_away())

    result = h.loop.reconcile_pass("pod")

    assert (result.result, result.cause) == ("error", "aborted")
    assert result.error == "lost Lease osc-gitops/osc-gitops: create not started"
    assert len(h.journal) == 1 and h.ovn.rows == {}, "no OVN transaction was started"


# ------------------------------------------------------------------------------ shutdown


def test_no_write_starts_after_shutdown(tmp_path: Path) -> None:
    h = Harness(published(tmp_path, ("c1", POLICIES)), tmp_path)
    h.loop.refresh_source()
    h.kube.journal.after_write.append(lambda entry: h.loop.shutdown())

    result = h.loop.reconcile_pass("pod")
    assert (result.result, result.error) == ("error", "shutting down: create not started")
    assert len(h.journal) == 1

    result = h.loop.reconcile_pass("pod")
    assert result.error == "shutting down: apply not started"
    assert len(h.journal) == 1


# ------------------------------------------------------------------------------ reporting


def test_drift_is_reported_repaired_and_counted(tmp_path: Path) -> None:
    h = Harness(published(tmp_path, ("c1", POLICIES)), tmp_path)
    h.loop.refresh_source()
    h.loop.reconcile_pass("start")
    assert h.reporter.of("drift_detected") == [], "a new revision is not drift"
    managed = h.reporter.of("managed_objects")[-1][0]
    assert managed["VirtualMachine"] == 2 and managed["Port_Group"] >= 1

    table, key = next(k for k in h.ovn.rows if k[0] == "Port_Group")
    h.ovn.drift(table, key, ports=[])
    assert h.loop.reconcile_pass("interval").result == "applied"
    assert h.reporter.of("drift_detected") == [()]
    assert h.reporter.of("changes_applied")[-1] == ((("Port_Group", "update"),),)
    assert h.reporter.of("reconciled")[-1] == ("c1",)
    assert [r for r, _ in h.reporter.of("pass_finished")] == ["applied", "applied"]


def test_a_failed_pass_backs_off_and_the_next_success_resets_the_backoff(tmp_path: Path) -> None:
    from reconciler.adapters.kube.errors import KubeForbidden

    h = Harness(published(tmp_path, ("c1", POLICIES)), tmp_path)
    h.loop.refresh_source()
    h.kube.failures.fail("create", KubeForbidden("fake API: forbidden", status=403))

    result = h.loop.reconcile_pass("start")
    assert (result.result, result.cause) == ("error", "kubernetes")
    assert h.reporter.of("error") == [("kubernetes",)]
    assert h.loop.schedule.failures == 1 and h.loop.schedule.not_before > h.clock.now
    assert h.status()["result"] == "error"

    assert h.loop.reconcile_pass("retry").result == "applied"
    assert h.loop.schedule.failures == 0 and h.status()["result"] == "applied"


def test_after_a_failed_pass_the_planner_trusts_nothing_it_remembered(tmp_path: Path) -> None:
    h = Harness(published(tmp_path, ("c1", POLICIES)), tmp_path)
    h.loop.refresh_source()
    h.loop.reconcile_pass("start")
    assert h.loop.reconcile_pass("interval").result == "unchanged"
    assert h.loop.planner.last_mode == "cached"

    h.kube.failures.fail("list_owned", ConnectionResetError("fake API: connection reset"))
    result = h.loop.reconcile_pass("interval")
    assert (result.result, result.cause) == ("error", "other")

    assert h.loop.reconcile_pass("retry").result == "unchanged"
    assert h.loop.planner.last_mode == "full"


def test_a_full_compile_every_full_resync_seconds(tmp_path: Path) -> None:
    h = Harness(published(tmp_path, ("c1", POLICIES)), tmp_path, full_resync=600.0)
    h.loop.refresh_source()
    modes = []
    for advance in (0, 10, 300, 300, 10):
        h.clock.advance(advance)
        h.loop.reconcile_pass("interval")
        modes.append(h.loop.planner.last_mode)
    # t=0: a full compile (and a full verify: every owned row is new); t=610: the resync
    assert modes == ["full", "cached", "cached", "full", "cached"]
    assert h.settled == 2, "the heap is settled after each pass with a full compile"


def test_a_local_folder_is_read_again_only_when_it_changed(tmp_path: Path) -> None:
    folder = write_policies(tmp_path / "policies")
    h = Harness(LocalSource(folder, "local-1"), tmp_path)
    assert h.loop.reconcile_pass("start").result == "applied"
    desired = h.loop.sources.desired
    assert h.loop.reconcile_pass("interval").result == "unchanged"
    assert h.loop.sources.desired is desired

    write_policies(folder, WITHOUT_BINDING)
    assert h.loop.reconcile_pass("interval").result == "applied"
    assert h.loop.sources.desired is not desired


# ------------------------------------------------------------------------------ run / run_once


def test_run_once_exit_codes(tmp_path: Path) -> None:
    source = published(tmp_path, ("c1", POLICIES))
    assert Harness(source, tmp_path / "a").loop.run_once() == EXIT_OK

    taken = FakeLease(held=False)
    taken.available = False
    h = Harness(source, tmp_path / "b", lease=taken)
    assert h.loop.run_once() == EXIT_OK and h.journal == [], "another replica leads"

    failing = Harness(source, tmp_path / "c")
    failing.ovn.failures.fail("apply", RuntimeError("boom"))
    assert failing.loop.run_once() == EXIT_ERROR


def wait_until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_run_reacts_to_watch_events_debounced_and_stops_cleanly(tmp_path: Path) -> None:
    lease = FakeLease(held=False)
    h = Harness(
        published(tmp_path, ("c1", POLICIES)), tmp_path, lease=lease, real_time=True,
        watch=True, debounce=0.02, debounce_max=0.2, interval=60.0, git_interval=60.0,
    )  # fmt: skip
    thread = threading.Thread(target=h.loop.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: h.loop.applies == 1 and h.kube.watching("Pod") == 1)
        assert ("leader", True) in h.reporter.events

        passes = h.loop.passes
        for i in range(100):
            h.kube.label_pod("shop", "db-1", {"app": "web" if i % 2 else "db", "n": str(i)})
        wait_until(lambda: h.loop.passes > passes and h.loop.last is not None)
        time.sleep(0.1)  # let any debounce window still open close: we count, not time
        assert h.loop.passes - passes <= 5
        assert h.loop.last is not None and h.loop.last.result in ("applied", "unchanged")
    finally:
        h.loop.shutdown()
        thread.join(timeout=5)
    assert not thread.is_alive()
    assert lease.released and h.kube.watching("Pod") == 0
    writes = len(h.journal)
    h.kube.label_pod("shop", "db-1", {"app": "web"})
    assert len(h.journal) == writes
