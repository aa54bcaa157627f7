"""compile(desired, observed) -> target: the exact rows and objects that should exist.

Pure and deterministic: the same inputs give a byte-identical target (every collection is built
in sorted order; ids are allocated from sorted names). No I/O.

Per VnfDeployment and selected node: a KubeVirt ``VirtualMachine`` ``<vnf>-<node>``, two Multus
``NetworkAttachmentDefinition`` (one per data NIC) and two LSPs on the node's switch. Per Binding
and node: the steering backend's rows (``reconciler.core.steering``), e.g. a ``Port_Group`` of the
bound security group's member pods on that node.

Compile names no backend: it asks the chosen one (``SteeringBackend``) for the VNF ports' details
and the binding rows, and fills the rows the backend declares pod-dependent with each node's pods
(:func:`fill_pods`), the same call the incremental planner makes for the nodes whose pods changed.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.compiling import kubevirt
from reconciler.core.model import naming, ovn_kubernetes
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Desired, Precedence, VnfDeployment
from reconciler.core.model.facts import unique
from reconciler.core.model.observed import Observed, Pod, PodPort, Switch
from reconciler.core.model.selectors import LabelIndex, matches_selector
from reconciler.core.model.target import NameCollision, Resource, Target
from reconciler.core.steering import STEERING_CHOICES, SteeringBackend, common, select_backend
from reconciler.core.steering.base import (
    MAX_OVN_ID,
    CompileError,
    CompileOptions,
    Members,
    NodePods,
    Pair,
    Side,
    TargetBuilder,
    VnfInstance,
    allocate_ids,
    binding_nodes,
    bindings_by_group,
    directions,
)
from reconciler.core.steering.chains import chain_nodes
from reconciler.core.steering.presence import PairState, check_gates, gate_rows, pair_states
from reconciler.errors import InternalError

__all__ = [
    "COMPILE_READS",
    "MAX_OVN_ID",
    "STEERING_CHOICES",
    "CompileError",
    "CompileOptions",
    "Compiled",
    "allocate_ids",
    "backend_view",
    "binding_nodes",
    "check_pods",
    "choose_backend",
    "choose_steering",
    "compile_full",
    "compile_target",
    "directions",
    "fill_pods",
    "live_port_groups",
    "members_by_group_and_node",
    "pods_by_node",
]

Ident = tuple[str, str]

COMPILE_READS: frozenset[str] = frozenset(
    {
        "pods",
        "pod_ports",
        "nodes",
        "switches",
        "network_policies",
        "capabilities",
        "observed_at",
        "ovn_kubernetes",
    }
)
"""The ``Observed`` fields compile itself reads; the chosen backend reads its
``observed_fields`` besides. The incremental planner derives from both which changes need a
full compile, so a new read here must be added here."""
_NOT_FOR_BACKENDS = frozenset({"pods", "pod_ports", "ovn_rows"})

_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""Node names come from the live cluster (or a snapshot file), not from validated manifests;
they reach OVN names and matches, so they are checked too."""


def choose_backend(
    desired: Desired, observed: Observed, options: CompileOptions
) -> SteeringBackend:
    """The steering backend of this compile (``reconciler.core.steering.select_backend``).

    Refuses first an NB whose OVN-Kubernetes could not restart beside our rows
    (``reconciler.core.model.ovn_kubernetes``): nothing is planned, nothing written."""
    refused = ovn_kubernetes.refusal(observed.ovn_kubernetes, observed.capabilities.schema_version)
    if refused is not None:
        raise CompileError(refused)
    return select_backend(
        options.steering, observed.capabilities, has_bindings=bool(desired.bindings)
    )


def choose_steering(desired: Desired, observed: Observed, options: CompileOptions) -> str:
    """The name of the steering backend of this compile (the plan's ``steering``)."""
    return choose_backend(desired, observed, options).name


