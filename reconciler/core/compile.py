"""compile(desired, observed) -> target: the exact rows and objects that should exist.

Pure and deterministic: the same inputs give a byte-identical target (every collection is built
in sorted order; ids are allocated from sorted names). No I/O.

Per VnfDeployment and selected node: a KubeVirt ``VirtualMachine`` ``<vnf>-<node>``, two Multus
``NetworkAttachmentDefinition`` (one per data NIC) and two LSPs on the node's switch. Per
SecurityGroup that is bound and node: a ``Port_Group`` of its member pods on that node. Per
Binding and node: the backend's steering rows (``reconciler.core.steering``).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import defaultdict
from collections.abc import Collection
from typing import Any

from reconciler.core import naming
from reconciler.core import ownership as own
from reconciler.core.model import Desired, Precedence
from reconciler.core.observed import Observed, Pod, PodPort
from reconciler.core.selectors import LabelIndex, matches_selector
from reconciler.core.steering import common, network_function, router_policy
from reconciler.core.steering.base import (
    MAX_OVN_ID,
    STEERING_CHOICES,
    CompileError,
    CompileOptions,
    Members,
    Steering,
    TargetBuilder,
    VnfInstance,
    allocate_ids,
    binding_nodes,
    bindings_by_group,
    directions,
    port_group_ports,
)
from reconciler.core.target import Target

__all__ = [
    "MAX_OVN_ID",
    "STEERING_CHOICES",
    "CompileError",
    "CompileOptions",
    "allocate_ids",
    "binding_nodes",
    "check_vnf_address",
    "choose_steering",
    "compile_target",
    "directions",
    "members_by_group_and_node",
    "pod_ips_by_switch",
    "port_group_ports",
]


_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""Node names come from the live cluster (or a snapshot file), not from validated manifests;
they reach OVN names and router-policy matches, so they are checked too."""


def choose_steering(desired: Desired, observed: Observed, options: CompileOptions) -> Steering:
    nf = observed.capabilities.network_function
    if options.steering == "router-policy":
        return "router-policy"
    if nf:
        return "network-function"
    if desired.bindings:
        version = observed.capabilities.schema_version or "unknown"
        raise CompileError(
            f"the OVN Northbound schema {version} has no Network_Function tables "
            "(Network Function insertion needs OVN >= 26.03, NB schema >= 7.18); "
            "upgrade OVN, or pass --steering router-policy to steer routed (inter-node) "
            "traffic only"
        )
    return "router-policy"


def compile_target(
    desired: Desired, observed: Observed, options: CompileOptions | None = None
) -> Target:
    options = options or CompileOptions()
    steering = choose_steering(desired, observed, options)
    out = TargetBuilder(options.instance)
    switches = {s.name: s for s in observed.switches}
    taken = pod_ips_by_switch(observed)
    instances = _vnf_instances(desired, observed, steering, switches, taken, out)
    for inst in instances.values():
        _emit_vnf_instance(inst, steering, out)

    members = members_by_group_and_node(desired, observed)
    backend = network_function if steering == "network-function" else router_policy
    backend.emit_bindings(desired, observed, instances, members, options, out)
    _binding_warnings(desired, members, instances, observed, out)
    return Target.of(out.resources, sorted(set(out.warnings)))


def _vnf_instances(
    desired: Desired,
    observed: Observed,
    steering: Steering,
    switches: dict[str, Any],
    pod_ips_by_switch: dict[str, set[str]],
    out: TargetBuilder,
) -> dict[tuple[str, str], VnfInstance]:
    instances: dict[tuple[str, str], VnfInstance] = {}
    for vnf_name, vnf in sorted(desired.vnfs.items()):
        selector = vnf.spec.nodeSelector
        for node in sorted(observed.nodes, key=lambda n: n.name):
            if any(node.labels.get(k) != v for k, v in selector.items()):
                continue
            if not _NODE_NAME.fullmatch(node.name) or len(node.name) > 253:
                out.warnings.append(
                    f"node name {node.name!r} is not a DNS subdomain: it is never used in OVN "
                    "names or matches"
                )
                continue
            if node.name not in switches:
                out.warnings.append(
                    f"node {node.name} has no OVN logical switch named after it: "
                    f"VnfDeployment {vnf_name} is not deployed there"
                )
                continue
            ip = None
            if steering == "router-policy":
                ip = _vnf_ip(vnf_name, node.name, switches[node.name].subnet, pod_ips_by_switch)
            instances[(vnf_name, node.name)] = VnfInstance(
                vnf=vnf,
                node=node.name,
                in_port=naming.vnf_port(vnf_name, node.name, "in"),
                out_port=naming.vnf_port(vnf_name, node.name, "out"),
                mac_in=naming.mac_for(vnf_name, node.name, "in"),
                mac_out=naming.mac_for(vnf_name, node.name, "out"),
                ip=ip,
            )
    return instances


