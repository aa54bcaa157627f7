"""Small builders for pure-core tests: manifests and observed snapshots as plain data."""

from __future__ import annotations

from typing import Any

from reconciler.core.model.desired import Binding, Desired, SecurityGroup, VnfDeployment
from reconciler.core.model.observed import Node, Observed, OvnCapabilities, Pod, PodPort, Switch


def sg(name: str, *labels: str, namespaces: list[str] | None = None) -> SecurityGroup:
    spec: dict[str, Any] = {"labels": list(labels)}
    if namespaces is not None:
        spec["namespaces"] = namespaces
    return SecurityGroup.model_validate({"metadata": {"name": name}, "spec": spec})


def vnf(name: str, namespace: str = "security", **spec: Any) -> VnfDeployment:
    return VnfDeployment.model_validate(
        {
            "metadata": {"name": name},
            "spec": {"namespace": namespace, "image": "quay.io/osc/fw:1.0", **spec},
        }
    )


def binding(name: str, group: str, vnf_name: str, order: int, **spec: Any) -> Binding:
    return Binding.model_validate(
        {
            "metadata": {"name": name},
            "spec": {"securityGroup": group, "vnf": vnf_name, "order": order, **spec},
        }
    )


def desired(*manifests: Any) -> Desired:
    return Desired(
        security_groups={m.metadata.name: m for m in manifests if isinstance(m, SecurityGroup)},
        vnfs={m.metadata.name: m for m in manifests if isinstance(m, VnfDeployment)},
        bindings={m.metadata.name: m for m in manifests if isinstance(m, Binding)},
    )


def cluster(
    pods: list[tuple[str, str, str, dict[str, str]]],
    nodes: tuple[str, ...] = ("node-1", "node-2"),
    nf: bool = True,
    node_labels: dict[str, dict[str, str]] | None = None,
    **extra: Any,
) -> Observed:
    """pods: (namespace, name, node, labels); every pod gets an LSP on its node's switch."""
    node_labels = node_labels or {}
    pod_objs = []
    ports = []
    for i, (ns, name, node, labels) in enumerate(pods):
        uid = f"uid-{ns}-{name}"
        pod_objs.append(Pod(ns, name, uid, node, labels))
        ip = f"10.244.{nodes.index(node) + 1}.{i + 5}"
        ports.append(PodPort(f"{ns}_{name}", node, ns, name, uid, f"0a:58:00:00:00:{i:02x}", (ip,)))
    return Observed(
        pods=tuple(pod_objs),
        nodes=tuple(Node(n, node_labels.get(n, {})) for n in nodes),
        pod_ports=tuple(ports),
        switches=tuple(Switch(n, f"10.244.{i + 1}.0/24") for i, n in enumerate(nodes)),
        routers=("ovn_cluster_router",),
        capabilities=OvnCapabilities("7.18.0" if nf else "7.0.0", nf),
        **extra,
    )
