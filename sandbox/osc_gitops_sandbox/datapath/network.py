"""A real OVN data path on one machine: OVS (userspace datapath) + ``ovn-controller``.

Why: rows in the Northbound DB are only a promise. This module turns a :class:`SandboxCluster`
(real NB/SB/``ovn-northd`` + the Kubernetes API emulator) into a network that carries packets,
so tests can prove that a labelled pod's traffic really crosses the VNF.

What it starts (as owned children, never ``--detach``; reaped by :meth:`Datapath.stop`, the
context manager, an ``atexit`` hook and ``PR_SET_PDEATHSIG``):

- ``ovsdb-server`` for a private ``conf.db`` (the distribution's ``vswitch.ovsschema``);
- ``ovs-vswitchd`` with ``br-int`` ``datapath_type=netdev`` (no kernel module needed) and
  ``fail-mode=secure``;
- ``ovn-controller`` against the sandbox SB (geneve on 127.0.0.1, netdev bridges).

All of them come from the cluster's OVN distribution (``cluster.ovn.distribution``, see
:mod:`osc_gitops_sandbox.ovn.distributions`), so northd and ovn-controller are always of one
version.

One chassis hosts every "node": OVN-Kubernetes pins each pod port with
``options:requested-chassis=<node>``, and ``ovn-controller`` accepts a port whose requested
chassis equals its chassis *name* or its *hostname*. So the chassis is named after the first
node and its hostname is the second node: both nodes' ports bind here without touching the rows
OVN-Kubernetes (played by :class:`SandboxCluster`) wrote. More than two nodes are refused.

What it plugs, the way OVN-Kubernetes + KubeVirt + ovs-cni would:

- a pod = a network namespace with a veth whose host end is on ``br-int`` with
  ``external_ids:iface-id=<namespace>_<pod>``, the MAC/IP of the pod's ``k8s.ovn.org/pod-networks``
  annotation and a default route via the node subnet's ``.1`` (``rtos-<node>``);
- a VNF = a namespace per ``VirtualMachineInstance`` of a VM the reconciler created (KubeVirt's
  VMIs are kept by :mod:`osc_gitops_sandbox.kubeapi.kubevirt` behind the emulator; the guests by the
  virt-handler thread of :mod:`osc_gitops_sandbox.datapath.guests`, which follows restarts and
  deletions on its own, boots a new guest for :attr:`Datapath.boot_delay` seconds or its VM's
  ``sandbox.osc.io/boot-delay`` before it forwards, and reports the VMI ``Running`` and,
  booted, ``AgentConnected``). Its NICs are made as Multus and ovs-cni make them (released
  ovs-cni v0.39.0 by default: no ``iface-id``; ``ovs_cni="main"``: the NAD's
  ``args.cni.ovnPort``), with the VM's ``macAddress``, and the product's node binder
  (``reconciler.engine.binder``, one per node, ``binder=True`` by default) binds them to their
  OVN ports, as it would in a cluster. For router-policy steering the
  guest routes: ``data-in`` only, the IP of the LSP row the reconciler wrote, ``ip_forward=1``.
  For Network Function steering (OVN 26.03) it bridges ``data-in`` and ``data-out`` (Linux
  bridge, STP off, no address), as a bump-in-the-wire VNF does; a VM whose image names Suricata
  runs Suricata 8 inline between the two NICs instead (IPS mode, :attr:`Datapath.suricata`,
  :mod:`osc_gitops_sandbox.datapath.suricata`). Turning forwarding (the bridge, Suricata) off
  simulates a dead VNF. :meth:`Datapath.sync_vnfs` waits until the guests caught up.

Every namespace has IPv6 off and every veth TX checksum offload off (TCP through the userspace
datapath's conntrack needs it; see :mod:`osc_gitops_sandbox.datapath.netns`).

``ovs-vswitchd`` runs in a network namespace of its own (the "host" of this data path): the
userspace datapath creates devices with fixed names (``ovs-netdev``), so two data paths in one
namespace collide. The veths' host ends live there as well, so nothing is added to the machine's
own network namespace. Namespaces are named ``osc-dp-<pid>-<random>-…`` (veths
``o<random><n>``), so parallel runs never clash, and a later run removes namespaces left by a
process that was SIGKILLed.

Probes (ICMP echo, TCP connect, counters) run in-process, see
:mod:`osc_gitops_sandbox.datapath.netns`.

One class owns the daemons and every namespace it plugged, so that :meth:`Datapath.stop` can
always remove all of it; the namespace and probe mechanics are in
:mod:`osc_gitops_sandbox.datapath.netns`, the VNF guests in
:mod:`osc_gitops_sandbox.datapath.guests`.

This module must not import ``ovs``/``ovsdbapp``/``kubernetes``: it shells out to ``ip``,
``ovs-vsctl`` and ``sysctl`` and reads the databases through
:mod:`osc_gitops_sandbox.ovn.ovsdb_rpc`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from osc_gitops_sandbox.datapath.chassis import UNDERLAY_NETWORK, Chassis, Underlay
from osc_gitops_sandbox.datapath.guests import GuestPrograms, VirtHandler, Vnf
from osc_gitops_sandbox.datapath.netns import (
    NETNS_PREFIX,
    DatapathError,
    Endpoint,
    PingResult,
    create_netns,
    delete_netns,
    disable_tx_checksum_offload,
    ip,
    sweep_stale_namespaces,
)
from osc_gitops_sandbox.lifecycle import Lifecycle
from osc_gitops_sandbox.ovn import distributions, ovs_cni, ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import HOST, Distribution
from osc_gitops_sandbox.ovn.processes import seconds_until
from osc_gitops_sandbox.ovn.stack import (
    OvnSandbox,
    OvnSandboxError,
)

__all__ = [
    "DATAPATH_TOOLS",
    "Datapath",
    "DatapathError",
    "Endpoint",
    "PingResult",
    "Probe",
    "Vnf",
    "datapath_unavailable_reason",
    "sweep_stale_namespaces",
]

DATAPATH_TOOLS = (
    "ovsdb-server", "ovsdb-tool", "ovs-appctl", "ovs-vsctl", "ovs-vswitchd", "ovn-northd",
    "ovn-nbctl", "ovn-controller",
)  # fmt: skip
"""What a data path runs from its distribution."""
POD_NETWORKS = "k8s.ovn.org/pod-networks"
RELEASED_OVS_CNI = ovs_cni.RELEASED
BINDER_NAMESPACE = "osc-gitops-agents"
"""Where the data path's binders publish their status Leases (the binder DaemonSet's)."""
NODE_SUBNETS = "k8s.ovn.org/node-subnets"


def datapath_unavailable_reason(distribution: str | Distribution = HOST) -> str | None:
    """Why a data path of ``distribution`` cannot run here (a ``pytest.skip`` reason), or
    ``None`` if it can."""
    if os.geteuid() != 0:
        return "the data path needs root (network namespaces, veths, ovs-vswitchd)"
    dist = distributions.distribution(distribution)
    reason = dist.unavailable_reason(DATAPATH_TOOLS)
    if reason:
        return reason
    if not dist.vswitch_schema.exists():
        return f"{dist.vswitch_schema} missing (install Debian's openvswitch-common)"
    missing = [t for t in ("ip", "sysctl") if not shutil.which(t)]
    if missing:
        return f"{', '.join(missing)} not on PATH (install iproute2, procps)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.strip()}"
    return None


@dataclass(frozen=True)
class Probe:
    """``sent`` echo requests from one pod to another: how many came back, the TTL of the last
    reply, and by how much each running VNF's :attr:`Vnf.forwarded` rose meanwhile."""

    sent: int
    replies: int
    ttl: int | None
    forwarded: dict[str, int]

    @property
    def through(self) -> list[str]:
        """The VNFs (``<namespace>/<vm>``) that forwarded packets during the probe."""
        return sorted(k for k, v in self.forwarded.items() if v > 0)


