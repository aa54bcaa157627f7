"""``osc-gitops explain`` output: human text, and the JSON contract.

JSON (``-o json``): top-level ``pod`` (``namespace``, ``name``, ``node``, ``port``, ``labels``),
``status`` (``reconciler.core.views.explain.Status``), ``steeredAsDeclared`` (the exit code's
answer), ``steering``, ``groups`` (``{name, label, labels, bound}``), ``bindings`` in evaluation
order (``{name, vnf, order, node, instance, healthy, shadowedBy}`` and ``securityGroup``,
``orderDefault``, ``redirection``, ``failurePolicy``, ``precedence``, ``traffic`` (always a
list of ``{protocol, ports}``), ``vm``, ``health``, ``healthDetail``, ``shadowed``, ``steers``,
``reason``, ``held``: why its steering on the pod's node waits for the VNF instance,
or null, ``hops``: the VNFs in the order a packet crosses them, ``{vnf, instance, vm,
health, healthDetail, unbound, traffic, trafficDetail}`` each, one for a single VNF; for a chain
``vnf`` is the list of names and ``instance`` is null; ``unbound``: the instance's data ports
OVN has not bound, one line each with the cause; ``traffic``: ``crossed``, ``quiet``,
``silent-while-pods-talked``, ``unknown`` or null (no instance), whether pod traffic crossed
the instance in the last minute, ``trafficDetail`` the same for humans), ``ovn``
(``{table, name, node, origin, state, changed, fields}``)
and ``warnings``.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.core.views.explain import BindingView, Explanation, RowView

_HEADLINE = {
    "steered": "steered as declared",
    "not-selected": "no SecurityGroup selects it: nothing to steer (as declared)",
    "no-bindings": "selected, but no Binding uses its groups: nothing to steer (as declared)",
    "pending": "not steered as declared yet: OVN rows or VMs differ from the manifests "
    "(osc-gitops apply fixes them)",
    "not-steered": "selected, but not steered by every Binding that applies (see below)",
    "held": "selected, but its steering is held until OVN reports the VNF instance healthy",
}


def explain_json(explanation: Explanation) -> dict[str, Any]:
    """The ``-o json`` document (module docstring)."""
    e = explanation
    return {
        "pod": {
            "namespace": e.namespace,
            "name": e.pod,
            "node": e.node,
            "port": e.port,
            "labels": dict(sorted(e.labels.items())),
        },
        "status": e.status,
        "steeredAsDeclared": e.as_declared,
        "steering": e.steering,
        "groups": [
            {"name": g.name, "label": g.label, "labels": list(g.labels), "bound": g.bound}
            for g in e.groups
        ],
        "bindings": [_binding_json(b) for b in e.bindings],
        "ovn": [
            {
                "table": r.table,
                "name": r.name,
                "node": r.node,
                "origin": r.origin,
                "state": r.state,
                "changed": list(r.changed),
                "fields": r.fields,
            }
            for r in e.ovn
        ],
        "warnings": list(e.warnings),
    }


def _binding_json(b: BindingView) -> dict[str, Any]:
    return {
        "name": b.name,
        "securityGroup": b.group,
        "vnf": b.vnf,
        "order": b.order,
        "orderDefault": b.order_default,
        "redirection": b.redirection,
        "failurePolicy": b.failure_policy,
        "precedence": b.precedence,
        "traffic": b.traffic,
        "node": b.node,
        "instance": b.instance,
        "vm": b.vm_state,
        "healthy": b.healthy,
        "health": b.health,
        "healthDetail": b.health_detail,
        "shadowedBy": b.shadowed_by,
        "shadowed": b.shadowed,
        "steers": b.steers,
        "reason": b.reason,
        "held": b.held or None,
        "hops": [
            {
                "vnf": h.vnf,
                "instance": h.instance,
                "vm": h.vm_state,
                "health": h.health,
                "healthDetail": h.health_detail,
                "unbound": list(h.unbound),
                "traffic": h.traffic_verdict or None,
                "trafficDetail": h.traffic or None,
            }
            for h in b.hops
        ],
    }


def render_explain_json(explanation: Explanation) -> str:
    return json.dumps(explain_json(explanation), indent=2, ensure_ascii=False) + "\n"


def render_explain_text(explanation: Explanation) -> str:
    """Pod, groups, bindings in evaluation order, OVN rows along the packet's path, warnings."""
    e = explanation
    where = f" on {e.node}" if e.node else " (not scheduled)"
    port = f" (OVN port {e.port})" if e.port else " (no OVN port)"
    lines = [
        f"Pod {e.namespace}/{e.pod}{where}{port}: {_HEADLINE[e.status]}",
        f"steering: {e.steering}",
    ]
    if e.groups:
        lines += ["", "Selected by:"]
        for g in e.groups:
            also = [label for label in g.labels if label != g.label]
            extra = f" (also {', '.join(also)})" if also else ""
            unbound = "" if g.bound else "  [no Binding uses it]"
            lines.append(f"  SecurityGroup {g.name} through {g.label}{extra}{unbound}")
    if e.bindings:
        lines += ["", "Bindings, in evaluation order (the first whose traffic matches steers):"]
        for i, b in enumerate(e.bindings, 1):
            lines += _binding_lines(i, b)
    if e.ovn:
        lines += ["", "OVN rows:"]
        width = max(len(r.table) for r in e.ovn)
        for r in e.ovn:
            detail = _row_detail(r, e.port)
            changed = f" (changed: {', '.join(r.changed)})" if r.changed else ""
            lines.append(
                f"  {r.state:<8} {r.table:<{width}}  {r.name}{detail and '  ' + detail}{changed}"
            )
    if e.warnings:
        lines += ["", "Warnings:"]
        lines += [f"  - {w}" for w in e.warnings]
    return "\n".join(lines) + "\n"


