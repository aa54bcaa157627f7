"""Router-policy steering: ``Logical_Router_Policy`` ``reroute`` on the cluster router.

Works on any OVN (23.03 here), but only for *routed* traffic: packets between pods on different
nodes (or to outside the cluster) cross ``ovn_cluster_router``; packets between two pods on the
same node switch never do and are not steered. The failure policy is not enforced: with no health
check, a VNF that stops forwarding blackholes the group's routed traffic (always fail-close).

Per binding and node where the VNF runs, and per direction:
- exit-lport (towards the group's pods on node N):
  ``inport != "rtos-N" && ip4.dst == $<pg>_ip4`` -> reroute to the VNF's address on N. Traffic
  that entered the router from N's own switch (the VNF forwarding it back) is not rerouted again.
- entry-lport (from the group's pods on N):
  ``eth.src != <VNF MAC> && ip4.src == $<pg>_ip4`` -> reroute to the VNF on N; the VNF's own
  forwarded packets carry its MAC and pass.
The VNF's address is the top host of the node subnet (see ``compile._vnf_ip``).
"""

from __future__ import annotations

from reconciler import naming
from reconciler.model import Desired
from reconciler.observed import Observed
from reconciler.steering import common
from reconciler.steering.base import (
    CompileOptions,
    Members,
    TargetBuilder,
    VnfInstance,
    binding_nodes,
    bindings_by_group,
    directions,
)


def emit_bindings(
    desired: Desired,
    observed: Observed,
    instances: dict[tuple[str, str], VnfInstance],
    members: Members,
    options: CompileOptions,
    out: TargetBuilder,
) -> None:
    inst_id = options.instance
    router = options.cluster_router
    if desired.bindings and router not in observed.routers:
        out.warnings.append(
            f"router-policy: logical router {router} not found: no binding is steered"
        )
        return
    port_groups: dict[str, tuple[str, str]] = {}
    for group, bindings in bindings_by_group(desired).items():
        for binding in bindings:
            spec = binding.spec
            if spec.failurePolicy.value == "fail-open":
                out.warnings.append(
                    f"Binding {binding.metadata.name}: router-policy cannot fail open (no "
                    "health check); a VNF that stops forwarding blackholes the traffic"
                )
            for inst in binding_nodes(binding, instances):
                node = inst.node
                if inst.ip is None:
                    out.warnings.append(
                        f"router-policy: switch {node} has no other_config:subnet, so VNF "
                        f"{spec.vnf} has no address there: Binding {binding.metadata.name} "
                        f"is not steered on {node}"
                    )
                    continue
                pg = naming.port_group(inst_id, group, node)
                port_groups[pg] = (group, node)
                l4 = common.traffic_match(spec.traffic)
                l4 = "" if l4 == "ip" else f" && {l4}"
                for direction in directions(spec.redirection):
                    if direction == "to-lport":
                        match = f'inport != "rtos-{node}" && ip4.dst == ${pg}_ip4{l4}'
                    else:
                        match = f"eth.src != {inst.mac_in} && ip4.src == ${pg}_ip4{l4}"
                    key = naming.ovn_ident(
                        inst_id, binding.metadata.name, node, direction.split("-")[0]
                    )
                    out.ovn(
                        "Logical_Router_Policy",
                        key,
                        f"Binding/{binding.metadata.name}",
                        node,
                        {
                            "router": router,
                            "priority": common.priority(
                                common.ROUTER_POLICY_PRIORITY_BASE, spec.order
                            ),
                            "match": match,
                            "action": "reroute",
                            "nexthops": [inst.ip],
                        },
                    )
    for pg, (group, node) in sorted(port_groups.items()):
        ports = sorted(p.name for p in members.get(group, {}).get(node, ()))
        out.ovn("Port_Group", pg, f"SecurityGroup/{group}", node, {"name": pg, "ports": ports})
