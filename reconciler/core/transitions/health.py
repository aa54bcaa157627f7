"""The report beside a plan's changes: each VNF instance's health as OVN sees it, the data
ports of running VNF VMs OVN has not bound, and the NF id budget per NB.

Nothing here feeds compile or the diff. Health changes by the second (northd rewrites
``Network_Function_Group.network_function_active`` as its probes succeed or fail) and must
never cause a write or a full compile; it is read from the plan's health index
(``reconciler.core.steering.HealthIndex``) and shown in the plan (``Plan.vnf_instances``), as
it is in ``osc-gitops status`` and the metrics. The id budget is shown in the plan
(``Plan.nf_ids``) and exported as a metric, so an alert fires long before OVN's 255 ids per NB
run out.

Pure, no I/O.
"""

from __future__ import annotations

from typing import Any

from reconciler.core.model.observed import Observed
from reconciler.core.model.target import Target
from reconciler.core.steering import HealthIndex, id_budget, instances_in

__all__ = ["plan_report"]


def plan_report(
    target: Target, observed: Observed, health: HealthIndex | None = None
) -> dict[str, Any]:
    """What a plan shows beside its changes (:class:`Plan` facts by field name):
    ``vnf_instances``, the health of every VNF instance with a Network_Function in the target
    or the NB (from ``health``, the plan's health index, made when not given), ``unbound``,
    the data ports of running VNF VMs OVN has not bound (from the same index), and ``nf_ids``,
    the id budget of this NB after the plan. Left out where they say nothing (no
    Network_Function anywhere; an NB without the tables; every port bound)."""
    report: dict[str, Any] = {}
    index = health if health is not None else HealthIndex(observed)
    found = index.instances(instances_in(target))
    if found:
        report["vnf_instances"] = tuple(found.values())
    if index.unbound:
        report["unbound"] = index.unbound
    budget = id_budget(target, observed)
    if budget:
        report["nf_ids"] = budget
    return report
