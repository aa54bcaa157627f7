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

__all__ = ["nad_names", "network_attachment", "virtual_machine"]


def nad_names(inst: VnfInstance) -> dict[str, str]:
    """The instance's NetworkAttachmentDefinition per side (``in``, ``out``)."""
    prefix = inst.vnf.spec.dataNetwork or inst.vnf.metadata.name
    return {side: naming.nad_name(prefix, inst.node, side, inst.slot) for side in ("in", "out")}


def _labels(inst: VnfInstance, instance: str) -> dict[str, str]:
    return {
        own.MANAGED_BY_LABEL: own.MANAGED_BY_VALUE,
        own.OWNER: instance,
        own.VNF_LABEL: inst.vnf.metadata.name,
        own.NODE_LABEL: inst.node,
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
            "annotations": {own.RESOURCE: f"VnfDeployment/{inst.vnf.metadata.name}"},
        },
        "spec": {"config": json.dumps(config, sort_keys=True)},
    }


def virtual_machine(inst: VnfInstance, instance: str, nads: dict[str, str]) -> dict[str, Any]:
    """The VM of the instance, pinned to its node, its two data NICs on ``nads``."""
    spec, vnf_name, node = inst.vnf.spec, inst.vnf.metadata.name, inst.node
    annotations = {
        own.RESOURCE: f"VnfDeployment/{vnf_name}",
        "osc.io/ports": f"in={inst.in_port},out={inst.out_port}",
    }
    interfaces = [
        {"name": "default", "masquerade": {}},
        {"name": "data-in", "bridge": {}, "macAddress": inst.mac_in},
        {"name": "data-out", "bridge": {}, "macAddress": inst.mac_out},
    ]
    template = {
        "metadata": {"labels": {own.VNF_LABEL: vnf_name, own.NODE_LABEL: node}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "domain": {
                "cpu": {"cores": spec.cpu},
                "resources": {"requests": {"memory": spec.memory}},
                "devices": {
                    "disks": [{"name": "containerdisk", "disk": {"bus": "virtio"}}],
                    "interfaces": interfaces,
                },
            },
            "networks": [
                {"name": "default", "pod": {}},
                {"name": "data-in", "multus": {"networkName": nads["in"]}},
                {"name": "data-out", "multus": {"networkName": nads["out"]}},
            ],
            "volumes": [{"name": "containerdisk", "containerDisk": {"image": spec.image}}],
        },
    }
    return {
        "metadata": {"labels": _labels(inst, instance), "annotations": annotations},
        "spec": {"runStrategy": "Always", "template": template},
    }