def _binding_lines(index: int, b: BindingView) -> list[str]:
    order = f"order {b.order}" + (" (default)" if b.order_default else "")
    lines = [
        f"  {index}. {b.name}  (SecurityGroup {b.group}, {order}, {b.redirection}): "
        + "; ".join(b.traffic_text),
        f"     {b.failure_policy}, {b.precedence}",
    ]
    if b.instance:
        vm = f" ({b.vm_state})" if b.vm_state and b.vm_state != "ok" else ""
        detail = f": {b.health_detail}" if b.health_detail else ""
        lines.append(
            f"     VNF {b.vnf} on {b.node}: VirtualMachine {b.instance}{vm}, {b.health}{detail}"
        )
        for hop in b.hops[:1]:
            lines += [f"     ! {line}" for line in hop.unbound]
            if hop.traffic:
                lines.append(f"     traffic: {hop.traffic}")
    elif len(b.hops) > 1:
        lines.append(f"     chain {b.vnf_text} on {b.node}, hop by hop:")
        for n, hop in enumerate(b.hops, 1):
            where = f"VirtualMachine {hop.instance}" if hop.instance else "no instance here"
            vm = f" ({hop.vm_state})" if hop.vm_state and hop.vm_state != "ok" else ""
            detail = f": {hop.health_detail}" if hop.health_detail else ""
            lines.append(f"       {n}. VNF {hop.vnf}: {where}{vm}, {hop.health}{detail}")
            lines += [f"          ! {line}" for line in hop.unbound]
            if hop.traffic:
                lines.append(f"          traffic: {hop.traffic}")
    if b.reason:
        lines.append(f"     does not steer this pod: {b.reason}")
    if b.held:
        lines.append(f"     ~ held: {b.held}")
    if b.shadowed_by:
        lines.append(f"     shadowed by {b.shadowed_by}: steers nothing of this pod")
    else:
        for direction, by in b.shadowed.items():
            lines.append(f"     shadowed for {direction} traffic by {', '.join(by)}")
    return lines


def _row_detail(row: RowView, port: str | None) -> str:
    f = row.fields
    if row.table == "Port_Group":
        ports = f.get("ports") or ()
        holds = "holds the pod's port" if port in ports else "does not hold the pod's port"
        return f"{holds} ({len(ports)} in all)"
    if row.table == "ACL":
        target = f.get("network_function_group")
        return (
            f"{f.get('direction')} tier {f.get('tier')} priority {f.get('priority')}: "
            f"{f.get('match')}" + (f" -> {target}" if target else f" -> {f.get('action')}")
        )
    if row.table == "Logical_Router_Policy":
        return (
            f"priority {f.get('priority')}: {f.get('match')} -> {f.get('action')} "
            f"{', '.join(f.get('nexthops') or ())}"
        )
    if row.table == "Network_Function_Group":
        return (
            f"{f.get('mode')}, {f.get('fallback')} -> {', '.join(f.get('network_function') or ())}"
        )
    if row.table == "Network_Function":
        return f"id {f.get('id')}: {f.get('inport')} -> {f.get('outport')}"
    if row.table == "Network_Function_Health_Check":
        options = f.get("options") or {}
        return ", ".join(f"{k} {v}" for k, v in sorted(options.items()))
    return ""
