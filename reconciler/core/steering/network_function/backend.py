"""Network Function insertion (OVN >= 26.03): the default steering backend.

Per bound security group and node: a Port_Group of the member pods on that node. Per VNF and
node: one Network_Function (the node VNF's in/out ports). Per VNF, node and failure policy: one
Network_Function_Group (``mode=inline``, ``fallback``), shared by the bindings that need it, so
ids (1-255 per NB) last as long as possible. Per binding, node and direction: one
``allow-related`` ACL on the Port_Group with ``network_function_group`` set: to-lport
``outport == @pg`` for exit-lport, from-lport ``inport == @pg`` for entry-lport, the latter
with ``options:apply-after-lb=true`` (``common.FROM_LPORT_OPTIONS``: OVN-Kubernetes' egress
policy stage, so ``precedence`` orders it against NetworkPolicy in both directions), both
leaving node traffic out unless the binding says ``steerNodeTraffic`` (``node_traffic``).
Replies take the reverse path through the same function, so every binding is inherently
bi-directional.

One VNF instance twice on one switch: a packet steered from-lport into a function leaves it by
the function's out port and is then switched to its destination; when that pod's to-lport ACL
steers into the *same* function, OVN sends it in again and drops it. So wherever a VNF is
entered from-lport, each to-lport steering ACL through it has a twin one priority above, same
tier, ``allow-related`` without a function group, matching its match ``&& inport == "<the
function's out port on that node>"`` (:func:`crossed_acls`): the packet that already crossed is
let through as its steering ACL would have let it, without crossing again. The steering ACL
itself cannot exclude that port: ``inport`` is a nominal field, and ovn-controller refuses
``inport != ...`` and ``!(inport == ...)`` (the row would be silently inert).

Load balancers (Kubernetes Services) on a node switch: OVN 26.03 drops the replies of a
Service connection a from-lport-steered pod opens, unless the function's ports are stateless;
on such a switch the backend adds one Port_Group of its function ports and two
``allow-stateless`` ACLs per node (:mod:`~reconciler.core.steering.services`, which also words
the plan's note about it).

Health (``VnfDeployment.spec.healthCheck``): each function gets a
``Network_Function_Health_Check`` (created with it, in the same transaction: the table is not a
root table). OVN probes only when both ``NB_Global options:svc_monitor_ip`` and
``svc_monitor_ip_dst`` are set; that row belongs to the cluster, so :func:`emit_svc_monitor`
sets only the options nobody set and records which ones in a marker of this instance
(``reconciler.core.model.target.svc_monitor_marker``), keeps them while a health-checked function of
ours exists, and removes exactly those afterwards.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.model import naming
from reconciler.core.model.desired import Binding, Desired, HealthCheck
from reconciler.core.model.facts import Finding
from reconciler.core.model.observed import NbGlobal, Observed, OvnCapabilities
from reconciler.core.model.plan import Change, Plan
from reconciler.core.model.target import (
    NB_GLOBAL,
    NB_GLOBAL_KEY,
    SVC_MONITOR_OPTIONS,
    Resource,
    svc_monitor_marker,
)
from reconciler.core.steering import chains, common, node_traffic, services
from reconciler.core.steering.base import (
    DEFAULT_SVC_MONITOR_IP,
    DEFAULT_SVC_MONITOR_IP_DST,
    GROUP_REF,
    ID_BUDGET_WARN,
    MAX_OVN_ID,
    CompileError,
    CompileOptions,
    Drain,
    Drained,
    Instances,
    OwnedRows,
    PortConfig,
    PortGroupPods,
    Side,
    Steered,
    TargetBuilder,
    VnfInstance,
    allocate_ids,
    bindings_by_group,
    directions,
    emit_port_groups,
    ids_in_use,
    vnfs_of_row,
)
from reconciler.core.steering.network_function import gating, rollout
from reconciler.core.steering.network_function.health import HealthIndex

HEALTH_CHECK = "Network_Function_Health_Check"
FROM_LPORT = "from-lport"
TO_LPORT = "to-lport"

AclRow = tuple[str, str, str, dict[str, object], tuple[str, str]]
"""An ACL as emitted: ``(osc.io/key, origin, node, fields, (group, node) it is gated by)``."""


class NetworkFunction(PortGroupPods):
    """The ``network-function`` backend; its only pod-dependent rows are the Port_Groups."""

    name = "network-function"
    observed_fields = frozenset({"switches", "used_ids", "nb_global", "nf_active", "nodes"})
    """``nf_active``: the health of a chain's hops, read only for chains that may fail open
    (``chains.paths``; ``TargetBuilder.health_read`` says which groups were read); ``nodes``:
    their ``k8s.ovn.org/node-subnets``, the management-port address left out of steering
    (``node_traffic``)."""
    live_tables = frozenset({"Network_Function", "Network_Function_Group", "Logical_Switch_Port"})
    """Their ids (1-255 per NB) are kept across passes (``allocate_ids``), and so are the VLAN
    tags of a chain's ports (``chains.allocate_tags``)."""
    active_standby = True
    """A Network_Function_Group is active/standby: a node's second instance is a member too."""
    acl_tiers = True
    """Its rows are ACLs, evaluated tier by tier: ``precedence`` comes before ``order`` in the
    evaluation order (``common.evaluation_key``)."""
    routed_only = False
    """ACLs on the pods' switch: traffic between pods of one switch is steered too."""
    health_checked = True
    stateless_beside_load_balancers = True
    steering_tables: tuple[str, ...] = ("ACL",)
    function_tables: tuple[str, ...] = ("Network_Function_Group", "Network_Function", HEALTH_CHECK)

    def steered_by(self, table: str, fields: Mapping[str, Any], rows: OwnedRows) -> Steered | None:
        """An ACL with a function group: the group's VNFs (its chain, or its VnfDeployment:
        a group of ours names them as its functions do), its direction (a from-lport ACL
        steers traffic from the pods) and the group's fallback."""
        group = fields.get("network_function_group")
        if table != "ACL" or not group:
            return None
        nfg = rows.get("Network_Function_Group", str(group))
        vnfs = vnfs_of_row(nfg)
        match = str(fields.get("match") or "")
        groups = [str(fields.get("port_group") or ""), *GROUP_REF.findall(match)]
        direction = "entry" if fields.get("direction") == "from-lport" else "exit"
        policy = str(nfg["fallback"]) if nfg.get("fallback") else None
        return Steered(vnfs, groups, direction, policy)

    def path_rows(
        self, rows: Mapping[tuple[str, str], Mapping[str, Any]], steering: Iterable[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """The function groups the ACLs name, their functions and the functions' probes."""
        groups = {
            ("Network_Function_Group", str(group))
            for ident in steering
            if (group := rows.get(ident, {}).get("network_function_group"))
        }
        functions = {
            ("Network_Function", str(nf))
            for ident in groups
            for nf in rows.get(ident, {}).get("network_function") or ()
        }
        names = {key for _, key in functions}
        checks = {
            ident
            for ident, fields in rows.items()
            if ident[0] == HEALTH_CHECK and fields.get("network_function") in names
        }
        return groups | functions | checks

    def check_options(self, options: CompileOptions) -> None:
        svc_monitor_addresses(options)

    def hold_unready(self, plan: Plan, observed: Observed, health: HealthIndex) -> Plan:
        return gating.hold_unready(plan, observed, health)

    def drain(self, changes: Sequence[Change], drained: Drained, observed: Observed) -> Drain:
        return rollout.drain(changes, drained, observed)

    def available(self, capabilities: OvnCapabilities) -> bool:
        return capabilities.network_function

    def unavailable_reason(self, capabilities: OvnCapabilities) -> str:
        version = capabilities.schema_version or "unknown"
        return (
            f"the OVN Northbound schema {version} has no Network_Function tables "
            "(Network Function insertion needs OVN >= 26.03, NB schema >= 7.18); "
            "upgrade OVN, or pass --steering router-policy to steer routed (inter-node) "
            "traffic only"
        )

    def vnf_address(
        self, vnf: str, node: str, subnet: str | None, live: str | None, taken: frozenset[str]
    ) -> str | None:
        return None  # OVN forwards to the function's ports by name: no address needed

    def vnf_port(self, inst: VnfInstance, side: Side) -> PortConfig:
        peer = inst.out_port if side == "in" else inst.in_port
        options = {
            "is-nf": "true",
            "nf-linked-port": peer,
            "receive_multicast": "false",
            "lsp_learn_fdb": "false",
        }
        return PortConfig([], options)

    def emit_bindings(
        self, desired: Desired, observed: Observed, instances: Instances,
        options: CompileOptions, out: TargetBuilder,
    ) -> None:  # fmt: skip
        inst_id = options.instance
        walk = _Walk(
            inst_id,
            instances,
            chains.paths(desired, instances, observed, inst_id, out),
            {s.name for s in observed.switches if s.load_balancers},
            out.only_pairs,
            _node_traffic(observed, options, out),
        )
        for group, bindings in bindings_by_group(desired).items():
            for binding in bindings:
                walk.binding(group, binding)
        crossed = crossed_acls(desired, instances, walk.paths, inst_id, out.findings)
        walk.acls += crossed
        emit_port_groups(walk.port_groups, out)

        wires = chains.wires(walk.uses, instances)
        nf_ids, checked = _emit_functions(walk, wires, observed, desired, out)
        _unchecked_warnings(desired, out)
        emit_svc_monitor(observed.nb_global, options, needed=checked > 0, out=out)
        nfg_ids = _emit_groups(walk, wires, observed, desired, out)
        services.emit_stateless_ports(_function_ports(walk.functions, wires), walk.lbs, out)
        twice = [
            (walk.paths[(origin.partition("/")[2], node)], node)
            for _, origin, node, _, _ in crossed
            if node in walk.lbs
        ]
        note = services.plan_note(inst_id, walk.beside_lbs, twice)
        if note is not None:
            out.warn("load-balancer", note)
        if wires:
            tags = chains.allocate_tags({w.key for w in wires}, wires, observed)
            for w in wires:
                chains.emit_wire(
                    w, tags[w.key], walk.users[w.hops], nf_ids, nfg_ids, walk.uses[w.use], inst_id,
                    out,
                )  # fmt: skip
        _chain_warnings(desired, out)
        for key, origin, node, fields, pair in sorted(walk.acls, key=lambda a: a[0]):
            out.ovn("ACL", key, origin, node, dict(fields), gate=pair)
        for table, ours in (("Network_Function", nf_ids), ("Network_Function_Group", nfg_ids)):
            _budget_warning(table, len(ours), observed, out)


@dataclass
class _Walk:
    """What the walk over every (binding, node where its VNFs run) collects for
    :meth:`NetworkFunction.emit_bindings`. The walk meets 20,000 pairs at 10k pods, most of
    them pairs a one-shot compile skips: what depends on the binding only is found once per
    binding, and a VNF instance's functions and group once per instance."""

    instance: str
    instances: Instances
    paths: Mapping[tuple[str, str], tuple[str, ...]]
    """(binding, node) -> the VNFs its traffic crosses there (``chains.paths``)."""
    lbs: set[str]
    """The switches with load balancers."""
    only_pairs: frozenset[tuple[str, str]] | None
    left_out: Callable[[str], node_traffic.NodeExclusion] | None = None
    """A node -> the node traffic its steering ACLs leave out (``node_traffic``)."""
    port_groups: dict[str, tuple[str, str]] = field(default_factory=dict)
    functions: dict[str, VnfInstance] = field(default_factory=dict)
    groups: dict[str, tuple[VnfInstance, str]] = field(default_factory=dict)
    acls: list[AclRow] = field(default_factory=list)
    beside_lbs: list[tuple[str, str]] = field(default_factory=list)
    """(binding, node) steered beside load balancers."""
    uses: dict[chains.WireUse, set[str]] = field(default_factory=dict)
    """A chain's wiring on a node -> its fallbacks."""
    users: dict[tuple[str, ...], str] = field(default_factory=dict)
    """A chain -> the first Binding through it."""
    seen: set[tuple[str, str, str]] = field(default_factory=set)
    """(vnf, node, fallback) of the instances whose functions and group are in already."""

    def binding(self, group: str, binding: Binding) -> None:
        spec = binding.spec
        # a single VNF's own policy, if written as a list; a chain's hops have theirs
        fallback = spec.failurePolicy.value if spec.is_chain else spec.hop_policies[0].value
        if spec.is_chain:
            for hop_node, hop in chains.probes(spec, self.instances):
                self._functions_of(hop, hop_node)
                policy = chains.hop_policy(spec, hop)
                self.groups[chains.probe_group(self.instance, hop, policy)] = (hop, policy)
        for node in chains.chain_nodes(spec.vnfs, self.instances):
            self._pair(group, binding, node, fallback)

    def _functions_of(self, inst: VnfInstance, node: str) -> None:
        for member in inst.members():
            nf = naming.network_function(self.instance, inst.vnf.metadata.name, node, member.slot)
            self.functions[nf] = member

    def _pair(self, group: str, binding: Binding, node: str, fallback: str) -> None:
        """One binding on one node: its instance's rows, and its ACLs where the pair can be
        present (a one-shot compile builds no Port_Group or ACL of a pair that cannot be: their
        rows are gated by it; the instance's rows stay)."""
        spec, name = binding.spec, binding.metadata.name
        inst = self.instances[(spec.vnfs[0], node)]
        path = self.paths[(name, node)]
        present = self.only_pairs is None or (group, node) in self.only_pairs
        pg = naming.port_group(self.instance, group, node) if present else ""
        if present:
            self.port_groups[pg] = (group, node)
        nfg: str | None = None
        if not spec.is_chain:
            vnf_name = inst.vnf.metadata.name
            nfg = naming.network_function_group(self.instance, vnf_name, node, fallback)
            if (vnf_name, node, fallback) not in self.seen:
                self.seen.add((vnf_name, node, fallback))
                self._functions_of(inst, node)
                self.groups[nfg] = (inst, fallback)
        if node in self.lbs:
            self.beside_lbs.append((name, node))
        for direction in directions(spec.redirection):
            if spec.is_chain:
                nfg = chains.target_group(self.instance, spec, path, direction, node, fallback)
                if len(path) > 1:
                    use = (path, chains.wire_direction(direction), node)
                    self.uses.setdefault(use, set()).add(fallback)
                    self.users.setdefault(path, f"Binding/{name}")
            if present:
                self.acls.append(self._acl(group, binding, node, pg, direction, nfg))

    def _acl(
        self, group: str, binding: Binding, node: str, pg: str, direction: str, nfg: str | None
    ) -> AclRow:
        """The steering ACL of a binding on a node in one direction."""
        spec, name = binding.spec, binding.metadata.name
        side = "outport" if direction == TO_LPORT else "inport"
        term = ""
        if not spec.steerNodeTraffic and self.left_out is not None:
            term = self.left_out(node).match(direction)
        exclude = f" && {term}" if term else ""
        fields: dict[str, object] = {
            "port_group": pg,
            "name": name,
            "direction": direction,
            "priority": common.priority(common.ACL_PRIORITY_BASE, spec.order),
            "tier": common.ACL_TIER[spec.precedence],
            "match": f"{side} == @{pg}{exclude} && {common.traffic_match(spec.traffic)}",
            "action": "allow-related",
            "network_function_group": nfg,
        }
        if direction == FROM_LPORT:  # OVN-Kubernetes' egress policy stage
            fields["options"] = dict(common.FROM_LPORT_OPTIONS)
        key = naming.ovn_ident(self.instance, name, node, direction.split("-")[0])
        return key, f"Binding/{name}", node, fields, (group, node)


def _node_traffic(
    observed: Observed, options: CompileOptions, out: TargetBuilder
) -> Callable[[str], node_traffic.NodeExclusion]:
    """A node -> what its steering ACLs leave out as node traffic, found once per node (and
    its warnings said once)."""
    found: dict[str, node_traffic.NodeExclusion] = {}

    def of(node: str) -> node_traffic.NodeExclusion:
        if node not in found:
            said: list[str] = []
            found.update(
                node_traffic.exclusions(
                    [node], observed.nodes, observed.switches, options.join_subnets,
                    options.transit_subnets, said,
                )
            )  # fmt: skip
            for text in said:
                out.warn("node-traffic", text, f"Node/{node}", node)
        return found[node]

    return of


def _emit_functions(
    walk: _Walk,
    wires: Sequence[chains.Wire],
    observed: Observed,
    desired: Desired,
    out: TargetBuilder,
) -> tuple[dict[str, int], int]:
    """Every function (the instances' and the chains') gets an id; the instances' functions and
    their health checks are emitted (a chain's are its wiring's). Returns the ids and how many
    functions have a health check."""
    inst_id = walk.instance
    chain_functions = {w.function(inst_id): w for w in wires}
    what = {nf: (inst.node, inst.vnf.metadata.name) for nf, inst in walk.functions.items()}
    what |= {nf: (w.node, f"chain {' -> '.join(w.hops)} ({w.direction})")
             for nf, w in chain_functions.items()}  # fmt: skip
    nf_ids = _allocate(
        "Network_Function", [*walk.functions, *chain_functions], observed, desired, what
    )
    checked = 0
    for nf, inst in sorted(walk.functions.items()):
        origin = f"VnfDeployment/{inst.vnf.metadata.name}"
        fields = {"name": nf, "id": nf_ids[nf], "inport": inst.in_port, "outport": inst.out_port}
        out.ovn("Network_Function", nf, origin, inst.node, fields)
        check = inst.vnf.spec.healthCheck
        if check.enabled:
            checked += 1
            probe = {"name": nf, "network_function": nf, "options": probe_options(check)}
            out.ovn(HEALTH_CHECK, nf, origin, inst.node, probe)
    return nf_ids, checked


def _emit_groups(
    walk: _Walk,
    wires: Sequence[chains.Wire],
    observed: Observed,
    desired: Desired,
    out: TargetBuilder,
) -> dict[str, int]:
    """Every function group (the instances' per failure policy, the chains', each function's
    probe group) gets an id; the instances' and the probe groups are emitted (a chain's are its
    wiring's). Returns the ids."""
    inst_id = walk.instance
    chain_groups = {w.group(inst_id, fb): (w, fb) for w in wires for fb in walk.uses[w.use]}
    probes = probe_groups(walk.functions.values(), inst_id)
    what = {
        g: (inst.node, f"{inst.vnf.metadata.name} {fb}") for g, (inst, fb) in walk.groups.items()
    }
    what |= {g: (w.node, f"chain {' -> '.join(w.hops)} ({w.direction}) {fb}")
             for g, (w, fb) in chain_groups.items()}  # fmt: skip
    what |= {g: (inst.node, f"{inst.vnf.metadata.name} probe") for g, (_, inst) in probes.items()}
    nfg_ids = _allocate(
        "Network_Function_Group", [*walk.groups, *chain_groups, *probes], observed, desired, what
    )

    def function_group(nfg: str, inst: VnfInstance, fallback: str, members: list[str]) -> None:
        fields = {
            "name": nfg,
            "id": nfg_ids[nfg],
            "mode": "inline",
            "fallback": fallback,
            "network_function": sorted(members),
        }
        origin = f"VnfDeployment/{inst.vnf.metadata.name}"
        out.ovn("Network_Function_Group", nfg, origin, inst.node, fields)

    for nfg, (inst, fallback) in sorted(walk.groups.items()):
        members = [
            naming.network_function(inst_id, inst.vnf.metadata.name, inst.node, m.slot)
            for m in inst.members()
        ]
        function_group(nfg, inst, fallback, members)
    for nfg, (nf, inst) in sorted(probes.items()):
        function_group(nfg, inst, "fail-close", [nf])  # a probe group: no ACL sends to it
    return nfg_ids


def probe_groups(
    functions: Iterable[VnfInstance], instance: str
) -> dict[str, tuple[str, VnfInstance]]:
    """One probe group per function of a node that has two instances (``naming.probe_group``:
    the function alone, referenced by no ACL, so ``network_function_active`` says whether that
    function is healthy even while the other one is active), by group name -> (function name,
    instance). Measured on OVN 26.03: northd probes every function with a health check and
    writes ``network_function_active`` of every group, whether an ACL references it or not
    (docs/datapath.md, "Transitions")."""
    probes: dict[str, tuple[str, VnfInstance]] = {}
    for inst in functions:
        if inst.second is None and not inst.slot:
            continue  # a node with one instance: its steering groups tell its health
        vnf = inst.vnf.metadata.name
        nf = naming.network_function(instance, vnf, inst.node, inst.slot)
        probes[naming.probe_group(instance, vnf, inst.node, inst.slot)] = (nf, inst)
    return probes


def _allocate(
    table: str,
    names: Iterable[str],
    observed: Observed,
    desired: Desired,
    what: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, int]:
    """``allocate_ids``, whose error names the VnfDeployments with a second instance per node
    (they take two functions and up to two probe groups more per node)."""
    try:
        return allocate_ids(table, names, observed, what)
    except CompileError as exc:
        doubled = sorted(n for n, v in desired.vnfs.items() if v.spec.instancesPerNode > 1)
        if not doubled:
            raise
        raise CompileError(
            f"{exc}; instancesPerNode: 2 of VnfDeployment {', '.join(doubled)} takes a second "
            "Network_Function and two probe Network_Function_Groups more per node: set it back "
            "to 1 where no standby is needed"
        ) from None


def _function_ports(
    functions: Mapping[str, VnfInstance], wires: list[chains.Wire]
) -> dict[str, set[str]]:
    """Node -> the inport and outport of every Network_Function of ours there."""
    ports: dict[str, set[str]] = defaultdict(set)
    for inst in functions.values():
        ports[inst.node].update((inst.in_port, inst.out_port))
    for wire in wires:
        ports[wire.node].update((wire.port("in"), wire.port("out")))
    return ports


def crossed_acls(
    desired: Desired,
    instances: Instances,
    paths: Mapping[tuple[str, str], tuple[str, ...]],
    instance: str,
    findings: list[Finding],
) -> list[AclRow]:
    """The ACLs that let a packet which already crossed a VNF instance on its switch reach a
    steered pod without crossing it again (see the module docstring): per binding steering
    to-lport through a VNF that some binding (of any group) steers from-lport through, per
    node, on the binding's Port_Group, one priority above its steering ACL, same tier.

    Why one per binding and node, on the group's own Port_Group: OVN installs a port group's
    ACLs only on the switches of its ports, and ovn-controller refuses a match naming a port
    group that has no port on the switch (``expecting port group name``). So one row shared by
    several groups (``outport == {@a, @b}``, kept on a Port_Group of the function's port) fails
    whole wherever one of the groups has no pod; matching the groups' addresses instead
    (``ip4.dst == $a_ip4``) would let a packet sent to a member's IP but another pod's MAC skip
    that pod's own policies.

    One priority above a binding's ACL is the priority of the ACLs of order ``order - 1``. A
    binding of the same group there that steers overlapping traffic through another VNF must
    still win (for a packet from the first VNF it chains to the second, as across nodes), so
    its traffic is left out (:func:`common.subtract`: TCP, UDP and ICMP only, OVN cannot negate
    a protocol); when it takes all of it, this binding's to-lport ACL never steers and needs
    no twin. For such a binding of *another* group, no row can tell which pods are in both
    groups: the plan warns.

    The VNFs crossed on a node are the binding's path there (``paths``: its VNF, its chain, or
    what is left of a chain around a dead fail-open hop, ``chains.paths``)."""
    entering = {
        n for n, b in desired.bindings.items() if FROM_LPORT in directions(b.spec.redirection)
    }
    entered = {(path, node) for (n, node), path in paths.items() if path and n in entering}
    rows: list[AclRow] = []
    for name, binding in sorted(desired.bindings.items()):
        spec = binding.spec
        if TO_LPORT not in directions(spec.redirection):
            continue
        above = _one_order_above(binding, desired)
        for other in above:
            if other.spec.securityGroup != spec.securityGroup:
                findings.append(
                    Finding("tie", f"Binding/{name}", None, _tie_warning(other, binding))
                )
        if not entered:
            continue  # nothing steers from-lport: no packet crossed a VNF before (the warnings
            # above still apply)
        for node in chains.chain_nodes(spec.vnfs, instances):
            path = paths[(name, node)]
            if (path, node) in entered:
                row = _crossed_acl(binding, node, path, above, instances, instance)
                if row is not None:
                    rows.append(row)
    return rows


def _crossed_acl(
    binding: Binding,
    node: str,
    path: tuple[str, ...],
    above: Sequence[Binding],
    instances: Instances,
    instance: str,
) -> AclRow | None:
    """The twin of a binding's to-lport ACL on a node (:func:`crossed_acls`), or ``None``
    when a binding of its group one order above takes all of its traffic there."""
    spec, name = binding.spec, binding.metadata.name
    chained = [
        f
        for b in above
        if b.spec.securityGroup == spec.securityGroup
        and all((vnf, node) in instances for vnf in b.spec.vnfs)
        for f in b.spec.traffic_filters()
    ]
    traffic: common.TrafficSpec = spec.traffic
    if chained:
        traffic = common.subtract(spec.traffic_filters(), chained)
        if not traffic:
            return None
    crossed = _entry_out_port(path, node, instances)
    pg = naming.port_group(instance, spec.securityGroup, node)
    match = (
        f"outport == @{pg} && inport == {common.port_literal(crossed)} && "
        f"{common.traffic_match(traffic)}"
    )
    fields: dict[str, object] = {
        "port_group": pg,
        "name": name,
        "direction": TO_LPORT,
        "priority": common.priority(common.ACL_PRIORITY_BASE, spec.order) + 1,
        "tier": common.ACL_TIER[spec.precedence],
        "match": match,
        "action": "allow-related",
        "network_function_group": None,
    }
    key = naming.ovn_ident(instance, name, node, "to", "crossed")
    return key, f"Binding/{name}", node, fields, (spec.securityGroup, node)


def _entry_out_port(hops: tuple[str, ...], node: str, instances: Instances) -> str:
    """The port a packet leaves the VNF (or the chain) by after it was steered into it
    from-lport on ``node``: the VNF's out port, or the entry wiring's function out port."""
    if len(hops) == 1:
        return instances[(hops[0], node)].out_port
    return chains.port_name(hops, chains.ENTRY, node, "out")


def _chain_warnings(desired: Desired, out: TargetBuilder) -> None:
    """A hop that may fail open but has no health check can never be found dead."""
    for name, binding in sorted(desired.bindings.items()):
        spec = binding.spec
        if not spec.is_chain:
            continue
        blind = [
            vnf
            for vnf, policy in zip(spec.vnfs, spec.hop_policies, strict=True)
            if policy.value == "fail-open" and not desired.vnfs[vnf].spec.healthCheck.enabled
        ]
        if blind:
            out.warn(
                "health-check",
                f"Binding {name}: VnfDeployment {', '.join(blind)} of the chain "
                f"{spec.vnf_text} may fail open but has healthCheck.enabled: false, so it is "
                "never found dead and the chain's traffic is dropped when it stops forwarding",
                f"Binding/{name}",
            )


def _one_order_above(binding: Binding, desired: Desired) -> list[Binding]:
    """The bindings whose to-lport steering ACLs share the priority and tier of ``binding``'s
    :func:`crossed_acls` row (order one less, same precedence) and could take the same packets
    to another VNF."""
    spec = binding.spec
    return [
        other
        for _, other in sorted(desired.bindings.items())
        if other.spec.order == spec.order - 1
        and other.spec.precedence is spec.precedence
        and other.spec.vnfs != spec.vnfs
        and TO_LPORT in directions(other.spec.redirection)
        and common.overlaps(other.spec.traffic_filters(), spec.traffic_filters())
    ]


def _tie_warning(earlier: Binding, binding: Binding) -> str:
    return (
        f"Binding {earlier.metadata.name} (order {earlier.spec.order}, VNF "
        f"{earlier.spec.vnf_text}) and Binding {binding.metadata.name} (order "
        f"{binding.spec.order}, VNF {binding.spec.vnf_text}) are one order apart: the ACL that "
        f"lets traffic which already crossed {binding.spec.vnf_text} on a node reach group "
        f"{binding.spec.securityGroup} without crossing it again has the priority of "
        f"{earlier.metadata.name}'s, so for a pod in groups {earlier.spec.securityGroup} and "
        f"{binding.spec.securityGroup} OVN may or may not send such traffic through "
        f"{earlier.spec.vnf_text}; leave a gap of at least 2 between "
        "their orders"
    )


def probe_options(check: HealthCheck) -> dict[str, str]:
    """The ``options`` of a ``Network_Function_Health_Check`` (OVN reads them as strings)."""
    return {
        "failure_count": str(check.failureCount),
        "interval": str(check.interval),
        "success_count": str(check.successCount),
        "timeout": str(check.timeout),
    }


def svc_monitor_addresses(options: CompileOptions) -> dict[str, str]:
    """The probe's source and destination address to set where nobody set them: the options'
    values, else the link-local defaults. Raises :class:`CompileError` unless they are two
    different addresses of one IP version."""
    given = {
        "svc_monitor_ip": options.svc_monitor_ip or DEFAULT_SVC_MONITOR_IP,
        "svc_monitor_ip_dst": options.svc_monitor_ip_dst or DEFAULT_SVC_MONITOR_IP_DST,
    }
    parsed = {}
    for key, value in given.items():
        try:
            parsed[key] = ipaddress.ip_address(value)
        except ValueError:
            flag = "--" + key.replace("_", "-")
            raise CompileError(f"{flag} {value!r} is not an IP address") from None
    src, dst = parsed["svc_monitor_ip"], parsed["svc_monitor_ip_dst"]
    if src.version != dst.version or src == dst:
        raise CompileError(
            f"--svc-monitor-ip {src} and --svc-monitor-ip-dst {dst} must be two different "
            "addresses of the same IP version (the source and destination of OVN's probe)"
        )
    return {key: str(address) for key, address in parsed.items()}


def emit_svc_monitor(
    nb_global: NbGlobal, options: CompileOptions, *, needed: bool, out: TargetBuilder
) -> None:
    """The ``NB_Global`` resource: the service-monitor options this instance sets or keeps.

    ``NB_Global`` belongs to the cluster. An option is ours when our marker lists it; an option
    nobody set becomes ours while ``needed`` (a health-checked function of ours exists); an
    option someone else set is never touched, and when it differs from an address the user
    gave explicitly the plan says so. Without ``needed``, nothing is emitted, so the diff
    removes exactly the options (and the marker) we set."""
    if not needed:
        return
    wanted = svc_monitor_addresses(options)
    explicit = {
        "svc_monitor_ip": options.svc_monitor_ip is not None,
        "svc_monitor_ip_dst": options.svc_monitor_ip_dst is not None,
    }
    marker = svc_monitor_marker(options.instance)
    claimed = set(nb_global.external_ids.get(marker, "").split(","))
    ours: dict[str, str] = {}
    for key in SVC_MONITOR_OPTIONS:
        live = nb_global.options.get(key)
        if key in claimed or live is None:
            ours[key] = wanted[key]
        elif explicit[key] and live != wanted[key]:
            flag = "--" + key.replace("_", "-")
            out.warn(
                "health-check",
                f"NB_Global options:{key} is {live}, set by someone else: osc-gitops keeps it "
                f"(it never changes what it did not set), so {flag} {wanted[key]} is not used",
            )
    if ours:
        fields = {"options": ours, "external_ids": {marker: ",".join(sorted(ours))}}
        out.resources.append(Resource(NB_GLOBAL, NB_GLOBAL_KEY, "", None, fields))


def _unchecked_warnings(desired: Desired, out: TargetBuilder) -> None:
    """One warning per VNF with health checks off that a binding steers through."""
    bindings: dict[str, list[str]] = defaultdict(list)
    for binding in desired.bindings.values():
        if binding.spec.is_chain:
            continue  # a chain has no health check of its own (_chain_warnings)
        bindings[binding.spec.vnfs[0]].append(
            f"{binding.metadata.name} ({binding.spec.failurePolicy.value})"
        )
    for vnf_name, vnf in sorted(desired.vnfs.items()):
        if vnf.spec.healthCheck.enabled or not bindings.get(vnf_name):
            continue
        out.warn(
            "health-check",
            f"VnfDeployment {vnf_name} has healthCheck.enabled: false: OVN counts its "
            "instances healthy whenever their ports are bound, so the failure policy of "
            f"Binding {', '.join(sorted(bindings[vnf_name]))} cannot act when the VNF stops "
            "forwarding (a dead VNF drops the steered traffic, fail-open or not)",
            f"VnfDeployment/{vnf_name}",
        )


def _budget_warning(table: str, ours: int, observed: Observed, out: TargetBuilder) -> None:
    used = ids_in_use(table, ours, observed)
    if used > ID_BUDGET_WARN * MAX_OVN_ID:
        out.warn(
            "nf-ids",
            f"{table} ids: {used}/{MAX_OVN_ID} used in this Northbound DB after this plan "
            f"({ours} by osc-gitops, {used - ours} by others), above "
            f"{ID_BUDGET_WARN:.0%}: bind fewer VNFs per NB, run one NB per node (OVN-Kubernetes "
            "interconnect), or use --steering router-policy before the ids run out",
        )
