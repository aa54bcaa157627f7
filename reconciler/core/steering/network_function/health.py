"""The health index: what OVN says of every VNF function of ours, read from the NB rows once.

northd writes ``Network_Function_Group.network_function_active`` as its probes succeed or fail
(``Observed.nf_active``); which function belongs to which VNF instance, which has a health
check and which groups hold it is in our own rows. :class:`HealthIndex` reads those rows in one
pass, the first time anything asks, and answers every question about health from them:

- :meth:`HealthIndex.members`: each function (each VM) with its own health (gating, rollouts,
  ``apply --wait``);
- :meth:`HealthIndex.instances`: each VNF instance (a VnfDeployment on a node) as the node's
  traffic sees it (the plan's ``vnf_instances``, ``status``, metrics, ``explain``);
- :meth:`HealthIndex.steering_groups`: which steering groups hold which functions (a rollout's
  drain);
- :attr:`HealthIndex.unbound`: the data ports of running VNF VMs OVN has not bound (their LSP
  is not ``up``: ``reconciler.core.steering.port_binding``), with any backend (the plan's
  ``unbound``, ``status``, ``explain``, ``apply --wait``, metrics).

One index is built per plan (``reconciler.core.planning.full.compile_plan``,
``CompiledPlan.health``) and per pass of the engine, and handed to whoever reads health. Only
the Network Function backend has health checks; with any other backend the index knows no
function (only :attr:`HealthIndex.unbound` says something then).
Nothing here feeds compile or the diff: health changes by the second and must never cause a
write or a full compile. Pure, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.facts import (
    HEALTHY,
    NOT_HEALTHY,
    UNKNOWN,
    Health,
    InstanceHealth,
    UnboundPort,
)
from reconciler.core.model.observed import Observed
from reconciler.core.model.target import SVC_MONITOR_OPTIONS, Resource
from reconciler.core.steering.port_binding import unbound_ports

__all__ = [
    "HEALTH_CHECK_TABLE",
    "HealthIndex",
    "MemberHealth",
    "instances_in",
    "vnf_node",
    "why_not_healthy",
]

NF, NFG, CHECK = "Network_Function", "Network_Function_Group", "Network_Function_Health_Check"
HEALTH_CHECK_TABLE = CHECK
"""The table of a function's health check: a scope that keeps others' checks keeps the probe
addresses they need (``reconciler.core.planning.slicing``)."""


def external_ids(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    ids = fields.get("external_ids")
    if type(ids) is dict:  # the usual case, without isinstance's ABC check (hot: once a row)
        return ids
    return ids if isinstance(ids, Mapping) else {}


def vnf_node(fields: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(vnf, node)`` of an owned row compiled from a VnfDeployment on a node."""
    ids = external_ids(fields)
    kind, _, vnf = str(ids.get(own.RESOURCE, "")).partition("/")
    node = ids.get(own.NODE)
    if kind != "VnfDeployment" or not vnf or not isinstance(node, str):
        return None
    return vnf, node


def slot_of(name: str, owner: str, vnf: str, node: str) -> str:
    """Which instance of its node a Network_Function of ours is (from its name)."""
    for slot in naming.SLOTS:
        try:
            if naming.network_function(owner, vnf, node, slot) == name:
                return slot
        except naming.NameError_:
            break
    return ""


def why_not_healthy(observed: Observed, in_service: bool | None = None) -> str:
    """Why OVN does not count a checked function healthy, what that does to traffic and what
    to look at next, for humans. ``in_service``: whether some ACL steers traffic to it now
    (:attr:`HealthIndex.in_service`); only then does its bindings' failure policy act. While
    its steering is held (a new instance) no ACL names it: the pods' traffic flows unsteered,
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


@dataclass(frozen=True, slots=True)
class MemberHealth:
    """One VNF VM (one Network_Function) as OVN reports it. With two instances on a node the
    node's steering groups name only the active one; each function's probe group
    (``naming.probe_group``) tells the other's health."""

    vnf: str
    node: str
    slot: str
    function: str
    """The Network_Function's name."""
    health: Health
    detail: str = ""
    checkable: bool = True
    """OVN will judge it: it has a health check and a group holds it. When not, ``unknown`` is
    all there will ever be (a rollout cannot wait for OVN's word then)."""

    @property
    def vm(self) -> str:
        """The VirtualMachine's name (``naming.vm_name``)."""
        return naming.vm_name(self.vnf, self.node, self.slot)


