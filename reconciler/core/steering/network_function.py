"""Network Function insertion (OVN >= 26.03): the default steering backend.

Per bound security group and node: a Port_Group of the member pods on that node. Per VNF and
node: one Network_Function (the node VNF's in/out ports). Per VNF, node and failure policy: one
Network_Function_Group (``mode=inline``, ``fallback``), shared by the bindings that need it, so
ids (1-255 per NB) last as long as possible. Per binding, node and direction: one
``allow-related`` ACL on the Port_Group with ``network_function_group`` set: to-lport
``outport == @pg`` for exit-lport, from-lport ``inport == @pg`` for entry-lport. Replies take the
reverse path through the same function, so every binding is inherently bi-directional.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.core import naming
from reconciler.core.model import Desired
from reconciler.core.observed import Observed, OvnCapabilities
from reconciler.core.steering import common
from reconciler.core.steering.base import (
    CompileOptions,
    PortConfig,
    PortGroupPods,
    Side,
    TargetBuilder,
    VnfInstance,
    allocate_ids,
    binding_nodes,
    bindings_by_group,
    directions,
    emit_port_groups,
)


class NetworkFunction(PortGroupPods):
    """The ``network-function`` backend; its only pod-dependent rows are the Port_Groups."""

    name = "network-function"
    observed_fields = frozenset({"switches", "used_ids"})
    live_tables = frozenset({"Network_Function", "Network_Function_Group"})
    """Their ids (1-255 per NB) are kept across passes (``allocate_ids``)."""

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

    def vnf_address(self, vnf: str, node: str, subnet: str | None) -> str | None:
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
        self,
        desired: Desired,
        observed: Observed,
        instances: Mapping[tuple[str, str], VnfInstance],
        options: CompileOptions,
        out: TargetBuilder,
    ) -> None:
        inst_id = options.instance
        lb_switches = {s.name for s in observed.switches if s.load_balancers}
        port_groups: dict[str, tuple[str, str]] = {}
        functions: dict[str, VnfInstance] = {}
        groups: dict[str, tuple[VnfInstance, str]] = {}
        acls: list[tuple[str, str, str, dict[str, object]]] = []

        for group, bindings in bindings_by_group(desired).items():
            for binding in bindings:
                spec = binding.spec
                fallback = spec.failurePolicy.value
                for inst in binding_nodes(binding, instances):
                    node = inst.node
                    pg = naming.port_group(inst_id, group, node)
                    port_groups[pg] = (group, node)
                    nf = naming.network_function(inst_id, spec.vnf, node)
                    functions[nf] = inst
                    nfg = naming.network_function_group(inst_id, spec.vnf, node, fallback)
                    groups[nfg] = (inst, fallback)
                    if node in lb_switches:
                        out.warnings.append(
                            f"switch {node} has load balancers (OVN-Kubernetes' Service group?): "
                            f"OVN does not support Network Function insertion together with load "
                            f"balancers on one switch, so Binding {binding.metadata.name} may not "
                            "steer there"
                        )
                    for direction in directions(spec.redirection):
                        side = "outport" if direction == "to-lport" else "inport"
                        match = f"{side} == @{pg} && {common.traffic_match(spec.traffic)}"
                        key = naming.ovn_ident(
                            inst_id, binding.metadata.name, node, direction.split("-")[0]
                        )
                        acls.append(
                            (
                                key,
                                f"Binding/{binding.metadata.name}",
                                node,
                                {
                                    "port_group": pg,
                                    "name": binding.metadata.name,
                                    "direction": direction,
                                    "priority": common.priority(
                                        common.ACL_PRIORITY_BASE, spec.order
                                    ),
                                    "tier": common.ACL_TIER[spec.precedence],
                                    "match": match,
                                    "action": "allow-related",
                                    "network_function_group": nfg,
                                },
                            )
                        )

        emit_port_groups(port_groups, out)

        nf_ids = allocate_ids("Network_Function", functions, observed)
        for nf, inst in sorted(functions.items()):
            out.ovn(
                "Network_Function",
                nf,
                f"VnfDeployment/{inst.vnf.metadata.name}",
                inst.node,
                {"name": nf, "id": nf_ids[nf], "inport": inst.in_port, "outport": inst.out_port},
            )
        nfg_ids = allocate_ids("Network_Function_Group", groups, observed)
        for nfg, (inst, fallback) in sorted(groups.items()):
            nf = naming.network_function(inst_id, inst.vnf.metadata.name, inst.node)
            out.ovn(
                "Network_Function_Group",
                nfg,
                f"VnfDeployment/{inst.vnf.metadata.name}",
                inst.node,
                {
                    "name": nfg,
                    "id": nfg_ids[nfg],
                    "mode": "inline",
                    "fallback": fallback,
                    "network_function": [nf],
                },
            )
        for key, origin, node, fields in sorted(acls, key=lambda a: a[0]):
            out.ovn("ACL", key, origin, node, dict(fields))
