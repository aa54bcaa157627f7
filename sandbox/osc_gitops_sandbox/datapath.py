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
  ``data-in`` NIC is attached to the OVN port named by the NAD's ``args.cni.ovnPort`` (ovs-cni),
  with the VM's ``macAddress`` and the IP of the LSP row the reconciler wrote, and the guest
  forwards (``ip_forward=1``, ``rp_filter=0``, ``send_redirects=0``). Turning forwarding off
  simulates a dead VNF. :meth:`Datapath.sync_vnfs` follows VM creation/deletion.

``ovs-vswitchd`` runs in a network namespace of its own (the "host" of this data path): the
userspace datapath creates devices with fixed names (``ovs-netdev``), so two data paths in one
namespace collide. The veths' host ends live there as well, so nothing is added to the machine's
own network namespace. Namespaces are named ``osc-dp-<pid>-<random>-…`` (veths
``o<random><n>``), so parallel runs never clash, and a later run removes namespaces left by a
process that was SIGKILLed.

Probes run in-process: a short-lived thread enters the namespace (``setns``), opens a raw ICMP
socket (which stays bound to that namespace) or reads ``/proc/thread-self/net/snmp``; no
``ping`` binary is needed.

This module must not import ``ovs``/``ovsdbapp``/``kubernetes``: it shells out to ``ip``,
``ovs-vsctl`` and ``sysctl`` and reads the databases through :mod:`osc_gitops_sandbox.ovsdb_rpc`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import ipaddress
import json
import os
import re
import secrets
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from osc_gitops_sandbox import distributions, ovsdb_rpc
from osc_gitops_sandbox.distributions import HOST, Distribution
from osc_gitops_sandbox.ovn import (
    Daemon,
    OvnSandboxError,
    child_env,
    run_command,
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
NETNS_DIR = Path("/run/netns")
NETNS_PREFIX = "osc-dp-"
POD_NETWORKS = "k8s.ovn.org/pod-networks"
NODE_SUBNETS = "k8s.ovn.org/node-subnets"
PORTS_ANNOTATION = "osc.io/ports"
CLONE_NEWNET = 0x40000000

T = TypeVar("T")


class DatapathError(OvnSandboxError):
    """The data path could not be built or probed; the message names the process, namespace
    or port, and ends with the tail of the relevant log where there is one."""


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


# ---------------------------------------------------------------------------------------------
# network namespaces, entered from a short-lived thread

_libc = ctypes.CDLL(None, use_errno=True)


def _in_netns(netns: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a fresh thread that first joins ``netns`` (only that thread switches).

    Sockets created there stay in ``netns`` for their lifetime, so callers can use them from
    any thread afterwards; files under ``/proc/thread-self/net`` show that namespace.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            fd = os.open(NETNS_DIR / netns, os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({netns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"netns-{netns}", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise DatapathError(f"network namespace {netns}: {box['error']}") from box["error"]
    return box["value"]


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


@dataclass(frozen=True)
class PingResult:
    """One ICMP echo: ``ok`` when the reply came back; ``ttl`` of the reply as received (each
    routing hop, OVN's router and a forwarding VNF alike, takes one off)."""

    ok: bool
    ttl: int | None = None
    rtt_ms: float | None = None


@dataclass
class Endpoint:
    """A plugged interface: a namespace with ``eth0`` on ``br-int`` as the OVN port ``lsp``."""

    netns: str
    veth: str
    lsp: str
    mac: str
    ip: str
    prefixlen: int
    gateway: str
    node: str
    _sock: socket.socket | None = None
    _ident: int = 0
    _seq: int = 0

    def ping(self, dst: str, timeout: float = 1.0) -> PingResult:
        """Send one ICMP echo request to ``dst`` from this namespace and wait for the reply."""
        if self._sock is None:
            self._sock = _in_netns(
                self.netns,
                lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
            )
            self._ident = secrets.randbelow(0xFFFF) + 1
        sock = self._sock
        while select.select([sock], [], [], 0)[0]:  # drop stale replies of earlier probes
            sock.recv(65535)
        self._seq = (self._seq + 1) & 0xFFFF
        header = struct.pack("!BBHHH", 8, 0, 0, self._ident, self._seq)
        payload = b"osc-gitops-datapath"
        packet = (
            struct.pack("!BBHHH", 8, 0, _checksum(header + payload), self._ident, self._seq)
            + payload
        )
        start = time.monotonic()
        sock.sendto(packet, (dst, 0))
        deadline = start + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([sock], [], [], left)[0]:
                break
            data, (src, _) = sock.recvfrom(65535)
            ihl = (data[0] & 0x0F) * 4
            icmp_type, _, _, ident, seq = struct.unpack("!BBHHH", data[ihl : ihl + 8])
            if icmp_type == 0 and ident == self._ident and seq == self._seq and src == dst:
                return PingResult(True, data[8], (time.monotonic() - start) * 1000)
        return PingResult(False)

    def ip_counters(self) -> dict[str, int]:
        """The ``Ip:`` line of ``/proc/net/snmp`` in this namespace (``IpForwDatagrams`` …)."""

        def read() -> str:
            return Path("/proc/thread-self/net/snmp").read_text()

        lines = [ln.split() for ln in _in_netns(self.netns, read).splitlines()]
        names, values = (ln for ln in lines if ln and ln[0] == "Ip:")
        return {k: int(v) for k, v in zip(names[1:], values[1:], strict=True)}

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


@dataclass(frozen=True)
class Probe:
    """``sent`` echo requests from one pod to another: how many came back, the TTL of the last
    reply, and by how much each running VNF's ``IpForwDatagrams`` rose meanwhile."""

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
    """A VNF instance as this harness runs it (the guest of one ``VirtualMachine``)."""

    namespace: str
    """Kubernetes namespace of the VirtualMachine."""
    vm: str
    vm_uid: str
    endpoint: Endpoint

    @property
    def forwarded(self) -> int:
        """``IpForwDatagrams``: packets this VNF routed on (the proof of steering)."""
        return self.endpoint.ip_counters()["ForwDatagrams"]


# ---------------------------------------------------------------------------------------------
# cleanup of everything we create, even on crash

_LIVE_NETNS: set[str] = set()
_LIVE_LOCK = threading.Lock()


def _ip(*args: str, check: bool = True) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise DatapathError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")


def _delete_netns(name: str) -> None:
    """Deleting the namespace destroys its veth pair too (the peer inside dies with it)."""
    _ip("netns", "delete", name, check=False)
    with _LIVE_LOCK:
        _LIVE_NETNS.discard(name)


def _delete_all_live_netns() -> None:
    with _LIVE_LOCK:
        names = sorted(_LIVE_NETNS)
    for name in names:
        _delete_netns(name)


atexit.register(_delete_all_live_netns)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def sweep_stale_namespaces() -> list[str]:
    """Remove ``osc-dp-<pid>-…`` namespaces whose creating process is gone (a SIGKILLed run)."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in sorted(NETNS_DIR.iterdir()):
            m = re.match(rf"^{NETNS_PREFIX}(\d+)-", entry.name)
            if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
                _delete_netns(entry.name)
                removed.append(entry.name)
    return removed


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
        ends = [*self.pods.values(), *(v.endpoint for v in self.vnfs.values())]
        return sorted([e.netns for e in ends] + ([self.host_netns] if self._host_created else []))

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
        _ip("netns", "add", self.host_netns)
        with _LIVE_LOCK:
            _LIVE_NETNS.add(self.host_netns)
        self._host_created = True
        _ip("-n", self.host_netns, "link", "set", "lo", "up")
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
        for ep in [*self.pods.values(), *(v.endpoint for v in self.vnfs.values())]:
            ep.close()
            _delete_netns(ep.netns)
        self.pods.clear()
        self.vnfs.clear()
        for daemon in (self.controller, self.vswitchd, self.ovsdb):
            if daemon is not None:
                daemon.stop()
        if self._host_created:
            _delete_netns(self.host_netns)
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

    def _plug(
        self, label: str, lsp: str, mac: str, ip: str, node: str, *, vnf: bool,
        iface_id_ver: str | None = None,
    ) -> Endpoint:  # fmt: skip
        """Namespace + veth, host end on br-int as ``lsp`` (what a CNI plugin does).

        ``iface_id_ver``: the pod UID, which OVN-Kubernetes' CNI also writes to the OVS
        interface; ovn-controller refuses to bind a port whose LSP ``options:iface-id-ver``
        differs (a recreated pod with the same name must not inherit the old port)."""
        self._check_alive()
        self._count += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]", "-", label)[:40]
        netns = f"{NETNS_PREFIX}{os.getpid()}-{self.token}-{self._count}-{safe}"
        veth = f"o{self.token}{self._count}"[:15]
        subnet = self._subnet(node)
        gateway = str(subnet.network_address + 1)
        _ip("netns", "add", netns)
        with _LIVE_LOCK:
            _LIVE_NETNS.add(netns)
        endpoint = Endpoint(netns, veth, lsp, mac, ip, subnet.prefixlen, gateway, node)
        try:
            sysctls = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
            if vnf:
                sysctls += [
                    "net.ipv4.ip_forward=1",
                    "net.ipv4.conf.all.rp_filter=0",
                    "net.ipv4.conf.default.rp_filter=0",
                    "net.ipv4.conf.all.send_redirects=0",
                    "net.ipv4.conf.default.send_redirects=0",
                ]
            run_command(["ip", "netns", "exec", netns, "sysctl", "-q", "-w", *sysctls])
            host = ("-n", self.host_netns)
            _ip(*host, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
            _ip(*host, "link", "set", veth, "up")
            batch = "\n".join([
                f"link set eth0 address {mac}",
                f"addr add {ip}/{subnet.prefixlen} dev eth0",
                "link set eth0 up",
                "link set lo up",
                f"route add default via {gateway} dev eth0",
            ])  # fmt: skip
            proc = subprocess.run(
                ["ip", "-n", netns, "-batch", "-"], input=batch, capture_output=True,
                text=True, check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                raise DatapathError(f"configuring {netns}: {proc.stderr.strip()}")
            ids = [f"external_ids:iface-id={lsp}"]
            if iface_id_ver:
                ids.append(f"external_ids:iface-id-ver={iface_id_ver}")
            self._vsctl("add-port", "br-int", veth, "--", "set", "Interface", veth, *ids)
        except BaseException:
            _delete_netns(netns)
            raise
        return endpoint

    def _unplug(self, endpoint: Endpoint) -> None:
        endpoint.close()
        with contextlib.suppress(OvnSandboxError):
            self._vsctl("--if-exists", "del-port", "br-int", endpoint.veth)
        _delete_netns(endpoint.netns)

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
            ip = net["ip_addresses"][0].split("/")[0]
            self.pods[lsp] = self._plug(
                lsp, lsp, net["mac_address"], ip, pod["spec"]["nodeName"], vnf=False,
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
                self._unplug(self.vnfs.pop(key).endpoint)
        new = []
        for key, vm in sorted(wanted.items()):
            if key in self.vnfs:
                continue
            self.vnfs[key] = self._start_guest(vm)
            new.append(self.vnfs[key].endpoint.lsp)
        if wait:
            self.wait_ports_up(new)
        return dict(self.vnfs)

    def _start_guest(self, vm: dict[str, Any]) -> Vnf:
        meta = vm["metadata"]
        where = f"VirtualMachine {meta['namespace']}/{meta['name']}"
        spec = vm["spec"]["template"]["spec"]
        node = spec.get("nodeSelector", {}).get("kubernetes.io/hostname")
        if not node:
            raise DatapathError(f"{where} has no kubernetes.io/hostname nodeSelector")
        iface = next(
            (i for i in spec["domain"]["devices"]["interfaces"] if i["name"] == "data-in"), None
        )
        network = next((n for n in spec.get("networks", []) if n["name"] == "data-in"), None)
        if iface is None or network is None or "multus" not in network:
            raise DatapathError(f"{where} has no multus data-in interface")
        ports = dict(
            p.split("=", 1) for p in meta["annotations"][PORTS_ANNOTATION].split(",") if "=" in p
        )
        nad = self.cluster.kube.get_object(
            "NetworkAttachmentDefinition", meta["namespace"], network["multus"]["networkName"]
        )
        lsp = ports.get("in")
        if nad is not None:  # ovs-cni reads the OVN port from the NAD's args.cni.ovnPort
            lsp = json.loads(nad["spec"]["config"])["args"]["cni"]["ovnPort"]
            if ports.get("in") not in (None, lsp):
                raise DatapathError(
                    f"{where}: annotation says in={ports.get('in')} but its NAD says {lsp}"
                )
        if not lsp:
            raise DatapathError(f"{where}: no OVN port for data-in (annotation or NAD)")
        ip = self._lsp_ip(lsp, where)
        endpoint = self._plug(f"vnf-{meta['name']}", lsp, iface["macAddress"], ip, node, vnf=True)
        return Vnf(meta["namespace"], meta["name"], meta["uid"], endpoint)

    def _lsp_ip(self, lsp: str, where: str) -> str:
        """The guest's address: what the reconciler wrote in the port's ``addresses``."""
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
        raise DatapathError(
            f"{where}: OVN port {lsp} has no IP in addresses ({addresses!r}); the data path "
            'needs --steering router-policy, where the VNF port carries "<MAC> <IP>"'
        )

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
        (``ovn-nbctl --wait=hv sync``: NB_Global.nb_cfg reaches the chassis and comes back)."""
        self._check_alive()
        limit = int(max(timeout or self.timeout, 1))
        self.cluster.ovn.nbctl(f"--timeout={limit}", "--wait=hv", "sync", timeout=limit + 5)

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

    def probe(self, src: Endpoint, dst: Endpoint, count: int = 3, timeout: float = 1.0) -> Probe:
        """Ping ``dst`` from ``src`` ``count`` times and diff every VNF's forward counter."""
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

    def wait_steered(
        self, src: Endpoint, dst: Endpoint, vnf: Vnf, timeout: float = 10.0, interval: float = 0.005
    ) -> float:
        """Poll with single pings until one comes back *and* ``vnf`` forwarded packets;
        returns the seconds it took. Used to measure label-change-to-steered latency."""
        start = time.monotonic()
        while True:
            before = vnf.forwarded
            reply = src.ping(dst.ip, min(0.2, max(timeout, 0.01)))
            if reply.ok and vnf.forwarded > before:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise DatapathError(
                    f"traffic {src.lsp} -> {dst.lsp} did not pass VNF {vnf.vm} within {timeout} s"
                )
            time.sleep(interval)

    def set_forwarding(self, vnf: Vnf, enabled: bool) -> None:
        """Turn the guest's IP forwarding on/off (off = a dead VNF that swallows packets)."""
        run_command([
            "ip", "netns", "exec", vnf.endpoint.netns, "sysctl", "-q", "-w",
            f"net.ipv4.ip_forward={1 if enabled else 0}",
        ])  # fmt: skip
        if enabled:  # re-enabling forwarding resets these per-interface defaults in some kernels
            run_command([
                "ip", "netns", "exec", vnf.endpoint.netns, "sysctl", "-q", "-w",
                "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0",
                "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0",
            ])  # fmt: skip