@dataclass(frozen=True, slots=True)
class _Function:
    name: str
    vnf: str
    node: str
    slot: str


@dataclass(frozen=True, slots=True)
class _Group:
    name: str
    members: tuple[str, ...]
    vnf_node: tuple[str, str] | None


@dataclass(frozen=True)
class _Rows:
    """Our functions, health checks and groups, as one pass over the owned rows found them."""

    functions: list[_Function] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)
    groups: list[_Group] = field(default_factory=list)
    steered_to: set[str] = field(default_factory=set)
    """The function groups some owned ACL sends traffic to (in service now)."""
    chains: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """A chain's function group -> (its node, its hops)."""

    @classmethod
    def of(cls, observed: Observed) -> _Rows:
        rows = cls()
        for row in observed.ovn_rows:
            if row.table == NF:
                where = vnf_node(row.fields)
                if where is not None:
                    name = str(row.fields.get("name", row.key))
                    owner = str(external_ids(row.fields).get(own.OWNER, own.DEFAULT_INSTANCE))
                    rows.functions.append(_Function(name, *where, slot_of(name, owner, *where)))
            elif row.table == CHECK:
                nf = row.fields.get("network_function")
                if isinstance(nf, str):
                    rows.checked.add(nf)
            elif row.table == NFG:
                members = tuple(str(nf) for nf in row.fields.get("network_function") or ())
                name = str(row.fields.get("name", row.key))
                rows.groups.append(_Group(name, members, vnf_node(row.fields)))
                ids = external_ids(row.fields)
                node = ids.get(own.NODE)
                if ids.get(own.CHAIN) and isinstance(node, str):
                    rows.chains[name] = (node, tuple(str(ids[own.CHAIN]).split(",")))
            elif row.table == "ACL" and row.fields.get("network_function_group"):
                rows.steered_to.add(str(row.fields["network_function_group"]))
        return rows


