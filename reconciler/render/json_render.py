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
