"""Scenario generator: N pods over M nodes, S security groups, B bindings, V VNFs.

Why it is built this way: the benchmark must be reproducible byte for byte (same names, labels,
UIDs, addresses on every run) and cheap to generate at 50,000 pods, so everything is derived
from the pod index with modular arithmetic and written as plain dicts/strings, never through the
model classes (the manifests are then loaded by the product's own loader, like a user's repo).

Label design (documented in ``docs/benchmarks.md``): every pod carries three keys,
``app`` (1000 values), ``team`` (200 values) and ``tier`` (100 values). Group ``g`` selects
1-3 of them (``1 + g % 3`` labels, OR semantics), so at 10,000 pods a group has ~10-150 members
and a pod belongs to ~1.5 groups on average; memberships grow linearly with the pod count.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAMESPACES = 20
APP_VALUES = 1000
TEAM_VALUES = 200
TIER_VALUES = 100
VNF_NAMES = ("firewall", "ips", "dpi")
VNF_NAMESPACE = "osc-vnfs"
BOTH_EVERY = 20
"""Every 20th binding is ``redirection: both`` (the rest ``exit-lport``): the router-policy
backend's entry-lport match lists the group's port groups of *every* node, so its size grows
with nodes x nodes; a few such bindings keep that path exercised without dominating."""


@dataclass(frozen=True)
class Scale:
    """The knobs of one scenario."""

    pods: int
    nodes: int = 100
    groups: int = 200
    bindings: int = 200
    vnfs: int = 3
    both_every: int = BOTH_EVERY
    """Every ``both_every``-th binding is ``redirection: both`` (0: none, all ``exit-lport``)."""

    @property
    def label(self) -> str:
        return f"{self.pods // 1000}k" if self.pods >= 1000 else str(self.pods)


def node_name(i: int) -> str:
    return f"node-{i:03d}"


def node_subnet(i: int) -> str:
    """A /22 per node (1021 hosts): room for 500 pods per node at 50k pods over 100 nodes."""
    base = int(ipaddress.ip_address("10.64.0.0")) + i * 1024
    return f"{ipaddress.ip_address(base)}/22"


def pod_labels(n: int) -> dict[str, str]:
    return {
        "app": f"app-{n % APP_VALUES}",
        "team": f"team-{(n // 7) % TEAM_VALUES}",
        "tier": f"tier-{(n // 3) % TIER_VALUES}",
    }


def group_labels(g: int) -> list[str]:
    labels = [f"app=app-{g % APP_VALUES}"]
    if g % 3 >= 1:
        labels.append(f"team=team-{g % TEAM_VALUES}")
    if g % 3 == 2:
        labels.append(f"tier=tier-{g % TIER_VALUES}")
    return labels


Objects = list[dict[str, Any]]


def kube_objects(scale: Scale) -> tuple[Objects, Objects, Objects]:
    """(namespaces, nodes, pods) as Kubernetes objects with OVN-Kubernetes' annotations.

    Pods are spread round-robin over the nodes; pod ``n`` on node ``n % nodes`` gets host
    address ``3 + n // nodes`` of the node subnet (``.1`` is the router, ``.2`` spare), the
    same scheme as ``osc_gitops_sandbox.ovn.stack.make_pods``.
    """
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{j:02d}"}}
        for j in range(NAMESPACES)
    ] + [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": VNF_NAMESPACE}}]
    nodes = []
    nets = []
    for i in range(scale.nodes):
        subnet = node_subnet(i)
        nets.append(ipaddress.ip_network(subnet))
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node_name(i),
                    "labels": {"kubernetes.io/hostname": node_name(i)},
                    "annotations": {
                        "k8s.ovn.org/node-subnets": json.dumps({"default": [subnet]}),
                    },
                },
                "spec": {"podCIDR": subnet},
            }
        )
    pods = []
    for n in range(scale.pods):
        i = n % scale.nodes
        net = nets[i]
        ip = net.network_address + 3 + n // scale.nodes
        mac = "0a:58:" + ":".join(f"{b:02x}" for b in ip.packed)
        networks = {
            "default": {"ip_addresses": [f"{ip}/{net.prefixlen}"], "mac_address": mac},
        }
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"pod-{n:06d}",
                    "namespace": f"ns-{n % NAMESPACES:02d}",
                    "uid": f"00000000-0000-4000-8000-{n:012d}",
                    "labels": pod_labels(n),
                    "annotations": {"k8s.ovn.org/pod-networks": json.dumps(networks)},
                },
                "spec": {
                    "nodeName": node_name(i),
                    "containers": [{"name": "main", "image": "app:1"}],
                },
                "status": {"phase": "Running", "podIP": str(ip)},
            }
        )
    return namespaces, nodes, pods


def manifests(scale: Scale) -> str:
    """The whole policy repository as one multi-document YAML text."""
    docs: list[str] = []
    for v in range(scale.vnfs):
        name = VNF_NAMES[v] if v < len(VNF_NAMES) else f"vnf{v}"
        docs.append(
            "apiVersion: osc.io/v1alpha1\nkind: VnfDeployment\n"
            f"metadata:\n  name: {name}\n"
            f"spec:\n  namespace: {VNF_NAMESPACE}\n  image: quay.io/example/{name}:1.0\n"
            "  cpu: 1\n  memory: 1Gi\n"
        )
    for g in range(scale.groups):
        labels = "".join(f"    - {label}\n" for label in group_labels(g))
        docs.append(
            "apiVersion: osc.io/v1alpha1\nkind: SecurityGroup\n"
            f"metadata:\n  name: sg-{g:03d}\nspec:\n  labels:\n{labels}"
        )
    for b in range(scale.bindings):
        g = b % scale.groups
        v = b % scale.vnfs
        vnf = VNF_NAMES[v] if v < len(VNF_NAMES) else f"vnf{v}"
        both = scale.both_every and b % scale.both_every == 0
        redirection = "both" if both else "exit-lport"
        docs.append(
            "apiVersion: osc.io/v1alpha1\nkind: Binding\n"
            f"metadata:\n  name: bind-{b:03d}\n"
            f"spec:\n  securityGroup: sg-{g:03d}\n  vnf: {vnf}\n"
            f"  order: {10 + b // scale.groups}\n  redirection: {redirection}\n"
            "  failurePolicy: fail-close\n"
        )
    return "---\n".join(docs)


def write_manifests(scale: Scale, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "policies.yaml"
    path.write_text(manifests(scale))
    return path


def unlabelled_pod(scale: Scale, k: int) -> tuple[str, str, dict[str, str]]:
    """The ``k``-th pod for the label-latency test and the label that makes it join a group.

    It gets ``bench-join=sg-XXX``-free treatment: we set its ``app`` label to the value group
    ``k % groups`` selects, so it joins exactly that group's Port_Group on its node.
    """
    n = (k * 7919) % scale.pods
    g = k % scale.groups
    return f"ns-{n % NAMESPACES:02d}", f"pod-{n:06d}", {"app": f"app-{g % APP_VALUES}"}
