"""Zone mode: an OVN-Kubernetes *interconnect* cluster, played locally.

In interconnect mode every node is its own OVN zone: the node's ``ovnkube-node`` pod runs the
zone's NB, SB and northd on local unix sockets; there is no central NB. :class:`ZonedCluster`
plays that: ONE Kubernetes API emulator and, per node, one NB (+ SB +
northd with ``northd=True``) on its own unix socket, seeded the way ovnkube-controller seeds its
zone (``go-controller/pkg/ovn/zone_interconnect`` in OVN-Kubernetes):

- the node's switch ``<node>`` (``other_config:subnet``), its ``stor-<node>`` port and
  ``rtos-<node>`` on ``ovn_cluster_router``, and the LSPs of the pods on THAT node only;
- the transit switch ``transit_switch`` (``other_config:interconn-ts``) with the local
  ``tstor-<node>`` (type ``router``, to ``rtots-<node>`` on the cluster router) and one
  ``tstor-<other>`` of type ``remote`` per other node: the only rows about other nodes;
- ``NB_Global`` ``name`` and ``options:name`` = the node (``ovnkube.sh local-nb-ovsdb``).

Node objects carry OVN-Kubernetes' annotations (``node-subnets``, ``zone-name``, ``node-id``,
``node-transit-switch-port-ifaddr``). The cluster then changes as a real one does: a pod's LSP
goes into its node's NB only; a moved pod is deleted and recreated elsewhere (new UID); nodes
join and leave with their zones; one zone's NB can go down and come back with its data (fault
tests). Writes for a zone whose NB is down are replayed when it is back, as ovnkube-controller
retries them.

Why NB-only by default: the reconciler only talks to a zone's NB, and a zone without northd is
one ``ovsdb-server`` process started from a copy of one empty database file, so a hundred zones
are cheap enough for tests and benchmarks.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.kubeapi.kubevirt import KubeVirt
from osc_gitops_sandbox.kubeapi.server import KubeApiServer
from osc_gitops_sandbox.lifecycle import Lifecycle
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import (
    NODE_SUBNETS,
    KubeUserActions,
    PodAddresses,
    choose_distribution,
    delete_lsp,
    insert_pod_lsps,
    load_seed_dir,
    node_subnet,
    pod_object,
    seed_pod_of,
)
from osc_gitops_sandbox.ovn.distributions import Distribution
from osc_gitops_sandbox.ovn.interconnect import (
    NODE_ID,
    POD_NETWORK,
    TRANSIT_PORT_ADDRESS,
    TRANSIT_SUBNET,
    TRANSIT_SWITCH,
    TRANSIT_SWITCH_TUNNEL_KEY,
    ZONE_NAME,
    ZoneNode,
    add_remote_chassis,
    add_remote_ports,
    complete_node,
    delete_remote_chassis,
    ensure_nb_global,
    interconnect_ops,
    node_object,
    remove_remote,
)
from osc_gitops_sandbox.ovn.stack import (
    OWN_SCHEMA,
    OvnSandbox,
    OvnSandboxError,
    SeedNode,
    SeedPod,
    resolve_stack,
    run_tool,
    seed_ovn_kubernetes,
)
from osc_gitops_sandbox.ovn.vnf_health import ForwardingVnfs

__all__ = [  # the interconnect vocabulary is re-exported: tests name it from here
    "NODE_ID",
    "POD_NETWORK",
    "SOCKET_PATH_MAX",
    "TRANSIT_PORT_ADDRESS",
    "TRANSIT_SUBNET",
    "TRANSIT_SWITCH",
    "TRANSIT_SWITCH_TUNNEL_KEY",
    "ZONE_NAME",
    "Zone",
    "ZoneNode",
    "ZonedCluster",
    "complete_node",
    "node_object",
]

SOCKET_PATH_MAX = 107
"""``sun_path`` holds 108 bytes including the terminating NUL."""


class Zone:
    """One node's OVN databases, as its ``ovnkube-node`` pod runs them: the NB (and, with
    ``northd``, the SB and ovn-northd) in ``workdir`` on unix sockets."""

    def __init__(
        self,
        node: ZoneNode,
        workdir: Path,
        distribution: Distribution,
        *,
        northd: bool = False,
        timeout: float = 10.0,
        template: Path | None = None,
        forwarding_vnfs: bool = False,
    ) -> None:
        socket = workdir.resolve() / "nb.sock"
        if len(str(socket)) > SOCKET_PATH_MAX:
            raise OvnSandboxError(
                f"zone {node.name!r}: socket path {socket} is longer than {SOCKET_PATH_MAX} "
                "bytes; use a shorter work dir or node name"
            )
        self.node = node
        self._template = template
        self.ovn = OvnSandbox(
            workdir, northd=northd, southbound=northd, distribution=distribution, timeout=timeout
        )
        self._pending: list[Callable[[str], None]] = []
        self.forwarding_vnfs: ForwardingVnfs | None = None
        """Every VNF answers OVN's health probe (no chassis runs here): see
        :mod:`osc_gitops_sandbox.ovn.vnf_health`."""
        if forwarding_vnfs:
            remote = self.ovn.sb_remote if northd else self.ovn.nb_remote
            self.forwarding_vnfs = ForwardingVnfs(remote, northd=northd)

    @property
    def workdir(self) -> Path:
        return self.ovn.workdir

    @property
    def nb_remote(self) -> str:
        """``unix:<workdir>/nb.sock``: the address an agent on this node is given."""
        return self.ovn.nb_remote

    @property
    def nb_running(self) -> bool:
        return self.ovn.nb_running

    @property
    def pending_writes(self) -> int:
        """OVN writes waiting for the NB to come back (see :meth:`write`)."""
        return len(self._pending)

    def start(self) -> Zone:
        database = self.ovn.workdir / "nb.db"
        if self._template is not None and not database.exists():
            shutil.copyfile(self._template, database)  # what `ovsdb-tool create` would write
        self.ovn.start()
        if self.forwarding_vnfs is not None:
            self.forwarding_vnfs.start()
        return self

    def stop(self) -> None:
        if self.forwarding_vnfs is not None:
            self.forwarding_vnfs.stop()
        self.ovn.stop()

    def stop_nb(self) -> None:
        self.ovn.stop_nb()

    def start_nb(self) -> None:
        """Bring the NB back with its data, then replay the writes made while it was down."""
        self.ovn.start_nb()
        while self._pending:
            self._pending[0](self.nb_remote)
            self._pending.pop(0)

    def write(self, action: Callable[[str], None]) -> None:
        """Run ``action(nb_remote)`` now, or once the NB is back if it is down."""
        if self.nb_running and not self._pending:
            action(self.nb_remote)
        else:
            self._pending.append(action)

    def dump(self, tables: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        return self.ovn.dump(tables)


NodeSpec = str | SeedNode | ZoneNode | Mapping[str, Any]
"""A node to add: a name, a :class:`SeedNode`/:class:`ZoneNode`, or a Node API object."""


class ZonedCluster(KubeUserActions, Lifecycle):
    """One Kubernetes API emulator and one OVN zone per node (see the module docstring).

    Start with :meth:`start` (or ``with``). ``nodes`` become zones at start; :meth:`seed` /
    :meth:`seed_dir` take Node and Pod objects as :class:`~osc_gitops_sandbox.ovn.cluster.
    SandboxCluster` does. ``distribution``: ``"sid"`` (OVN 26.03), ``"host"`` (23.03) or
    ``"auto"`` (sid when ``make setup`` built it). ``northd=True`` gives every zone its SB and
    northd too (three processes per zone instead of one).
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        *,
        nodes: Iterable[NodeSpec] = (),
        distribution: str | Distribution = "auto",
        northd: bool = False,
        timeout: float = 10.0,
        kubevirt: bool = True,
    ) -> None:
        self.workdir = self._own_workdir(workdir, "oscz-")
        tools = ["ovsdb-server", "ovsdb-tool", "ovs-appctl"]
        tools += ["ovn-northd", "ovn-nbctl", "ovn-sbctl"] if northd else []
        chosen = choose_distribution("auto", distribution, northd=northd)
        self.distribution, self._nb_schema = resolve_stack(OWN_SCHEMA, chosen, tools)
        self.northd = northd
        self.timeout = timeout
        self.kube = KubeApiServer()
        self.kubevirt = KubeVirt(self.kube) if kubevirt else None
        """KubeVirt played behind the emulator (VMIs, status, the restart subresource)."""
        self.kubeconfig = str(self.workdir / "kubeconfig")
        self._initial_nodes = list(nodes)
        self._zones: dict[str, Zone] = {}
        self._addresses = PodAddresses()
        self._node_ids: dict[str, int] = {}
        self._template = self.workdir / "nb-empty.db"
        self._started = False
        self._play_vnfs = True
        """Whether new zones play the VNFs' answers to OVN's probe (until a data path runs)."""

    # -- lifecycle (start, stop, ``with``: see osc_gitops_sandbox.lifecycle) ----------------
    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self._template.exists():
            run_tool(
                self.distribution, "ovsdb-tool", "create", str(self._template),
                str(self._nb_schema),
            )  # fmt: skip
        self.kube.start()
        self.kube.write_kubeconfig(self.kubeconfig)
        self._started = True
        self.add_nodes(self._initial_nodes)

    def _stop(self) -> None:
        """Stop every zone and the API emulator."""
        try:
            if self._started:
                self.kube.stop()
                self._started = False
        finally:
            for zone in self._zones.values():
                zone.stop()

    # -- the zones -------------------------------------------------------------------------
    @property
    def network_function(self) -> bool:
        """Whether the zones' NB has the Network Function tables (OVN >= 26.03)."""
        return "Network_Function" in json.loads(self._nb_schema.read_text())["tables"]

    @property
    def nodes(self) -> list[str]:
        """The nodes (= zones), in the order they joined."""
        return list(self._zones)

    def zone(self, node: str) -> Zone:
        try:
            return self._zones[node]
        except KeyError:
            raise KeyError(f"no zone for node {node!r} (nodes: {self.nodes})") from None

    def nb_remote(self, node: str) -> str:
        """The NB address of ``node``'s zone (``unix:.../nb.sock``)."""
        return self.zone(node).nb_remote

    @property
    def nb_remotes(self) -> dict[str, str]:
        """``{node: NB address}`` for every zone."""
        return {name: zone.nb_remote for name, zone in self._zones.items()}

    def stop_nb(self, node: str) -> None:
        """Take ``node``'s NB away (its socket disappears; the database file stays)."""
        self.zone(node).stop_nb()

    def start_nb(self, node: str) -> None:
        """Bring ``node``'s NB back on the same socket with the same data."""
        self.zone(node).start_nb()

    @property
    def forwarding_vnfs(self) -> _PlayedVnfs:
        """What :class:`~osc_gitops_sandbox.datapath.network.Datapath` stops when real guests behind
        real chassis start answering OVN's probes: every zone's played answers, now and in
        zones added later."""
        return _PlayedVnfs(self)

    # -- nodes -----------------------------------------------------------------------------
    def add_node(
        self, name: str, subnet: str | None = None, labels: Mapping[str, str] | None = None
    ) -> Zone:
        """A node joins: its Node object (``subnet`` defaults to the next free
        ``10.244.<k>.0/24``), a started and seeded zone, and its remote transit port in every
        other zone."""
        obj: dict[str, Any] = {"kind": "Node", "metadata": {"name": name, "labels": labels or {}}}
        if subnet is not None:
            obj["spec"] = {"podCIDR": subnet}
        self.add_nodes([obj])
        return self.zone(name)

    def add_nodes(self, specs: Iterable[NodeSpec], pods: Sequence[SeedPod] = ()) -> list[Zone]:
        """Several nodes join at once, with ``pods`` already running on them (their LSPs are
        seeded with the switch, one transaction per zone)."""
        if not self._started:
            raise OvnSandboxError("ZonedCluster is not started")
        old = [zone.node for zone in self._zones.values()]
        new: list[ZoneNode] = []
        objects: list[dict[str, Any]] = []
        try:
            for spec in specs:
                zone_node, obj = self._resolve(spec)
                new.append(zone_node)
                objects.append(obj)
            pods_on: dict[str, list[SeedPod]] = {n.name: [] for n in new}
            for pod in pods:
                if pod.node not in pods_on:
                    raise ValueError(
                        f"pod {pod.namespace}/{pod.name}: {pod.node!r} is not a node added here"
                    )
                pods_on[pod.node].append(pod)
                self._addresses.observe(pod)
        except BaseException:
            for zone_node in new:
                self._forget(zone_node.name)
            raise
        zones: list[Zone] = []
        for zone_node in new:
            zone = Zone(
                zone_node, self.workdir / "zones" / zone_node.name, self.distribution,
                northd=self.northd, timeout=self.timeout, template=self._template,
                forwarding_vnfs=(
                    self._play_vnfs and self.kubevirt is not None and self.network_function
                ),
            )  # fmt: skip
            self._zones[zone_node.name] = zone
            zone.start()
            remotes = [n for n in [*old, *new] if n.name != zone_node.name]
            seed_ovn_kubernetes(zone.nb_remote, [zone_node.seed], pods_on[zone_node.name])
            ensure_nb_global(zone.nb_remote)
            ovsdb_rpc.transact(
                zone.nb_remote, "OVN_Northbound", interconnect_ops(zone_node, remotes)
            )
            if self.northd:
                add_remote_chassis(zone.ovn.sb_remote, remotes)
            zones.append(zone)
        if new:
            for node in old:
                self._zones[node.name].write(lambda remote: add_remote_ports(remote, new))
                if self.northd:
                    add_remote_chassis(self._zones[node.name].ovn.sb_remote, new)
            self.kube.add_objects(objects)
        return zones

    def remove_node(self, name: str) -> None:
        """A node leaves: its pods are deleted (what the pod GC does), then its Node object;
        its zone stops and its files go; the other zones drop its remote transit port."""
        zone = self.zone(name)
        for pod in self.kube.objects("Pod"):
            if pod.get("spec", {}).get("nodeName") == name:
                meta = pod["metadata"]
                self._http("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
        self._http("DELETE", f"/api/v1/nodes/{name}")
        zone.stop()
        shutil.rmtree(zone.workdir, ignore_errors=True)
        del self._zones[name]
        self._forget(name)
        for other in self._zones.values():
            other.write(lambda remote: remove_remote(remote, name))
            if self.northd:
                delete_remote_chassis(other.ovn.sb_remote, zone.node.chassis)

    def _resolve(self, spec: NodeSpec) -> tuple[ZoneNode, dict[str, Any]]:
        """Register one node to add: its zone node (subnet and id as given, else the next
        free ones) and its complete Node object."""
        if isinstance(spec, Mapping):
            meta = spec.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            given = NODE_SUBNETS in annotations or (spec.get("spec") or {}).get("podCIDR")
            zone_node = self._register(
                str(meta["name"]),
                node_subnet(spec) if given else None,
                int(annotations[NODE_ID]) if NODE_ID in annotations else None,
            )
            return zone_node, complete_node(spec, zone_node)
        if isinstance(spec, str):
            zone_node = self._register(spec, None, None)
        elif isinstance(spec, ZoneNode):
            zone_node = self._register(spec.name, spec.subnet, spec.node_id)
        else:
            zone_node = self._register(spec.name, spec.subnet, None)
        return zone_node, node_object(zone_node)

    def _register(self, name: str, subnet: str | None, node_id: int | None) -> ZoneNode:
        if name in self._node_ids:
            raise ValueError(f"node {name!r} is already in the cluster")
        subnets = set(self._addresses.subnets.values())
        if subnet is None:
            free = (s for k in range(1, 256) if (s := f"10.244.{k}.0/24") not in subnets)
            subnet = next(free, None)
            if subnet is None:
                raise OvnSandboxError(f"no free /24 left in {POD_NETWORK}")
        elif subnet in subnets:
            raise ValueError(f"node {name!r}: subnet {subnet} is already another node's")
        ids = set(self._node_ids.values())
        if node_id is None:
            node_id = next(i for i in range(1, len(ids) + 2) if i not in ids)
        elif node_id in ids:
            raise ValueError(f"node {name!r}: node id {node_id} is already another node's")
        self._node_ids[name] = node_id
        self._addresses.add_node(name, subnet)
        return ZoneNode(name, subnet, node_id)

    def _forget(self, name: str) -> None:
        self._node_ids.pop(name, None)
        self._addresses.remove_node(name)

    # -- seeding ---------------------------------------------------------------------------
    def seed(
        self, nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
        namespaces: Sequence[Mapping[str, Any]] = (),
    ) -> None:  # fmt: skip
        """Node and Pod API objects (as for ``SandboxCluster.seed``): new nodes become zones
        seeded with their pods; pods on existing nodes go into those zones' NBs."""
        seed_pods = [seed_pod_of(p) for p in pods]
        new_names = {str(n["metadata"]["name"]) for n in nodes}
        self.kube.add_objects(namespaces)
        self.add_nodes(nodes, [p for p in seed_pods if p.node in new_names])
        existing: dict[str, list[SeedPod]] = {}
        for pod in seed_pods:
            if pod.node not in new_names:
                existing.setdefault(pod.node, []).append(pod)
                self._addresses.observe(pod)
        for node, on_node in existing.items():
            self.zone(node).write(partial(insert_pod_lsps, pods=on_node))
        self.kube.add_objects(pods)

    def seed_dir(self, folder: str | Path) -> None:
        """Seed from ``namespaces.yaml``, ``nodes.yaml``, ``pods.yaml`` (kubectl List format)."""
        nodes, pods, namespaces = load_seed_dir(folder)
        self.seed(nodes, pods, namespaces)

    # -- playing OVN-Kubernetes ------------------------------------------------------------
    def add_pod(
        self, namespace: str, name: str, node: str, labels: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Create a pod in the API (server-set UID) and its LSP in ``node``'s NB only."""
        zone = self.zone(node)
        mac, ip, prefixlen = self._addresses.allocate(node)
        self.kube.add_objects([pod_object(namespace, name, node, labels, mac, ip, prefixlen)])
        pod = self.kube.get_object("Pod", namespace, name)
        assert pod is not None, "the emulator just stored this pod"
        seed = SeedPod(namespace, name, pod["metadata"]["uid"], node, mac, ip)
        zone.write(lambda remote: insert_pod_lsps(remote, [seed]))
        return pod

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete the pod from the API and its LSP from its node's NB."""
        pod = self.kube.get_object("Pod", namespace, name)
        self._http("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
        node = (pod or {}).get("spec", {}).get("nodeName")
        if node in self._zones:
            self._zones[node].write(lambda remote: delete_lsp(remote, f"{namespace}_{name}"))


class _PlayedVnfs:
    """Every zone's :class:`ForwardingVnfs` of a :class:`ZonedCluster`, stopped together."""

    def __init__(self, cluster: ZonedCluster) -> None:
        self._cluster = cluster

    def stop(self) -> None:
        self._cluster._play_vnfs = False
        for zone in self._cluster._zones.values():
            if zone.forwarding_vnfs is not None:
                zone.forwarding_vnfs.stop()
                zone.forwarding_vnfs = None
