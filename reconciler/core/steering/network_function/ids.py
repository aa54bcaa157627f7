"""The Network_Function id budget: ids 1-255 per NB, shared by every writer of it (the plan's
``nf_ids``, the id metrics). Pure, no I/O."""

from __future__ import annotations

from collections import defaultdict

from reconciler.core.model.observed import Observed
from reconciler.core.model.target import Target
from reconciler.core.steering.base import MAX_OVN_ID, ids_in_use
from reconciler.core.steering.network_function.health import NF, NFG

__all__ = ["NF_ID_TABLES", "id_budget", "live_id_budget"]

NF_ID_TABLES: tuple[str, ...] = (NF, NFG)
"""The tables whose ids (1-255) are allocated among every writer of one NB."""


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
