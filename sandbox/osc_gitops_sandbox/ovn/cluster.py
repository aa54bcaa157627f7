"""A whole local "cluster": real OVN processes + the Kubernetes API emulator, seeded consistently.

What OVN-Kubernetes would do in a real cluster is played here by :class:`SandboxCluster`: for
every pod it writes the pod's LSP ``<namespace>_<pod>`` on the node's switch (MAC/IP from the
``k8s.ovn.org/pod-networks`` annotation, ``iface-id-ver`` = pod UID), and it removes the LSP
when the pod goes. The reconciler under test only ever talks to the two servers.

Used by the integration tests, ``osc-gitops demo`` and the benchmarks. The pieces both
topologies share (pod addressing, the pod object, its LSP, talking to the emulator) are public
here; :mod:`osc_gitops_sandbox.ovn.zones` plays the interconnect topology (one NB per node) with
them.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.kubeapi.kubevirt import KubeVirt, restart_path
from osc_gitops_sandbox.kubeapi.server import KubeApiServer
from osc_gitops_sandbox.lifecycle import Lifecycle
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import HOST, SID, Distribution
from osc_gitops_sandbox.ovn.stack import (
    NF_SCHEMA,
    OWN_SCHEMA,
    OvnSandbox,
    SeedNode,
    SeedPod,
    ovn_unavailable_reason,
    seed_ovn_kubernetes,
)
from osc_gitops_sandbox.ovn.vnf_health import FORWARDING_ANNOTATION, ForwardingVnfs

POD_NETWORKS = "k8s.ovn.org/pod-networks"
NODE_SUBNETS = "k8s.ovn.org/node-subnets"


def load_items(path: Path) -> list[dict[str, Any]]:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    items: list[dict[str, Any]] = []
    for doc in yaml.load_all(path.read_text()):
        if not doc:
            continue
        items.extend(doc.get("items", []) if doc.get("kind") == "List" else [doc])
    return items


def node_subnet(node: Mapping[str, Any]) -> str:
    """A Node object's pod subnet: OVN-Kubernetes' ``node-subnets`` annotation, else
    ``spec.podCIDR``."""
    annotations = node.get("metadata", {}).get("annotations", {})
    if NODE_SUBNETS in annotations:
        return str(json.loads(annotations[NODE_SUBNETS])["default"][0])
    return str(node.get("spec", {}).get("podCIDR"))


def seed_pod_of(pod: Mapping[str, Any]) -> SeedPod:
    """OVN-Kubernetes' view of a pod object (its LSP), from the pod-networks annotation."""
    meta = pod["metadata"]
    net = json.loads(meta["annotations"][POD_NETWORKS])["default"]
    ip = net["ip_addresses"][0].split("/")[0]
    return SeedPod(
        meta["namespace"], meta["name"], meta["uid"], pod["spec"]["nodeName"],
        net["mac_address"], ip,
    )  # fmt: skip


class PodAddresses:
    """Pod IPs and MACs per node subnet, handed out the way OVN-Kubernetes' IPAM does: the
    subnet's ``.1`` is the router port, ``.2`` the management port, pods count up from ``.3``
    (the MAC is ``0a:58:`` + the IPv4 bytes)."""

    def __init__(self) -> None:
        self._subnets: dict[str, str] = {}
        self._next_host: dict[str, int] = {}

    def add_node(self, node: str, subnet: str) -> None:
        self._subnets[node] = subnet

    def remove_node(self, node: str) -> None:
        self._subnets.pop(node, None)
        self._next_host.pop(node, None)

    def subnet(self, node: str) -> str:
        return self._subnets[node]

    @property
    def subnets(self) -> dict[str, str]:
        return dict(self._subnets)

    def observe(self, pod: SeedPod) -> None:
        """A pod that already has its address (seeded): later pods get higher ones."""
        host = int(ipaddress.ip_address(pod.ip)) - int(
            ipaddress.ip_network(self._subnets[pod.node]).network_address
        )
        self._next_host[pod.node] = max(self._next_host.get(pod.node, 2), host)

    def allocate(self, node: str) -> tuple[str, str, int]:
        """``(mac, ip, prefix length)`` for a new pod on ``node``."""
        net = ipaddress.ip_network(self._subnets[node])
        host = self._next_host.get(node, 2) + 1
        self._next_host[node] = host
        ip = net.network_address + host
        mac = "0a:58:" + ":".join(f"{b:02x}" for b in ip.packed[-4:])
        return mac, str(ip), net.prefixlen


