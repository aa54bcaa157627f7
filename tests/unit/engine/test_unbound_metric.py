"""``osc_gitops_unbound_vnf_ports``: the loop's health report counts the unbound data ports of
running VNF VMs per instance, and an instance whose ports are bound drops out."""

from __future__ import annotations

from reconciler.engine.reporting.health import OvnHealthReport
from reconciler.engine.reporting.metrics import Metrics, PrometheusReporter
from tests.unit.core.test_unbound import IN, OUT, observed


def test_the_metric_counts_unbound_ports_per_instance() -> None:
    metrics = Metrics()
    OvnHealthReport(PrometheusReporter(metrics)).settled(observed({IN: False, OUT: False}))
    text = metrics.exposition().decode()
    assert 'osc_gitops_unbound_vnf_ports{node="node-1",vnf="firewall"} 2.0' in text
    OvnHealthReport(PrometheusReporter(metrics)).settled(observed({IN: True, OUT: True}))
    assert "osc_gitops_unbound_vnf_ports{" not in metrics.exposition().decode()