@dataclass(frozen=True)
class Compiled:
    """A target and what the incremental planner needs to re-plan pods without compiling again."""

    target: Target
    backend: SteeringBackend
    instances: dict[tuple[str, str], VnfInstance]
    """The VNF instances by ``(vnf, node)``, in compile order (sorted)."""
    pod_dependent: dict[str, list[Ident]]
    """Node -> the resources whose fields come from that node's pods (:func:`fill_pods`),
    among :attr:`potential`."""
    potential: dict[Ident, Resource] = field(default_factory=dict)
    """Every row the backend emitted, pod fields filled, whether its pair is present or not:
    what the incremental planner adds when a pair appears."""
    gates: dict[Ident, Pair] = field(default_factory=dict)
    """Gated rows (of :attr:`potential`) -> their (group, node) pair."""
    anchors: dict[Pair, Ident] = field(default_factory=dict)
    """Each pair's Port_Group, whose live row says whether an empty pair is held."""
    states: dict[Pair, PairState] = field(default_factory=dict)
    """Each pair's state (``reconciler.core.steering.presence``)."""
    health_read: frozenset[str] = frozenset()
    """Network_Function_Groups whose ``Observed.nf_active`` the target depends on
    (``TargetBuilder.health_read``)."""


def compile_target(
    desired: Desired, observed: Observed, options: CompileOptions | None = None
) -> Target:
    """Every row and object that should exist for these manifests on this cluster."""
    return compile_full(desired, observed, options).target


def compile_full(
    desired: Desired,
    observed: Observed,
    options: CompileOptions | None = None,
    *,
    potential: bool = True,
) -> Compiled:
    """:func:`compile_target`, keeping what the incremental planner needs (:class:`Compiled`).

    ``potential=False`` (a one-shot plan, which has no later pass to prepare for) keeps out the
    rows of pairs that cannot be present (no member, no live Port_Group): the target is the
    same, ``Compiled.potential`` holds only the rows of the pairs that can be present."""
    options = options or CompileOptions()
    backend = choose_backend(desired, observed, options)
    members = members_by_group_and_node(desired, observed.pods, observed.pod_ports)
    out = TargetBuilder(options.instance)
    if not potential:
        out.only_pairs = frozenset(
            {(group, node) for group, nodes in members.items() for node in nodes}
            | set(live_pairs(observed))
        )
    instances = _vnf_instances(desired, observed, backend, out)
    pods = pods_by_node(members, observed.pod_ports)
    check_pods(backend, instances.values(), pods)
    for inst in instances.values():
        for member in inst.members():
            _emit_vnf_instance(member, backend, out)
    backend.emit_bindings(desired, backend_view(observed, backend), instances, options, out)
    resources, pod_dependent = fill_pods(backend, out.resources, pods, in_place=True)
    anchors = check_gates(resources, out.gates)
    live = live_port_groups(observed)
    states = pair_states(
        anchors,
        lambda pair: len(members.get(pair[0], {}).get(pair[1], ())),
        live.get,
        observed.observed_at,
        options.empty_grace,
    )
    present = gate_rows(resources, out.gates, states)
    _binding_warnings(desired, members, instances, observed, backend, out)
    try:
        target = Target.of(present, unique(out.findings))
    except NameCollision as exc:  # two generated names alike: only node names cause it now
        raise CompileError(str(exc)) from None
    return Compiled(
        target,
        backend,
        instances,
        pod_dependent,
        potential={r.ident: r for r in resources},
        gates=out.gates,
        anchors={pair: res.ident for pair, res in anchors.items()},
        states=states,
        health_read=frozenset(out.health_read),
    )


def live_pairs(observed: Observed) -> Iterable[Pair]:
    """The (group, node) pairs of our live Port_Groups (a held pair's anchor among them)."""
    prefix = "SecurityGroup/"
    for row in observed.ovn_rows:
        if row.table == "Port_Group":
            ids = row.fields.get("external_ids") or {}
            origin, node = ids.get(own.RESOURCE, ""), ids.get(own.NODE)
            if origin.startswith(prefix) and node:
                yield origin[len(prefix) :], node


