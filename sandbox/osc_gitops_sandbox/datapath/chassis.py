"""One OVN chassis, and the underlay that carries Geneve between several of them.

A :class:`Chassis` is what runs on one Kubernetes node of an OVN-Kubernetes cluster: an OVS
database (``conf.db``), ``ovs-vswitchd`` with the integration bridge ``br-int`` (the userspace
``netdev`` datapath: no kernel module), and ``ovn-controller`` against a Southbound DB (the
cluster's, or in interconnect mode its own zone's). ``ovs-vswitchd`` runs in a network namespace
of its own (the chassis' "host"): the userspace datapath creates devices with fixed names
(``ovs-netdev``), so two datapaths in one namespace collide; the veth host ends of the pods it
plugs live there too.

Several chassis talk Geneve over an :class:`Underlay`: a namespace with a Linux bridge
(``br-ul``), one veth per chassis. OVS' userspace datapath only tunnels through a bridge of its
own (native tunnelling: the encapsulated packet leaves by the bridge the route to the remote
tunnel IP points to), so each chassis gets ``br-phy`` (``netdev``, ``NORMAL``) holding its
underlay NIC, with the chassis' tunnel IP (``ovn-encap-ip``) on ``br-phy``'s internal port, and
a static ``tnl/neigh`` entry per peer (no ARP race on the first packet). The underlay's MTU is
9000, so the pods' 1500-byte frames fit with the Geneve header.

A single chassis without an underlay is the older setup (``ovn-encap-ip=127.0.0.1``, no tunnel
crossed): one chassis plays two nodes through its name and hostname (ovn-controller binds a
port whose ``requested-chassis`` equals either).

Processes are owned children, stopped by PID (sid's daemons are all named ``ld-linux-x86-64``);
namespaces are ``osc-dp-<pid>-…`` and registered for removal at exit.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import signal
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from osc_gitops_sandbox.datapath.netns import (
    NETNS_PREFIX,
    DatapathError,
    create_netns,
    delete_netns,
    disable_tx_checksum_offload,
    ip,
)
from osc_gitops_sandbox.lifecycle import Lifecycle
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import Distribution
from osc_gitops_sandbox.ovn.stack import Daemon, child_env, run_tool, tail, wait_until

__all__ = ["UNDERLAY_MTU", "UNDERLAY_NETWORK", "Chassis", "Underlay"]

UNDERLAY_NETWORK = ipaddress.ip_network("172.31.0.0/24")
"""The nodes' own network (their InternalIPs, the Geneve tunnel endpoints)."""
UNDERLAY_MTU = 9000
TUNNEL_BRIDGE = "br-phy"

LOG = logging.getLogger(__name__)
CRASH_EXIT_CODES = (-signal.SIGSEGV, -signal.SIGABRT)
"""How a crashed daemon ends (a kill by the harness or a test is SIGTERM or SIGKILL)."""
CONTROLLER_RESTARTS = 3
"""Crashes of one chassis' ovn-controller survived before the chassis counts as dead."""
CONTROLLER_CRASHES: list[str] = []
"""Each crash of an ovn-controller that was restarted, for the test session's summary (sid's
26.03.1 SIGSEGVs now and then while it claims a chain's ports: docs/upstream/README.md)."""


class Underlay(Lifecycle):
    """The nodes' network: a Linux bridge in a namespace of its own, a veth per chassis."""

    def __init__(self, token: str) -> None:
        self.netns = f"{NETNS_PREFIX}{os.getpid()}-{token}-ul"
        self._created = False
        self._count = 0

    def _start(self) -> None:
        create_netns(self.netns)
        self._created = True
        ip("-n", self.netns, "-batch", "-", stdin="\n".join([
            "link add br-ul type bridge stp_state 0 forward_delay 0 mcast_snooping 0",
            f"link set br-ul mtu {UNDERLAY_MTU} up",
        ]))  # fmt: skip

    def _stop(self) -> None:
        if self._created:
            delete_netns(self.netns)
            self._created = False

    def attach(self, netns: str, ifname: str) -> None:
        """A veth ``ifname`` in ``netns`` whose other end is a port of ``br-ul``."""
        self._count += 1
        peer = f"ul{os.getpid() % 10000}x{self._count}"[:15]
        ip("-n", self.netns, "link", "add", peer, "mtu", str(UNDERLAY_MTU), "type", "veth",
           "peer", "name", ifname, "mtu", str(UNDERLAY_MTU), "netns", netns)  # fmt: skip
        ip("-n", self.netns, "link", "set", peer, "master", "br-ul", "up")
        disable_tx_checksum_offload(self.netns, peer)
        disable_tx_checksum_offload(netns, ifname)


