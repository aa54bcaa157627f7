"""The steering-backend interface, and the types and helpers it shares with ``compile``.

A backend turns Bindings into OVN rows. :class:`SteeringBackend` is everything ``compile`` and the
incremental planner (``reconciler.core.planning.incremental``) may know of one, so that neither
names a backend: how it is chosen (:meth:`~SteeringBackend.available`), how the VNF data ports
look, the rows of each binding, and, above all, **what depends on pods**. The planner re-plans a
pod event by redoing only the rows a backend *declares* pod-dependent, on the pod's node, so those
declarations are enforced rather than trusted:

- ``emit_bindings`` never sees a pod: it gets an ``Observed`` that holds only the fields the
  backend declares (:attr:`~SteeringBackend.observed_fields`, plus the owned rows of its
  :attr:`~SteeringBackend.live_tables`). A backend that reads something else finds it empty and
  fails its own tests, instead of producing plans that go stale in the warm loop.
- Pods reach a backend only as the :class:`NodePods` of one node, in
  :meth:`~SteeringBackend.pod_fields` (the fields of a row it declared pod-dependent) and
  :meth:`~SteeringBackend.check_pods`. Compile fills every pod-dependent row through
  ``pod_fields`` and the planner refills the rows of the nodes whose pods changed through the very
  same call: one code path, so the two cannot disagree.

Pure, no I/O.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, NamedTuple, Protocol

from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Binding, Desired, Redirection, VnfDeployment
from reconciler.core.model.facts import Code, Finding
from reconciler.core.model.observed import Observed, OvnCapabilities, OvnRow, PodPort
from reconciler.core.model.plan import Change, Plan
from reconciler.core.model.target import Resource
from reconciler.core.steering.network_function.health import HealthIndex
from reconciler.errors import UserError

MAX_OVN_ID = 255
ID_BUDGET_WARN = 0.8
"""Share of the 255 Network_Function(_Group) ids per NB above which the plan warns."""
DEFAULT_SVC_MONITOR_IP = "169.254.254.1"
DEFAULT_SVC_MONITOR_IP_DST = "169.254.254.2"
"""Link-local defaults of ``NB_Global options:svc_monitor_ip``/``svc_monitor_ip_dst`` (set only
where nobody set them). Chosen clear of what OVN-Kubernetes uses: its masquerade subnet
(169.254.0.0/17 by default, 169.254.169.0/29 in older releases), the cloud metadata address
169.254.169.254, and RFC 3927's reserved first and last /24."""
Side = Literal["in", "out"]
DEFAULT_EMPTY_GRACE = 60.0
"""How long the rows of a (group, node) pair outlive its last member by default: longer than a
pod's restart or a rolling update's replacement takes, short next to the periodic pass."""
Pair = tuple[str, str]
"""``(security group, node)``: the unit whose rows exist only while it has members."""


class CompileError(UserError):
    """The desired state cannot be realised on this cluster (message says why and what to do)."""


DEFAULT_JOIN_SUBNETS = ("100.64.0.0/16", "fd98::/64")
"""OVN-Kubernetes' defaults (``go-controller/pkg/config/config.go``: ``V4JoinSubnet``,
``V6JoinSubnet``; helm ``v4JoinSubnet``)."""
DEFAULT_TRANSIT_SUBNETS = ("100.88.0.0/16", "fd97::/64")
"""OVN-Kubernetes' defaults (``ClusterManagerConfig.V4TransitSubnet``/``V6TransitSubnet``)."""