def live_port_groups(observed: Observed) -> dict[str, dict[str, Any]]:
    """Our live Port_Groups by name (whether an empty pair is held is read from them)."""
    return {r.key: r.fields for r in observed.ovn_rows if r.table == "Port_Group"}


def backend_view(observed: Observed, backend: SteeringBackend) -> Observed:
    """``observed`` as a backend's ``emit_bindings`` may see it: the fields it declares and the
    owned rows of its ``live_tables``, nothing else (``SteeringBackend`` says why)."""
    undeclarable = backend.observed_fields & _NOT_FOR_BACKENDS
    if undeclarable:
        raise InternalError(
            f"steering backend {backend.name} declares {sorted(undeclarable)} in observed_fields: "
            "pods reach a backend as NodePods, owned rows through live_tables"
        )
    fields = {name: getattr(observed, name) for name in backend.observed_fields}
    tables = backend.live_tables
    rows = tuple(r for r in observed.ovn_rows if r.table in tables) if tables else ()
    return Observed(**fields, ovn_rows=rows)


def pods_by_node(members: Members, pod_ports: Iterable[PodPort]) -> dict[str, NodePods]:
    """The :class:`NodePods` of every node that has a member or a pod LSP; a node missing here
    has no pods (``NodePods(node)``)."""
    by_node: dict[str, dict[str, list[PodPort]]] = defaultdict(dict)
    for group, nodes in members.items():
        for node, ports in nodes.items():
            by_node[node][group] = ports
    addresses = _pod_addresses(pod_ports)
    return {
        node: NodePods(node, by_node.get(node, {}), frozenset(addresses.get(node, ())))
        for node in sorted(by_node.keys() | addresses.keys())
    }


def _pod_addresses(pod_ports: Iterable[PodPort]) -> dict[str, set[str]]:
    """Pod addresses (without prefix length) per node switch."""
    ips: dict[str, set[str]] = defaultdict(set)
    for port in pod_ports:
        for ip in port.ips:
            ips[port.switch].add(ip.split("/")[0])
    return ips


def check_pods(
    backend: SteeringBackend, instances: Iterable[VnfInstance], pods: Mapping[str, NodePods]
) -> None:
    """The backend's pod checks for each instance, in the order given (the first failure is
    the error)."""
    for inst in instances:
        backend.check_pods(inst, pods.get(inst.node) or NodePods(inst.node))


def fill_pods(
    backend: SteeringBackend,
    resources: Iterable[Resource],
    pods: Mapping[str, NodePods],
    *,
    in_place: bool = False,
) -> tuple[list[Resource], dict[str, list[Ident]]]:
    """``resources`` with the pod-dependent ones filled from their node's pods, and those
    resources' identities by node.

    Compile passes every resource it built and every node, ``in_place``: its builder made each
    ``fields`` dict for that resource alone, and nobody holds them yet, so they are updated
    rather than rebuilt. The incremental planner passes the pod-dependent resources of the nodes
    whose pods changed; they are shared with the last plan, so a resource whose fields change is
    a new one, and one whose fields do not is returned as the same object."""
    filled: list[Resource] = []
    by_node: dict[str, list[Ident]] = defaultdict(list)
    for res in resources:
        if backend.depends_on_pods(res):
            node = res.node
            if node is None:
                raise InternalError(
                    f"steering backend {backend.name}: {res.kind} {res.key} depends on pods "
                    "but belongs to no node"
                )
            new = backend.pod_fields(res, pods.get(node) or NodePods(node))
            if in_place:
                res.fields.update(new)
            elif not new.items() <= res.fields.items():  # not already so
                res = Resource(res.kind, res.key, res.origin, node, {**res.fields, **new})
            by_node[node].append(res.ident)
        filled.append(res)
    return filled, dict(by_node)


