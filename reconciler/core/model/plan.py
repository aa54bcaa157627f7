"""The Plan: typed, ordered changes between the target and what we own live.

``Change`` satisfies the OVN adapter's change protocol (``action``, ``kind``, ``key``, ``before``,
``after``) and the Kubernetes apply step's needs. The JSON form (``format_version`` 1) is a
documented contract, see ``reconciler.render.json_render``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from reconciler.core.model.facts import (
    Finding,
    Hold,
    InstanceHealth,
    Pending,
    Protection,
    ProtectionBasis,
    UnboundPort,
    VnfRollout,
    texts,
)
from reconciler.core.model.target import KUBE_KINDS, OVN_TABLES

__all__ = ["KIND_ORDER", "Action", "Change", "Plan", "changes_between", "fact"]

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
    def label(self) -> str:
        """``create Port_Group osc.web.node_1``."""
        return f"{self.action} {self.kind} {self.key}"

    def canonical(self) -> str:
        """The change as one canonical JSON text: two changes are the same change when these
        are equal (a saved plan read back has lists where the plan had tuples)."""
        fields = [self.action, self.kind, self.key, self.origin, self.node, self.before,
                  self.after, list(self.changed)]  # fmt: skip
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @property
    def sort_key(self) -> tuple[int, str, str]:
        return (KIND_ORDER.get(self.kind, 99), self.key, self.action)


def changes_between(
    saved: Sequence[Change], fresh: Sequence[Change]
) -> tuple[list[str], list[str]]:
    """What a fresh plan changes that a saved one did not, and what the saved one changed that
    the fresh one no longer does (:attr:`Change.label` each, sorted): both empty when the two
    plans have exactly the same changes (``osc-gitops apply FILE``)."""
    before = {c.canonical(): c.label for c in saved}
    now = {c.canonical(): c.label for c in fresh}
    only_now = sorted(v for k, v in now.items() if k not in before)
    only_saved = sorted(v for k, v in before.items() if k not in now)
    return only_now, only_saved


def fact(key: str, item: type[Any] | None = None, default: Any = None) -> Any:
    """A :class:`Plan` field that is one of its facts: ``key`` is its name in the JSON plan's
    ``meta``; ``item`` the type of a tuple's items (with ``to_json``/``from_json``); anything
    else is plain JSON data. ``None`` or an empty tuple is left out of ``meta``."""
    return field(default=default, metadata={"json": key, "item": item})


@dataclass(frozen=True, slots=True)
class Plan:
    """The changes, and the facts that tell people about them (none affects what is applied).

    **Adding a fact** is one field here, declared with :func:`fact` (its ``meta`` key, in the
    place it takes in ``meta``), plus its lines in the renderers that show it
    (``reconciler.render.text``/``markdown``); the JSON plan, a saved plan read back
    (``osc-gitops show FILE``) and :attr:`meta` follow from the declaration. A fact whose
    values are records is a tuple of a frozen dataclass in ``reconciler.core.model.facts``
    with ``to_json``/``from_json`` (e.g. ``unbound: tuple[UnboundPort, ...] =
    fact("unbound", UnboundPort, ())``); whoever finds it sets it with
    ``dataclasses.replace(plan, unbound=...)``. A plain string fact also shows in the text
    plan's first line (``instance: … · steering: …``). ``tests/unit/core/test_plan_facts.py``
    round-trips every fact through the JSON plan."""

    changes: tuple[Change, ...] = ()
    findings: tuple[Finding, ...] = ()
    """The warnings, each with what it concerns (JSON: ``warnings``, their text)."""
    instance: str | None = fact("instance")
    steering: str | None = fact("steering")
    """The steering backend's name (``--steering``)."""
    nb_schema: str | None = fact("nb_schema")
    scope: str | None = fact("scope")
    """``kubernetes-only``, or a zoned plan's scope; ``None``: the whole NB (or a node's)."""
    zones: Mapping[str, Any] | None = fact("zones")
    """A zoned plan: each zone's node and when its agent published its slice."""
    rollouts: tuple[VnfRollout, ...] = fact("rollout", VnfRollout, ())
    held: tuple[Hold, ...] = fact("held", Hold, ())
    pending: tuple[Pending, ...] = fact("pending", Pending, ())
    """What differs from the manifests that this plan does not write yet (a template change
    waiting for its rollout, a VM being rolled, held steering): not converged."""
    node: str | None = fact("node")
    """A node agent's plan: its node."""
    vnf_instances: tuple[InstanceHealth, ...] = fact("vnf_instances", InstanceHealth, ())
    unbound: tuple[UnboundPort, ...] = fact("unbound", UnboundPort, ())
    """Data ports of running VNF VMs that OVN has not bound (JSON: ``meta.unbound``)."""
    nf_ids: Mapping[str, Mapping[str, int]] | None = fact("nf_ids")
    """Per NF id table: ``used``, ``max``, ``ours``, ``nodes``, ``per_node`` after this plan."""
    revision: str | None = fact("revision")
    protection: Protection | None = None
    """JSON: ``meta.protection_basis`` and the top-level ``protection_changes``."""
    group_bindings: Mapping[str, Any] | None = fact("group_bindings")
    """Per changed SecurityGroup, its bindings in evaluation order (the review's diagrams)."""

    @property
    def empty(self) -> bool:
        return not self.changes

    @property
    def warnings(self) -> tuple[str, ...]:
        """The findings' wording, in order."""
        return texts(self.findings)

    def summary(self) -> dict[str, int]:
        counts = Counter(c.action for c in self.changes)
        return {"create": counts["create"], "update": counts["update"], "delete": counts["delete"]}

    @property
    def converged(self) -> bool:
        """Nothing to write and nothing pending: the live state is what the manifests say
        (``plan`` exits 0 only then)."""
        return not self.changes and not self.pending

    def ovn_changes(self) -> list[Change]:
        return [c for c in self.changes if c.is_ovn]

    def kube_changes(self) -> list[Change]:
        return [c for c in self.changes if not c.is_ovn]

    def header(self) -> list[tuple[str, str]]:
        """The plain string facts that say something, in ``meta`` order (``instance``,
        ``steering``, ...)."""
        return [(key, value) for key, value in _facts(self) if isinstance(value, str) and value]

    @property
    def meta(self) -> dict[str, Any]:
        """Every fact that says something, in its JSON form and ``meta`` order: the JSON
        plan's ``meta`` object, with ``protection_changes`` (which the JSON plan puts at its
        top level)."""
        out: dict[str, Any] = {}
        for key, value in _facts(self):
            out[key] = [v.to_json() for v in value] if isinstance(value, tuple) else value
        if self.protection is not None:
            out = _with_protection(out, self.protection)
        return out

    def with_meta(self, meta: Mapping[str, Any]) -> Plan:
        """This plan with the facts of a :attr:`meta` object (unknown keys are ignored)."""
        values: dict[str, Any] = {}
        changes = meta.get("protection_changes")
        if changes is not None or "protection_basis" in meta:
            values["protection"] = Protection(
                tuple(changes) if changes is not None else None,
                ProtectionBasis.from_json(meta.get("protection_basis") or {}),
            )
        for name, key, item in _FACTS:
            raw = meta.get(key)
            if raw is not None:
                values[name] = tuple(item.from_json(v) for v in raw) if item else raw
        return replace(self, **values)


_FACTS: tuple[tuple[str, str, Any], ...] = tuple(
    (f.name, f.metadata["json"], f.metadata["item"]) for f in fields(Plan) if "json" in f.metadata
)
"""``(field name, meta key, item type)`` of every fact, in ``meta`` order."""


def _facts(plan: Plan) -> list[tuple[str, Any]]:
    """``(meta key, value)`` of every fact of ``plan`` that says something."""
    found: list[tuple[str, Any]] = []
    for name, key, _ in _FACTS:
        value = getattr(plan, name)
        if value is not None and value != ():
            found.append((key, value))
    return found


def _with_protection(meta: dict[str, Any], protection: Protection) -> dict[str, Any]:
    """``meta`` with ``protection_changes`` and ``protection_basis`` where a review puts them:
    before ``group_bindings`` (the JSON plan moves ``protection_changes`` to its top level)."""
    bindings = meta.pop("group_bindings", None)
    changes = protection.changes
    meta["protection_changes"] = list(changes) if changes is not None else None
    meta["protection_basis"] = protection.basis.to_json()
    if bindings is not None:
        meta["group_bindings"] = bindings
    return meta
