"""Machine-readable plan, ``format_version`` "1".

```json
{
  "format_version": "1",
  "meta": {"steering": "network-function", "instance": "osc-gitops", ...},
  "changes": [
    {"action": "create" | "update" | "delete",
     "resource": {"kind": "Port_Group", "name": "osc.web.node_1", "node": "node-1",
                  "origin": "SecurityGroup/web"},
     "before": {...} | null, "after": {...} | null, "changed": ["['ports']"]}
  ],
  "warnings": ["..."],
  "summary": {"create": 1, "update": 0, "delete": 0}
}
```
``kind`` is an OVN table or a Kubernetes kind; ``name`` is the row's name / ``osc.io/key`` or
``namespace/name``. Fields are added, never renamed or removed, within a format version.
A row that wires a service chain (its function, groups, child ports and link
switches) has ``resource.chain``, the chain's VNFs in order (``["ngfw", "ids"]``, from its
``external_ids:osc.io/chain``); an ACL steering into a chain names the chain's group in
``network_function_group`` (``osc.chain2_exit.ngfw.ids.node_1.fail_close``).

``protection_changes`` (added in format 1, before ``changes`` in meaning: read it first) says
which pods start and stop being steered, per Binding, when the plan is applied
(``reconciler.core.views.protection``):

```json
"protection_changes": [
  {"binding": "payments-ids", "security_group": "payments", "vnfs": ["ids"],
   "change": "changed" | "added" | "removed",
   "start": [{"namespace": "shop", "pod": "web-7", "node": "node-2", "label": "app=web",
              "vnfs": ["ids"]}],
   "stop": [...],
   "steered_before": 37, "steered_after": 0,
   "route_changes": [
     {"pods": [...], "lost": ["ids"], "gained": [], "order_changed": false,
      "before": {"vnfs": ["fw", "ids"], "redirection": "both", "failure_policy": "fail-close"},
      "after": {"vnfs": ["fw"], "redirection": "both", "failure_policy": "fail-close"},
      "summary": "2 pods of shop lose ids (fw → ids becomes fw)"}],
   "pending": [...]}
]
```
Only bindings whose pods change are listed; ``[]`` means no pod starts or stops being steered
and no route changes; ``null`` means the plan could not tell, and ``meta.protection_basis``
says why. ``route_changes`` (issue 33): pods steered before and after whose route changes,
grouped by (before, after): the VNFs in the order a packet crosses them, ``redirection``
(``exit-lport``, ``entry-lport``, ``both``) and ``failure_policy`` (``null`` where the rows do
not say: router policies), the hops ``lost`` and ``gained``, whether the kept hops'
``order_changed``, and the sentence the text plan shows. ``pending``: pods the binding will
steer once its VNF instances are healthy (the plan holds the steering, ``meta.held``): not
steered now and not by this plan.
``meta.protection_basis`` is ``{"source": "live" | "base" | "nothing-applied" | "none",
"detail": "..."}``: what the plan is compared with. ``live`` (the default whenever OVN rows are
observed, a snapshot's too): the pods the owned OVN rows steer now against those they steer
once the plan's changes are made; ``base``: the manifests of a ``--base`` folder, both sides
judged from manifests on the observed cluster; ``nothing-applied``: this instance owns nothing
yet, so no pod is steered now; ``none``: nothing to compare with (``--kubernetes-only`` reads
no OVN), ``protection_changes`` is ``null``. (``applied``, the manifests the last ``apply``
from the same machine recorded, is no longer produced: the live rows replaced it.)
A pod's ``label`` is the SecurityGroup label that selects it, ``null`` when none of the
group's planned labels does (a pod that stops being steered because the group's labels
changed); ``vnfs`` the binding's VNFs its traffic goes to on its node (in chain order).
``meta.group_bindings`` holds, per changed SecurityGroup, its bindings in evaluation order
(what the pull-request comment draws; each with ``removed_vnfs``, the hops its pods stop
crossing) and ``removed``, the bindings removed from it, both struck through in the diagram.

``meta.held`` (absent when nothing is held): steering that apply does not write yet because OVN
has not reported its VNF instance healthy, one entry per (binding, node): ``{binding, node,
reason, waiting_for (VM names: any one of them healthy switches it on; all of them with
``chain``), groups (Network_Function_Groups not active), vnfs, why, chain (a chain's steering:
waits for every hop), changes ([kind, name] of the changes held back: they are not in
``changes``)}``.
``meta.rollout`` (absent without one): a rolling update per VnfDeployment whose VMs need a
restart: ``{vnf, summary ("VnfDeployment/fw: 1 of 3 nodes updated ..."), nodes_updated,
nodes_total, halted (why, or null), max_unavailable, deadline, window, instances_per_node, vms:
[{key, node, slot, function, outdated, released, template, phase, since, rolling_to, halted,
peer}]}``; VM template updates not ``released`` are held back (not in ``changes``).
``meta.unbound`` (absent when none): the data ports of running VNF VMs that OVN has not bound
(the LSP's ``up`` is not true: ``reconciler.core.steering.port_binding.unbound_ports``), one entry
per port: ``{vnf, node, vm ("namespace/name"), port (the LSP), side ("in"|"out"), cause}``.
Such an instance never passes its health check, so the steering onto it stays held.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.core.model.facts import Finding
from reconciler.core.model.ownership import CHAIN
from reconciler.core.model.plan import Change, Plan

FORMAT_VERSION = "1"


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    meta = plan.meta
    changes = meta.pop("protection_changes", None)
    return {
        "format_version": FORMAT_VERSION,
        "meta": meta,
        "protection_changes": changes,
        "changes": [
            {
                "action": c.action,
                "resource": _resource(c),
                "before": c.before,
                "after": c.after,
                "changed": list(c.changed),
            }
            for c in plan.changes
        ],
        "warnings": list(plan.warnings),
        "summary": {**plan.summary(), "pending": len(plan.pending)},
    }


def _resource(change: Any) -> dict[str, Any]:
    """``{kind, name, node, origin}``, and ``chain`` for a row that wires a service chain."""
    out: dict[str, Any] = {
        "kind": change.kind,
        "name": change.key,
        "node": change.node,
        "origin": change.origin,
    }
    fields = change.after or change.before or {}
    chain = (fields.get("external_ids") or {}).get(CHAIN) if isinstance(fields, dict) else None
    if isinstance(chain, str):
        out["chain"] = chain.split(",")
    return out


def plan_from_dict(data: dict[str, Any]) -> Plan:
    """The :class:`Plan` a :func:`plan_to_dict` dict describes (a saved plan shown again:
    ``osc-gitops show FILE``), so every renderer prints it as it printed the original."""
    meta = dict(data.get("meta") or {})
    if data.get("protection_changes") is not None:
        meta["protection_changes"] = data["protection_changes"]
    changes = tuple(
        Change(
            action=change["action"],
            kind=change["resource"]["kind"],
            key=change["resource"]["name"],
            origin=change["resource"]["origin"],
            node=change["resource"]["node"],
            before=change["before"],
            after=change["after"],
            changed=tuple(change.get("changed") or ()),
        )
        for change in data.get("changes") or ()
    )
    findings = tuple(Finding("note", "", None, str(w)) for w in data.get("warnings") or ())
    return Plan(changes, findings).with_meta(meta)


def render_json(plan: Plan) -> str:
    return json.dumps(plan_to_dict(plan), indent=2, sort_keys=False) + "\n"