def pod_object(
    namespace: str, name: str, node: str, labels: Mapping[str, str] | None,
    mac: str, ip: str, prefixlen: int,
) -> dict[str, Any]:  # fmt: skip
    """The pod as the API holds it once OVN-Kubernetes annotated it (``pod-networks``)."""
    annotation = {"default": {"ip_addresses": [f"{ip}/{prefixlen}"], "mac_address": mac}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                     "annotations": {POD_NETWORKS: json.dumps(annotation)}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "app:1"}]},
    }  # fmt: skip


def insert_pod_lsps(nb_remote: str, pods: Sequence[SeedPod]) -> None:
    """Write the pods' LSPs on their nodes' switches in one transaction, as OVN-Kubernetes
    does when pods start (the switches must exist)."""
    ops: list[dict[str, Any]] = []
    ports_of: dict[str, list[list[str]]] = {}
    for i, pod in enumerate(pods):
        addr = f"{pod.mac} {pod.ip}"
        ops.append(
            {"op": "insert", "table": "Logical_Switch_Port", "uuid-name": f"p{i}",
             "row": {"name": pod.lsp_name, "addresses": addr, "port_security": addr,
                     "external_ids": ovsdb_rpc.to_datum({"namespace": pod.namespace,
                                                         "pod": "true"}),
                     "options": ovsdb_rpc.to_datum({"iface-id-ver": pod.uid,
                                                    "requested-chassis": pod.node})}},
        )  # fmt: skip
        ports_of.setdefault(pod.node, []).append(["named-uuid", f"p{i}"])
    for node, ports in ports_of.items():
        ops.append(
            {"op": "mutate", "table": "Logical_Switch", "where": [["name", "==", node]],
             "mutations": [["ports", "insert", ["set", ports]]]},
        )  # fmt: skip
    if ops:
        ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)


def delete_lsp(nb_remote: str, lsp: str) -> None:
    """Remove an LSP and its switch's reference to it (nothing to do if it is not there)."""
    rows = ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Logical_Switch_Port", "where": [["name", "==", lsp]],
         "columns": ["_uuid"]},
    ])[0]["rows"]  # fmt: skip
    if not rows:
        return
    uuid = rows[0]["_uuid"]
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "mutate", "table": "Logical_Switch", "where": [],
         "mutations": [["ports", "delete", ["set", [uuid]]]]},
        {"op": "delete", "table": "Logical_Switch_Port", "where": [["_uuid", "==", uuid]]},
    ])  # fmt: skip


def api_request(kube: KubeApiServer, method: str, path: str, body: Any = None) -> Any:
    """Talk to the emulator over the wire (so watches see the change, as in a cluster)."""
    conn = http.client.HTTPConnection(kube.host, kube.port, timeout=10)
    try:
        headers = {"Content-Type": "application/merge-patch+json"} if body else {}
        conn.request(method, path, json.dumps(body) if body else None, headers)
        response = conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {response.status} {data[:200]!r}")
        return json.loads(data) if data else None
    finally:
        conn.close()


SeedObjects = tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]


def load_seed_dir(folder: str | Path) -> SeedObjects:
    """``(nodes, pods, namespaces)`` from ``nodes.yaml``, ``pods.yaml``, ``namespaces.yaml``
    (kubectl List format; a missing file is empty)."""
    folder = Path(folder)

    def items(name: str) -> list[dict[str, Any]]:
        path = folder / name
        return load_items(path) if path.exists() else []

    return items("nodes.yaml"), items("pods.yaml"), items("namespaces.yaml")


def choose_distribution(
    nb_schema: str, dist: str | Distribution, *, northd: bool
) -> str | Distribution:
    """``"auto"`` resolves to sid when it is there (the product's default backend needs it),
    else to the host's distribution; an explicit choice or the older ``nb_schema`` spelling
    wins."""
    if dist != "auto":
        return dist
    if nb_schema == NF_SCHEMA:
        return SID
    if nb_schema != "auto":
        return HOST
    return SID if ovn_unavailable_reason(northd=northd, distribution=SID) is None else HOST


