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
:mod:`osc_gitops_sandbox.distributions`), so northd and ovn-controller are always of one version.

One chassis hosts every "node": OVN-Kubernetes pins each pod port with
``options:requested-chassis=<node>``, and ``ovn-controller`` accepts a port whose requested
chassis equals its chassis *name* or its *hostname*. So the chassis is named after the first
node and its hostname is the second node: both nodes' ports bind here without touching the rows
OVN-Kubernetes (played by :class:`SandboxCluster`) wrote. More than two nodes are refused.

What it plugs, the way OVN-Kubernetes + KubeVirt + ovs-cni would:

- a pod = a network namespace with a veth whose host end is on ``br-int`` with
  ``external_ids:iface-id=<namespace>_<pod>``, the MAC/IP of the pod's ``k8s.ovn.org/pod-networks``
  annotation and a default route via the node subnet's ``.1`` (``rtos-<node>``);
- a VNF = a namespace per ``VirtualMachine`` the reconciler created (this plays KubeVirt): its
  NICs are attached to the OVN ports named by the NADs' ``args.cni.ovnPort`` (ovs-cni), with the
  VM's ``macAddress``. For router-policy steering the guest routes: ``data-in`` only, the IP of
  the LSP row the reconciler wrote, ``ip_forward=1``, ``rp_filter=0``, ``send_redirects=0``. For
  Network Function steering (OVN 26.03) it bridges ``data-in`` and ``data-out`` (Linux bridge,
  STP off, no address), as a bump-in-the-wire VNF does. Turning forwarding (or the bridge) off
  simulates a dead VNF. :meth:`Datapath.sync_vnfs` follows VM creation/deletion.