class HealthIndex:
    """Health as OVN reports it, from one read of ``observed``'s rows (see the module
    docstring). Cheap to make: nothing is read until something is asked."""

    def __init__(self, observed: Observed) -> None:
        self.observed = observed

    @cached_property
    def _rows(self) -> _Rows:
        return _Rows.of(self.observed)

    @cached_property
    def _held_by(self) -> dict[str, list[_Group]]:
        """Function name -> the groups (steering and probe) that hold it."""
        out: dict[str, list[_Group]] = defaultdict(list)
        for group in self._rows.groups:
            for nf in group.members:
                out[nf].append(group)
        return out

    @cached_property
    def in_service(self) -> frozenset[tuple[str, str]]:
        """``(vnf, node)`` of every VNF instance some owned ACL steers traffic to now: through
        a function group holding one of its functions, or a chain's group that crosses it.
        Only these are under their bindings' failure policy when unhealthy; an instance whose
        steering is still held has no ACL: its pods' traffic flows unsteered."""
        rows = self._rows
        where = {nf.name: (nf.vnf, nf.node) for nf in rows.functions}
        out: set[tuple[str, str]] = set()
        for group in rows.groups:
            if group.name not in rows.steered_to:
                continue
            out.update(where[nf] for nf in group.members if nf in where)
            if group.name in rows.chains:
                node, hops = rows.chains[group.name]
                out.update((hop, node) for hop in hops)
        return frozenset(out)

    def active(self, group: str) -> str | None:
        """The function northd made active in ``group`` (``None``: none healthy, or not
        judged yet)."""
        return self.observed.nf_active.get(group)

    @cached_property
    def members(self) -> dict[str, MemberHealth]:
        """Every Network_Function of ours by name, with its own health as OVN reports it.

        Evidence, best first: the function's probe group (only function in it, so its active
        function is exactly this one's health); a steering group that has it active (healthy);
        a steering group with only this function and none active (not healthy). A standby
        without a probe group, or a function no group holds, is ``unknown``."""
        out: dict[str, MemberHealth] = {}
        checked = self._rows.checked
        for nf in sorted(self._rows.functions, key=lambda f: (f.name, f.vnf, f.node, f.slot)):
            name = nf.name
            health: Health = UNKNOWN
            detail = ""
            held_by = self._held_by.get(name, [])
            probes = [g.name for g in held_by if naming.is_probe_group(g.name)]
            checkable = name in checked and bool(held_by)
            if name not in checked:
                detail = "no health check: OVN counts it healthy whenever its ports are bound"
            elif probes:
                healthy = all(self.active(g) == name for g in probes)
                health = HEALTHY if healthy else NOT_HEALTHY
            elif any(self.active(g.name) == name for g in held_by):
                health = HEALTHY
            elif any(g.members == (name,) and self.active(g.name) is None for g in held_by):
                health = NOT_HEALTHY
            elif not held_by:
                detail = "no binding steers through it"
            else:
                detail = "standby: northd names only the active function of a group"
            if health == NOT_HEALTHY:
                detail = why_not_healthy(self.observed, (nf.vnf, nf.node) in self.in_service)
            out[name] = MemberHealth(nf.vnf, nf.node, nf.slot, name, health, detail, checkable)
        return out

    def instances(
        self, extra: Iterable[tuple[str, str]] = ()
    ) -> dict[tuple[str, str], InstanceHealth]:
        """The health of every VNF instance that has a Network_Function of ours in the NB, plus
        ``extra`` (e.g. the ones a plan creates, ``unknown`` until they exist), by
        ``(vnf, node)``, sorted. With ``instancesPerNode: 2`` the node's two functions count as
        one instance here (what the node's traffic sees); :attr:`members` tells each VM's own.

        An instance is ``healthy`` when northd made one of its functions the active one of
        every steering group of ours that holds it, ``not healthy`` when it did not (none
        healthy: fail-close groups drop, fail-open ones bypass the VNF), ``unknown`` without a
        health check, without a steering group (no binding steers through it; probe groups do
        not count) or before it exists."""
        functions: dict[tuple[str, str], list[str]] = defaultdict(list)
        for nf in self._rows.functions:
            functions[(nf.vnf, nf.node)].append(nf.name)
        checked = self._rows.checked
        out: dict[tuple[str, str], InstanceHealth] = {}
        for where in sorted({*functions, *extra}):
            vnf, node = where
            nfs = functions.get(where) or []
            steering = sorted(
                {g.name for nf in nfs for g in self._held_by.get(nf, ()) if not _probe(g)}
            )
            if not nfs:
                out[where] = InstanceHealth(vnf, node, UNKNOWN, "not in the Northbound DB yet")
            elif not checked.intersection(nfs):
                out[where] = InstanceHealth(vnf, node, UNKNOWN, "no health check")
            elif not steering:
                out[where] = InstanceHealth(vnf, node, UNKNOWN, "no binding steers through it")
            elif all(self.active(g) in nfs for g in steering):
                out[where] = InstanceHealth(vnf, node, HEALTHY)
            else:
                detail = why_not_healthy(self.observed, where in self.in_service)
                out[where] = InstanceHealth(vnf, node, NOT_HEALTHY, detail)
        return out

    @cached_property
    def unbound(self) -> tuple[UnboundPort, ...]:
        """The data ports of running VNF VMs OVN has not bound, sorted (any backend: a port is
        bound or not whatever steers onto it)."""
        return tuple(unbound_ports(self.observed))

    def steering_groups(self, vnf: str, node: str) -> list[tuple[str, tuple[str, ...]]]:
        """The live steering groups of ``vnf`` on ``node`` (not probe groups): ``(name,
        functions)`` each."""
        return [
            (g.name, g.members)
            for g in self._rows.groups
            if g.vnf_node == (vnf, node) and not _probe(g)
        ]

    @cached_property
    def active_functions(self) -> frozenset[str]:
        """The functions northd made active in a steering group of a VNF of ours (not a probe
        group): each node's active instance."""
        return frozenset(
            nf
            for g in self._rows.groups
            if g.vnf_node is not None and not _probe(g) and (nf := self.active(g.name))
        )

    def drained(self, function: str, vnf: str, node: str) -> bool:
        """No live steering group of ``vnf`` on ``node`` holds ``function``, and northd no
        longer names it active in one (it rewrote ``network_function_active``: the traffic
        moved)."""
        return all(
            function not in members and self.active(name) != function
            for name, members in self.steering_groups(vnf, node)
        )


def instances_in(target: Iterable[Resource]) -> set[tuple[str, str]]:
    """``(vnf, node)`` of every VNF instance with a Network_Function of its own in ``target``
    (a chain's function is not one)."""
    return {
        (res.origin.partition("/")[2], res.node)
        for res in target
        if res.kind == NF and res.origin.startswith("VnfDeployment/") and res.node is not None
    }


def _probe(group: _Group) -> bool:
    return naming.is_probe_group(group.name)
