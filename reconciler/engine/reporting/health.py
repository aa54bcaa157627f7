"""What the loop reports about the live OVN side after each pass: every VNF instance's health as
OVN sees it, and the Network_Function ids in use per NB.

An operator must see a dead firewall before a user reports it, so the loop exports it
(``osc_gitops_vnf_instance_healthy``, ``osc_gitops_nf_ids_used``, and the data ports of running
VNF VMs OVN has not bound, ``osc_gitops_unbound_vnf_ports``: ``reporting.metrics``) and
writes it into the status file behind ``osc-gitops status``. Both are derived from the read the
pass ended with (one ``reconciler.core.steering.HealthIndex``); reading health never writes
anything and never re-plans. Passes in which none of its inputs changed report nothing new.
"""

from __future__ import annotations

from typing import Any, Protocol

from reconciler.core.model.observed import Observed
from reconciler.core.steering import HealthIndex, live_id_budget
from reconciler.engine.providers import Reporter


class HealthSink(Protocol):
    """Where the per-instance health goes besides the reporter (the loop's status book)."""

    def vnf_health(self, instances: list[dict[str, Any]]) -> None: ...
    def unbound(self, ports: list[dict[str, Any]]) -> None: ...


class OvnHealthReport:
    """Turns the observed state at the end of a pass into health and id-budget reports."""

    def __init__(self, reporter: Reporter, sink: HealthSink | None = None) -> None:
        self.reporter = reporter
        self.sink = sink
        self._inputs: tuple[Any, ...] | None = None

    def settled(self, observed: Observed) -> None:
        """Report for ``observed``, unless its inputs are those of the last call: our rows the
        very same tuple (the read cache hands back the same one while none changed), the small
        rest equal."""
        inputs = (
            observed.ovn_rows, observed.nf_active, observed.used_ids, observed.nb_global,
            observed.ports_up, observed.ports_chassis, observed.kube_objects,
        )  # fmt: skip
        last = self._inputs
        if (
            last is not None
            and inputs[0] is last[0]
            and all(a is b or a == b for a, b in zip(inputs[1:], last[1:], strict=True))
        ):
            return
        self._inputs = inputs
        index = HealthIndex(observed)
        health = index.instances()
        self.reporter.vnf_health({where: h.healthy for where, h in health.items()})
        self.reporter.nf_ids_used(live_id_budget(observed))
        unbound = index.unbound
        counts: dict[tuple[str, str], int] = {}
        for port in unbound:
            counts[(port.vnf, port.node)] = counts.get((port.vnf, port.node), 0) + 1
        self.reporter.unbound_ports(counts)
        if self.sink is not None:
            self.sink.vnf_health([h.to_json() for h in health.values()])
            self.sink.unbound([u.to_json() for u in unbound])