Every namespace has IPv6 off and every veth TX checksum offload off (TCP through the userspace
datapath's conntrack needs it; see :mod:`osc_gitops_sandbox.netns`).

``ovs-vswitchd`` runs in a network namespace of its own (the "host" of this data path): the
userspace datapath creates devices with fixed names (``ovs-netdev``), so two data paths in one
namespace collide. The veths' host ends live there as well, so nothing is added to the machine's
own network namespace. Namespaces are named ``osc-dp-<pid>-<random>-…`` (veths
``o<random><n>``), so parallel runs never clash, and a later run removes namespaces left by a
process that was SIGKILLed.

Probes (ICMP echo, TCP connect, counters) run in-process, see :mod:`osc_gitops_sandbox.netns`.

Longer than the usual ~600 lines on purpose: one class owns the daemons and every namespace it
plugged (pods, both kinds of VNF guest), so that :meth:`Datapath.stop` can always remove all of
it; the namespace and probe mechanics are in :mod:`osc_gitops_sandbox.netns`.

This module must not import ``ovs``/``ovsdbapp``/``kubernetes``: it shells out to ``ip``,
``ovs-vsctl`` and ``sysctl`` and reads the databases through :mod:`osc_gitops_sandbox.ovsdb_rpc`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from osc_gitops_sandbox import distributions, ovsdb_rpc
from osc_gitops_sandbox.distributions import HOST, Distribution
from osc_gitops_sandbox.netns import (
    NETNS_PREFIX,
    DatapathError,
    Endpoint,
    FrameCounter,
    PingResult,
    create_netns,
    delete_netns,
    disable_tx_checksum_offload,
    ip,
    sweep_stale_namespaces,
    sysctl,
)
from osc_gitops_sandbox.ovn import (
    Daemon,
    OvnSandboxError,
    child_env,
    run_tool,
    tail,
    wait_until,
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
NODE_SUBNETS = "k8s.ovn.org/node-subnets"
PORTS_ANNOTATION = "osc.io/ports"
VNF_BRIDGE = "br0"
ROUTER_GUEST_SYSCTLS = (
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
    "net.ipv4.conf.all.send_redirects=0",
    "net.ipv4.conf.default.send_redirects=0",
)


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


@dataclass
class Vnf:
    """A VNF instance as this harness runs it (the guest of one ``VirtualMachine``).

    Two kinds of guest, chosen by the OVN ports the reconciler wrote:

    - a *router* (router-policy steering; the ``data-in`` port has an address): one NIC,
      ``ip_forward=1``; it routes packets on, taking one off the TTL;
    - a *bridge* (Network Function steering; NF ports have no address): ``data-in`` (``eth0``)
      and ``data-out`` (``eth1``) in a Linux bridge with STP off; frames cross unchanged.
    """

    namespace: str
    """Kubernetes namespace of the VirtualMachine."""
    vm: str
    vm_uid: str
    endpoint: Endpoint
    """The ``data-in`` NIC."""
    out_endpoint: Endpoint | None = None
    """The ``data-out`` NIC of a bridge guest; ``None`` for a router guest."""
    counters: list[FrameCounter] = field(default_factory=list)
    """A bridge guest's frame counters, one per NIC (see :class:`FrameCounter`)."""

    @property
    def bridge(self) -> bool:
        return self.out_endpoint is not None

    @property
    def endpoints(self) -> list[Endpoint]:
        return [self.endpoint] + ([self.out_endpoint] if self.out_endpoint else [])

    @property
    def forwarded(self) -> int:
        """Packets of pods this VNF passed on (the proof of steering): ``IpForwDatagrams`` of
        a router guest; the IPv4 frames a bridge guest sent out of its two NICs, OVN's health
        probes (link-local addresses) not included."""
        if self.out_endpoint is None:
            return self.endpoint.ip_counters()["ForwDatagrams"]
        return sum(c.counts()[0] for c in self.counters)

    def forwarded_per_nic(self) -> tuple[int, int]:
        """A bridge guest's pod frames sent out of ``data-in`` and out of ``data-out``.

        What leaves ``data-in`` re-enters OVN at the function's inport: traffic that OVN sent
        in at the outport, i.e. towards the protected pod for a to-lport (exit-lport) ACL.
        Unequal counts show a flow crossing the VNF in one direction only."""
        if len(self.counters) != 2:
            raise DatapathError(f"VNF {self.namespace}/{self.vm} is not a bridge guest")
        return self.counters[0].counts()[0], self.counters[1].counts()[0]

    @property
    def health_probes(self) -> int:
        """Frames of OVN's Network Function health probe the bridge guest passed on (0 for a
        router guest, which OVN never probes)."""
        return sum(c.counts()[1] for c in self.counters)

    def close(self) -> None:
        for counter in self.counters:
            counter.close()
        for endpoint in self.endpoints:
            endpoint.close()


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


class Datapath:
    """OVS + ``ovn-controller`` on top of a started :class:`SandboxCluster`.

    Usage::

        with SandboxCluster(nb_schema="installed") as cluster:
            cluster.seed_dir(...)
            with Datapath(cluster) as dp:
                pods = dp.plug_pods()
                dp.sync_vnfs()   # after an apply created the VNF VMs
                pods["ns_a"].ping(pods["ns_b"].ip)
    """

    def __init__(
        self, cluster: Any, workdir: str | os.PathLike[str] | None = None, *, timeout: float = 15
    ) -> None:
        self.cluster = cluster
        self._own_tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._own_tmp = tempfile.TemporaryDirectory(prefix="osc-dp-")
            workdir = self._own_tmp.name
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.token = secrets.token_hex(3)
        self.ovsdb: Daemon | None = None
        self.vswitchd: Daemon | None = None
        self.controller: Daemon | None = None
        self.chassis = ""
        self.host_netns = f"{NETNS_PREFIX}{os.getpid()}-{self.token}-0-host"
        """The "host" network namespace ovs-vswitchd runs in: the userspace datapath creates
        devices with fixed names (``ovs-netdev``, ``br-int``), so two data paths in one network
        namespace collide; each gets its own, and the pods' veth host ends live there too."""
        self._host_created = False
        self.pods: dict[str, Endpoint] = {}
        self.vnfs: dict[str, Vnf] = {}
        """Running VNF guests by VirtualMachine ``<namespace>/<name>``."""
        self._count = 0

    # -- addresses -----------------------------------------------------------------------------
    @property
    def ovs_remote(self) -> str:
        return f"unix:{self.workdir / 'db.sock'}"

    @property
    def sb_remote(self) -> str:
        return str(self.cluster.ovn.sb_remote)

    @property
    def nb_remote(self) -> str:
        return str(self.cluster.nb_remote)

    @property
    def pids(self) -> list[int]:
        return [d.pid for d in (self.ovsdb, self.vswitchd, self.controller) if d is not None]

    @property
    def namespaces(self) -> list[str]:
        """Every network namespace this data path created and has not removed yet."""
        ends = [*self.pods.values(), *(e for v in self.vnfs.values() for e in v.endpoints)]
        names = {e.netns for e in ends} | ({self.host_netns} if self._host_created else set())
        return sorted(names)

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def distribution(self) -> Distribution:
        """The cluster's OVN distribution: OVS and ovn-controller match its northd."""
        dist = self.cluster.ovn.distribution
        assert isinstance(dist, Distribution)
        return dist

    def start(self) -> Datapath:
        reason = datapath_unavailable_reason(self.distribution)
        if reason:
            raise DatapathError(f"cannot start the data path: {reason}")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _vsctl(self, *args: str) -> str:
        return run_tool(
            self.distribution, "ovs-vsctl", f"--db={self.ovs_remote}", "--timeout=10", *args,
            timeout=15,
        )  # fmt: skip

    def _start(self) -> None:
        sweep_stale_namespaces()
        nodes = sorted(n["metadata"]["name"] for n in self.cluster.kube.objects("Node"))
        if not nodes or len(nodes) > 2:
            raise DatapathError(
                f"the data path plays 1 or 2 nodes on one chassis; the cluster has {len(nodes)}"
            )
        self.chassis = nodes[0]
        hostname = nodes[-1]
        dist = self.distribution
        env = child_env(self.workdir, dist)
        create_netns(self.host_netns)  # IPv6 off: the veths' host ends live here
        self._host_created = True
        db = self.workdir / "conf.db"
        run_tool(dist, "ovsdb-tool", "create", str(db), str(dist.vswitch_schema))
        log = self.workdir / "ovsdb-server.log"
        self.ovsdb = Daemon(
            "ovsdb-server (OVS conf.db)",
            [
                *dist.command("ovsdb-server"), "--no-chdir",
                f"--remote=punix:{self.workdir / 'db.sock'}",
                f"--unixctl={self.workdir / 'ovsdb-server.ctl'}", f"--log-file={log}",
                "-vconsole:off", "-vfile:info", str(db),
            ],
            log, self.workdir / "ovsdb-server.ctl", env,
        )  # fmt: skip
        remote = self.ovs_remote
        wait_until(lambda: ovsdb_rpc.list_dbs(remote, 1.0), self.ovsdb, "OVS db", self.timeout)
        self._vsctl(
            "--no-wait", "init", "--",
            "set", "Open_vSwitch", ".",
            f"external_ids:system-id={self.chassis}",
            f"external_ids:hostname={hostname}",
            f"external_ids:ovn-remote={self.sb_remote}",
            "external_ids:ovn-encap-type=geneve",
            "external_ids:ovn-encap-ip=127.0.0.1",
            "external_ids:ovn-bridge-datapath-type=netdev", "--",
            "add-br", "br-int", "--",
            "set", "Bridge", "br-int", "datapath_type=netdev", "fail-mode=secure",
            "other_config:disable-in-band=true",
        )  # fmt: skip
        log = self.workdir / "ovs-vswitchd.log"
        self.vswitchd = Daemon(
            "ovs-vswitchd",
            [
                "ip", "netns", "exec", self.host_netns,  # execs: the pid is ovs-vswitchd's
                *dist.command("ovs-vswitchd"), remote, "--no-chdir",
                f"--unixctl={self.workdir / 'ovs-vswitchd.ctl'}", f"--log-file={log}",
                "-vconsole:off", "-vfile:info",
            ],
            log, self.workdir / "ovs-vswitchd.ctl", env,
        )  # fmt: skip
        vswitchd = self.vswitchd
        wait_until(
            lambda: (self.workdir / "ovs-vswitchd.ctl").exists()
            and "br-int" in run_tool(dist, "ovs-appctl", "-t", str(vswitchd.ctl), "dpif/show",
                                     timeout=2),
            vswitchd, "br-int in the netdev datapath", self.timeout,
        )  # fmt: skip
        log = self.workdir / "ovn-controller.log"
        # ovn-controller 23.03 has no --unixctl: its control socket lands in $OVN_RUNDIR.
        self.controller = Daemon(
            "ovn-controller",
            [*dist.command("ovn-controller"), remote, "--no-chdir", f"--log-file={log}",
             "-vconsole:off", "-vfile:info"],
            log, self.workdir / "ovn-controller.ctl", env,
        )  # fmt: skip
        controller = self.controller
        wait_until(self._chassis_ready, controller, f"chassis {self.chassis} in SB", self.timeout)

    def _chassis_ready(self) -> bool:
        rows = ovsdb_rpc.transact(self.sb_remote, "OVN_Southbound", [
            {"op": "select", "table": "Chassis", "where": [["name", "==", self.chassis]],
             "columns": ["hostname", "encaps"]},
        ], timeout=2)[0]["rows"]  # fmt: skip
        return bool(rows)

    def stop(self) -> None:
        """Remove every namespace/veth we made, then stop ovn-controller, vswitchd, ovsdb."""
        for vnf in self.vnfs.values():
            vnf.close()
        for ep in [*self.pods.values(), *(e for v in self.vnfs.values() for e in v.endpoints)]:
            ep.close()
            delete_netns(ep.netns)
        self.pods.clear()
        self.vnfs.clear()
        for daemon in (self.controller, self.vswitchd, self.ovsdb):
            if daemon is not None:
                daemon.stop()
        if self._host_created:
            delete_netns(self.host_netns)
            self._host_created = False
        if self._own_tmp is not None:
            self._own_tmp.cleanup()
            self._own_tmp = None

    def __enter__(self) -> Datapath:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _check_alive(self) -> None:
        for daemon in (self.ovsdb, self.vswitchd, self.controller):
            if daemon is not None and not daemon.alive():
                raise DatapathError(daemon.failure("died").args[0])

    # -- plugging ------------------------------------------------------------------------------
    def _subnet(self, node: str) -> ipaddress.IPv4Network:
        obj = self.cluster.kube.get_object("Node", None, node)
        if obj is None:
            raise DatapathError(f"node {node} not found in the Kubernetes API emulator")
        return _subnet_of_node(obj)

    def _new_namespace(self, label: str, *sysctls: str) -> str:
        self._check_alive()
        self._count += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]", "-", label)[:40]
        netns = f"{NETNS_PREFIX}{os.getpid()}-{self.token}-{self._count}-{safe}"
        create_netns(netns, *sysctls)
        return netns

    def _add_nic(
        self, netns: str, ifname: str, lsp: str, mac: str, node: str, *,
        ip_address: str = "", iface_id_ver: str | None = None,
    ) -> Endpoint:  # fmt: skip
        """A veth ``ifname`` in ``netns``, host end on br-int as ``lsp`` (what a CNI plugin
        does); with ``ip_address`` also the address and a default route via the node subnet's
        ``.1``.

        TX checksum offload is turned off on both ends (see
        :func:`~osc_gitops_sandbox.netns.disable_tx_checksum_offload`: TCP through the userspace
        datapath's conntrack needs it). ``iface_id_ver``: the pod UID, which OVN-Kubernetes' CNI
        also writes to the OVS interface; ovn-controller refuses to bind a port whose LSP
        ``options:iface-id-ver`` differs (a recreated pod must not inherit the old port)."""
        self._count += 1
        veth = f"o{self.token}{self._count}"[:15]
        subnet = self._subnet(node)
        gateway = str(subnet.network_address + 1)
        host = ("-n", self.host_netns)
        ip(*host, "link", "add", veth, "type", "veth", "peer", "name", ifname, "netns", netns)
        ip(*host, "link", "set", veth, "up")
        disable_tx_checksum_offload(self.host_netns, veth)
        disable_tx_checksum_offload(netns, ifname)
        batch = [f"link set {ifname} address {mac}", f"link set {ifname} up"]
        if ip_address:
            batch += [
                f"addr add {ip_address}/{subnet.prefixlen} dev {ifname}",
                f"route add default via {gateway} dev {ifname}",
            ]
        ip("-n", netns, "-batch", "-", stdin="\n".join(batch))
        ids = [f"external_ids:iface-id={lsp}"]
        if iface_id_ver:
            ids.append(f"external_ids:iface-id-ver={iface_id_ver}")
        self._vsctl("add-port", "br-int", veth, "--", "set", "Interface", veth, *ids)
        return Endpoint(
            netns, veth, lsp, mac, ip_address, subnet.prefixlen if ip_address else 0,
            gateway if ip_address else "", node, ifname,
        )  # fmt: skip

    def _plug(
        self, label: str, lsp: str, mac: str, ip_address: str, node: str, *,
        sysctls: Iterable[str] = (), iface_id_ver: str | None = None,
    ) -> Endpoint:  # fmt: skip
        """A namespace with one addressed NIC ``eth0`` on ``lsp`` (a pod, a router guest)."""
        netns = self._new_namespace(label, *sysctls)
        try:
            return self._add_nic(
                netns, "eth0", lsp, mac, node, ip_address=ip_address, iface_id_ver=iface_id_ver
            )
        except BaseException:
            delete_netns(netns)
            raise

    def _unplug(self, *endpoints: Endpoint) -> None:
        for endpoint in endpoints:
            endpoint.close()
            with contextlib.suppress(OvnSandboxError):
                self._vsctl("--if-exists", "del-port", "br-int", endpoint.veth)
        for netns in sorted({e.netns for e in endpoints}):
            delete_netns(netns)

    def plug_pods(self, pods: Iterable[tuple[str, str]] | None = None) -> dict[str, Endpoint]:
        """Plug pods (``(namespace, name)``; default: every pod in the emulator) and wait
        until OVN reports their ports up. Returns all plugged pods by LSP name."""
        if pods is None:
            pods = [
                (p["metadata"]["namespace"], p["metadata"]["name"])
                for p in self.cluster.kube.objects("Pod")
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
            self.pods[lsp] = self._plug(
                lsp, lsp, net["mac_address"], address, pod["spec"]["nodeName"],
                iface_id_ver=pod["metadata"]["uid"],
            )  # fmt: skip
            new.append(lsp)
        self.wait_ports_up(new)
        return dict(self.pods)

    def unplug_pod(self, namespace: str, name: str) -> None:
        endpoint = self.pods.pop(f"{namespace}_{name}", None)
        if endpoint is not None:
            self._unplug(endpoint)

    def sync_vnfs(self, *, wait: bool = True) -> dict[str, Vnf]:
        """Play KubeVirt + ovs-cni for the reconciler's ``VirtualMachine`` objects.

        A VM with ``runStrategy: Always`` gets a running guest (a namespace) on its ``data-in``
        port; a VM that is gone, halted or recreated (new UID) loses its guest (a recreated VM
        gets a fresh one, so its counters restart at zero). Returns the running VNFs by
        ``<namespace>/<vm>``.
        """
        wanted: dict[str, dict[str, Any]] = {}
        for vm in self.cluster.kube.objects("VirtualMachine"):
            meta = vm["metadata"]
            if PORTS_ANNOTATION not in meta.get("annotations", {}):
                continue
            if vm.get("spec", {}).get("runStrategy", "Always") not in ("Always", "RerunOnFailure"):
                continue
            wanted[f"{meta['namespace']}/{meta['name']}"] = vm
        for key in list(self.vnfs):
            vm = wanted.get(key)
            if vm is None or vm["metadata"]["uid"] != self.vnfs[key].vm_uid:
                gone = self.vnfs.pop(key)
                gone.close()
                self._unplug(*gone.endpoints)
        new = []
        for key, vm in sorted(wanted.items()):
            if key in self.vnfs:
                continue
            self.vnfs[key] = self._start_guest(vm)
            new += [e.lsp for e in self.vnfs[key].endpoints]
        if wait:
            self.wait_ports_up(new)
        return dict(self.vnfs)

    def _start_guest(self, vm: dict[str, Any]) -> Vnf:
        """Play KubeVirt for one VM: a router guest when its ``data-in`` port has an address
        (router-policy), else a bridge guest on ``data-in`` + ``data-out`` (Network Function)."""
        meta = vm["metadata"]
        where = f"VirtualMachine {meta['namespace']}/{meta['name']}"
        spec = vm["spec"]["template"]["spec"]
        node = spec.get("nodeSelector", {}).get("kubernetes.io/hostname")
        if not node:
            raise DatapathError(f"{where} has no kubernetes.io/hostname nodeSelector")
        ports = dict(
            p.split("=", 1) for p in meta["annotations"][PORTS_ANNOTATION].split(",") if "=" in p
        )
        in_lsp, in_mac = self._vm_port(vm, "in", ports, where)
        address = self._lsp_ip(in_lsp, where)
        label = f"vnf-{meta['name']}"
        if address:
            endpoint = self._plug(
                label, in_lsp, in_mac, address, node, sysctls=ROUTER_GUEST_SYSCTLS
            )
            return Vnf(meta["namespace"], meta["name"], meta["uid"], endpoint)
        out_lsp, out_mac = self._vm_port(vm, "out", ports, where)
        netns = self._new_namespace(label)
        counters: list[FrameCounter] = []
        try:
            endpoint = self._add_nic(netns, "eth0", in_lsp, in_mac, node)
            out_endpoint = self._add_nic(netns, "eth1", out_lsp, out_mac, node)
            ip("-n", netns, "-batch", "-", stdin="\n".join([
                # No multicast snooping: with it the bridge joins 224.0.0.106 and sends IGMP
                # reports of its own into both NF ports, which counts as forwarded traffic.
                f"link add {VNF_BRIDGE} type bridge stp_state 0 forward_delay 0 mcast_snooping 0",
                f"link set {VNF_BRIDGE} multicast off",
                f"link set eth0 master {VNF_BRIDGE}",
                f"link set eth1 master {VNF_BRIDGE}",
                # A wire, not a learning switch: a pod's MAC arrives on data-out for traffic
                # towards it and on data-in for traffic from it (and, between two members of
                # one group, on both sides), so a learned entry would make the bridge drop a
                # frame "back out of the port it came in on".
                "link set eth0 type bridge_slave learning off flood on",
                "link set eth1 type bridge_slave learning off flood on",
                f"link set {VNF_BRIDGE} up",
            ]))  # fmt: skip
            counters += [FrameCounter(netns, "eth0"), FrameCounter(netns, "eth1")]
        except BaseException:
            for counter in counters:  # an open packet socket would keep the namespace alive
                counter.close()
            delete_netns(netns)
            raise
        return Vnf(meta["namespace"], meta["name"], meta["uid"], endpoint, out_endpoint, counters)

    def _vm_port(
        self, vm: dict[str, Any], side: str, ports: dict[str, str], where: str
    ) -> tuple[str, str]:
        """The OVN port and MAC of the VM's ``data-<side>`` NIC: the port as ovs-cni finds it,
        in the NAD's ``args.cni.ovnPort`` (checked against the ``osc.io/ports`` annotation)."""
        spec = vm["spec"]["template"]["spec"]
        name = f"data-{side}"
        iface = next(
            (i for i in spec["domain"]["devices"]["interfaces"] if i["name"] == name), None
        )
        network = next((n for n in spec.get("networks", []) if n["name"] == name), None)
        if iface is None or network is None or "multus" not in network:
            raise DatapathError(f"{where} has no multus {name} interface")
        nad = self.cluster.kube.get_object(
            "NetworkAttachmentDefinition", vm["metadata"]["namespace"],
            network["multus"]["networkName"],
        )  # fmt: skip
        lsp = ports.get(side)
        if nad is not None:  # ovs-cni reads the OVN port from the NAD's args.cni.ovnPort
            lsp = json.loads(nad["spec"]["config"])["args"]["cni"]["ovnPort"]
            if ports.get(side) not in (None, lsp):
                raise DatapathError(
                    f"{where}: annotation says {side}={ports.get(side)} but its NAD says {lsp}"
                )
        if not lsp:
            raise DatapathError(f"{where}: no OVN port for {name} (annotation or NAD)")
        return lsp, str(iface["macAddress"])

    def _lsp_ip(self, lsp: str, where: str) -> str:
        """The guest's address: what the reconciler wrote in the port's ``addresses`` (a
        router-policy VNF port); ``""`` for a port without one (a Network Function port)."""
        rows = ovsdb_rpc.transact(self.nb_remote, "OVN_Northbound", [
            {"op": "select", "table": "Logical_Switch_Port", "where": [["name", "==", lsp]],
             "columns": ["addresses"]},
        ])[0]["rows"]  # fmt: skip
        if not rows:
            raise DatapathError(f"{where}: OVN port {lsp} does not exist in the NB")
        addresses = ovsdb_rpc.from_atom(rows[0]["addresses"])
        for entry in [addresses] if isinstance(addresses, str) else addresses:
            parts = entry.split()
            if len(parts) >= 2:
                return str(parts[1])
        return ""

    # -- waiting and probing -------------------------------------------------------------------
    def wait_ports_up(self, lsps: Iterable[str], timeout: float | None = None) -> None:
        """Until northd reports every port ``up`` (bound here and its flows installed)."""
        pending = set(lsps)
        deadline = time.monotonic() + (timeout or self.timeout)
        while pending:
            self._check_alive()
            rows = ovsdb_rpc.transact(self.nb_remote, "OVN_Northbound", [
                {"op": "select", "table": "Logical_Switch_Port", "where": [],
                 "columns": ["name", "up"]},
            ])[0]["rows"]  # fmt: skip
            pending -= {r["name"] for r in rows if r.get("up") is True}
            if not pending:
                return
            if time.monotonic() > deadline:
                raise DatapathError(
                    f"port(s) {', '.join(sorted(pending))} not up after {timeout or self.timeout}"
                    f" s; ovn-controller log {self.workdir / 'ovn-controller.log'}:\n"
                    f"{tail(self.workdir / 'ovn-controller.log')}"
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
        self._check_alive()
        limit = int(max(timeout or self.timeout, 1))
        self.cluster.ovn.nbctl(f"--timeout={limit}", "--wait=hv", "sync", timeout=limit + 5)
        assert self.vswitchd is not None
        run_tool(self.distribution, "ovs-appctl", "-t", str(self.vswitchd.ctl),
                 "revalidator/purge", timeout=limit)  # fmt: skip

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
        """Lines where ovn-controller rejected a logical flow (northd accepts matches that
        ovn-controller cannot parse, e.g. ``inport != "p"``: such rows are silently inert)."""
        log = self.workdir / "ovn-controller.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return [ln for ln in text.splitlines() if "error parsing" in ln]

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
        start = time.monotonic()
        while True:
            before = vnf.forwarded
            src.new_flow()
            reply = src.ping(dst.ip, min(0.2, max(timeout, 0.01)))
            if reply.ok and vnf.forwarded > before:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise DatapathError(
                    f"traffic {src.lsp} -> {dst.lsp} did not pass VNF {vnf.vm} within {timeout} s"
                )
            time.sleep(interval)

    def set_forwarding(self, vnf: Vnf, enabled: bool) -> None:
        """Let the guest pass traffic on or not (off = a dead VNF that swallows packets): IP
        forwarding of a router guest; the bridge of a bridge guest (down: its ports stop
        forwarding, frames are dropped)."""
        netns = vnf.endpoint.netns
        if vnf.bridge:
            ip("-n", netns, "link", "set", VNF_BRIDGE, "up" if enabled else "down")
            return
        sysctl(netns, f"net.ipv4.ip_forward={1 if enabled else 0}")
        if enabled:  # re-enabling forwarding resets these per-interface defaults in some kernels
            sysctl(
                netns, "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0",
                "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0",
            )  # fmt: skip
