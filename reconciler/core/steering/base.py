"""Types and helpers shared by ``compile`` and the steering backends (pure, no I/O)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.core import ownership as own
from reconciler.core.model import Binding, Desired, Redirection, VnfDeployment
from reconciler.core.observed import Observed, PodPort
from reconciler.core.target import Resource
from reconciler.errors import UserError

Steering = Literal["network-function", "router-policy"]
STEERING_CHOICES: tuple[str, ...] = ("network-function", "router-policy")
MAX_OVN_ID = 255


class CompileError(UserError):
    """The desired state cannot be realised on this cluster (message says why and what to do)."""


@dataclass(frozen=True)
class CompileOptions:
    instance: str = own.DEFAULT_INSTANCE
    steering: Steering | None = None
    """``None``: network-function when the NB schema has it, else an error asking the user to
    choose router-policy explicitly (it steers routed traffic only, a weaker promise)."""
    cluster_router: str = "ovn_cluster_router"


@dataclass(frozen=True)
class VnfInstance:
    """One VNF VM on one node, with its two OVN data ports."""

    vnf: VnfDeployment
    node: str
    in_port: str
    out_port: str
    mac_in: str
    mac_out: str
    ip: str | None = None
    """Router-policy backend only: the address the router reroutes to."""


@dataclass
class TargetBuilder:
    """Collects resources and warnings; one instance per compile call."""

    instance: str
    resources: list[Resource] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def ext_ids(self, origin: str, key: str, node: str | None) -> dict[str, str]:
        ids = {own.OWNER: self.instance, own.RESOURCE: origin, own.KEY: key}
        if node is not None:
            ids[own.NODE] = node
        return ids

    def ovn(
        self, table: str, key: str, origin: str, node: str | None, fields: dict[str, Any]
    ) -> None:
        fields = {**fields, "external_ids": self.ext_ids(origin, key, node)}
        self.resources.append(Resource(table, key, origin, node, fields))

    def kube(
        self, kind: str, namespace: str, name: str, origin: str, node: str, body: dict[str, Any]
    ) -> None:
        self.resources.append(Resource(kind, f"{namespace}/{name}", origin, node, body))


Members = dict[str, dict[str, list[PodPort]]]
"""security group -> node -> member pod ports (sorted by name)."""


def port_group_ports(members: Members, group: str, node: str) -> list[str]:
    """``Port_Group.ports`` of a group on a node: its member pods' LSP names, sorted. Both
    backends and the incremental planner (``reconciler.core.incremental``) build it here only."""
    return sorted(p.name for p in members.get(group, {}).get(node, ()))


def bindings_by_group(desired: Desired) -> dict[str, list[Binding]]:
    groups: dict[str, list[Binding]] = defaultdict(list)
    for binding in desired.bindings.values():
        groups[binding.spec.securityGroup].append(binding)
    return {g: sorted(bs, key=lambda b: b.spec.order) for g, bs in sorted(groups.items())}


def binding_nodes(
    binding: Binding, instances: dict[tuple[str, str], VnfInstance]
) -> list[VnfInstance]:
    return [inst for (vnf, _), inst in sorted(instances.items()) if vnf == binding.spec.vnf]


def directions(redirection: Redirection) -> list[str]:
    """OVN ACL directions: ``exit-lport`` = towards the pod (to-lport), ``entry-lport`` = from
    it (from-lport)."""
    if redirection is Redirection.EXIT_LPORT:
        return ["to-lport"]
    if redirection is Redirection.ENTRY_LPORT:
        return ["from-lport"]
    return ["from-lport", "to-lport"]


def allocate_ids(table: str, names: Iterable[str], observed: Observed) -> dict[str, int]:
    """Stable ids 1-255: a row that exists keeps its id, new rows take the lowest free ones."""
    wanted = sorted(set(names))
    existing = {
        r.fields.get("name"): r.fields.get("id") for r in observed.ovn_rows if r.table == table
    }
    taken = set(observed.used_ids.get(table, ()))
    ids: dict[str, int] = {}
    for name in wanted:
        old = existing.get(name)
        if isinstance(old, int) and old not in taken:
            ids[name] = old
            taken.add(old)
    free = (i for i in range(1, MAX_OVN_ID + 1) if i not in taken)
    for name in wanted:
        if name in ids:
            continue
        nxt = next(free, None)
        if nxt is None:
            raise CompileError(
                f"{table} ids exhausted: OVN allows ids 1-{MAX_OVN_ID} per Northbound DB and this "
                f"target needs {len(wanted)} rows (plus {len(observed.used_ids.get(table, ()))} "
                "taken by others); bind fewer VNFs per NB, run one NB per node "
                "(OVN-Kubernetes interconnect), or use --steering router-policy"
            )
        ids[name] = nxt
    return ids
