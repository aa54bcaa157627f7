"""What the engine reports keeps its shape: JSON log fields, metric names and labels, and the
status file written after ``apply`` and after each pass of the loop."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from reconciler.core.model.plan import Change, Plan
from reconciler.engine.reporting import status
from reconciler.engine.reporting.logs import LOGGER, JsonFormatter, reconcile_id
from reconciler.engine.reporting.metrics import Metrics, PrometheusReporter

CHANGE = Change("update", "Port_Group", "pg-web-node-1", "SecurityGroup/web", "node-1", {}, {})


def test_log_lines_are_one_json_object_with_the_reconcile_id() -> None:
    record = logging.LogRecord(LOGGER, logging.INFO, __file__, 1, "applied", (), None)
    record.revision = "c1"
    token = reconcile_id.set("abc123")
    try:
        line = JsonFormatter().format(record)
    finally:
        reconcile_id.reset(token)
    data = json.loads(line)
    assert set(data) == {"ts", "level", "logger", "msg", "reconcile_id", "revision"}
    assert (data["level"], data["logger"], data["msg"]) == ("info", "osc_gitops.loop", "applied")
    assert data["reconcile_id"] == "abc123" and data["ts"].endswith("Z")

    try:
        raise ValueError("bad\nthing")
    except ValueError as exc:
        failed = logging.LogRecord(
            LOGGER, logging.ERROR, __file__, 1, "x", (), (ValueError, exc, None)
        )
    assert json.loads(JsonFormatter().format(failed))["error"] == "ValueError: bad\nthing"


def test_the_prometheus_reporter_keeps_every_metric_name_and_label() -> None:
    metrics = Metrics()
    reporter = PrometheusReporter(metrics)
    reporter.pass_finished("applied", "pod", 0.01)
    reporter.reconciled("c1")
    reporter.changes_applied([CHANGE])
    reporter.drift_detected()
    reporter.error("kubernetes")
    reporter.managed_objects({"Port_Group": 2, "VirtualMachine": 1})
    reporter.managed_objects({"Port_Group": 3})
    reporter.source_up(False)
    reporter.leader(True)

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
    }
    assert (
        samples[("osc_gitops_reconciles_total", (("result", "applied"), ("trigger", "pod")))] == 1
    )
    assert samples[("osc_gitops_reconcile_duration_seconds_count", (("result", "applied"),))] == 1
    assert (
        samples[
            ("osc_gitops_changes_applied_total", (("action", "update"), ("kind", "Port_Group")))
        ]
        == 1
    )
    assert samples[("osc_gitops_drift_detected_total", ())] == 1
    assert samples[("osc_gitops_errors_total", (("cause", "kubernetes"),))] == 1
    assert samples[("osc_gitops_managed_objects", (("kind", "Port_Group"),))] == 3
    assert samples[("osc_gitops_managed_objects", (("kind", "VirtualMachine"),))] == 0
    assert samples[("osc_gitops_source_up", ())] == 0
    assert samples[("osc_gitops_leader", ())] == 1
    assert samples[("osc_gitops_applied_revision_info", (("revision", "c1"),))] == 1
    assert samples[("osc_gitops_last_success_timestamp_seconds", ())] > 0


def test_apply_records_the_revision_it_converged_to(tmp_path: Path) -> None:
    path = status.status_path(tmp_path, "osc-gitops")
    path.parent.mkdir(parents=True)
    path.write_text("not json")  # an unreadable file is replaced, not fatal

    status.record_apply(path, "osc-gitops", revision="c1", plan=Plan((CHANGE,)),
                        source="https://git.example/policies", ref="main")  # fmt: skip

    st = status.read(path)
    assert (st.result, st.revision, st.attempted, st.ref) == ("applied", "c1", "c1", "main")
    assert st.changes == {"create": 0, "update": 1, "delete": 0} and st.revision_applied_at

    status.record_apply(path, "osc-gitops", revision="c1", plan=Plan(), source=".", ref=None)
    assert status.read(path).result == "unchanged"


def test_the_loop_status_keeps_the_applied_time_of_an_unchanged_revision(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    book = status.StatusBook(path, "osc-gitops", "fake://policies@main")
    common: dict[str, Any] = {"latest_seen": "c1", "refused": None, "source_error": None}
    book.record("applied", message=None, changes={"create": 3}, applied_revision="c1", **common)
    applied_at = status.read(path).revision_applied_at
    book.status.revision_applied_at = "2000-01-01T00:00:00Z"
    book.record("unchanged", message=None, changes={}, applied_revision="c1", **common)
    st = status.read(path)
    assert st.revision_applied_at == "2000-01-01T00:00:00Z" and applied_at
    assert st.changes == {"create": 3}, "the last changes stay until something changes"

    again = status.StatusBook(path, "osc-gitops", "elsewhere")
    assert (again.status.revision, again.status.source) == ("c1", "elsewhere")
