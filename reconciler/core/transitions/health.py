"""Report-only views: each VNF instance's health as OVN sees it, and the NF id budget per NB.

Nothing here feeds compile or the diff. Health changes by the second (northd rewrites
``Network_Function_Group.network_function_active`` as its probes succeed or fail) and must
never cause a write or a full compile; it is read from ``Observed.nf_active`` and shown in the
plan (``Plan.vnf_instances``), in ``osc-gitops status`` and as metrics. The id budget is
shown in the plan (``Plan.nf_ids``) and exported as a metric, so an alert fires long before
OVN's 255 ids per NB run out.

Pure, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from reconciler.core.model import ownership as own
from reconciler.core.model.facts import (
    HEALTHY,
    NOT_HEALTHY,
    UNKNOWN,
    Health,
    InstanceHealth,
)
from reconciler.core.model.naming import is_probe_group
from reconciler.core.model.observed import Observed, OvnRow
from reconciler.core.model.target import SVC_MONITOR_OPTIONS, Target
from reconciler.core.steering.base import MAX_OVN_ID, ids_in_use

__all__ = [
    "HEALTHY",
    "NF_ID_TABLES",
    "NOT_HEALTHY",
    "UNKNOWN",
    "Health",
    "InstanceHealth",
    "id_budget",
    "in_service",
    "live_id_budget",
    "plan_report",
    "vnf_health",
    "why_not_healthy",
]

NF_ID_TABLES: tuple[str, ...] = ("Network_Function", "Network_Function_Group")
"""The tables whose ids (1-255) are allocated among every writer of one NB."""

_NF = "Network_Function"
_NFG = "Network_Function_Group"
_CHECK = "Network_Function_Health_Check"


def _instance_of(row: OvnRow) -> tuple[str, str] | None:
    """``(vnf, node)`` of an owned row compiled from a VnfDeployment on a node."""
    ids = row.fields.get("external_ids") or {}
    kind, _, vnf = str(ids.get(own.RESOURCE, "")).partition("/")
    node = ids.get(own.NODE)
    if kind != "VnfDeployment" or not vnf or not isinstance(node, str):
        return None
    return vnf, node


def vnf_health(
    observed: Observed, instances: Iterable[tuple[str, str]] = ()
) -> dict[tuple[str, str], InstanceHealth]:
    """The health of every VNF instance that has a Network_Function of ours in the NB, plus
    ``instances`` (e.g. the ones a plan creates, ``unknown`` until they exist), by
    ``(vnf, node)``, sorted. With ``instancesPerNode: 2`` the node's two functions count as one
    instance here (what the node's traffic sees);
    ``reconciler.core.transitions.gating.member_health`` tells each VM's own health.

    An instance is ``healthy`` when northd made one of its functions the active one of every
    steering group of ours that holds it, ``not healthy`` when it did not (none healthy:
    fail-close groups drop, fail-open ones bypass the VNF), ``unknown`` without a health check,
    without a steering group (no binding steers through it; probe groups do not count) or before
    it exists."""
    functions: dict[tuple[str, str], list[str]] = defaultdict(list)
    checked: set[str] = set()
    groups: dict[str, list[str]] = defaultdict(list)
    for row in observed.ovn_rows:
        if row.table == _NF:
            where = _instance_of(row)
            if where is not None:
                functions[where].append(str(row.fields.get("name", row.key)))
        elif row.table == _CHECK:
            nf = row.fields.get("network_function")
            if isinstance(nf, str):
                checked.add(nf)
        elif row.table == _NFG:
            name = str(row.fields.get("name", row.key))
            if is_probe_group(name):
                continue
            for nf in row.fields.get("network_function") or ():
                groups[str(nf)].append(name)
    out: dict[tuple[str, str], InstanceHealth] = {}
    serving = in_service(observed)
    for where in sorted({*functions, *instances}):
        vnf, node = where
        nfs = functions.get(where) or []
        steering = sorted({g for nf in nfs for g in groups.get(nf, ())})
        if not nfs:
            out[where] = InstanceHealth(vnf, node, UNKNOWN, "not in the Northbound DB yet")
        elif not checked.intersection(nfs):
            out[where] = InstanceHealth(vnf, node, UNKNOWN, "no health check")
        elif not steering:
            out[where] = InstanceHealth(vnf, node, UNKNOWN, "no binding steers through it")
        elif all(observed.nf_active.get(g) in nfs for g in steering):
            out[where] = InstanceHealth(vnf, node, HEALTHY)
        else:
            why = why_not_healthy(observed, where in serving)
            out[where] = InstanceHealth(vnf, node, NOT_HEALTHY, why)
    return out


def why_not_healthy(observed: Observed, in_service: bool | None = None) -> str:
    """Why OVN does not count a checked function healthy, what that does to traffic and what
    to look at next, for humans. ``in_service``: whether some ACL steers traffic to it now
    (:func:`in_service`); only then does its bindings' failure policy act. While its steering
    is held (a new instance, issue 22) no ACL names it: the pods' traffic flows unsteered,
    neither dropped nor inspected. ``None``: not known (say neither)."""
    missing = [k for k in SVC_MONITOR_OPTIONS if k not in observed.nb_global.options]
    if missing:
        return (
            f"NB_Global options:{' and '.join(missing)} not set: OVN never probes, so it "
            "never counts the function healthy; next: set them (--svc-monitor-ip, "
            "--svc-monitor-ip-dst)"
        )
    effect = (
        "; its bindings' failure policy acts (fail-close drops, fail-open bypasses the VNF)"
        if in_service
        else "; no traffic is steered to it yet (its steering is held: the pods' traffic "
        "flows unsteered)"
        if in_service is False
        else ""
    )
    return (
        f"probe failing: OVN's probe gets no answer, or northd has not judged it yet{effect}; "
        "next: check that the guest forwards between its two data NICs, that svc_monitor_ip "
        "is reachable from the node, and that the VM's ports are bound"
    )


def in_service(observed: Observed) -> set[tuple[str, str]]:
    """``(vnf, node)`` of every VNF instance some owned ACL steers traffic to now: through a
    function group holding one of its functions, or a chain's group that crosses it."""
    groups: dict[str, OvnRow] = {}
    functions: dict[str, tuple[str, str]] = {}
    used: set[str] = set()
    for row in observed.ovn_rows:
        if row.table == _NFG:
            groups[str(row.fields.get("name", row.key))] = row
        elif row.table == _NF:
            where = _instance_of(row)
            if where is not None:
                functions[str(row.fields.get("name", row.key))] = where
        elif row.table == "ACL" and row.fields.get("network_function_group"):
            used.add(str(row.fields["network_function_group"]))
    out: set[tuple[str, str]] = set()
    for name in used:
        group = groups.get(name)
        if group is None:
            continue
        for nf in group.fields.get("network_function") or ():
            if str(nf) in functions:
                out.add(functions[str(nf)])
        ids = group.fields.get("external_ids") or {}
        node = ids.get(own.NODE)
        if ids.get(own.CHAIN) and isinstance(node, str):
            out.update((hop, node) for hop in str(ids[own.CHAIN]).split(","))
    return out


def id_budget(target: Target, observed: Observed) -> dict[str, dict[str, int]]:
    """Per NF id table: ids in use in the NB once the plan is applied (ours in the target plus
    everyone else's), the limit, and how ours add up: ``ours`` over ``nodes`` nodes, at most
    ``per_node`` on one node (a central NB holds every node's: nodes x functions per node must
    stay under 255). Empty when the NB has no Network_Function tables."""
    if not observed.capabilities.network_function:
        return {}
    ours = {table: 0 for table in NF_ID_TABLES}
    per_node: dict[str, dict[str | None, int]] = {table: defaultdict(int) for table in ours}
    for res in target:
        if res.kind in ours:
            ours[res.kind] += 1
            per_node[res.kind][res.node] += 1
    return {
        table: {
            "used": ids_in_use(table, count, observed),
            "max": MAX_OVN_ID,
            "ours": count,
            "nodes": len(per_node[table]),
            "per_node": max(per_node[table].values(), default=0),
        }
        for table, count in ours.items()
    }


def live_id_budget(observed: Observed) -> dict[str, int]:
    """Per NF id table: ids in use in the NB as observed (ours plus everyone else's); empty
    when the NB has no Network_Function tables."""
    if not observed.capabilities.network_function:
        return {}
    ours = {table: 0 for table in NF_ID_TABLES}
    for row in observed.ovn_rows:
        if row.table in ours:
            ours[row.table] += 1
    return {table: ids_in_use(table, count, observed) for table, count in ours.items()}


def plan_report(target: Target, observed: Observed) -> dict[str, Any]:
    """What a plan shows beside its changes (:class:`Plan` facts by field name):
    ``vnf_instances``, the health of every VNF instance with a Network_Function in the target
    or the NB, and ``nf_ids``, the id budget of this NB after the plan. Left out where they say
    nothing (no Network_Function anywhere; an NB without the tables)."""
    report: dict[str, Any] = {}
    instances = {
        (res.origin.partition("/")[2], res.node)
        for res in target
        if res.kind == _NF and res.origin.startswith("VnfDeployment/")  # not a chain's
    }
    health = vnf_health(observed, {(v, n) for v, n in instances if n is not None})
    if health:
        report["vnf_instances"] = tuple(health.values())
    budget = id_budget(target, observed)
    if budget:
        report["nf_ids"] = budget
    return report