@dataclass(eq=False)
class Chassis(Lifecycle):
    """OVS + ``ovn-controller`` for one node (see the module docstring).

    ``name``: the chassis name (``system-id``); ``hostname``: what else (default: ``name``) a
    port's ``requested-chassis`` may say to bind here. ``sb_remote``: the Southbound DB it joins.
    ``encap_ip``: its Geneve endpoint; with an ``underlay`` it is put on ``br-phy``.
    ``interconnect``: ``ovn-is-interconn=true`` (OVN-Kubernetes sets it on every node of an
    interconnect cluster: the transit switch's remote ports are reached through this chassis).
    """

    name: str
    workdir: Path
    distribution: Distribution
    sb_remote: str
    _: KW_ONLY
    netns: str
    hostname: str | None = None
    encap_ip: str = "127.0.0.1"
    underlay: Underlay | None = None
    interconnect: bool = False
    timeout: float = 15.0
    ovsdb: Daemon | None = field(default=None, init=False)
    vswitchd: Daemon | None = field(default=None, init=False)
    controller: Daemon | None = field(default=None, init=False)
    _restarts: int = field(default=0, init=False)
    _netns_created: bool = field(default=False, init=False)

    @property
    def ovs_remote(self) -> str:
        return f"unix:{self.workdir / 'db.sock'}"

    @property
    def daemons(self) -> list[Daemon]:
        return [d for d in (self.ovsdb, self.vswitchd, self.controller) if d is not None]

    @property
    def controller_log(self) -> Path:
        return self.workdir / "ovn-controller.log"

    def vsctl(self, *args: str) -> str:
        return run_tool(
            self.distribution, "ovs-vsctl", f"--db={self.ovs_remote}", "--timeout=10", *args,
            timeout=15,
        )  # fmt: skip

    def appctl(self, daemon: Daemon | None, *args: str, timeout: float = 5.0) -> str:
        if daemon is None:
            raise DatapathError(f"chassis {self.name} is not running")
        return run_tool(self.distribution, "ovs-appctl", "-t", str(daemon.ctl), *args,
                        timeout=timeout)  # fmt: skip

    # -- lifecycle -------------------------------------------------------------------------
    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        dist = self.distribution
        env = child_env(self.workdir, dist)
        create_netns(self.netns)  # IPv6 off: the veths' host ends live here
        self._netns_created = True
        db = self.workdir / "conf.db"
        run_tool(dist, "ovsdb-tool", "create", str(db), str(dist.vswitch_schema))
        log = self.workdir / "ovsdb-server.log"
        self.ovsdb = Daemon(
            f"ovsdb-server (OVS conf.db of {self.name})",
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
        ids = [
            f"external_ids:system-id={self.name}",
            f"external_ids:hostname={self.hostname or self.name}",
            f"external_ids:ovn-remote={self.sb_remote}", "external_ids:ovn-encap-type=geneve",
            f"external_ids:ovn-encap-ip={self.encap_ip}",
            "external_ids:ovn-bridge-datapath-type=netdev",
        ]  # fmt: skip
        if self.interconnect:
            ids.append("external_ids:ovn-is-interconn=true")
        bridges = [
            "--", "add-br", "br-int", "--",
            "set", "Bridge", "br-int", "datapath_type=netdev", "fail-mode=secure",
            "other_config:disable-in-band=true",
        ]  # fmt: skip
        if self.underlay is not None:
            self.underlay.attach(self.netns, "ul0")
            bridges += [
                "--", "add-br", TUNNEL_BRIDGE, "--",
                "set", "Bridge", TUNNEL_BRIDGE, "datapath_type=netdev",
                "other_config:disable-in-band=true", "--",
                "set", "Interface", TUNNEL_BRIDGE, f"mtu_request={UNDERLAY_MTU}", "--",
                "add-port", TUNNEL_BRIDGE, "ul0", "--",
                "set", "Interface", "ul0", f"mtu_request={UNDERLAY_MTU}",
            ]  # fmt: skip
        self.vsctl("--no-wait", "init", "--", "set", "Open_vSwitch", ".", *ids, *bridges)
        log = self.workdir / "ovs-vswitchd.log"
        self.vswitchd = Daemon(
            f"ovs-vswitchd ({self.name})",
            [
                "ip", "netns", "exec", self.netns,  # execs: the pid is ovs-vswitchd's
                *dist.command("ovs-vswitchd"), remote, "--no-chdir",
                f"--unixctl={self.workdir / 'ovs-vswitchd.ctl'}", f"--log-file={log}",
                "-vconsole:off", "-vfile:info",
            ],
            log, self.workdir / "ovs-vswitchd.ctl", env,
        )  # fmt: skip
        vswitchd = self.vswitchd
        wanted = ["br-int"] + ([TUNNEL_BRIDGE] if self.underlay else [])
        wait_until(
            lambda: (self.workdir / "ovs-vswitchd.ctl").exists()
            and all(b in self.appctl(vswitchd, "dpif/show", timeout=2) for b in wanted),
            vswitchd, "bridges in the netdev datapath", self.timeout,
        )  # fmt: skip
        if self.underlay is not None:
            self._address_tunnel_bridge()
        self.controller = self._start_controller()
        wait_until(self.registered, self.controller, f"chassis {self.name} in SB", self.timeout)

    def _start_controller(self) -> Daemon:
        # ovn-controller 23.03 has no --unixctl: its control socket lands in $OVN_RUNDIR.
        log = self.controller_log
        return Daemon(
            f"ovn-controller ({self.name})",
            [*self.distribution.command("ovn-controller"), self.ovs_remote, "--no-chdir",
             f"--log-file={log}", "-vconsole:off", "-vfile:info"],
            log, self.workdir / "ovn-controller.ctl", child_env(self.workdir, self.distribution),
        )  # fmt: skip

    def _address_tunnel_bridge(self) -> None:
        """The tunnel IP on ``br-phy``'s internal port, the underlay NIC without one."""
        prefix = UNDERLAY_NETWORK.prefixlen
        ip("-n", self.netns, "-batch", "-", stdin="\n".join([
            f"link set ul0 mtu {UNDERLAY_MTU} up",
            f"link set {TUNNEL_BRIDGE} mtu {UNDERLAY_MTU} up",
            f"addr add {self.encap_ip}/{prefix} dev {TUNNEL_BRIDGE}",
        ]))  # fmt: skip
        disable_tx_checksum_offload(self.netns, TUNNEL_BRIDGE)
        # ovs-vswitchd learns the route from the kernel (netlink); wait until it has, so the
        # first encapsulated packet finds its way out of br-phy.
        assert self.vswitchd is not None
        wait_until(
            lambda: f"{UNDERLAY_NETWORK} dev {TUNNEL_BRIDGE}"
            in self.appctl(self.vswitchd, "ovs/route/show", timeout=2),
            self.vswitchd, "the underlay route in ovs-vswitchd", self.timeout,
        )  # fmt: skip

    def add_peers(self, peers: Iterable[tuple[str, str]]) -> None:
        """Static neighbour entries ``(tunnel IP, MAC of its br-phy)`` for the other chassis,
        so the first encapsulated packet does not wait for ARP."""
        for address, mac in peers:
            if address != self.encap_ip:
                self.appctl(self.vswitchd, "tnl/neigh/set", TUNNEL_BRIDGE, address, mac)

    def tunnel_mac(self) -> str:
        """The MAC of ``br-phy`` (the source of this chassis' encapsulated frames)."""
        out = self.vsctl("get", "Interface", TUNNEL_BRIDGE, "mac_in_use")
        return out.strip().strip('"')

    def registered(self) -> bool:
        rows = ovsdb_rpc.transact(self.sb_remote, "OVN_Southbound", [
            {"op": "select", "table": "Chassis", "where": [["name", "==", self.name]],
             "columns": ["hostname"]},
        ], timeout=2)[0]["rows"]  # fmt: skip
        return bool(rows)

    def _stop(self) -> None:
        for daemon in (self.controller, self.vswitchd, self.ovsdb):
            if daemon is not None:
                daemon.stop()
        if self._netns_created:
            delete_netns(self.netns)
            self._netns_created = False

    # -- running -----------------------------------------------------------------------------
    def check_alive(self) -> None:
        """Raise when a daemon of this chassis is gone; an ovn-controller that crashed (SIGSEGV,
        SIGABRT) is restarted instead, as kubelet restarts OVN-Kubernetes' ovn-controller
        container, at most :data:`CONTROLLER_RESTARTS` times, and the crash is recorded in
        :data:`CONTROLLER_CRASHES` (the test session prints them: an upstream bug, never ours
        to hide)."""
        for daemon in self.daemons:
            if daemon.alive():
                continue
            crashed = daemon.proc.poll() in CRASH_EXIT_CODES
            if daemon is self.controller and crashed and self._restarts < CONTROLLER_RESTARTS:
                self._restart_controller(daemon)
                continue
            raise DatapathError(daemon.failure("died").args[0])

    def _restart_controller(self, crashed: Daemon) -> None:
        self._restarts += 1
        evidence = crashed.failure("crashed").args[0]
        kept = self.controller_log.with_suffix(f".crash-{self._restarts}.log")
        with contextlib.suppress(OSError):
            kept.write_text(self.controller_log.read_text(errors="replace"))
        CONTROLLER_CRASHES.append(f"{evidence}\n(full log kept in {kept})")
        LOG.warning("ovn-controller of chassis %s crashed; restarted as kubelet would: %s",
                    self.name, evidence.splitlines()[0])  # fmt: skip
        self.controller = self._start_controller()

    def purge(self, timeout: float) -> None:
        """Drop the datapath flows cached from older OpenFlow tables (see ``Datapath.wait_hv``)."""
        self.appctl(self.vswitchd, "revalidator/purge", timeout=timeout)

    def controller_errors(self) -> list[str]:
        """Lines where ovn-controller rejected a logical flow."""
        log = self.controller_log
        text = log.read_text(errors="replace") if log.exists() else ""
        return [ln for ln in text.splitlines() if "error parsing" in ln]

    def log_tail(self) -> str:
        return f"ovn-controller log {self.controller_log}:\n{tail(self.controller_log)}"