def _subnet_of_node(node: dict[str, Any]) -> ipaddress.IPv4Network:
    annotations = node.get("metadata", {}).get("annotations", {})
    if NODE_SUBNETS in annotations:
        cidr = json.loads(annotations[NODE_SUBNETS])["default"][0]
    else:
        cidr = node.get("spec", {}).get("podCIDR")
    net = ipaddress.ip_network(str(cidr), strict=False)
    if not isinstance(net, ipaddress.IPv4Network):
        raise DatapathError(f"node {node['metadata']['name']}: only IPv4 subnets are plugged")
    return net


# ---------------------------------------------------------------------------------------------
# the data path


def node_ip(node: dict[str, Any]) -> str | None:
    """A Node's ``InternalIP`` (its address on the nodes' network), if it has one."""
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return None


class Datapath(Lifecycle):
    """Chassis (OVS + ``ovn-controller``) on top of a started cluster.

    ``cluster``: a :class:`~osc_gitops_sandbox.ovn.cluster.SandboxCluster` (one NB/SB: the
    *central* topology) or a :class:`~osc_gitops_sandbox.ovn.zones.ZonedCluster` started with
    ``northd=True`` (one NB/SB/northd per node: *interconnect*). ``chassis_per_node``: one
    :class:`~osc_gitops_sandbox.datapath.chassis.Chassis` per node, talking Geneve over an
    :class:`~osc_gitops_sandbox.datapath.chassis.Underlay` (always so for zones; default for a
    central cluster: one chassis playing at most two nodes, no tunnel crossed).

    Usage::

        with SandboxCluster(nb_schema="installed") as cluster:
            cluster.seed_dir(...)
            with Datapath(cluster, chassis_per_node=True) as dp:
                pods = dp.plug_pods()
                dp.sync_vnfs()   # after an apply created the VNF VMs
                pods["ns_a"].ping(pods["ns_b"].ip)
    """

    def __init__(
        self, cluster: Any, workdir: str | os.PathLike[str] | None = None, *,
        timeout: float = 15, boot_delay: float = 0.0, chassis_per_node: bool | None = None,
        ovs_cni: str | None = None, binder: bool | None = None, instance: str = "osc-gitops",
        programs: GuestPrograms | None = None,
    ) -> None:  # fmt: skip
        from osc_gitops_sandbox.datapath.suricata import SuricataPrograms
        from osc_gitops_sandbox.ovn.zones import ZonedCluster

        self.cluster = cluster
        self.zoned = isinstance(cluster, ZonedCluster)
        self.per_node = bool(chassis_per_node) or self.zoned
        if self.zoned and chassis_per_node is False:
            raise DatapathError("an interconnect cluster has one chassis per node")
        if self.zoned and not cluster.northd:
            raise DatapathError("the zones need their SB and northd: ZonedCluster(northd=True)")
        self.workdir = self._own_workdir(workdir, "osc-dp-")
        self.timeout = timeout
        self.token = secrets.token_hex(3)
        self.chassis: dict[str, Chassis] = {}
        """Every chassis by name (= the node it serves; the first node's when one chassis
        plays two)."""
        self._chassis_of: dict[str, Chassis] = {}
        self.underlay: Underlay | None = None
        self.pods: dict[str, Endpoint] = {}
        kubevirt = getattr(cluster, "kubevirt", None)
        if kubevirt is None:
            raise DatapathError("the cluster runs no KubeVirt (SandboxCluster(kubevirt=True))")
        self.ovs_cni = ovs_cni or os.environ.get("OSC_DATAPATH_OVS_CNI") or RELEASED_OVS_CNI
        """How the played ovs-cni finds a VNF NIC's OVN port (see
        :mod:`osc_gitops_sandbox.ovn.ovs_cni`): ``v0.39.0`` (the default; env
        ``OSC_DATAPATH_OVS_CNI``) sets no ``iface-id``, ``main`` reads the NAD's."""
        if binder is None:
            binder = os.environ.get("OSC_DATAPATH_BINDER", "1") != "0"
        self.binder = binder
        """Whether the product's node binder runs on every node (default; env
        ``OSC_DATAPATH_BINDER=0`` turns it off)."""
        self.instance = instance
        self.suricata = SuricataPrograms(self.workdir / "sg")
        """The Suricata guests' rules and address groups (a VM whose image names Suricata runs
        Suricata between its NICs, :mod:`osc_gitops_sandbox.datapath.suricata`)."""
        self._handler = VirtHandler(
            self, cluster.kube, kubevirt, boot_delay=boot_delay, ovs_cni=self.ovs_cni,
            programs=programs if programs is not None else self.suricata,
        )  # fmt: skip
        self._count = itertools.count(1)
        self._binders: dict[str, Any] = {}
        self._binder_stop: Any = None
        self._binder_threads: list[Any] = []

    # -- where things are ----------------------------------------------------------------------
    def stack_of(self, node: str) -> OvnSandbox:
        """The OVN stack (NB, SB, northd) that serves ``node``: its zone's, or the cluster's."""
        stack = self.cluster.zone(node).ovn if self.zoned else self.cluster.ovn
        assert isinstance(stack, OvnSandbox)
        return stack

    @property
    def stacks(self) -> list[OvnSandbox]:
        """Every OVN stack the chassis are bound to (one, or one per zone)."""
        if not self.zoned:
            return [self.cluster.ovn]
        return [self.cluster.zone(node).ovn for node in self.cluster.nodes]

    def nb_remote_of(self, node: str) -> str:
        return self.stack_of(node).nb_remote

    @property
    def nb_remote(self) -> str:
        """The central NB (a zoned cluster has none: see :meth:`nb_remote_of`)."""
        if self.zoned:
            raise DatapathError("an interconnect cluster has one NB per node: nb_remote_of(node)")
        return str(self.cluster.nb_remote)

    def chassis_of(self, node: str) -> Chassis:
        try:
            return self._chassis_of[node]
        except KeyError:
            raise DatapathError(f"no chassis serves node {node!r}") from None

    @property
    def pids(self) -> list[int]:
        return [d.pid for c in self.chassis.values() for d in c.daemons]

    @property
    def vnfs(self) -> dict[str, Vnf]:
        """Running VNF guests by VirtualMachine ``<namespace>/<name>`` (a snapshot: the
        virt-handler thread replaces the dict when a guest comes or goes)."""
        return self._handler.vnfs

    @property
    def boot_delay(self) -> float:
        """Seconds a new guest boots before it forwards, unless its VM says otherwise
        (annotation ``sandbox.osc.io/boot-delay``); settable."""
        return self._handler.boot_delay

    @boot_delay.setter
    def boot_delay(self, seconds: float) -> None:
        self._handler.boot_delay = seconds

    @property
    def namespaces(self) -> list[str]:
        """Every network namespace this data path created and has not removed yet."""
        ends = [*self.pods.values(), *(e for v in self.vnfs.values() for e in v.endpoints)]
        names = {e.netns for e in ends} | {c.netns for c in self.chassis.values()}
        if self.underlay is not None:
            names.add(self.underlay.netns)
        return sorted(names)

    @property
    def distribution(self) -> Distribution:
        """The cluster's OVN distribution: OVS and ovn-controller match its northd."""
        dist = self.cluster.distribution
        assert isinstance(dist, Distribution)
        return dist

    # -- lifecycle (start, stop, ``with``: see osc_gitops_sandbox.lifecycle) ------------------
    def _start(self) -> None:
        reason = datapath_unavailable_reason(self.distribution)
        if reason:
            raise DatapathError(f"cannot start the data path: {reason}")
        forwarding = getattr(self.cluster, "forwarding_vnfs", None)
        if forwarding is not None:
            forwarding.stop()  # a real chassis and real guests answer OVN's probes from now on
        sweep_stale_namespaces()
        nodes = [n["metadata"]["name"] for n in self.cluster.kube.objects("Node")]
        if self.zoned:
            nodes = list(self.cluster.nodes)  # in the order they joined (their node ids)
        if not nodes or (not self.per_node and len(nodes) > 2):
            raise DatapathError(
                f"one chassis plays 1 or 2 nodes (chassis_per_node=True for more); "
                f"the cluster has {len(nodes)}"
            )
        if self.per_node:
            self.underlay = Underlay(self.token).start()
        order = nodes if self.per_node else sorted(nodes)
        for i, node in enumerate(order):
            if not self.per_node and i > 0:
                self._chassis_of[node] = self._chassis_of[order[0]]
                continue
            self._add_chassis(node, i, hostname=None if self.per_node else order[-1])
        if self.per_node:
            self._introduce_peers()
        if self.binder:
            self.start_binders()
        self._handler.start()

    def _add_chassis(self, node: str, index: int, *, hostname: str | None = None) -> Chassis:
        obj = self.cluster.kube.get_object("Node", None, node) or {}
        encap_ip = "127.0.0.1"
        if self.per_node:
            encap_ip = node_ip(obj) or str(UNDERLAY_NETWORK.network_address + index + 1)
        chassis = Chassis(
            node, self.workdir / f"c{index}", self.distribution, self.stack_of(node).sb_remote,
            netns=f"{NETNS_PREFIX}{os.getpid()}-{self.token}-0-c{index}", hostname=hostname,
            encap_ip=encap_ip, underlay=self.underlay, interconnect=self.zoned,
            timeout=self.timeout,
        )  # fmt: skip
        self.chassis[node] = chassis
        self._chassis_of[node] = chassis
        chassis.start()
        return chassis

    def _introduce_peers(self) -> None:
        peers = [(c.encap_ip, c.tunnel_mac()) for c in self.chassis.values()]
        for chassis in self.chassis.values():
            chassis.add_peers(peers)

    def _stop(self) -> None:
        """Remove every namespace/veth we made, then stop every chassis and the underlay."""
        self.stop_binders()
        self._handler.close()
        for ep in self.pods.values():
            ep.close()
            delete_netns(ep.netns)
        self.pods.clear()
        for chassis in self.chassis.values():
            chassis.stop()
        if self.underlay is not None:
            self.underlay.stop()

    def check_alive(self) -> None:
        for chassis in self.chassis.values():
            chassis.check_alive()

    # -- the node binder (the product's, ``reconciler.engine.binder``) -------------------------
    def start_binders(
        self, *, stats_interval: float = 1.0, resync: float = 5.0, window: float = 60.0
    ) -> None:
        """One binder per node against its chassis' OVS database, as the binder DaemonSet
        (or the node agent's ``--ovs-db``) runs in a cluster; each publishes its state in
        ``osc-gitops-agents/osc-gitops-binder-<node>``. Idempotent."""
        import threading

        from reconciler.adapters.kube.client import KubeSettings
        from reconciler.adapters.kube.node_vms import NodeVms
        from reconciler.adapters.kube.status_lease import StatusLease
        from reconciler.adapters.ovn.vswitch import OvsDb
        from reconciler.engine.binder import Binder, BinderConfig, binder_lease_name

        if self._binders:
            return
        kube = self.cluster.kube
        if kube.get_object("Namespace", None, BINDER_NAMESPACE) is None:
            kube.create(kube.resource_type("Namespace"), "", {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BINDER_NAMESPACE},
            })  # fmt: skip
        settings = KubeSettings(kubeconfig=self.cluster.kubeconfig)
        self._binder_stop = threading.Event()
        nodes = list(self.cluster.nodes) if self.zoned else sorted(self._chassis_of)
        for node in nodes:
            binder = Binder(
                BinderConfig(node=node, instance=self.instance, resync=resync,
                             stats_interval=stats_interval, window=window),
                NodeVms(settings, node, self.instance),
                OvsDb(self.chassis_of(node).ovs_remote, timeout=self.timeout),
                publisher=StatusLease.for_settings(
                    settings, BINDER_NAMESPACE, binder_lease_name(node),
                    identity=f"sandbox-binder-{node}", duration=30, owner_node=node,
                ),
            )  # fmt: skip
            thread = threading.Thread(target=binder.run, args=(self._binder_stop,),
                                      daemon=True, name=f"binder-{node}")  # fmt: skip
            self._binders[node] = binder
            self._binder_threads.append(thread)
            thread.start()

    def stop_binders(self) -> None:
        """Stop every binder (the bindings they made stay, as a stopped DaemonSet leaves them)."""
        if self._binder_stop is not None:
            self._binder_stop.set()
        for thread in self._binder_threads:
            thread.join(timeout=10)
        self._binders.clear()
        self._binder_threads.clear()
        self._binder_stop = None

    @property
    def binders(self) -> dict[str, Any]:
        """The running binders by node (``reconciler.engine.binder.Binder``)."""
        return dict(self._binders)

    # -- plugging ------------------------------------------------------------------------------
    def _subnet(self, node: str) -> ipaddress.IPv4Network:
        obj = self.cluster.kube.get_object("Node", None, node)
        if obj is None:
            raise DatapathError(f"node {node} not found in the Kubernetes API emulator")
        return _subnet_of_node(obj)

    def new_namespace(self, label: str, *sysctls: str) -> str:
        """A registered network namespace ``osc-dp-<pid>-<token>-<n>-<label>``."""
        self.check_alive()
        safe = re.sub(r"[^A-Za-z0-9_.-]", "-", label)[:40]
        netns = f"{NETNS_PREFIX}{os.getpid()}-{self.token}-{next(self._count)}-{safe}"
        create_netns(netns, *sysctls)
        return netns

    def add_nic(
        self, netns: str, ifname: str, lsp: str, mac: str, node: str, *,
        ip_address: str = "", iface_id_ver: str | None = None,
        cni: tuple[str, str, str] | None = None,
    ) -> Endpoint:  # fmt: skip
        """A veth ``ifname`` in ``netns``, host end on the node's chassis' br-int as ``lsp``
        (what a CNI plugin does); with ``ip_address`` also the address and a default route via
        the node subnet's ``.1``.

        TX checksum offload is turned off on both ends (see
        :func:`~osc_gitops_sandbox.datapath.netns.disable_tx_checksum_offload`: TCP through the
        userspace datapath's conntrack needs it). ``iface_id_ver``: the pod UID, which
        OVN-Kubernetes' CNI also writes to the OVS interface; ovn-controller refuses to bind a port
        whose LSP ``options:iface-id-ver`` differs (a recreated pod must not inherit the old
        port)."""
        chassis = self.chassis_of(node)
        veth = f"o{self.token}{next(self._count)}"[:15]
        subnet = self._subnet(node)
        gateway = str(subnet.network_address + 1)
        host = ("-n", chassis.netns)
        ip(*host, "link", "add", veth, "type", "veth", "peer", "name", ifname, "netns", netns)
        ip(*host, "link", "set", veth, "up")
        disable_tx_checksum_offload(chassis.netns, veth)
        disable_tx_checksum_offload(netns, ifname)
        batch = [f"link set {ifname} address {mac}", f"link set {ifname} up"]
        if ip_address:
            batch += [
                f"addr add {ip_address}/{subnet.prefixlen} dev {ifname}",
                f"route add default via {gateway} dev {ifname}",
            ]
        ip("-n", netns, "-batch", "-", stdin="\n".join(batch))
        if cni is not None:
            version, config, cni_args = cni
            ovs_cni.cni_add(
                chassis.ovs_remote, version, config=config, cni_args=cni_args, host_iface=veth,
                cont_iface=ifname, netns=f"/var/run/netns/{netns}",
            )  # fmt: skip
        else:
            ids = [f"external_ids:iface-id={lsp}"]
            if iface_id_ver:
                ids.append(f"external_ids:iface-id-ver={iface_id_ver}")
            chassis.vsctl("add-port", "br-int", veth, "--", "set", "Interface", veth, *ids)
        return Endpoint(
            netns, veth, lsp, mac, ip_address, subnet.prefixlen if ip_address else 0,
            gateway if ip_address else "", node, ifname,
        )  # fmt: skip

    def plug(
        self, label: str, lsp: str, mac: str, ip_address: str, node: str, *,
        sysctls: Iterable[str] = (), iface_id_ver: str | None = None,
    ) -> Endpoint:  # fmt: skip
        """A namespace with one addressed NIC ``eth0`` on ``lsp`` (a pod, a router guest)."""
        netns = self.new_namespace(label, *sysctls)
        try:
            return self.add_nic(
                netns, "eth0", lsp, mac, node, ip_address=ip_address, iface_id_ver=iface_id_ver
            )
        except BaseException:
            delete_netns(netns)
            raise

    def plug_management_port(self, node: str) -> Endpoint:
        """The node's management port (``ovn-k8s-mp0``, the subnet's ``.2``, where kubelet
        probes its pods from) as OVN-Kubernetes sets it up in the node's NB
        (:func:`~osc_gitops_sandbox.ovn.netpol.add_management_port`), plugged as a namespace
        of its own standing for the host."""
        from osc_gitops_sandbox.ovn.netpol import add_management_port

        subnet = self._subnet(node)
        address = subnet.network_address + 2
        mac = "0a:58:" + ":".join(f"{b:02x}" for b in address.packed[-4:])
        lsp = add_management_port(self.nb_remote_of(node), node, mac, str(address))
        endpoint = self.plug(f"mp-{node}", lsp, mac, str(address), node)
        self.wait_ports_up([lsp])
        return endpoint

    def unplug(self, *endpoints: Endpoint) -> None:
        for endpoint in endpoints:
            endpoint.close()
            with contextlib.suppress(OvnSandboxError):
                self.chassis_of(endpoint.node).vsctl(
                    "--if-exists", "del-port", "br-int", endpoint.veth
                )
        for netns in sorted({e.netns for e in endpoints}):
            delete_netns(netns)

    def plug_pods(self, pods: Iterable[tuple[str, str]] | None = None) -> dict[str, Endpoint]:
        """Plug pods (``(namespace, name)``; default: every pod in the emulator) and wait
        until OVN reports their ports up. Returns all plugged pods by LSP name."""
        if pods is None:
            pods = [
                (p["metadata"]["namespace"], p["metadata"]["name"])
                for p in self.cluster.kube.objects("Pod")
                if (p["metadata"].get("labels") or {}).get("kubevirt.io") != "virt-launcher"
            ]
        new = []
        for namespace, name in pods:
            lsp = f"{namespace}_{name}"
            if lsp in self.pods:
                continue
            pod = self.cluster.kube.get_object("Pod", namespace, name)
            if pod is None:
                raise DatapathError(f"pod {namespace}/{name} not found in the API emulator")
            net = json.loads(pod["metadata"]["annotations"][POD_NETWORKS])["default"]
            address = net["ip_addresses"][0].split("/")[0]
            self.pods[lsp] = self.plug(
                lsp, lsp, net["mac_address"], address, pod["spec"]["nodeName"],
                iface_id_ver=pod["metadata"]["uid"],
            )  # fmt: skip
            new.append(lsp)
        self.wait_ports_up(new)
        return dict(self.pods)

    def unplug_pod(self, namespace: str, name: str) -> None:
        endpoint = self.pods.pop(f"{namespace}_{name}", None)
        if endpoint is not None:
            self.unplug(endpoint)

    def sync_vnfs(self, *, wait: bool = True) -> dict[str, Vnf]:
        """Catch up with KubeVirt now: every VMI of the reconciler's VMs has its guest, every
        guest its VMI (a restarted or recreated VM's guest is a new one, its counters start at
        zero), and (``wait``) OVN reports every guest's ports up. The virt-handler thread does
        the same on its own as VMs and VMIs change (see
        :mod:`osc_gitops_sandbox.datapath.guests`); this call makes a test deterministic and raises
        a guest that cannot be plugged. Returns the running VNFs by ``<namespace>/<vm>``.
        A guest may still be booting (see :attr:`boot_delay`)."""
        lsps = self._handler.sync()
        if wait:
            self.wait_ports_up(lsps)
        return dict(self.vnfs)

    def wait_booted(self, timeout: float | None = None) -> None:
        """Until every running guest finished booting (forwards)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not all(v.booted for v in self.vnfs.values()):
            if time.monotonic() > deadline:
                booting = sorted(k for k, v in self.vnfs.items() if not v.booted)
                raise DatapathError(f"VNF guests still booting after {timeout} s: {booting}")
            time.sleep(0.01)

    # -- waiting and probing -------------------------------------------------------------------
    def wait_ports_up(self, lsps: Iterable[str], timeout: float | None = None) -> None:
        """Until northd reports every port ``up`` (bound on a chassis, its flows installed)."""
        pending = set(lsps)
        deadline = time.monotonic() + (timeout or self.timeout)
        while pending:
            self.check_alive()
            for stack in self.stacks:
                rows = ovsdb_rpc.transact(stack.nb_remote, "OVN_Northbound", [
                    {"op": "select", "table": "Logical_Switch_Port", "where": [],
                     "columns": ["name", "up"]},
                ])[0]["rows"]  # fmt: skip
                pending -= {r["name"] for r in rows if r.get("up") is True}
            if not pending:
                return
            if time.monotonic() > deadline:
                logs = "\n".join(c.log_tail() for c in self.chassis.values())
                raise DatapathError(
                    f"port(s) {', '.join(sorted(pending))} not up after {timeout or self.timeout}"
                    f" s; {logs}"
                )
            time.sleep(0.01)

    def wait_hv(self, timeout: float | None = None) -> None:
        """Until ovn-controller has installed flows for every NB change made so far
        (``ovn-nbctl --wait=hv sync``: NB_Global.nb_cfg reaches the chassis and comes back),
        and the datapath holds no flow cached from the tables before.

        The second half matters: ovs-vswitchd keeps using datapath flows built from the old
        OpenFlow tables until its revalidator threads have run (up to half a second later),
        so a new connection right after ``--wait=hv`` can still take the old path.
        ``revalidator/purge`` drops the cached flows at once (the next packets are classified
        against the new tables); waiting for a revalidation round would cost more time."""
        self.check_alive()
        limit = int(max(timeout or self.timeout, 1))
        for stack in self.stacks:
            stack.nbctl(f"--timeout={limit}", "--wait=hv", "sync", timeout=limit + 5)
        for chassis in self.chassis.values():
            chassis.purge(limit)

    def vnf_on(self, node: str, vnf: str | None = None) -> Vnf:
        """The running VNF guest on ``node`` (of VnfDeployment ``vnf`` if several run there)."""
        hits = [
            v for v in self.vnfs.values()
            if v.endpoint.node == node and (vnf is None or v.endpoint.lsp.startswith(f"nf_{vnf}_"))
        ]  # fmt: skip
        if len(hits) != 1:
            raise DatapathError(f"expected one VNF guest on {node}, found {len(hits)}")
        return hits[0]

    def controller_errors(self) -> list[str]:
        """Lines where an ovn-controller rejected a logical flow (northd accepts matches that
        ovn-controller cannot parse, e.g. ``inport != "p"``: such rows are silently inert)."""
        return [line for c in self.chassis.values() for line in c.controller_errors()]

    def probe(
        self, src: Endpoint, dst: Endpoint, count: int = 3, timeout: float = 1.0, *,
        new_flow: bool = True,
    ) -> Probe:  # fmt: skip
        """Ping ``dst`` from ``src`` ``count`` times and diff every VNF's forward counter.

        ``new_flow``: the echoes are a new ICMP connection (see :meth:`Endpoint.new_flow`), so
        the probe shows the path a new connection takes now; ``False`` continues the previous
        probe's connection (conntrack keeps the path it was given when it started)."""
        if new_flow:
            src.new_flow()
        before = {k: v.forwarded for k, v in self.vnfs.items()}
        results = [src.ping(dst.ip, timeout) for _ in range(count)]
        after = {k: v.forwarded for k, v in self.vnfs.items()}
        ok = [r for r in results if r.ok]
        return Probe(
            sent=count,
            replies=len(ok),
            ttl=ok[-1].ttl if ok else None,
            forwarded={k: after[k] - before.get(k, 0) for k in after},
        )

    def tcp_probe(
        self, src: Endpoint, dst_ip: str, port: int, count: int = 1, timeout: float = 1.0
    ) -> Probe:
        """``count`` TCP connections from ``src`` to ``dst_ip:port`` (someone must listen, see
        :meth:`Endpoint.listen_tcp`), each closed at once; ``replies`` = connections
        established. The counters are read once the closing segments have crossed too, so the
        next probe does not see them."""
        before = {k: v.forwarded for k, v in self.vnfs.items()}
        connected = sum(src.tcp_connect(dst_ip, port, timeout) for _ in range(count))
        after = self._settled_counters()
        return Probe(
            sent=count,
            replies=connected,
            ttl=None,
            forwarded={k: after[k] - before.get(k, 0) for k in after},
        )

    def _settled_counters(self, quiet: float = 0.05, limit: float = 1.0) -> dict[str, int]:
        """Every VNF's forward counter once it has not moved for ``quiet`` seconds."""
        deadline = time.monotonic() + limit
        counters = {k: v.forwarded for k, v in self.vnfs.items()}
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = {k: v.forwarded for k, v in self.vnfs.items()}
            if now == counters:
                break
            counters = now
        return counters

    def wait_steered(
        self, src: Endpoint, dst: Endpoint, vnf: Vnf, timeout: float = 10.0, interval: float = 0.005
    ) -> float:
        """Poll with single pings, each a new ICMP connection, until one comes back *and*
        ``vnf`` forwarded packets; returns the seconds it took. Used to measure
        label-change-to-steered latency."""

        def passed() -> bool:
            before = vnf.forwarded
            src.new_flow()
            reply = src.ping(dst.ip, min(0.2, max(timeout, 0.01)))
            return reply.ok and vnf.forwarded > before

        return seconds_until(
            passed, timeout, interval=interval,
            late=lambda: DatapathError(
                f"traffic {src.lsp} -> {dst.lsp} did not pass VNF {vnf.vm} within {timeout} s"
            ),
        )  # fmt: skip

    def set_forwarding(self, vnf: Vnf, enabled: bool) -> None:
        """Let the guest pass traffic on or not (off = a dead VNF that swallows packets): IP
        forwarding of a router guest; the bridge of a bridge guest (down: its ports stop
        forwarding, frames are dropped). A guest still booting counts as booted from now on."""
        self._handler.set_forwarding(vnf, enabled)
