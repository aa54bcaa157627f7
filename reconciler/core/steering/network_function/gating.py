"""Health-gated steering: traffic is never switched onto a VNF instance OVN has not seen healthy.

A new VNF instance (a new VnfDeployment, a new node, a VM recreated) is dead to OVN until its
first health probe passes; a ``fail-close`` binding switched onto it at once drops its pods'
traffic until then (tens of seconds for a real VM), and a ``fail-open`` one sends it around the
VNF. So a plan's *transitions onto a new path* wait: the VM, its NADs, LSPs, Network_Function,
health check and function groups are written at once, but the ACL changes that would steer a
binding's traffic to a function group that northd has not yet reported active
(``Network_Function_Group.network_function_active``) are held. The next pass after northd
reports the group active (the loop wakes on that NB change) switches them on.

What is held, and why it is safe:

- **Per (binding, node).** Every steering ACL carries ``osc.io/resource`` = ``Binding/<name>``
  and ``osc.io/node``; the unit of holding is that pair, so a binding whose traffic crosses
  several VNFs on a node (a chain, one ACL per hop) is held whole until every hop's group is
  active, and a crossed-traffic twin ACL waits with its steering ACL.
- **Only transitions onto a new path.** An ACL change is a transition when it creates an ACL
  with a function group, or moves one to a group with a function the binding's traffic did not
  go through before (another VNF, a new instance). Traffic already steered keeps its failure
  policy: a live ACL whose group is (or becomes) unhealthy is never touched here, and a new
  failure policy on the same functions applies at once, so holding is never a way around
  ``fail-close`` of a path in service.
- **The old path stays whole.** While a unit is held its live ACLs stay as they are; a function
  group they reference that the plan would delete is kept too, with its functions and their
  health checks (deleted once the unit switched). When the VNF instance itself goes in the same
  plan (its ports are deleted: the VnfDeployment or the node is gone) the old path cannot be
  kept: the unit is not held and the plan warns.
- **Northd's word, not ours.** A group counts as ready when northd wrote an active function for
  it that the plan does not take out of it, or when it (a new group, e.g. another failure
  policy on the same VNF) holds a function northd already reports healthy in another group:
  northd judges a function by its own probe, so such a group is active from the first
  computation that also builds its ACLs' flows. A function northd has never reported healthy
  (a new VNF instance, a new node, a recreated VM's) is what waits. Measured on OVN 26.03:
  northd probes every function with a health check and fills ``network_function_active`` of
  every group, whether an ACL references the group or not, so holding never deadlocks
  (docs/datapath.md, "Transitions").

The security trade-off (docs/operations.md): a pod that was not steered stays unsteered (with
``fail-close``: delivered, not dropped) until its VNF instance is healthy; a steered pod is
never dropped by a rollout.

This is a pure pass over a finished plan (no I/O, no clock), applied the same way to every
plan however it was made (``reconciler.core.transitions.hold``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.facts import HEALTHY, Finding, Hold
from reconciler.core.model.observed import Observed, OvnRow
from reconciler.core.model.plan import Change, Plan
from reconciler.core.steering.network_function.health import (
    CHECK,
    NF,
    NFG,
    HealthIndex,
    external_ids,
    slot_of,
    vnf_node,
)

__all__ = ["hold_unready"]

CHAIN = "osc.io/chain"
"""``external_ids`` key of a service chain's rows: its hops, ``h1,...,hk``."""

_NF, _NFG, _CHECK, _ACL = NF, NFG, CHECK, "ACL"
Ident = tuple[str, str]


def _unit(change: Change) -> tuple[str, str] | None:
    kind, _, name = change.origin.partition("/")
    if change.kind != _ACL or kind != "Binding" or not name or change.node is None:
        return None
    return name, change.node


def _new_path(change: Change) -> str | None:
    """The function group a change switches traffic onto, if it is a transition."""
    if change.after is None:  # a delete
        return None
    group = change.after.get("network_function_group")
    if not isinstance(group, str) or not group:
        return None
    if change.before is not None and change.before.get("network_function_group") == group:
        return None
    return group