def _vnf_instances(
    desired: Desired, observed: Observed, backend: SteeringBackend, out: TargetBuilder
) -> dict[tuple[str, str], VnfInstance]:
    switches: dict[str, Switch] = {s.name: s for s in observed.switches}
    placed: dict[str, list[str]] = defaultdict(list)  # node -> VNFs there, sorted
    for vnf_name, vnf in sorted(desired.vnfs.items()):
        selector = vnf.spec.nodeSelector
        for node in sorted(observed.nodes, key=lambda n: n.name):
            if any(node.labels.get(k) != v for k, v in selector.items()):
                continue
            if not _NODE_NAME.fullmatch(node.name) or len(node.name) > 253:
                out.warn(
                    "placement",
                    f"node name {node.name!r} is not a DNS subdomain: it is never used in OVN "
                    "names or matches",
                    f"Node/{node.name}",
                )
                continue
            if node.name not in switches:
                out.warn(
                    "placement",
                    f"node {node.name} has no OVN logical switch named after it: "
                    f"VnfDeployment {vnf_name} is not deployed there",
                    f"VnfDeployment/{vnf_name}",
                    node.name,
                )
                continue
            placed[node.name].append(vnf_name)
    live = _live_vnf_addresses(observed)
    addresses: dict[tuple[str, str], str | None] = {}
    for where, vnfs in placed.items():
        subnet = switches[where].subnet
        # VNFs keep the address they have (a VM's address does not move), then new ones take
        # free ones: each VNF on a node gets its own (``SteeringBackend.vnf_address``).
        taken: set[str] = set()
        for vnf_name in sorted(vnfs, key=lambda v: (live.get((v, where)) is None, v)):
            ip = backend.vnf_address(
                vnf_name, where, subnet, live.get((vnf_name, where)), frozenset(taken)
            )
            addresses[(vnf_name, where)] = ip
            if ip is not None:
                taken.add(ip)
    instances: dict[tuple[str, str], VnfInstance] = {}
    for vnf_name, vnf in sorted(desired.vnfs.items()):
        for name in sorted(n for n, vnfs in placed.items() if vnf_name in vnfs):
            first = _vnf_instance(vnf, name, switches[name].subnet, addresses[(vnf_name, name)])
            if vnf.spec.instancesPerNode > 1 and backend.active_standby:
                second = _vnf_instance(vnf, name, switches[name].subnet, None, naming.SECOND)
                first = dataclasses.replace(first, second=second)
            instances[(vnf_name, name)] = first
        if vnf.spec.instancesPerNode > 1 and not backend.active_standby:
            out.warn(
                "backend",
                f"VnfDeployment {vnf_name} has instancesPerNode: {vnf.spec.instancesPerNode}, "
                f"but --steering {backend.name} cannot fail over between two instances of a "
                "node: one instance per node is deployed",
                f"VnfDeployment/{vnf_name}",
            )
    return instances


def _vnf_instance(
    vnf: VnfDeployment, node: str, subnet: str | None, ip: str | None, slot: str = ""
) -> VnfInstance:
    """One VNF instance on ``node``; ``slot``: ``""`` for the first, ``naming.SECOND`` for the
    second (its names and MACs add the slot, see ``naming.SECOND``; only a backend without
    addresses has one)."""
    name = vnf.metadata.name
    mac_parts = (name, node, slot) if slot else (name, node)
    return VnfInstance(
        vnf=vnf,
        node=node,
        in_port=naming.vnf_port(name, node, "in", slot),
        out_port=naming.vnf_port(name, node, "out", slot),
        mac_in=naming.mac_for(*mac_parts, "in"),
        mac_out=naming.mac_for(*mac_parts, "out"),
        ip=ip,
        subnet=subnet,
        slot=slot,
    )


def _live_vnf_addresses(observed: Observed) -> dict[tuple[str, str], str]:
    """(VNF, node) -> the address its data-in port has in OVN now (``mac ip`` in our LSP
    ``nf_<vnf>_<node>_in``), for the backends that give VNFs addresses."""
    found: dict[tuple[str, str], str] = {}
    for row in observed.ovn_rows:
        if row.table != "Logical_Switch_Port" or not row.key.endswith("_in"):
            continue
        ids = row.fields.get("external_ids") or {}
        kind, _, vnf = str(ids.get(own.RESOURCE, "")).partition("/")
        node = ids.get(own.NODE)
        if kind != "VnfDeployment" or not isinstance(node, str):
            continue
        if row.key != naming.vnf_port(vnf, node, "in"):
            continue
        for entry in row.fields.get("addresses") or ():
            parts = str(entry).split()
            if len(parts) == 2:
                found[(vnf, node)] = parts[1]
    return found


