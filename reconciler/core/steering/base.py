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

from collections import defaultdict
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Binding, Desired, Redirection, VnfDeployment
from reconciler.core.model.facts import Code, Finding
from reconciler.core.model.observed import Observed, OvnCapabilities, PodPort
from reconciler.core.model.target import Resource
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
        self,
        desired: Desired,
        observed: Observed,
        instances: Mapping[tuple[str, str], VnfInstance],
        options: CompileOptions,
        out: TargetBuilder,
    ) -> None:
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


def binding_nodes(
    binding: Binding, instances: Mapping[tuple[str, str], VnfInstance]
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
    healthy, ``reconciler.core.transitions.gating``), and a group id lives on in conntrack entries
    (``ct_label``), so it is better not handed to a new group at once. ``what`` (name ->
    (node, what it stands for)) makes the error say how the need adds up."""
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