class KubeUserActions:
    """What a user or a controller does through the API emulator, shared by the central-NB
    :class:`SandboxCluster` and the zoned :class:`~osc_gitops_sandbox.ovn.zones.ZonedCluster`."""

    kube: KubeApiServer

    def label_pod(self, namespace: str, name: str, labels: Mapping[str, str | None]) -> None:
        """Set (or with ``None`` remove) pod labels, like ``kubectl label --overwrite``."""
        self._http(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            {"metadata": {"labels": dict(labels)}},
        )

    def delete_vm(self, namespace: str, name: str) -> None:
        """What a user does with ``kubectl delete vm``."""
        self._http("DELETE", f"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}")

    def annotate_vm(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        """``kubectl annotate vm --overwrite`` (``None`` removes the key)."""
        self._http(
            "PATCH", f"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}",
            {"metadata": {"annotations": dict(annotations)}},
        )  # fmt: skip

    def restart_vm(self, namespace: str, name: str) -> None:
        """What ``virtctl restart`` does: PUT the VM's ``restart`` subresource (KubeVirt then
        replaces the VMI; the data path's guest goes down and boots again)."""
        self._http("PUT", restart_path(namespace, name), {})

    def delete_vmi(self, namespace: str, name: str) -> None:
        """``kubectl delete vmi``: a ``runStrategy: Always`` VM gets a new instance."""
        self._http(
            "DELETE", f"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}"
        )

    def add_pod(
        self, namespace: str, name: str, node: str, labels: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def delete_pod(self, namespace: str, name: str) -> None:
        raise NotImplementedError

    def move_pod(self, namespace: str, name: str, node: str) -> dict[str, Any]:
        """The pod is deleted and recreated on ``node`` with its labels: what a rescheduled
        pod of a Deployment or StatefulSet looks like to OVN (new UID, new address, the LSP
        leaves one node's switch, in zone mode one zone, and appears on another)."""
        old = self.kube.get_object("Pod", namespace, name)
        if old is None:
            raise KeyError(f"no pod {namespace}/{name}")
        self.delete_pod(namespace, name)
        return self.add_pod(namespace, name, node, old["metadata"].get("labels") or {})

    def _http(self, method: str, path: str, body: Any = None) -> Any:
        return api_request(self.kube, method, path, body)


class SandboxCluster(KubeUserActions, Lifecycle):
    """Start with :meth:`start` (or ``with``), seed with :meth:`seed_dir`, then play the cluster:
    :meth:`add_pod`, :meth:`delete_pod`, :meth:`label_pod`.

    ``distribution``: ``"sid"`` (OVN 26.03: Network Function steering), ``"host"`` (Debian
    bookworm's 23.03: router-policy steering only) or ``"auto"``: sid when ``make setup`` has built
    it, else the host's. ``nb_schema``: ``"auto"`` (the distribution's own), or as for
    :class:`OvnSandbox` (``"26.03"`` = sid, ``"installed"`` = the host's, when no
    ``distribution`` is given).
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        *,
        nb_schema: str = "auto",
        distribution: str | Distribution = "auto",
        northd: bool = True,
        tcp: bool = False,
        kubevirt: bool = True,
    ) -> None:
        self.workdir = self._own_workdir(workdir, "osc-")
        chosen = choose_distribution(nb_schema, distribution, northd=northd)
        self.ovn = OvnSandbox(
            self.workdir / "ovn",
            northd=northd,
            tcp=tcp,
            nb_schema=OWN_SCHEMA if nb_schema in ("auto", NF_SCHEMA) else nb_schema,
            distribution=chosen,
        )
        self.kube = KubeApiServer()
        self.kubevirt = KubeVirt(self.kube) if kubevirt else None
        """KubeVirt played behind the emulator (VMIs, status, the restart subresource)."""
        self.kubeconfig = str(self.workdir / "kubeconfig")
        self._addresses = PodAddresses()
        self.forwarding_vnfs: ForwardingVnfs | None = None
        """While no chassis runs here, every VNF answers OVN's health probe
        (:mod:`osc_gitops_sandbox.ovn.vnf_health`); a data path stops it and measures instead."""
        if self.ovn.network_function:  # without KubeVirt no VM stops: every VNF answers
            remote = self.ovn.sb_remote if northd else self.ovn.nb_remote
            forwarding = self.forwarding_ports if kubevirt else None
            self.forwarding_vnfs = ForwardingVnfs(remote, northd=northd, forwarding=forwarding)

    def forwarding_ports(self) -> set[str]:
        """The OVN data ports of the VNF VMs that forward, as this sandbox plays them without a
        data path: a VM that exists, does not run ``Halted`` and is not annotated
        ``sandbox.osc.io/forwarding: "false"`` (its ports from the reconciler's
        ``osc.io/ports`` annotation)."""
        ports: set[str] = set()
        for vm in self.kube.objects("VirtualMachine"):
            annotations = vm["metadata"].get("annotations") or {}
            halted = (vm.get("spec") or {}).get("runStrategy") == "Halted"
            if halted or annotations.get(FORWARDING_ANNOTATION) == "false":
                continue
            for pair in str(annotations.get("osc.io/ports", "")).split(","):
                ports.add(pair.partition("=")[2])
        return ports - {""}

    @property
    def distribution(self) -> Distribution:
        """The OVN distribution whose daemons run this cluster."""
        return self.ovn.distribution

    @property
    def network_function(self) -> bool:
        """Whether the NB has the Network Function tables (OVN >= 26.03)."""
        return self.ovn.network_function

    # -- lifecycle (start, stop, ``with``: see osc_gitops_sandbox.lifecycle) ------------------
    def _start(self) -> None:
        self.ovn.start()
        self.kube.start()
        self.kube.write_kubeconfig(self.kubeconfig)
        if self.forwarding_vnfs is not None:
            self.forwarding_vnfs.start()

    def _stop(self) -> None:
        try:
            if self.forwarding_vnfs is not None:
                self.forwarding_vnfs.stop()
            self.kube.stop()
        finally:
            self.ovn.stop()

    @property
    def nb_remote(self) -> str:
        return self.ovn.nb_remote

    # -- seeding -----------------------------------------------------------------------------
    def seed(
        self, nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
        namespaces: Sequence[Mapping[str, Any]] = (),
    ) -> None:  # fmt: skip
        """Seed Kubernetes objects and the matching OVN-Kubernetes rows."""
        seed_nodes = [SeedNode(n["metadata"]["name"], node_subnet(n)) for n in nodes]
        for node in seed_nodes:
            self._addresses.add_node(node.name, node.subnet)
        seed_pods = [seed_pod_of(p) for p in pods]
        for pod in seed_pods:
            self._addresses.observe(pod)
        self.kube.add_objects([*namespaces, *nodes, *pods])
        seed_ovn_kubernetes(self.nb_remote, seed_nodes, seed_pods)

    def seed_dir(self, folder: str | Path) -> None:
        """Seed from ``namespaces.yaml``, ``nodes.yaml``, ``pods.yaml`` (kubectl List format)."""
        self.seed(*load_seed_dir(folder))

    # -- playing OVN-Kubernetes ----------------------------------------------------------------
    def add_pod(
        self, namespace: str, name: str, node: str, labels: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Create a pod in the API (server-set UID) and its LSP in OVN, as OVN-Kubernetes does."""
        mac, ip, prefixlen = self._addresses.allocate(node)
        self.kube.add_objects([pod_object(namespace, name, node, labels, mac, ip, prefixlen)])
        pod = self.kube.get_object("Pod", namespace, name)
        assert pod is not None, "the emulator just stored this pod"
        insert_pod_lsps(
            self.nb_remote, [SeedPod(namespace, name, pod["metadata"]["uid"], node, mac, ip)]
        )
        return pod

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete the pod from the API and its LSP from OVN (OVN-Kubernetes' cleanup)."""
        self._http("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
        delete_lsp(self.nb_remote, f"{namespace}_{name}")
