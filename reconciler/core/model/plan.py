"""The Plan: typed, ordered changes between the target and what we own live.

``Change`` satisfies the OVN adapter's change protocol (``action``, ``kind``, ``key``, ``before``,
``after``) and the Kubernetes apply step's needs. The JSON form (``format_version`` 1) is a
documented contract, see ``reconciler.render.json_render``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from reconciler.core.model.target import KUBE_KINDS, OVN_TABLES

__all__ = ["KIND_ORDER", "Action", "Change", "Plan", "with_meta"]

Action = Literal["create", "update", "delete"]
KIND_ORDER: dict[str, int] = {k: i for i, k in enumerate((*KUBE_KINDS, *OVN_TABLES))}


@dataclass(frozen=True, slots=True)
class Change:
    action: Action
    kind: str
    key: str
    origin: str
    node: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changed: tuple[str, ...] = ()
    """For updates: the managed fields that differ, as readable paths (``ports``,
    ``options['nf-linked-port']``)."""

    @property
    def is_ovn(self) -> bool:
        return self.kind in OVN_TABLES

    @property
    def sort_key(self) -> tuple[int, str, str]:
        return (KIND_ORDER.get(self.kind, 99), self.key, self.action)


@dataclass(frozen=True, slots=True)
class Plan:
    changes: tuple[Change, ...] = ()
    warnings: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    """Context for renderers (steering backend, instance, revision); never affects equality of
    changes."""

    @property
    def empty(self) -> bool:
        return not self.changes

    def summary(self) -> dict[str, int]:
        counts = Counter(c.action for c in self.changes)
        return {"create": counts["create"], "update": counts["update"], "delete": counts["delete"]}

    def ovn_changes(self) -> list[Change]:
        return [c for c in self.changes if c.is_ovn]

    def kube_changes(self) -> list[Change]:
        return [c for c in self.changes if not c.is_ovn]


def with_meta(the_plan: Plan, **meta: Any) -> Plan:
    """``the_plan`` with ``meta`` added to :attr:`Plan.meta` (later keys after earlier ones)."""
    return replace(the_plan, meta={**the_plan.meta, **meta})
