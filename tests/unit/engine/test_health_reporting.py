"""VNF health and the NF id budget as the loop reports them: metric names and labels (alert
rules are written against them), the status file behind ``osc-gitops status``, and that reading
health never writes and never re-plans."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from reconciler.core.model.observed import OvnState
from reconciler.core.model.plan import Plan
from reconciler.engine.reporting import status
from reconciler.engine.reporting.metrics import Metrics, PrometheusReporter
from tests.support.fakes import FakeSource
from tests.unit.engine.scenario import POLICIES, Harness, write_policies


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
    }


def test_health_and_id_metrics_names_labels_and_values() -> None:
    metrics = Metrics()
    reporter = PrometheusReporter(metrics)
    reporter.vnf_health({("fw", "node-1"): True, ("fw", "node-2"): False, ("ips", "node-1"): None})
    reporter.nf_ids_used({"Network_Function": 3, "Network_Function_Group": 5})
    got = samples(metrics)
    healthy = "osc_gitops_vnf_instance_healthy"
    assert got[(healthy, (("node", "node-1"), ("vnf", "fw")))] == 1
    assert got[(healthy, (("node", "node-2"), ("vnf", "fw")))] == 0
    assert (healthy, (("node", "node-1"), ("vnf", "ips"))) not in got  # OVN cannot tell
    assert got[("osc_gitops_nf_ids_used", (("table", "Network_Function"),))] == 3
    assert got[("osc_gitops_nf_ids_used", (("table", "Network_Function_Group"),))] == 5
    assert got[("osc_gitops_nf_ids_limit", (("table", "Network_Function"),))] == 255
    # an instance that is gone drops out: an alert on == 0 must not fire for it forever
    reporter.vnf_health({("fw", "node-1"): False})
    got = samples(metrics)
    assert got[(healthy, (("node", "node-1"), ("vnf", "fw")))] == 0
    assert (healthy, (("node", "node-2"), ("vnf", "fw"))) not in got


def test_status_shows_each_instance(tmp_path: Path) -> None:
    path = status.status_path(tmp_path, "osc-gitops")
    instances = [
        {"vnf": "fw", "node": "node-1", "health": "healthy", "detail": ""},
        {"vnf": "fw", "node": "node-2", "health": "not healthy", "detail": "OVN's probe fails"},
    ]
    status.record_apply(path, "osc-gitops", revision="c1", plan=Plan(), source=".", ref=None,
                        vnf_instances=instances)  # fmt: skip
    st = status.read(path)
    assert st.vnf_instances == instances
    text = status.render_text(st)
    assert "  fw on node-1: healthy\n" in text
    assert "  fw on node-2: not healthy (OVN's probe fails)\n" in text
    # a status file written before the field existed still reads
    path.write_text('{"instance": "osc-gitops", "result": "applied"}')
    assert status.read(path).vnf_instances == []


def test_the_loop_reports_health_without_writing_or_recompiling(tmp_path: Path) -> None:
    source = FakeSource()
    source.publish("c1", write_policies(tmp_path / "c1", POLICIES))
    h = Harness(source, tmp_path)
    h.loop.refresh_source()
    assert h.loop.reconcile_pass("start").result == "applied"
    one, two = ("firewall", "node-1"), ("firewall", "node-2")
    # the NB after the apply: nothing judged healthy yet
    assert h.reporter.of("vnf_health")[-1] == ({one: False, two: False},)
    assert h.reporter.of("nf_ids_used")[-1] == (
        {"Network_Function": 2, "Network_Function_Group": 2},
    )
    assert [(i["node"], i["health"]) for i in h.status()["vnf_instances"]] == [
        ("node-1", "not healthy"),
        ("node-2", "not healthy"),
    ]
    reports = len(h.reporter.of("vnf_health"))
    assert h.loop.reconcile_pass("interval").result == "unchanged"
    assert len(h.reporter.of("vnf_health")) == reports, "nothing changed: nothing reported"

    # northd makes the function active: reported, with no write and no full compile
    read = h.ovn.read

    def northd_says_healthy() -> OvnState:
        return dataclasses.replace(
            read(), nf_active={"osc.firewall.node_1.fail_close": "osc.firewall.node_1"}
        )

    h.ovn.read = northd_says_healthy  # type: ignore[method-assign]
    # the first pass after it switches on the steering held for node-1 (and only that: health
    # gating, reconciler.core.steering.network_function.gating), without a full compile
    assert h.loop.reconcile_pass("interval").result == "applied"
    assert h.loop.planner.last_mode != "full"
    written = h.reporter.of("changes_applied")[-1][0]
    assert set(written) == {("ACL", "create")}
    assert h.status()["held"] == []  # no web pod on node-2: no steering there to hold
    transactions = h.ovn.transactions
    assert h.loop.reconcile_pass("interval").result == "unchanged"
    assert h.ovn.transactions == transactions
    assert h.loop.planner.last_mode != "full"
    assert h.reporter.of("vnf_health")[-1] == ({one: True, two: False},)
    assert h.status()["vnf_instances"][0]["health"] == "healthy"
