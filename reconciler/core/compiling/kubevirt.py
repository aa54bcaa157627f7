"""A VNF instance as KubeVirt objects: its VirtualMachine and the two
NetworkAttachmentDefinitions that wire its data NICs to its OVN ports (the managed body of each,
``reconciler.core.model.target``).

The VM's ``spec.template`` is what a rolling update compares
(``reconciler.core.transitions.rollout``: a template change needs a restart). Pure, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.steering.base import VnfInstance

__all__ = [
    "EVICTION_STRATEGY",
    "nad_names",
    "network_attachment",
    "pinned_to",
    "virtual_machine",
]

EVICTION_STRATEGY = "None"
"""``spec.template.spec.evictionStrategy`` of every VNF VM, chosen on purpose: KubeVirt's
``None`` lets a drain evict it (``LiveMigrate`` denies the eviction of a VM that cannot migrate,
and a node-pinned VNF never can, so ``kubectl drain`` would hang; ``External`` blocks the drain
until someone else deletes the VMI). What a drain then does: docs/operations.md, "Node drains"."""


def pinned_to(node: str) -> dict[str, Any]:
    """Node affinity on the node's ``metadata.name``, as a DaemonSet pins its pods: the
    ``kubernetes.io/hostname`` label is not the node name everywhere (AWS, hostname
    overrides)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term]}}
    }  # fmt: skip


def nad_names(inst: VnfInstance) -> dict[str, str]:
    """The instance's NetworkAttachmentDefinition per side (``in``, ``out``)."""
    prefix = inst.vnf.spec.dataNetwork or inst.vnf.metadata.name
    return {side: naming.nad_name(prefix, inst.node, side, inst.slot) for side in ("in", "out")}


def _labels(inst: VnfInstance, instance: str) -> dict[str, str]:
    return {
        own.MANAGED_BY_LABEL: own.MANAGED_BY_VALUE,
        own.OWNER: instance,
        own.VNF_LABEL: inst.vnf.metadata.name,
        own.NODE_LABEL: own.node_label_value(inst.node),  # a node name may be too long for one
    }


def network_attachment(inst: VnfInstance, instance: str, name: str, port: str) -> dict[str, Any]:
    """The NAD ``name`` of ``ovs`` type on ``br-int`` that names the OVN port ``port``."""
    config = {
        "cniVersion": "0.4.0",
        "name": name,
        "type": "ovs",
        "bridge": "br-int",
        "args": {"cni": {"ovnPort": port}},
    }
    return {
        "metadata": {
            "labels": _labels(inst, instance),
            "annotations": {
                own.RESOURCE: f"VnfDeployment/{inst.vnf.metadata.name}",
                **own.node_annotations(inst.node),
            },
        },
        "spec": {"config": json.dumps(config, sort_keys=True)},
    }


def virtual_machine(inst: VnfInstance, instance: str, nads: dict[str, str]) -> dict[str, Any]:
    """The VM of the instance, pinned to its node, its two data NICs on ``nads``."""
    spec, vnf_name, node = inst.vnf.spec, inst.vnf.metadata.name, inst.node
    annotations = {
        own.RESOURCE: f"VnfDeployment/{vnf_name}",
        **own.node_annotations(node),
        "osc.io/ports": f"in={inst.in_port},out={inst.out_port}",
    }
    volumes: dict[str, dict[str, Any]] = {"containerdisk": {"containerDisk": {"image": spec.image}}}
    if spec.cloudInitUserData is not None:
        volumes["cloudinitdisk"] = {"cloudInitNoCloud": {"userData": spec.cloudInitUserData}}
    interfaces = [
        {"name": "default", "masquerade": {}},
        {"name": "data-in", "bridge": {}, "macAddress": inst.mac_in},
        {"name": "data-out", "bridge": {}, "macAddress": inst.mac_out},
    ]
    template = {
        "metadata": {
            "labels": {own.VNF_LABEL: vnf_name, own.NODE_LABEL: own.node_label_value(node)}
        },
        "spec": {
            "affinity": pinned_to(node),
            # a drain evicts it like any pod (EVICTION_STRATEGY)
            "evictionStrategy": EVICTION_STRATEGY,
            "domain": {
                "cpu": {"cores": spec.cpu},
                "resources": {"requests": {"memory": spec.memory}},
                "devices": {
                    "disks": [{"name": vol, "disk": {"bus": "virtio"}} for vol in volumes],
                    "interfaces": interfaces,
                },
            },
            "networks": [
                {"name": "default", "pod": {}},
                {"name": "data-in", "multus": {"networkName": nads["in"]}},
                {"name": "data-out", "multus": {"networkName": nads["out"]}},
            ],
            "volumes": [{"name": vol, **source} for vol, source in volumes.items()],
        },
    }
    return {
        "metadata": {"labels": _labels(inst, instance), "annotations": annotations},
        "spec": {"runStrategy": "Always", "template": template},
    }