@dataclass(frozen=True)
class CompileOptions:
    instance: str = own.DEFAULT_INSTANCE
    steering: str | None = None
    """A registered backend's name (``reconciler.core.steering.BACKENDS``). ``None``: the default
    backend when this OVN supports it, else an error asking the user to choose one explicitly
    (see ``reconciler.core.steering.select_backend``)."""
    cluster_router: str = "ovn_cluster_router"
    svc_monitor_ip: str | None = None
    """``NB_Global options:svc_monitor_ip`` to set where nobody set it; ``None``: the default
    (:data:`DEFAULT_SVC_MONITOR_IP`). A value given here (a flag) that differs from one someone
    else set makes the plan warn; the default never does."""
    svc_monitor_ip_dst: str | None = None
    """Likewise for ``svc_monitor_ip_dst`` (default :data:`DEFAULT_SVC_MONITOR_IP_DST`)."""
    empty_grace: float = DEFAULT_EMPTY_GRACE
    """Seconds a (group, node) pair keeps its rows after its last member left
    (``reconciler.core.steering.presence``); 0: they go at once."""
    join_subnets: tuple[str, ...] = DEFAULT_JOIN_SUBNETS
    """OVN-Kubernetes' join subnets (its gateway routers' side of ``ovn_cluster_router``):
    traffic from and to them is node traffic, left out of steering unless a Binding says
    ``steerNodeTraffic: true`` (``reconciler.core.steering.node_traffic``)."""
    transit_subnets: tuple[str, ...] = DEFAULT_TRANSIT_SUBNETS
    """OVN-Kubernetes' transit subnets (interconnect: the routers' ports on the transit
    switch): node traffic as well."""
    vnf_namespaces: tuple[str, ...] = ()
    """Namespaces whose VirtualMachines and NADs (with our labels) are ours besides those the
    VnfDeployments name (``--vnf-namespaces``): where a removed VnfDeployment's objects are
    pruned from (``reconciler.core.planning.full.owned_namespaces``)."""


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
    """The address the backend gives the VNF's data port (:meth:`SteeringBackend.vnf_address`),
    if it needs one."""
    subnet: str | None = None
    """The node switch's ``other_config:subnet`` (OVN-Kubernetes' pod subnet of the node)."""
    slot: str = ""
    """``""`` for the node's first instance (the names it always had), ``naming.SECOND`` for
    the second one of ``instancesPerNode: 2``."""
    second: VnfInstance | None = None
    """The node's second instance (``instancesPerNode: 2``, a backend with
    :attr:`SteeringBackend.active_standby`), on the first one only: both are members of the
    node's function groups, so OVN fails over from the active one to the other."""

    def members(self) -> tuple[VnfInstance, ...]:
        """This instance and its second one, if any (the members of its function groups)."""
        return (self, self.second) if self.second is not None else (self,)


@dataclass(frozen=True)
class NodePods:
    """What the pods of one node decide: the only way pods reach a steering backend.

    It holds one node only, because the incremental planner recomputes the rows of the nodes
    whose pods changed and keeps every other row: a row that depended on another node's pods
    would go stale.
    """

    node: str
    members: Mapping[str, Sequence[PodPort]] = field(default_factory=dict)
    """Bound security group -> its member pods' LSPs on this node, sorted by name (a pod counts
    when OVN knows its LSP as the same pod, see ``compile.members_by_group_and_node``)."""
    addresses: frozenset[str] = frozenset()
    """Every address (without prefix length) a pod LSP on this node's switch holds, member or
    not."""

    def member_names(self, group: str) -> list[str]:
        """The LSP names of ``group``'s member pods on this node, sorted."""
        return sorted(p.name for p in self.members.get(group, ()))


Instances = Mapping[tuple[str, str], VnfInstance]
"""``(vnf, node)`` -> the VNF instance compile placed there."""
Drained = Mapping[tuple[str, str], set[str]]
"""``(vnf, node)`` -> the functions of it a rolling update drains."""


class Drain(NamedTuple):
    """What taking VNF functions out of their steering rows changes (a rolling update's drain,
    ``SteeringBackend.drain``): the planned changes it replaces (``touched``, ``(kind, key)``),
    the planned changes it keeps as they are, and the rows it wants instead, each with its live
    row (``None``: not live), for the caller to diff."""

    touched: frozenset[tuple[str, str]] = frozenset()
    kept: tuple[Change, ...] = ()
    rows: tuple[tuple[Resource, OvnRow | None], ...] = ()


GROUP_REF = re.compile(r"[@$]([A-Za-z_.][A-Za-z0-9_.]*)")
"""A Port_Group named in a match: ``@pg``, or its address set ``$pg_ip4``/``$pg_ip6``."""


