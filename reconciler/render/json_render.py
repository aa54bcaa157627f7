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

``meta.held`` (absent when nothing is held): steering that apply does not write yet because OVN
has not reported its VNF instance healthy, one entry per (binding, node): ``{binding, node,
reason, waiting_for (VM names), groups (Network_Function_Groups not active), vnfs, why,
changes ([kind, name] of the changes held back: they are not in ``changes``)}``.
``meta.rollout`` (absent without one): a rolling update per VnfDeployment whose VMs need a
restart: ``{vnf, summary ("VnfDeployment/fw: 1 of 3 nodes updated ..."), nodes_updated,
nodes_total, halted (why, or null), max_unavailable, deadline, window, instances_per_node, vms:
[{key, node, slot, function, outdated, released, template, phase, since, rolling_to, halted,
peer}]}``; VM template updates not ``released`` are held back (not in ``changes``).
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.core.plan import Plan

FORMAT_VERSION = "1"


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "meta": plan.meta,
        "changes": [
            {
                "action": c.action,
                "resource": {"kind": c.kind, "name": c.key, "node": c.node, "origin": c.origin},
                "before": c.before,
                "after": c.after,
                "changed": list(c.changed),
            }
            for c in plan.changes
        ],
        "warnings": list(plan.warnings),
        "summary": plan.summary(),
    }


def render_json(plan: Plan) -> str:
    return json.dumps(plan_to_dict(plan), indent=2, sort_keys=False) + "\n"
