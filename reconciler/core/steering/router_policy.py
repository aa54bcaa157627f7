"""Router-policy steering: ``Logical_Router_Policy`` ``reroute`` on the cluster router.

Works on any OVN (23.03 here), but only for *routed pod-to-pod* traffic: packets between pods on
different nodes cross ``ovn_cluster_router``; packets between two pods on the same node switch
never do and are not steered. The failure policy is not enforced: with no health check, a VNF
that stops forwarding blackholes the group's routed traffic (always fail-close).

Every steered packet goes to the VNF instance on the node of its *destination*, which hands it
to the destination pod directly on that node's switch: the VNF on node M only ever receives
packets for M's own subnet, so its forwarded copy never re-enters the router and cannot be
rerouted again (no loop, no guard needed). Per binding and node M where the VNF runs, and per
direction:

- exit-lport (towards the group's pods on M, from other nodes or from outside the cluster):
  ``ip4.dst == $<pg M>_ip4`` -> reroute to the VNF's address on M;
- entry-lport (from the group's pods, on any node the VNF runs on, to pods on M):
  ``ip4.dst == <subnet of M> && ip4.src == {$<pg N>_ip4, ...}`` -> reroute to the VNF on M.

Why not steer entry-lport traffic at the *source* node's VNF: the VNF would have to send it back
to the router from the pod's own switch, and in the router's policy stage nothing tells that copy
from the original. ``eth.src`` there is already the router port's MAC (``lr_in_ip_routing``
rewrites it), so an ``eth.src != <VNF MAC>`` guard loops the VNF's own packets until their TTL
runs out, and ``inport != "rtos-N"`` is refused by ovn-controller ("Nominal field inport may only
be tested for equality"), although northd accepts it. Both were seen on the real data path
(``docs/datapath.md``). Hence entry-lport traffic that leaves the cluster, or goes to a node
where the VNF does not run, is not steered; nor is any entry-lport traffic under node agents
(``--node``: each writes its own node's sources only, and the plan says so).

A VNF's address comes from the top of the node subnet (``RouterPolicy.vnf_address``): the
highest host for the first VNF on a node, the next one down for the next, each VNF keeping the
address it has while others come and go. OVN-Kubernetes allocates pod addresses from the bottom
of the node subnet, so the top ones are free until the subnet is nearly full, and compile
refuses one a pod holds (``RouterPolicy.check_pods``, this backend's only pod-dependent check).
(Every VNF on a node once got the highest host, so with two VNFs there a packet rerouted to one
could reach the other.)
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from reconciler.core.model import naming
from reconciler.core.model.desired import Binding, Desired
from reconciler.core.model.observed import Observed, OvnCapabilities
from reconciler.core.steering import base, common
from reconciler.core.steering.base import (
    CompileError,
    CompileOptions,
    Instances,
    NodePods,
    OwnedRows,
    PortConfig,
    Side,
    Steered,
    TargetBuilder,
    VnfInstance,
)


class RouterPolicy(base.PortGroupPods, base.WithoutHealthChecks):
    """The ``router-policy`` backend: pod-dependent rows are the Port_Groups (the router matches
    their ``_ip4`` address sets, which OVN keeps), plus one check, that no pod holds a VNF's
    address."""

    name = "router-policy"
    observed_fields = frozenset({"switches", "routers"})
    live_tables: frozenset[str] = frozenset({"Logical_Switch_Port"})
    """The VNFs' data ports: a VNF keeps the address it has (``vnf_address``)."""
    active_standby = False
    """A reroute has one next hop per node: no standby (``instancesPerNode: 2`` is ignored,
    with a warning)."""
    acl_tiers = False
    """Router policies have no tiers: ``order`` alone decides (``common.evaluation_key``)."""
    steering_tables: tuple[str, ...] = ("Logical_Router_Policy",)
    routed_only = True
    """A router policy sees only what crosses the cluster router: traffic between pods of one
    node's switch is not steered."""

    def steered_by(self, table: str, fields: Mapping[str, Any], rows: OwnedRows) -> Steered | None:
        """A reroute policy: the VNFs of its next hops; towards the group's pods (``ip4.dst ==
        $pg_ip4``) or from them; no failure policy (a router policy has no health)."""
        if table != "Logical_Router_Policy" or fields.get("action") != "reroute":
            return None
        hops = fields.get("nexthops") or ()
        vnfs = base.merge_vnfs(*(rows.next_hops.get(str(hop), ()) for hop in hops))
        match = str(fields.get("match") or "")
        direction = "exit" if re.match(r"ip[46]\.dst == \$", match) else "entry"
        return Steered(vnfs, base.GROUP_REF.findall(match), direction, None)

    def available(self, capabilities: OvnCapabilities) -> bool:
        return True  # router policies exist in every OVN we support

    def unavailable_reason(self, capabilities: OvnCapabilities) -> str:
        return "router-policy steering is always available"  # never asked: always available

    def vnf_address(
        self, vnf: str, node: str, subnet: str | None, live: str | None, taken: frozenset[str]
    ) -> str | None:
        """From the top of the node subnet down (see the module docstring): the address the
        VNF has (``live``) while it is a host of the subnet no other VNF there took, else the
        highest free host, so each VNF on a node has its own and keeps it."""
        if not subnet:
            return None
        net = ipaddress.ip_network(subnet, strict=False)
        if live is not None and live not in taken:
            try:
                if ipaddress.ip_address(live) in net and live != str(net.network_address):
                    return live
            except ValueError:
                pass
        top = net.broadcast_address - 1 if net.version == 4 else net[-2]
        for i in range(min(net.num_addresses - 2, 4096)):
            candidate = str(top - i)
            if candidate not in taken:
                return candidate
        return None

    def vnf_port(self, inst: VnfInstance, side: Side) -> PortConfig:
        mac = inst.mac_in if side == "in" else inst.mac_out
        addresses = [f"{mac} {inst.ip}"] if side == "in" and inst.ip else []
        return PortConfig(addresses, {})

    def check_pods(self, inst: VnfInstance, pods: NodePods) -> None:
        """Refuse a VNF address a pod on the node already holds."""
        if inst.ip is not None and inst.ip in pods.addresses:
            raise CompileError(
                f"router-policy: the address reserved for VNF {inst.vnf.metadata.name} on node "
                f"{inst.node} ({inst.ip} of {inst.subnet}, VNF addresses are taken from the top "
                "of the subnet down) is already used by a pod"
            )

    def emit_bindings(
        self, desired: Desired, observed: Observed, instances: Instances,
        options: CompileOptions, out: TargetBuilder,
    ) -> None:  # fmt: skip
        inst_id = options.instance
        router = options.cluster_router
        chained = sorted(n for n, b in desired.bindings.items() if b.spec.is_chain)
        if chained:
            raise CompileError(
                f"router-policy steering cannot carry a chain of VNFs (Binding "
                f"{', '.join(chained)}): a rerouted packet goes to one VNF's address; service "
                "chains need Network Function insertion (OVN >= 26.03, the default steering)"
            )
        if desired.bindings and router not in observed.routers:
            out.warn(
                "backend",
                f"router-policy: logical router {router} not found: no binding is steered",
            )
            return
        _agent_entry_warnings(desired, options, out)
        port_groups: dict[str, tuple[str, str]] = {}
        # A group's entry-lport policies name the address sets of its Port_Groups on every node:
        # those must exist wherever the VNF runs, members or not. The rows of other groups
        # exist per (group, node) with members (``presence``).
        ungated = {
            group
            for group, bindings in base.bindings_by_group(desired).items()
            if any("from-lport" in base.directions(b.spec.redirection) for b in bindings)
        }
        networks = _Networks({s.name: s.subnet for s in observed.switches})
        for group, bindings in base.bindings_by_group(desired).items():
            for binding in bindings:
                steered = _steered_nodes(binding, instances, networks, out)
                pgs = [naming.port_group(inst_id, group, inst.node) for inst, _, _ in steered]
                for pg, (inst, _, _) in zip(pgs, steered, strict=True):
                    port_groups[pg] = (group, inst.node)
                if not steered:
                    continue
                sets = [f"${pg}_ip4" for pg in pgs]
                sources = sets[0] if len(sets) == 1 else "{" + ", ".join(sets) + "}"
                for inst, ip, subnet in steered:
                    gated = group not in ungated
                    pairs = out.only_pairs
                    if gated and pairs is not None and (group, inst.node) not in pairs:
                        continue  # a one-shot compile: the pair cannot be present
                    where = _Where(group, inst.node, ip, subnet, sources, gated)
                    _emit_policies(binding, where, router, inst_id, out)
        base.emit_port_groups(port_groups, out, ungated)