def vnfs_of_row(fields: Mapping[str, Any]) -> tuple[str, ...]:
    """The VNFs an owned row is of: a chain's hops (``osc.io/chain``), or its VnfDeployment."""
    ids = fields.get("external_ids") or {}
    if ids.get(own.CHAIN):
        return tuple(str(ids[own.CHAIN]).split(","))
    kind, _, name = str(ids.get(own.RESOURCE, "")).partition("/")
    return (name,) if kind == "VnfDeployment" else ()


def merge_vnfs(*chains: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for chain in chains for v in chain))


class OwnedRows:
    """Owned rows (live, or as a plan leaves them) by table and name, for a backend to follow
    the references of its steering rows (:meth:`SteeringBackend.steered_by`)."""

    def __init__(self, by_table: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        self.by_table = by_table

    def get(self, table: str, name: str) -> Mapping[str, Any]:
        return self.by_table.get(table, {}).get(name) or {}

    @cached_property
    def next_hops(self) -> dict[str, tuple[str, ...]]:
        """An address of a VNF data port -> the VNFs of that port."""
        return {
            address: vnfs_of_row(lsp)
            for lsp in self.by_table.get("Logical_Switch_Port", {}).values()
            for entry in lsp.get("addresses") or ()
            for address in str(entry).split()[1:]
        }


class Steered(NamedTuple):
    """What one steering row does (:meth:`SteeringBackend.steered_by`)."""

    vnfs: tuple[str, ...]
    """The VNFs it sends traffic to, in chain order."""
    groups: list[str]
    """The Port_Groups it names (``pg`` or ``pg_ip4``)."""
    direction: str = "exit"
    """``exit`` (traffic to the group's pods) or ``entry`` (from them)."""
    policy: str | None = None
    """The failure policy it steers under (``fail-close``/``fail-open``; ``None``: none)."""


class PortConfig(NamedTuple):
    """``addresses`` and ``options`` of a VNF data-port LSP."""

    addresses: list[str]
    options: dict[str, str]


@dataclass
class TargetBuilder:
    """Collects resources and findings; one instance per compile call. Each resource gets a
    ``fields`` dict of its own (compile fills pod-dependent ones in place)."""

    instance: str
    resources: list[Resource] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    gates: dict[tuple[str, str], Pair] = field(default_factory=dict)
    """Resource identity -> the (group, node) pair whose presence it needs (rows emitted with
    ``gate``); compile drops the rows of absent pairs."""
    health_read: set[str] = field(default_factory=set)
    """Network_Function_Groups whose ``network_function_active`` (``Observed.nf_active``)
    the rows depend on (a chain that leaves out a dead fail-open hop): the incremental planner
    compiles everything again when one of them changes."""
    only_pairs: frozenset[Pair] | None = None
    """When set, the gated rows of any other pair are not kept at all: a one-shot compile
    passes the pairs that can be present (members, or a live Port_Group), since only the
    incremental planner needs the rows of absent pairs (``Compiled.potential``), and building
    them is most of a compile (20,000 pairs, 3 % present, at 10k pods)."""

    def warn(self, code: Code, text: str, subject: str = "", node: str | None = None) -> None:
        """Tell the user ``text`` (a :class:`~reconciler.core.model.facts.Finding`)."""
        self.findings.append(Finding(code, subject, node, text))

    def ext_ids(self, origin: str, key: str, node: str | None) -> dict[str, str]:
        ids = {own.OWNER: self.instance, own.RESOURCE: origin, own.KEY: key}
        if node is not None:
            ids[own.NODE] = node
        return ids

    def ovn(
        self,
        table: str,
        key: str,
        origin: str,
        node: str | None,
        fields: dict[str, Any],
        *,
        gate: Pair | None = None,
        extra_ids: Mapping[str, str] | None = None,
    ) -> None:
        """One OVN row. ``gate``: the row exists only while this (group, node) pair is present
        (it needs a member there, see ``reconciler.core.steering.presence``). ``extra_ids``:
        more ``osc.io/*`` keys for its ``external_ids``."""
        if gate is not None and self.only_pairs is not None and gate not in self.only_pairs:
            return
        ids = self.ext_ids(origin, key, node)
        if extra_ids:
            ids.update(extra_ids)
        fields = {**fields, "external_ids": ids}
        self.resources.append(Resource(table, key, origin, node, fields))
        if gate is not None:
            self.gates[(table, key)] = gate

    def kube(
        self, kind: str, namespace: str, name: str, origin: str, node: str, body: dict[str, Any]
    ) -> None:
        self.resources.append(Resource(kind, f"{namespace}/{name}", origin, node, dict(body)))


class SteeringBackend(Protocol):
    """A steering backend, as ``compile`` and the incremental planner see it.

    Implementations live in this package, one module each, and are registered in
    ``reconciler.core.steering.BACKENDS``; nothing outside the package names one.
    """

    name: str
    """The ``--steering`` value, and the plan's ``steering``."""
    observed_fields: frozenset[str]
    """The ``Observed`` fields :meth:`emit_bindings` reads, never ``pods``, ``pod_ports`` or
    ``ovn_rows`` (pods come as :class:`NodePods`, owned rows as :attr:`live_tables`). It sees only
    these; the incremental planner compiles everything when one of them changes."""
    active_standby: bool
    """Whether the backend can put two VNF instances of a node behind one steering target and
    fail over between them (``VnfDeployment.spec.instancesPerNode: 2``); compile places a
    second instance only then."""
    live_tables: frozenset[str]
    """Owned tables whose live rows :meth:`emit_bindings` reads (e.g. to keep an allocated id);
    its ``Observed.ovn_rows`` hold these tables' rows only, and a change in one of these rows
    makes the incremental planner compile everything."""
    routed_only: bool
    """What it can steer: only traffic that crosses the cluster router (not between pods of
    one node's switch). ``explain`` says so, and ``explain --trace`` traces towards a pod of
    another node."""
    health_checked: bool
    """Its VNF functions carry OVN health checks (``VnfDeployment.spec.healthCheck``), so the
    failure policy can act and the health index (:class:`reconciler.core.steering.HealthIndex`)
    says something about its VNF instances."""
    stateless_beside_load_balancers: bool
    """On a switch with load balancers its VNF ports are made stateless
    (``reconciler.core.steering.services``), which ``explain`` tells a steered pod there."""
    steering_tables: tuple[str, ...]
    """The tables of the rows that match a pod's traffic and send it on (ACL, router
    policy)."""
    function_tables: tuple[str, ...]
    """The tables of what those rows send traffic to, in the order a packet meets them
    (function groups, functions, their health checks); :meth:`path_rows` finds them."""

    def steered_by(self, table: str, fields: Mapping[str, Any], rows: OwnedRows) -> Steered | None:
        """When a row of ``table`` (owned by a Binding) is one of this backend's steering rows:
        the VNFs it sends traffic to (in chain order), the Port_Groups it names (``pg`` or
        ``pg_ip4``), its direction and failure policy; ``None`` when it is not (a twin ACL, a
        chain's ports: no steering of their own). ``reconciler.core.views.protection`` reads
        what the rows steer through it."""
        ...

    def path_rows(
        self, rows: Mapping[tuple[str, str], Mapping[str, Any]], steering: Iterable[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """The rows among ``rows`` (``(table, key)`` -> fields, compiled or live) that the
        steering rows ``steering`` send traffic to (``explain`` lists a pod's path)."""
        ...

    def check_options(self, options: CompileOptions) -> None:
        """Raise a :class:`~reconciler.errors.UserError` for an option the backend cannot use
        (the CLI asks every backend before it connects anywhere)."""
        ...

    def hold_unready(self, plan: Plan, observed: Observed, health: HealthIndex) -> Plan:
        """What it holds: ``plan`` without the steering it switches onto VNF instances OVN has
        not reported healthy yet, with :attr:`Plan.held` saying why
        (``reconciler.core.transitions.hold``). A backend without health checks holds
        nothing."""
        ...

    def drain(self, changes: Sequence[Change], drained: Drained, observed: Observed) -> Drain:
        """Take the functions in ``drained`` (``(vnf, node)`` -> function names) out of the
        rows that steer traffic to them, so the other instance of the node takes over (a
        rolling update on a two-instance node). Only an :attr:`active_standby` backend has
        anything to drain."""
        ...

    def available(self, capabilities: OvnCapabilities) -> bool:
        """Whether this OVN can carry the backend's rows."""
        ...

    def unavailable_reason(self, capabilities: OvnCapabilities) -> str:
        """Why it is not available, and what to do instead (a :class:`CompileError` message)."""
        ...

    def vnf_address(
        self, vnf: str, node: str, subnet: str | None, live: str | None, taken: frozenset[str]
    ) -> str | None:
        """The address of a VNF instance's data port, or ``None`` when the backend needs none:
        not one of ``taken`` (the other VNFs' on the node), and ``live`` (the one it has in
        OVN now, if any) when that is still right, so a VNF keeps its address while others
        come and go. It must not depend on pods: :meth:`check_pods` refuses an address a pod
        holds."""
        ...

    def vnf_port(self, inst: VnfInstance, side: Side) -> PortConfig:
        """``addresses`` and ``options`` of the VNF instance's ``in`` or ``out`` data port."""
        ...

    def emit_bindings(
        self, desired: Desired, observed: Observed, instances: Instances,
        options: CompileOptions, out: TargetBuilder,
    ) -> None:  # fmt: skip
        """Emit every Binding's rows into ``out`` (and warnings about them). ``observed`` holds
        only :attr:`observed_fields` and the rows of :attr:`live_tables`. ``instances`` maps
        ``(vnf, node)`` to the VNF instances compile placed. A row whose fields depend on pods is
        emitted with placeholders for them and must be declared by :meth:`depends_on_pods`:
        compile fills it with :meth:`pod_fields`. Which rows exist depends on pods only through
        the pairs the rows are gated by (``out.ovn(..., gate=(group, node))``): compile keeps a
        gated row while its pair has members on the node, or is held after its last one left
        (``reconciler.core.steering.presence``); each gated pair needs one gated Port_Group,
        its anchor, and every gated row must be of the pair's node."""
        ...

    def depends_on_pods(self, resource: Resource) -> bool:
        """Whether this row, emitted by :meth:`emit_bindings`, has fields that depend on the pods
        of its node (it must have a node)."""
        ...

    def pod_fields(self, resource: Resource, pods: NodePods) -> dict[str, Any]:
        """The pod-dependent fields of a row :meth:`depends_on_pods` named, for these pods of its
        node; they replace the placeholders (other fields are kept)."""
        ...

    def check_pods(self, inst: VnfInstance, pods: NodePods) -> None:
        """Raise :class:`CompileError` when the pods of the instance's node make it impossible
        (e.g. a pod holds the VNF's address)."""
        ...


class WithoutHealthChecks:
    """What a backend without OVN health checks says about health: nothing is held, nothing is
    drained (it cannot put two instances behind one target), no option to check. Inherit it to
    say so (``router_policy``)."""

    health_checked = False
    stateless_beside_load_balancers = False
    function_tables: tuple[str, ...] = ()

    def path_rows(
        self, rows: Mapping[tuple[str, str], Mapping[str, Any]], steering: Iterable[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        return set()

    def check_options(self, options: CompileOptions) -> None:
        return None

    def hold_unready(self, plan: Plan, observed: Observed, health: HealthIndex) -> Plan:
        return plan

    def drain(self, changes: Sequence[Change], drained: Drained, observed: Observed) -> Drain:
        return Drain()


class PortGroupPods:
    """The pod dependence of a backend whose only pod-dependent rows are the per-node
    ``Port_Group`` of each bound security group (origin ``SecurityGroup/<group>``, ``ports`` =
    the group's member pods on the node), emitted by :func:`emit_port_groups`, and which needs
    no pod check. Both shipped backends are such; inherit it to say so."""

    def depends_on_pods(self, resource: Resource) -> bool:
        return resource.kind == "Port_Group" and resource.origin.startswith("SecurityGroup/")

    def pod_fields(self, resource: Resource, pods: NodePods) -> dict[str, Any]:
        return {"ports": pods.member_names(resource.origin.partition("/")[2])}

    def check_pods(self, inst: VnfInstance, pods: NodePods) -> None:
        return None


def emit_port_groups(
    port_groups: Mapping[str, tuple[str, str]],
    out: TargetBuilder,
    ungated: Container[str] = (),
) -> None:
    """The ``Port_Group`` rows (name -> (security group, node)), each the anchor of its pair
    (gated by it) unless its group is in ``ungated``; ``ports`` is a placeholder that compile
    fills with :meth:`PortGroupPods.pod_fields`."""
    for pg, (group, node) in sorted(port_groups.items()):
        fields = {"name": pg, "ports": []}
        origin = f"SecurityGroup/{group}"
        if group in ungated:
            out.ovn("Port_Group", pg, origin, node, fields)
        else:
            presence = {own.PRESENCE: "members"}
            out.ovn("Port_Group", pg, origin, node, fields, gate=(group, node), extra_ids=presence)


Members = dict[str, dict[str, list[PodPort]]]
"""security group -> node -> member pod ports (sorted by name)."""


def bindings_by_group(desired: Desired) -> dict[str, list[Binding]]:
    groups: dict[str, list[Binding]] = defaultdict(list)
    for binding in desired.bindings.values():
        groups[binding.spec.securityGroup].append(binding)
    return {g: sorted(bs, key=lambda b: b.spec.order) for g, bs in sorted(groups.items())}


def binding_nodes(binding: Binding, instances: Instances) -> list[VnfInstance]:
    return [inst for (vnf, _), inst in sorted(instances.items()) if vnf == binding.spec.vnf]


def directions(redirection: Redirection) -> list[str]:
    """OVN ACL directions: ``exit-lport`` = towards the pod (to-lport), ``entry-lport`` = from
    it (from-lport)."""
    if redirection is Redirection.EXIT_LPORT:
        return ["to-lport"]
    if redirection is Redirection.ENTRY_LPORT:
        return ["from-lport"]
    return ["from-lport", "to-lport"]


def id_need(wanted: Sequence[str], what: Mapping[str, tuple[str, str]]) -> str:
    """How ``wanted`` rows add up, for a message: nodes x rows per node, and what they are
    (``what``: name -> (node, what it stands for, e.g. ``firewall``))."""
    per_node: dict[str, int] = defaultdict(int)
    kinds: dict[str, int] = defaultdict(int)
    for name in wanted:
        node, kind = what.get(name, ("", "other"))
        per_node[node] += 1
        kinds[kind] += 1
    if not per_node:
        return "none"
    most = max(per_node.values())
    listed = ", ".join(f"{kind} x {n}" for kind, n in sorted(kinds.items()))
    return f"{len(per_node)} node(s) x up to {most} per node ({listed})"


def allocate_ids(
    table: str,
    names: Iterable[str],
    observed: Observed,
    what: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, int]:
    """Stable ids 1-255: a row that exists keeps its id, new rows take the lowest free ones,
    where an id one of our live rows still holds (a row this plan deletes) is taken last: the
    old row may outlive the plan (health gating keeps a path in service until its successor is
    healthy, ``reconciler.core.steering.network_function.gating``), and a group id lives on in
    conntrack entries (``ct_label``), so it is better not handed to a new group at once.
    ``what`` (name -> (node, what it stands for)) makes the error say how the need adds up."""
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
    leaving = {i for i in existing.values() if isinstance(i, int)} - taken
    fresh = [i for i in range(1, MAX_OVN_ID + 1) if i not in taken and i not in leaving]
    free = iter([*fresh, *sorted(leaving)])
    for name in wanted:
        if name in ids:
            continue
        nxt = next(free, None)
        if nxt is None:
            need = f": {id_need(wanted, what)}" if what else ""
            raise CompileError(
                f"{table} ids exhausted: OVN allows ids 1-{MAX_OVN_ID} per Northbound DB and this "
                f"target needs {len(wanted)} rows{need} (plus "
                f"{len(observed.used_ids.get(table, ()))} taken by others); nothing was written. "
                "Bind fewer VNFs or chains per NB, run one NB per node (OVN-Kubernetes "
                "interconnect), or use --steering router-policy"
            )
        ids[name] = nxt
    return ids


def ids_in_use(table: str, ours: int, observed: Observed) -> int:
    """Ids of ``table`` (Network_Function or Network_Function_Group) taken in the NB when we
    hold ``ours`` of them: ours plus every one another writer holds (ids are unique per table)."""
    return ours + len(observed.used_ids.get(table, ()))
