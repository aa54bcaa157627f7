"""What ``osc-gitops sandbox up`` plays while it runs: OVN-Kubernetes and the kubelets.

A user of the sandbox creates, labels and deletes pods with ``kubectl``; in a cluster,
OVN-Kubernetes then gives a new pod an address and its logical switch port, and the node's
kubelet starts it and reports it. :class:`ClusterPlayer` does the same for the session:

- OVN-Kubernetes: a pod without ``spec.nodeName`` is placed on a node (in turn), gets an address
  (the ``k8s.ovn.org/pod-networks`` annotation) and its LSP ``<namespace>_<pod>``; a deleted pod
  (or one recreated under the same name) loses its LSP;
- the kubelets: every node reports ``Ready``; every pod with a port is ``Running`` with its IP and
  ready containers (what ``kubectl get pods`` shows as ``1/1 Running``);
- with a data path (``sandbox up --datapath``), every such pod is also plugged: a network
  namespace on the node's chassis, bound by ``ovn-controller``; a deleted pod is unplugged.
  The VNF guests follow the VirtualMachines on their own
  (:mod:`osc_gitops_sandbox.datapath.guests`); KubeVirt's virt-launcher pods are left alone
  (their default network is not played). The player only makes a guest stop forwarding while
  its VM is annotated ``sandbox.osc.io/forwarding: "false"`` (and resume when the annotation
  goes), as the sandbox plays it without a data path, and keeps :data:`GUESTS_FILE` (which
  namespace is which guest's: what ``osc-gitops sandbox exec`` reads beside the session's
  ``pods.json``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["GUESTS_FILE", "KUBELET_VERSION", "ClusterPlayer"]

GUESTS_FILE = "guests.json"
"""In the data path's folder: ``{"ns/vm": netns}`` of every running VNF guest (``sandbox exec``
reads it; the pods' are in the session's ``pods.json``)."""

KUBELET_VERSION = "v1.32.0-osc-sandbox"
"""What the played kubelets report (the emulator's ``/version`` says the same)."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ClusterPlayer:
    """Call :meth:`sync` after start and then periodically (see the module docstring).
    ``datapath``: a started :class:`~osc_gitops_sandbox.datapath.network.Datapath` on the cluster,
    or ``None``."""

    def __init__(self, cluster: Any, datapath: Any = None) -> None:
        from osc_gitops_sandbox.ovn.cluster import PodAddresses, node_subnet

        self.cluster = cluster
        self.datapath = datapath
        self.addresses = PodAddresses()
        self.nodes: list[str] = []
        self.node_ips: dict[str, str] = {}
        for node in cluster.kube.objects("Node"):
            name = node["metadata"]["name"]
            self.addresses.add_node(name, node_subnet(node))
            self.nodes.append(name)
            for address in (node.get("status") or {}).get("addresses") or []:
                if address.get("type") == "InternalIP":
                    self.node_ips[name] = address["address"]
        self.known: dict[tuple[str, str], str] = {}
        """Pods seen (namespace, name) -> uid."""
        self.wired: set[tuple[str, str]] = set()
        """Pods with an LSP (on a node of the sandbox)."""
        self._turn = 0
        self._forwarding: dict[str, tuple[str, bool]] = {}
        """VM (``ns/name``) -> (the guest's VMI uid, whether the player stopped it)."""
        self._netns: dict[str, str] | None = None
        for pod in cluster.kube.objects("Pod"):
            self._adopt(pod)
        self._report_nodes()

    # -- the kubelets ------------------------------------------------------------------------
    def _report_nodes(self) -> None:
        """Every node's kubelet posts ``Ready`` and its version (its heartbeat)."""
        from osc_gitops_sandbox.ovn.cluster import api_request

        for name in self.nodes:
            status = {
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "kubelet is posting ready status (osc-gitops sandbox)",
                    "lastHeartbeatTime": _now(), "lastTransitionTime": _now(),
                }],
                "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "operatingSystem": "linux",
                             "architecture": "amd64"},
            }  # fmt: skip
            api_request(self.cluster.kube, "PATCH", f"/api/v1/nodes/{name}/status",
                        {"status": status})  # fmt: skip

    def _report_pod(self, pod: Mapping[str, Any], ip: str) -> None:
        """The pod's kubelet: ``Running``, its IPs, every container started and ready."""
        from osc_gitops_sandbox.ovn.cluster import api_request

        meta, spec = pod["metadata"], pod.get("spec") or {}
        current = pod.get("status") or {}
        containers = [
            {"name": c.get("name", ""), "image": c.get("image", ""), "ready": True,
             "started": True, "restartCount": 0, "state": {"running": {"startedAt": _now()}}}
            for c in spec.get("containers") or []
        ]  # fmt: skip
        if (
            current.get("phase") == "Running"
            and current.get("podIP") == ip
            and [c.get("name") for c in current.get("containerStatuses") or []]
            == [c["name"] for c in containers]
        ):
            return
        status: dict[str, Any] = {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "containerStatuses": containers, "startTime": current.get("startTime") or _now(),
            "conditions": [{"type": t, "status": "True"} for t in (
                "PodScheduled", "Initialized", "ContainersReady", "Ready")],
        }  # fmt: skip
        host_ip = self.node_ips.get(spec.get("nodeName", ""))
        if host_ip:
            status["hostIP"] = host_ip
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        with contextlib.suppress(RuntimeError):  # deleted meanwhile
            api_request(self.cluster.kube, "PATCH", path, {"status": status})

    # -- OVN-Kubernetes ----------------------------------------------------------------------
    def _adopt(self, pod: Mapping[str, Any]) -> bool:
        """A pod that already has its address and port (seeded): remember and report it."""
        from osc_gitops_sandbox.ovn.cluster import POD_NETWORKS, seed_pod_of

        meta = pod["metadata"]
        if POD_NETWORKS not in (meta.get("annotations") or {}) or not pod["spec"].get("nodeName"):
            return False
        seeded = seed_pod_of(pod)
        self.addresses.observe(seeded)
        ident = (meta["namespace"], meta["name"])
        self.known[ident] = meta["uid"]
        self.wired.add(ident)
        self._report_pod(pod, seeded.ip)
        return True

    def plug_all(self) -> None:
        """Plug every wired pod into the data path (at start)."""
        if self.datapath is not None and self.wired:
            self.datapath.plug_pods(sorted(self.wired))

    def sync(self) -> None:
        from osc_gitops_sandbox.ovn.cluster import (
            api_request,
            insert_pod_lsps,
            pod_object,
        )
        from osc_gitops_sandbox.ovn.stack import SeedPod

        current: dict[tuple[str, str], str] = {}
        for pod in self.cluster.kube.objects("Pod"):
            meta = pod["metadata"]
            ident = (meta["namespace"], meta["name"])
            current[ident] = meta["uid"]
            if self.known.get(ident) == meta["uid"]:
                continue
            if ident in self.known:  # recreated under the same name: a new pod, a new port
                self._unwire(ident)
            if (meta.get("labels") or {}).get("kubevirt.io") == "virt-launcher":
                self.known[ident] = meta["uid"]  # KubeVirt's: its default network is not played
                continue
            node = pod["spec"].get("nodeName") or self.nodes[self._turn % len(self.nodes)]
            self._turn += 1
            if node not in self.nodes:
                self.known[ident] = meta["uid"]  # not a node of the sandbox: no port
                continue
            mac, ip, prefixlen = self.addresses.allocate(node)
            placed = pod_object(ident[0], ident[1], node, meta.get("labels"), mac, ip, prefixlen)
            patch = {"metadata": {"annotations": placed["metadata"]["annotations"]},
                     "spec": {"nodeName": node}}  # fmt: skip
            path = f"/api/v1/namespaces/{ident[0]}/pods/{ident[1]}"
            try:
                updated = api_request(self.cluster.kube, "PATCH", path, patch)
            except RuntimeError:
                continue  # deleted meanwhile
            insert_pod_lsps(self.cluster.nb_remote, [SeedPod(*ident, meta["uid"], node, mac, ip)])
            self.known[ident] = meta["uid"]
            self.wired.add(ident)
            if self.datapath is not None:
                self.datapath.plug_pods([ident])
            self._report_pod(updated, ip)
        for ident in set(self.known) - set(current):
            self._unwire(ident)
            del self.known[ident]
        if self.datapath is not None:
            self._follow_forwarding()
            self._write_netns_map()

    def _follow_forwarding(self) -> None:
        """A guest stops forwarding while its VM is annotated ``sandbox.osc.io/forwarding:
        "false"``, and forwards again when the annotation goes (a new guest of a restarted VM
        too). A guest never stopped here is left alone (it may still be booting)."""
        from osc_gitops_sandbox.ovn.vnf_health import FORWARDING_ANNOTATION

        annotations = {
            f"{vm['metadata']['namespace']}/{vm['metadata']['name']}":
                vm["metadata"].get("annotations") or {}
            for vm in self.cluster.kube.objects("VirtualMachine")
        }  # fmt: skip
        vnfs = self.datapath.vnfs
        for key, vnf in vnfs.items():
            off = annotations.get(key, {}).get(FORWARDING_ANNOTATION) == "false"
            seen = self._forwarding.get(key)
            was_off = seen is not None and seen[0] == vnf.vmi_uid and seen[1]
            if off != was_off:
                self.datapath.set_forwarding(vnf, not off)
                print(f"VNF guest {key}: forwarding {'off' if off else 'on'} "
                      f"({FORWARDING_ANNOTATION})", flush=True)  # fmt: skip
            self._forwarding[key] = (vnf.vmi_uid, off)
        self._forwarding = {k: v for k, v in self._forwarding.items() if k in vnfs}

    def _write_netns_map(self) -> None:
        """Which network namespace is which VNF guest's (when it changed)."""
        import json
        import os
        from pathlib import Path

        guests = {key: vnf.endpoint.netns for key, vnf in sorted(self.datapath.vnfs.items())}
        if guests == self._netns:
            return
        path = Path(self.datapath.workdir) / GUESTS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(guests, indent=1))
        os.replace(tmp, path)
        self._netns = guests

    def _unwire(self, ident: tuple[str, str]) -> None:
        from osc_gitops_sandbox.ovn.cluster import delete_lsp

        if self.datapath is not None:
            self.datapath.unplug_pod(*ident)
        delete_lsp(self.cluster.nb_remote, f"{ident[0]}_{ident[1]}")
        self.wired.discard(ident)
