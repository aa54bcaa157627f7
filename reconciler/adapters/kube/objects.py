"""The Kubernetes kinds the adapter knows, and the pure shaping of their JSON: the fields we
manage, the merge patch that sets them, and a Pod as plain :mod:`reconciler.core.model.observed`
data. Shared by the live client and the informer cache so both answer with the same values."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reconciler.core.model.observed import KubeObject, LauncherPod, NetworkPolicy, Node, Pod
from reconciler.core.model.ownership import PREFIX, ROLLOUT_PREFIX


@dataclass(frozen=True, slots=True)
class Kind:
    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        return base


KINDS: dict[str, Kind] = {
    "Pod": Kind("", "v1", "pods"),
    "Node": Kind("", "v1", "nodes", namespaced=False),
    "Namespace": Kind("", "v1", "namespaces", namespaced=False),
    "VirtualMachine": Kind("kubevirt.io", "v1", "virtualmachines"),
    "NetworkAttachmentDefinition": Kind("k8s.cni.cncf.io", "v1", "network-attachment-definitions"),
    "NetworkPolicy": Kind("networking.k8s.io", "v1", "networkpolicies"),
    "Lease": Kind("coordination.k8s.io", "v1", "leases"),
}
"""Kinds the adapter reads or writes, by ``kind``; one line per kind."""

VM_SUBRESOURCES = "subresources.kubevirt.io/v1"
"""KubeVirt's aggregated API of VM actions (``restart``, ``start``, ``stop``)."""


WATCHABLE = frozenset(
    {"Pod", "VirtualMachine", "NetworkAttachmentDefinition", "Node", "NetworkPolicy"}
)
"""Kinds :meth:`KubeCluster.watch` serves (what the loop and ``adapters.kube_cache`` follow)."""


def merge_patch_for(live: Any, target: Any) -> Any:
    """The RFC 7386 merge patch that turns ``live`` into ``target`` (``None`` removes a key).

    Lists and scalars are replaced whole, which is what merge patch can express.
    """
    if not isinstance(live, dict) or not isinstance(target, dict):
        return target
    patch: dict[str, Any] = {}
    for key in live.keys() - target.keys():
        patch[key] = None
    for key, value in target.items():
        if key not in live:
            patch[key] = value
        elif live[key] != value:
            patch[key] = merge_patch_for(live[key], value)
    return patch


def managed_body(obj: dict[str, Any]) -> dict[str, Any]:
    """The fields the reconciler manages: labels, ``osc.io/*`` annotations and spec."""
    meta = obj.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(PREFIX)}
    return {
        "metadata": {"labels": dict(meta.get("labels") or {}), "annotations": annotations},
        "spec": obj.get("spec") or {},
    }


def check_writable_kind(kind: str) -> None:
    if kind not in ("VirtualMachine", "NetworkAttachmentDefinition", "Pod", "Lease"):
        raise ValueError(f"unsupported kind {kind!r}")


def pod_from_object(obj: dict[str, Any]) -> Pod:
    meta = obj["metadata"]
    return Pod(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta.get("uid", ""),
        node=(obj.get("spec") or {}).get("nodeName") or None,
        labels=dict(meta.get("labels") or {}),
    )


def node_from_object(obj: dict[str, Any]) -> Node:
    meta = obj["metadata"]
    return Node(name=meta["name"], labels=dict(meta.get("labels") or {}), subnets=node_subnets(obj))


NODE_SUBNETS = "k8s.ovn.org/node-subnets"
"""OVN-Kubernetes' annotation of a node's pod subnets per network, JSON: ``{"default":
["10.244.1.0/24"]}`` (older releases: ``{"default": "10.244.1.0/24"}``)."""


def node_subnets(obj: dict[str, Any]) -> tuple[str, ...]:
    """The node's default-network subnets from :data:`NODE_SUBNETS` as written (a list, or one
    string: OVN-Kubernetes' reader takes both), empty when it has none or the annotation is
    unreadable. Not validated here: the core parses whatever it uses."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(NODE_SUBNETS)
    if not raw:
        return ()
    try:
        default = json.loads(raw).get("default")
    except (ValueError, AttributeError):
        return ()
    subnets = [default] if isinstance(default, str) else default
    if not isinstance(subnets, list):
        return ()
    return tuple(s for s in subnets if isinstance(s, str) and s)


def node_subnet(obj: dict[str, Any]) -> str | None:
    """The node's default-network subnet from :data:`NODE_SUBNETS` (the first IPv4 one when it
    has several), or ``None`` when it has none or the annotation is unreadable."""
    subnets = node_subnets(obj)
    return next((s for s in subnets if ":" not in s), subnets[0] if subnets else None)


def network_policy_from_object(obj: dict[str, Any]) -> NetworkPolicy:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    types = [t for t in spec.get("policyTypes") or () if t in ("Ingress", "Egress")]
    if not spec.get("policyTypes"):  # Kubernetes' defaulting of an omitted policyTypes
        types = ["Ingress", *(["Egress"] if spec.get("egress") else [])]
    return NetworkPolicy(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        pod_selector=dict(spec.get("podSelector") or {}),
        policy_types=tuple(types),
    )


def owned_object(kind: str, obj: dict[str, Any]) -> KubeObject:
    """An object we own, reduced to the fields we manage (what the diff compares), the
    rollout's state annotations and, for a VirtualMachine, what its status says."""
    meta = obj["metadata"]
    annotations = meta.get("annotations") or {}
    state = {k: str(v) for k, v in annotations.items() if k.startswith(ROLLOUT_PREFIX)}
    status: dict[str, Any] = {}
    if kind == "VirtualMachine":
        live = obj.get("status") or {}
        keys = ("printableStatus", "ready", "desiredGeneration", "observedGeneration")
        status = {k: live[k] for k in keys if k in live}
        if live:
            status["generation"] = meta.get("generation")
            status["stateChangeRequests"] = len(live.get("stateChangeRequests") or ())
    return KubeObject(
        kind=kind,
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        body=managed_body(obj),
        state=state,
        status=status,
    )


LAUNCHER_SELECTOR = "kubevirt.io=virt-launcher"
"""The label KubeVirt gives every virt-launcher pod (``pkg/virt-controller/services/
template.go`` ``podLabels``: ``kubevirt.io: virt-launcher``, ``kubevirt.io/created-by: <VMI
uid>``)."""
NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"


def launcher_pod_from_object(obj: dict[str, Any]) -> LauncherPod | None:
    """A virt-launcher pod as the binder needs it; ``None`` for a pod no VMI owns."""
    meta = obj.get("metadata") or {}
    owner = next(
        (r for r in meta.get("ownerReferences") or []
         if r.get("kind") == "VirtualMachineInstance" and r.get("controller")),
        None,
    )  # fmt: skip
    if owner is None:
        return None
    status = (meta.get("annotations") or {}).get(NETWORK_STATUS)
    phase = (obj.get("status") or {}).get("phase")
    return LauncherPod(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta.get("uid", ""),
        node=(obj.get("spec") or {}).get("nodeName") or None,
        vmi=str(owner.get("name", "")),
        network_status=status if isinstance(status, str) else None,
        terminating=bool(meta.get("deletionTimestamp")) or phase in ("Succeeded", "Failed"),
        running=phase == "Running",
    )
