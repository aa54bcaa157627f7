"""Apply a plan to an in-memory live state: lets pure tests check that plans converge."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.core.plan import Plan


def apply_to(live: dict[tuple[str, str], dict[str, Any]], plan: Plan) -> dict:
    out = copy.deepcopy(live)
    for change in plan.changes:
        ident = (change.kind, change.key)
        if change.action == "delete":
            del out[ident]
        else:
            assert change.after is not None
            out[ident] = copy.deepcopy(change.after)
    return out