def _emit_vnf_instance(inst: VnfInstance, backend: SteeringBackend, out: TargetBuilder) -> None:
    """A VNF instance's two data ports on its node's switch, its two NADs and its VM."""
    vnf_name = inst.vnf.metadata.name
    origin = f"VnfDeployment/{vnf_name}"
    node = inst.node
    data_ports: tuple[tuple[str, Side], ...] = ((inst.in_port, "in"), (inst.out_port, "out"))
    for port, port_side in data_ports:
        port_config = backend.vnf_port(inst, port_side)
        fields = {
            "name": port,
            "switch": node,
            "addresses": port_config.addresses,
            "port_security": [],
            "options": port_config.options,
        }
        out.ovn("Logical_Switch_Port", port, origin, node, fields)
    namespace = inst.vnf.spec.namespace
    nads = kubevirt.nad_names(inst)
    for side, port in (("in", inst.in_port), ("out", inst.out_port)):
        body = kubevirt.network_attachment(inst, out.instance, nads[side], port)
        out.kube("NetworkAttachmentDefinition", namespace, nads[side], origin, node, body)
    vm = naming.vm_name(vnf_name, node, inst.slot)
    out.kube(
        "VirtualMachine",
        namespace,
        vm,
        origin,
        node,
        kubevirt.virtual_machine(inst, out.instance, nads),
    )


def members_by_group_and_node(
    desired: Desired,
    pods: Iterable[Pod],
    pod_ports: Sequence[PodPort],
    groups: Container[str] | None = None,
) -> Members:
    """Member pods per bound group and node, keeping only pods OVN knows as the same pod.

    A pod counts when its LSP ``<namespace>_<pod>`` exists and, if the LSP records the pod UID
    (``options:iface-id-ver``), that UID matches: a recreated pod with the same name is a new pod.
    The node is the LSP's switch (where the steering rows must sit), so the members on some nodes
    need only the LSPs on their switches and the pods those LSPs name (the incremental planner's
    per-node path). That holds while LSP names are unique, as the NB's index on them makes them;
    were one name on two switches (a hand-written snapshot), the last LSP given would count.

    ``groups``: only these groups are looked at, the others left out of the result; the
    incremental planner passes those with a label some of the pods given carry (the others
    can have no member among them), ~15 of 200 for the ~100 pods of a node.
    """
    bound = {b.spec.securityGroup for b in desired.bindings.values()}
    if groups is not None:
        bound = {g for g in bound if g in groups}
    ports = {p.name: p for p in pod_ports}
    index = LabelIndex(pods)
    result: Members = {}
    for group_name in sorted(bound):
        group = desired.security_groups.get(group_name)
        if group is None:
            continue
        pods = index.members(group.spec.label_pairs(), group.spec.namespaces)
        if not pods:  # most groups, for one node's pods (the incremental planner)
            result[group_name] = {}
            continue
        by_node: dict[str, list[PodPort]] = defaultdict(list)
        for pod in pods:
            port = ports.get(pod.lsp_name)
            if port is None or (port.pod_uid is not None and port.pod_uid != pod.uid):
                continue
            by_node[port.switch].append(port)
        result[group_name] = {n: sorted(ps, key=lambda p: p.name) for n, ps in by_node.items()}
    return result