def _vnf_ip(vnf: str, node: str, subnet: str | None, taken: dict[str, set[str]]) -> str | None:
    """The router-policy backend's VNF address: the highest host address of the node subnet.

    OVN-Kubernetes allocates pod IPs from the bottom of the node subnet, so the top address is
    free until the subnet is full; compile refuses if a pod already holds it.
    """
    if not subnet:
        return None
    net = ipaddress.ip_network(subnet, strict=False)
    ip = str(net.broadcast_address - 1) if net.version == 4 else str(net[-2])
    check_vnf_address(vnf, node, ip, subnet, taken.get(node, set()))
    return ip


def check_vnf_address(vnf: str, node: str, ip: str, subnet: str | None, pod_ips: set[str]) -> None:
    """Refuse a VNF address a pod on the node already holds (router-policy backend)."""
    if ip in pod_ips:
        raise CompileError(
            f"router-policy: the address reserved for VNF {vnf} on node {node} ({ip}, the "
            f"highest host of {subnet}) is already used by a pod"
        )


def pod_ips_by_switch(observed: Observed) -> dict[str, set[str]]:
    """Pod addresses (without prefix length) per node switch."""
    ips: dict[str, set[str]] = defaultdict(set)
    for port in observed.pod_ports:
        for ip in port.ips:
            ips[port.switch].add(ip.split("/")[0])
    return ips


def _emit_vnf_instance(inst: VnfInstance, steering: Steering, out: TargetBuilder) -> None:
    vnf_name = inst.vnf.metadata.name
    origin = f"VnfDeployment/{vnf_name}"
    node = inst.node
    for port, peer, mac, side in (
        (inst.in_port, inst.out_port, inst.mac_in, "in"),
        (inst.out_port, inst.in_port, inst.mac_out, "out"),
    ):
        if steering == "network-function":
            options = {
                "is-nf": "true",
                "nf-linked-port": peer,
                "receive_multicast": "false",
                "lsp_learn_fdb": "false",
            }
            addresses: list[str] = []
        else:
            options = {}
            addresses = [f"{mac} {inst.ip}"] if side == "in" and inst.ip else []
        out.ovn(
            "Logical_Switch_Port",
            port,
            origin,
            node,
            {
                "name": port,
                "switch": node,
                "addresses": addresses,
                "port_security": [],
                "options": options,
            },
        )

    spec = inst.vnf.spec
    namespace = spec.namespace
    prefix = spec.dataNetwork or vnf_name
    nads = {side: naming.nad_name(prefix, node, side) for side in ("in", "out")}
    labels = {
        own.MANAGED_BY_LABEL: own.MANAGED_BY_VALUE,
        own.OWNER: out.instance,
        own.VNF_LABEL: vnf_name,
        own.NODE_LABEL: node,
    }
    annotations = {own.RESOURCE: origin}
    for side, port in (("in", inst.in_port), ("out", inst.out_port)):
        config = {
            "cniVersion": "0.4.0",
            "name": nads[side],
            "type": "ovs",
            "bridge": "br-int",
            "args": {"cni": {"ovnPort": port}},
        }
        out.kube(
            "NetworkAttachmentDefinition",
            namespace,
            nads[side],
            origin,
            node,
            {
                "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
                "spec": {"config": json.dumps(config, sort_keys=True)},
            },
        )
    vm_annotations = {
        **annotations,
        "osc.io/ports": f"in={inst.in_port},out={inst.out_port}",
    }
    out.kube(
        "VirtualMachine",
        namespace,
        naming.vm_name(vnf_name, node),
        origin,
        node,
        {
            "metadata": {"labels": dict(labels), "annotations": vm_annotations},
            "spec": {
                "runStrategy": "Always",
                "template": {
                    "metadata": {"labels": {own.VNF_LABEL: vnf_name, own.NODE_LABEL: node}},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        "domain": {
                            "cpu": {"cores": spec.cpu},
                            "resources": {"requests": {"memory": spec.memory}},
                            "devices": {
                                "disks": [{"name": "containerdisk", "disk": {"bus": "virtio"}}],
                                "interfaces": [
                                    {"name": "default", "masquerade": {}},
                                    {"name": "data-in", "bridge": {}, "macAddress": inst.mac_in},
                                    {
                                        "name": "data-out",
                                        "bridge": {},
                                        "macAddress": inst.mac_out,
                                    },
                                ],
                            },
                        },
                        "networks": [
                            {"name": "default", "pod": {}},
                            {"name": "data-in", "multus": {"networkName": nads["in"]}},
                            {"name": "data-out", "multus": {"networkName": nads["out"]}},
                        ],
                        "volumes": [
                            {"name": "containerdisk", "containerDisk": {"image": spec.image}}
                        ],
                    },
                },
            },
        },
    )