def _planned_members(plan: Plan) -> dict[str, list[str] | None]:
    """Function groups the plan creates, updates (their new members) or deletes (None)."""
    out: dict[str, list[str] | None] = {}
    for change in plan.changes:
        if change.kind != _NFG:
            continue
        if change.after is None:  # a delete
            out[change.key] = None
        else:
            out[change.key] = [str(nf) for nf in change.after.get("network_function") or ()]
    return out


def hold_unready(plan: Plan, observed: Observed, health: HealthIndex) -> Plan:
    """``plan`` without the steering transitions whose function groups are not ready, and with
    :attr:`Plan.held` saying what waits and why (``health``: the plan's health index). See the
    module docstring for the rules."""
    units: dict[tuple[str, str], list[Change]] = defaultdict(list)
    for change in plan.changes:
        unit = _unit(change)
        if unit is not None:
            units[unit].append(change)
    if not any(_new_path(c) for changes in units.values() for c in changes):
        return plan
    groups = _Groups.of(plan, observed, health)
    candidates = {
        unit: sorted({g for c in changes if (g := groups.onto(c)) is not None})
        for unit, changes in units.items()
    }
    candidates = {u: gs for u, gs in candidates.items() if gs}
    if not candidates:
        return plan
    groups.read_planned_ids(plan)
    held: list[Hold] = []
    warnings: list[Finding] = []
    old_path: _OldPath | None = None
    for unit, unit_groups in sorted(candidates.items()):
        waiting = [g for g in unit_groups if not groups.ready(g)]
        if not waiting:
            continue
        if old_path is None:
            old_path = _OldPath.of(plan, observed)
        found = _hold(unit, waiting, units[unit], groups, old_path)
        if isinstance(found, Finding):
            warnings.append(found)
        else:
            held.append(found)
    if not held and not warnings:
        return plan
    dropped = {ident for hold in held for ident in hold.changes}
    return replace(
        plan,
        changes=tuple(c for c in plan.changes if (c.kind, c.key) not in dropped),
        findings=(*plan.findings, *warnings),
        held=(*plan.held, *held),
    )