def _binding_warnings(
    desired: Desired,
    members: Members,
    instances: dict[tuple[str, str], VnfInstance],
    observed: Observed,
    backend: SteeringBackend,
    out: TargetBuilder,
) -> None:
    tiered = common.uses_tiers(backend)
    for group, bindings in bindings_by_group(desired).items():
        shadowed = common.shadowing(bindings, tiered=tiered)
        for binding in bindings:
            name = binding.metadata.name
            for direction, by in shadowed.get(name, {}).items():
                out.findings.append(common.shadowed_finding(name, direction, by))
            hops = binding.spec.vnfs
            for node, ports in sorted(members.get(group, {}).items()):
                missing = [vnf for vnf in hops if (vnf, node) not in instances]
                if not missing:
                    continue
                if binding.spec.is_chain:
                    text = (
                        f"{len(ports)} pod(s) of SecurityGroup {group} on node {node} are not "
                        f"steered by Binding {name}: its chain {binding.spec.vnf_text} is "
                        f"incomplete there (VnfDeployment {', '.join(missing)} does not run "
                        "there), and a chain steers only where every VNF of it runs"
                    )
                else:
                    text = (
                        f"{len(ports)} pod(s) of SecurityGroup {group} on node {node} are not "
                        f"steered by Binding {name}: VnfDeployment {hops[0]} does not run there"
                    )
                out.warn("unsteered", text, f"Binding/{name}", node)
        for later, earlier, direction, packets, lost in common.first_match_losses(
            bindings, tiered=tiered
        ):
            chain = list(dict.fromkeys((*earlier.spec.vnfs, *later.spec.vnfs)))
            theirs = set(chain_nodes(earlier.spec.vnfs, instances))
            mine = set(chain_nodes(later.spec.vnfs, instances))
            if not theirs & mine:
                continue  # they never steer on the same node
            where = "" if mine <= theirs else f" on {', '.join(sorted(theirs & mine))}"
            out.warn(
                "first-match",
                f"Binding {later.metadata.name} (VNF {later.spec.vnf_text}) never gets "
                f"{', '.join(common.describe_filters(packets))} of SecurityGroup {group} "
                f"({direction}){where}: Binding {earlier.metadata.name} (order "
                f"{earlier.spec.order}, "
                f"VNF {earlier.spec.vnf_text}) is evaluated first and takes it, and a packet is "
                f"steered by the first matching binding only, so it never crosses "
                f"{', '.join(lost)}. To send it through {' and then '.join(chain)}, give "
                f"Binding {earlier.metadata.name} the chain vnf: [{', '.join(chain)}]",
                f"Binding/{later.metadata.name}",
            )
    _network_policy_warnings(desired, members, observed, out, tiered=tiered)


def _network_policy_warnings(
    desired: Desired, members: Members, observed: Observed, out: TargetBuilder, *, tiered: bool
) -> None:
    if not observed.network_policies:
        return
    steered: dict[tuple[str, str], set[tuple[str, Precedence]]] = defaultdict(set)
    for group, bindings in bindings_by_group(desired).items():
        for ports in members.get(group, {}).values():
            for port in ports:
                for binding in bindings:
                    for direction in directions(binding.spec.redirection):
                        steered[(port.namespace, port.pod)].add(
                            (direction, binding.spec.precedence)
                        )
    pods_by_ns: dict[str, list[Pod]] = defaultdict(list)
    for pod in observed.pods:
        pods_by_ns[pod.namespace].append(pod)
    for policy in sorted(observed.network_policies, key=lambda p: (p.namespace, p.name)):
        hit = [
            pod
            for pod in pods_by_ns.get(policy.namespace, ())
            if (pod.namespace, pod.name) in steered
            and matches_selector(pod.labels, policy.pod_selector)
        ]
        if not hit:
            continue
        ways = set().union(*(steered[(p.namespace, p.name)] for p in hit))
        effects = common.network_policy_effects(policy.policy_types, ways, tiered=tiered)
        if not effects:
            continue  # it governs only directions these pods are not steered in
        out.warn(
            "network-policy",
            f"NetworkPolicy {policy.namespace}/{policy.name} selects {len(hit)} steered pod(s): "
            + "; ".join(effects),
            f"NetworkPolicy/{policy.namespace}/{policy.name}",
        )