def members_by_group_and_node(
    desired: Desired, observed: Observed, only_switches: Collection[str] | None = None
) -> Members:
    """Member pods per group and node, keeping only pods OVN knows as the same pod.

    A pod counts when its LSP ``<namespace>_<pod>`` exists and, if the LSP records the pod UID
    (``options:iface-id-ver``), that UID matches: a recreated pod with the same name is a new pod.
    The node is the LSP's switch (where the steering rows must sit). With ``only_switches``,
    only the members on those switches are computed (the incremental planner's per-node path):
    membership on one node depends only on the pods whose LSP sits on that node's switch.
    """
    bound = {b.spec.securityGroup for b in desired.bindings.values()}
    if only_switches is None:
        ports = {p.name: p for p in observed.pod_ports}
        index = LabelIndex(observed.pods)
    else:
        wanted = set(only_switches)
        ports = {p.name: p for p in observed.pod_ports if p.switch in wanted}
        index = LabelIndex(p for p in observed.pods if p.lsp_name in ports)
    result: Members = {}
    for group_name in sorted(bound):
        group = desired.security_groups.get(group_name)
        if group is None:
            continue
        by_node: dict[str, list[PodPort]] = defaultdict(list)
        for pod in index.members(group.spec.label_pairs(), group.spec.namespaces):
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
    out: TargetBuilder,
) -> None:
    for group, bindings in bindings_by_group(desired).items():
        covered: dict[str, str] = {}
        for binding in bindings:
            name = binding.metadata.name
            for direction in directions(binding.spec.redirection):
                if direction in covered:
                    out.warnings.append(
                        f"Binding {name} is shadowed for {direction} traffic by Binding "
                        f"{covered[direction]} (lower order, takes all IP traffic): a packet "
                        "is steered by the first matching binding only"
                    )
                elif common.covers_all(binding.spec.traffic):
                    covered[direction] = name
            vnf_nodes = {n for (v, n) in instances if v == binding.spec.vnf}
            for node, ports in sorted(members.get(group, {}).items()):
                if node not in vnf_nodes:
                    out.warnings.append(
                        f"{len(ports)} pod(s) of SecurityGroup {group} on node {node} are not "
                        f"steered by Binding {name}: VnfDeployment {binding.spec.vnf} does not "
                        "run there"
                    )
    _network_policy_warnings(desired, members, observed, out)


def _network_policy_warnings(
    desired: Desired, members: Members, observed: Observed, out: TargetBuilder
) -> None:
    if not observed.network_policies:
        return
    steered: dict[tuple[str, str], set[Precedence]] = defaultdict(set)
    for group, bindings in bindings_by_group(desired).items():
        for ports in members.get(group, {}).values():
            for port in ports:
                for binding in bindings:
                    steered[(port.namespace, port.pod)].add(binding.spec.precedence)
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
        precedences = set().union(*(steered[(p.namespace, p.name)] for p in hit))
        effects = []
        if Precedence.AFTER_NETWORK_POLICY in precedences:
            effects.append("flows it allows are not steered (precedence after-network-policy)")
        if Precedence.BEFORE_NETWORK_POLICY in precedences:
            effects.append("its denies do not apply to steered flows (before-network-policy)")
        out.warnings.append(
            f"NetworkPolicy {policy.namespace}/{policy.name} selects {len(hit)} steered pod(s): "
            + "; ".join(effects)
        )