@dataclass
class _Groups:
    """The function groups a plan's transitions go onto, live and planned, and whether northd
    made them ready.

    Only the live function groups are read for every transition. What only a unit that waits
    needs (health of every function, the live ACLs, ids, ports) is read from the rows when one
    does (:class:`_OldPath`, ``health``): the first member of a group on a node makes a
    transition onto a ready group on the label -> commit path, which must not pay for a read of
    every owned row (docs/benchmarks.md)."""

    observed: Observed
    health: HealthIndex
    live: dict[str, list[str]]
    """Live group -> its functions."""
    ids: dict[str, Mapping[str, Any]]
    """Group -> its ``external_ids`` (live, then planned)."""
    planned: dict[str, list[str] | None]
    """Groups the plan creates, updates (their new functions) or deletes (None)."""
    members: dict[str, list[str]]
    """Group -> its functions once the plan is applied."""

    @classmethod
    def of(cls, plan: Plan, observed: Observed, health: HealthIndex) -> _Groups:
        live: dict[str, list[str]] = {}
        ids: dict[str, Mapping[str, Any]] = {}
        for row in observed.ovn_rows:
            if row.table == _NFG:
                functions = row.fields.get("network_function") or ()
                live[row.key] = [str(nf) for nf in functions]  # the key of a group is its name
                ids[row.key] = external_ids(row.fields)
        planned = _planned_members(plan)
        members = {**live, **{g: m for g, m in planned.items() if m is not None}}
        return cls(observed, health, live, ids, planned, members)

    def read_planned_ids(self, plan: Plan) -> None:
        self.ids.update(
            {c.key: external_ids(c.after) for c in plan.changes if c.kind == _NFG and c.after}
        )

    def onto(self, change: Change) -> str | None:
        """The group a change switches the unit's traffic onto, when that brings a VNF
        function the unit did not go through before (a new instance, another VNF); a new
        failure policy on the same functions is not a transition: it applies at once."""
        group = _new_path(change)
        if group is None:
            return None
        before = (change.before or {}).get("network_function_group")
        old = set(self.live.get(str(before), ())) if before else set()
        return group if set(self.members.get(group) or ()) - old else None

    def hops(self, group: str) -> list[str]:
        """A chain's group (``osc.io/chain``): each hop's own function on the node, whose
        health decides (the chain's function has no probe of its own: OVN's probe cannot
        cross the chain's link switches)."""
        ids = self.ids.get(group) or {}
        chain, node = ids.get(CHAIN), ids.get(own.NODE)
        if not isinstance(chain, str) or not chain or not isinstance(node, str):
            return []
        owner = str(ids.get(own.OWNER, own.DEFAULT_INSTANCE))
        return [naming.network_function(owner, hop, node) for hop in chain.split(",")]

    def ready(self, group: str) -> bool:
        """northd made a function of the group active, or the group (new, or with new
        members) holds a function northd already counts healthy elsewhere: northd judges the
        function by its own Service_Monitor, so the group is active from its first
        computation (the one that also builds the ACL's flows). A chain's group also needs
        every hop's own function healthy."""
        after = self.planned.get(group, self.live.get(group))
        if not after:
            return False
        members = self.health.members
        chain = self.hops(group)
        for nf in chain:
            hop = members.get(nf)
            if hop is None or (hop.checkable and hop.health != HEALTHY):
                return False
        if chain:
            return True  # its function has no probe: northd counts it healthy at once
        active = self.observed.nf_active.get(group)
        if group in self.live and active is not None and active in after:
            return True
        return any(members[nf].health == HEALTHY for nf in after if nf in members)

    def needs(self, group: str) -> list[str]:
        """The functions whose health a group waits for (a chain's: its hops')."""
        return self.hops(group) or list(self.members.get(group) or ())


def _hold(
    unit: tuple[str, str],
    waiting: list[str],
    changes: list[Change],
    groups: _Groups,
    old_path: _OldPath,
) -> Hold | Finding:
    """The hold of one (binding, node) whose steering waits for ``waiting`` groups, keeping
    its old path whole; or why that path cannot be kept (the unit is then not held)."""
    binding, node = unit
    old_groups = {
        str(g)
        for row in old_path.live_acls.get(unit, ())
        if isinstance(g := row.fields.get("network_function_group"), str) and g
    }
    kept = sorted(g for g in old_groups if g in groups.planned and groups.planned[g] is None)
    old_functions = sorted({nf for g in kept for nf in groups.live.get(g, ())})
    live_ports, deleted_ports = old_path.live_ports, old_path.deleted_ports
    lost = sorted({nf for nf in old_functions if live_ports.get(nf, set()) & deleted_ports})
    onto = f"Binding {binding} on node {node} is switched onto {', '.join(waiting)} before OVN "
    if lost:
        return _cannot_keep(
            binding,
            node,
            f"{onto}reported it healthy: the VNF it steered through until now "
            f"({', '.join(lost)}) is removed in the same plan, so its steering cannot be kept "
            "until then (the failure policy acts meanwhile)",
        )
    keep = {(_NFG, g) for g in kept}
    deleted, live_ids, new_ids = old_path.deleted, old_path.live_ids, old_path.new_ids
    keep |= {(t, nf) for nf in old_functions for t in (_NF, _CHECK) if (t, nf) in deleted}
    clash = sorted(key for table, key in keep if live_ids.get((table, key)) in new_ids[table])
    if clash:  # only when the ids ran out: a new row of the plan takes the kept row's id
        return _cannot_keep(
            binding,
            node,
            f"{onto}reported it healthy: {', '.join(clash)} cannot be kept until then (its id "
            "is given to a new row; the ids are nearly exhausted)",
        )
    idents = tuple(sorted({(c.kind, c.key) for c in changes} | keep))
    known, healths = old_path.known, groups.health.members
    functions = [
        nf
        for g in waiting
        for nf in groups.needs(g)
        if nf not in healths or healths[nf].health != HEALTHY
    ]
    chained = any(groups.hops(g) for g in waiting)
    vms = [known[nf][2] if nf in known else nf for nf in functions]
    vms = list(dict.fromkeys(vms)) if chained else sorted(set(vms))
    vnfs = sorted({known[nf][0] for nf in functions if nf in known})
    whys = sorted({healths[nf].detail if nf in healths else _NEW for nf in functions} - {""})
    return Hold(binding, node, tuple(vms), tuple(waiting), idents, "; ".join(whys),
                tuple(vnfs), chained)  # fmt: skip


