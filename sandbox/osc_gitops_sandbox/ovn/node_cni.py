"""A node's CNI for KubeVirt's virt-launcher pods, without a data path: Multus and ovs-cni,
played against a node's Open_vSwitch database alone.

What the data path's virt-handler does with real veths (:mod:`osc_gitops_sandbox.datapath.
guests`), this does with database rows only, so the node binder's tests and benchmark need no
root, namespaces or ovs-vswitchd: for each virt-launcher pod on the node whose VMI is in the
emulator, every Multus network of the VMI gets ovs-cni's port (:func:`osc_gitops_sandbox.ovn.
ovs_cni.cni_add`: the NAD's config as stdin, ``CNI_ARGS`` with the pod's UID and the requested
MAC), then Multus' ``network-status`` goes on the pod and the kubelet reports it ``Running``.
A pod that is gone loses its ports (ovs-cni's DEL) unless :attr:`NodeCni.keep_deleted` (a CNI
DEL that has not run yet).

Attach it to an emulator whose :class:`~osc_gitops_sandbox.kubeapi.kubevirt.KubeVirt` has
``external_handler = True`` (new virt-launcher pods stay ``Pending`` until plugged).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from osc_gitops_sandbox.kubeapi.kubevirt import (
    NETWORK_STATUS,
    multus_networks,
    network_status,
)
from osc_gitops_sandbox.ovn import ovs_cni

__all__ = ["NodeCni", "Plugged"]


@dataclass
class Plugged:
    """One virt-launcher pod's NICs as ovs-cni made them."""

    pod_uid: str
    namespace: str
    name: str
    interfaces: dict[str, str] = field(default_factory=dict)
    """Multus network (``data-in``) -> the OVS interface (host veth) name."""


@dataclass(eq=False)
class NodeCni:
    """Multus + ovs-cni of ``node`` (see the module docstring)."""

    kube: Any
    node: str
    ovs_remote: str
    _: KW_ONLY
    version: str = ovs_cni.RELEASED
    multus_status: bool = True
    """Whether Multus writes ``network-status`` (off: a Multus that never reports)."""
    keep_deleted: bool = False
    """Leave the ports of a deleted pod (a CNI DEL that has not run yet)."""
    mac_of: Callable[[str, str], str] | None = None
    """``(network, requested MAC) -> MAC`` the interface really gets (a mismatch test)."""
    plugged: dict[str, Plugged] = field(default_factory=dict, init=False)
    """By pod UID."""
    _count: itertools.count[int] = field(default_factory=lambda: itertools.count(1), init=False)

    def _launchers(self) -> list[dict[str, Any]]:
        return [
            p for p in self.kube.objects("Pod")
            if (p["metadata"].get("labels") or {}).get("kubevirt.io") == "virt-launcher"
            and (p.get("spec") or {}).get("nodeName") == self.node
        ]  # fmt: skip

    def sync(self) -> list[Plugged]:
        """Plug every new virt-launcher pod of the node, unplug every gone one; returns the
        pods plugged now."""
        pods = {p["metadata"]["uid"]: p for p in self._launchers()}
        for uid in list(self.plugged):
            if uid not in pods and not self.keep_deleted:
                for iface in self.plugged.pop(uid).interfaces.values():
                    ovs_cni.delete_port(self.ovs_remote, iface)
        new = []
        for uid, pod in pods.items():
            if uid not in self.plugged:
                plugged = self.plug(pod)
                if plugged is not None:
                    new.append(plugged)
        return new

    def plug(self, pod: dict[str, Any]) -> Plugged | None:
        """ovs-cni's ADD for every Multus network of the pod's VMI, then Multus' status."""
        meta = pod["metadata"]
        owner = next((r for r in meta.get("ownerReferences") or []
                      if r.get("kind") == "VirtualMachineInstance"), None)  # fmt: skip
        if owner is None:
            return None
        vmi = self.kube.get_object("VirtualMachineInstance", meta["namespace"], owner["name"])
        if vmi is None or vmi["metadata"]["uid"] != owner.get("uid"):
            return None
        plugged = Plugged(meta["uid"], meta["namespace"], meta["name"])
        macs: dict[str, str] = {}
        for net in multus_networks(vmi):
            nad = self.kube.get_object("NetworkAttachmentDefinition", net["namespace"], net["nad"])
            if nad is None:
                continue
            mac = net["mac"]
            if self.mac_of is not None:
                mac = self.mac_of(net["network"], mac)
            macs[net["network"]] = mac
            veth = f"veth{meta['uid'][:6]}{next(self._count)}"[:15]
            ovs_cni.cni_add(
                self.ovs_remote, self.version, config=nad["spec"]["config"],
                cni_args=f"IgnoreUnknown=true;K8S_POD_NAMESPACE={meta['namespace']};"
                f"K8S_POD_NAME={meta['name']};K8S_POD_UID={meta['uid']};MAC={mac}",
                host_iface=veth, cont_iface=net["interface"],
                netns=f"/var/run/netns/cni-{meta['uid'][:8]}",
            )  # fmt: skip
            plugged.interfaces[net["network"]] = veth
        patch: dict[str, Any] = {"status": {"phase": "Running"}}
        if self.multus_status:
            patch["metadata"] = {"annotations": {NETWORK_STATUS: network_status(vmi, macs)}}
        self.kube.patch(self.kube.resource_type("Pod"), meta["namespace"], meta["name"],
                        "application/merge-patch+json", patch)  # fmt: skip
        self.plugged[meta["uid"]] = plugged
        return plugged