class _Networks:
    """Each node's subnet, parsed once per node (not per binding and node)."""

    def __init__(self, subnets: Mapping[str, str | None]) -> None:
        self.subnets = subnets
        self.parsed: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network] = {}

    def of(self, node: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        net = self.parsed.get(node)
        if net is None:
            net = ipaddress.ip_network(self.subnets.get(node) or "::/128", strict=False)
            self.parsed[node] = net
        return net


def _steered_nodes(
    binding: Binding,
    instances: Instances,
    networks: _Networks,
    out: TargetBuilder,
) -> list[tuple[VnfInstance, str, str]]:
    """``(instance, its address, the node's subnet)`` of every node where the binding's VNF
    has an IPv4 address to reroute to; the plan says where it has none, and that router
    policies cannot fail open."""
    name, spec = binding.metadata.name, binding.spec
    if spec.failurePolicy.value == "fail-open":
        out.warn(
            "backend",
            f"Binding {name}: router-policy cannot fail open (no health check); a VNF that "
            "stops forwarding blackholes the traffic",
            f"Binding/{name}",
        )
    steered: list[tuple[VnfInstance, str, str]] = []
    for inst in base.binding_nodes(binding, instances):
        net = networks.of(inst.node)
        if inst.ip is None or net.version != 4:
            out.warn(
                "unsteered",
                f"router-policy: switch {inst.node} has no IPv4 other_config:subnet, so VNF "
                f"{spec.vnf} has no address there: Binding {name} is not steered on {inst.node}",
                f"Binding/{name}",
                inst.node,
            )
            continue
        steered.append((inst, inst.ip, str(net)))
    return steered


class _Where(NamedTuple):
    """A binding's policies on one node: the group, the node, the VNF's address there, the
    node's subnet, the address sets of the group's Port_Groups (entry-lport sources), and
    whether the policies are gated by the (group, node) pair."""

    group: str
    node: str
    ip: str
    subnet: str
    sources: str
    gated: bool


def _emit_policies(
    binding: Binding, where: _Where, router: str, instance: str, out: TargetBuilder
) -> None:
    spec, name = binding.spec, binding.metadata.name
    l4 = common.traffic_match(spec.traffic)
    l4 = "" if l4 == "ip" else f" && {l4}"
    pg = naming.port_group(instance, where.group, where.node)
    for direction in base.directions(spec.redirection):
        if direction == "to-lport":
            match = f"ip4.dst == ${pg}_ip4{l4}"
        else:
            match = f"ip4.dst == {where.subnet} && ip4.src == {where.sources}{l4}"
        out.ovn(
            "Logical_Router_Policy",
            naming.ovn_ident(instance, name, where.node, direction.split("-")[0]),
            f"Binding/{name}",
            where.node,
            {
                "router": router,
                "priority": common.priority(common.ROUTER_POLICY_PRIORITY_BASE, spec.order),
                "match": match,
                "action": "reroute",
                "nexthops": [where.ip],
            },
            gate=(where.group, where.node) if where.gated else None,
        )


def _agent_entry_warnings(desired: Desired, options: CompileOptions, out: TargetBuilder) -> None:
    """A node agent (``--node N``, ``core.slicing.AgentOptions``: its ``node``; imported by
    name it would be a cycle) compiles node N's slice only, so the entry-lport policy it writes
    for N matches sources on N (``ip4.src == $<pg N>_ip4``) going to N's own subnet: traffic
    that stays on N's switch and never meets the router. No agent writes the policy for
    traffic from N's pods to another node (that one's sources would be N's), so entry-lport is
    never steered (measured in zone mode: docs/datapath.md, "The router-policy backend")."""
    agent = getattr(options, "node", "")
    if not agent:
        return
    for name, binding in sorted(desired.bindings.items()):
        redirection = binding.spec.redirection.value
        if "from-lport" not in base.directions(binding.spec.redirection):
            continue
        kept = " Its exit-lport part is steered." if redirection == "both" else ""
        out.warn(
            "backend",
            f"Binding {name} ({redirection}): router-policy run as a node agent (--node "
            f"{agent}) cannot steer entry-lport traffic: the policy {agent}'s agent writes "
            f"matches {agent}'s pods going to {agent}'s own subnet, traffic that never crosses "
            "the router, and their traffic to other nodes would need policies in those nodes' "
            f"slices naming {agent}'s pods, which no agent writes (measured in zone mode: not "
            f"steered).{kept} Use network-function steering (OVN >= 26.03), or protect the "
            "destination pods exit-lport",
            f"Binding/{name}",
            agent,
        )