_NEW = "new: OVN has not probed it yet"


def _cannot_keep(binding: str, node: str, text: str) -> Finding:
    return Finding("transition", f"Binding/{binding}", node, text)


@dataclass(frozen=True)
class _OldPath:
    """What :func:`gate` reads to keep a waiting unit's old path whole (or to warn that it
    cannot be): read from all the owned rows, so only once a unit waits."""

    live_acls: dict[tuple[str, str], list[OvnRow]]
    """Our live steering ACLs by unit (binding, node)."""
    deleted: set[Ident]
    live_ids: dict[Ident, Any]
    """The ``id`` of every live row that has one."""
    new_ids: dict[str, set[Any]]
    """Per table, the ids the plan gives rows that did not have them."""
    deleted_ports: set[str]
    live_ports: dict[str, set[str]]
    """Live Network_Function -> its inport and outport."""
    known: dict[str, tuple[str, str, str]]
    """:func:`_functions`."""

    @classmethod
    def of(cls, plan: Plan, observed: Observed) -> _OldPath:
        live_acls: dict[tuple[str, str], list[OvnRow]] = defaultdict(list)
        for row in observed.ovn_rows:
            if row.table == _ACL:
                ids = external_ids(row.fields)
                kind, _, name = str(ids.get(own.RESOURCE, "")).partition("/")
                node = ids.get(own.NODE)
                if kind == "Binding" and isinstance(node, str):
                    live_acls[(name, node)].append(row)
        deleted = {(c.kind, c.key) for c in plan.changes if c.action == "delete"}
        live_ids = {
            (r.table, r.key): r.fields.get("id") for r in observed.ovn_rows if "id" in r.fields
        }
        new_ids: dict[str, set[Any]] = defaultdict(set)
        for c in plan.changes:
            after, before = c.after, c.before or {}
            if after is not None and "id" in after and before.get("id") != after["id"]:
                new_ids[c.kind].add(after["id"])
        live_ports = {
            r.key: {str(r.fields.get("inport")), str(r.fields.get("outport"))}
            for r in observed.ovn_rows
            if r.table == _NF
        }
        return cls(
            live_acls=live_acls,
            deleted=deleted,
            live_ids=live_ids,
            new_ids=new_ids,
            deleted_ports={key for kind, key in deleted if kind == "Logical_Switch_Port"},
            live_ports=live_ports,
            known=_functions(plan, observed),
        )


def _functions(plan: Plan, observed: Observed) -> dict[str, tuple[str, str, str]]:
    """``(vnf, node, VirtualMachine name)`` of every Network_Function of ours, live or
    planned."""
    rows = [(r.key, r.fields) for r in observed.ovn_rows if r.table == _NF]
    rows += [(c.key, c.after) for c in plan.changes if c.kind == _NF and c.after is not None]
    out: dict[str, tuple[str, str, str]] = {}
    for name, fields in rows:
        where = vnf_node(fields)
        if where is None:
            continue
        owner = str(external_ids(fields).get(own.OWNER, own.DEFAULT_INSTANCE))
        out[name] = (*where, naming.vm_name(*where, slot_of(name, owner, *where)))
    return out
