"""Network namespaces for the data path: creating, entering, probing and sweeping them.

Pods and VNF guests of :mod:`osc_gitops_sandbox.datapath.network` are network namespaces. Probes run
in-process: a short-lived thread enters a namespace (``setns``) and opens a socket there (the
socket stays in that namespace for its lifetime) or reads ``/proc/thread-self/net/...``; no
``ping`` or ``ethtool`` binary is needed.

Every namespace is named ``osc-dp-<pid>-…`` and registered, so it is removed at exit even after a
crashed test, and a later run removes those of a process that was SIGKILLed
(:func:`sweep_stale_namespaces`).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import ctypes
import errno
import fcntl
import ipaddress
import os
import re
import secrets
import select
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from osc_gitops_sandbox.ovn.stack import OvnSandboxError

__all__ = [
    "NETNS_DIR",
    "NETNS_PREFIX",
    "DatapathError",
    "Endpoint",
    "FrameCounter",
    "PingResult",
    "TcpServer",
    "create_netns",
    "delete_netns",
    "disable_tx_checksum_offload",
    "icmp_checksum",
    "in_netns",
    "ip",
    "sweep_stale_namespaces",
    "sysctl",
]

NETNS_DIR = Path("/run/netns")
NETNS_PREFIX = "osc-dp-"
CLONE_NEWNET = 0x40000000
SIOCETHTOOL = 0x8946
ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_8021Q = 0x8100
PACKET_OUTGOING = 4
LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")
ETHTOOL_STXCSUM = 0x17
"""ethtool's "tx off": set TX checksum offload (``struct ethtool_value``)."""

T = TypeVar("T")


class DatapathError(OvnSandboxError):
    """The data path could not be built or probed; the message names the process, namespace
    or port, and ends with the tail of the relevant log where there is one."""


_libc = ctypes.CDLL(None, use_errno=True)


def in_netns(netns: str, fn: Callable[[], T]) -> T:
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


# ---------------------------------------------------------------------------------------------
# creating and removing namespaces, even on crash

_LIVE_NETNS: set[str] = set()
_LIVE_LOCK = threading.Lock()


def ip(*args: str, check: bool = True, stdin: str | None = None) -> None:
    """``ip ARGS`` (``stdin`` feeds ``ip -batch -``); a failure names the command."""
    proc = subprocess.run(
        ["ip", *args], input=stdin, capture_output=True, text=True, check=False
    )  # fmt: skip
    if check and proc.returncode != 0:
        raise DatapathError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")


def sysctl(netns: str, *settings: str) -> None:
    """``sysctl -w SETTINGS`` inside ``netns``."""
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, "sysctl", "-q", "-w", *settings],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise DatapathError(f"sysctl in {netns} failed: {proc.stderr.strip()}")


def create_netns(name: str, *sysctls: str) -> None:
    """A new registered namespace with ``lo`` up and IPv6 off, then ``sysctls``.

    IPv6 is off everywhere because every interface would otherwise send MLD reports and router
    solicitations into OVN: noise in every counter, and frames a bridging VNF sends round."""
    ip("netns", "add", name)
    with _LIVE_LOCK:
        _LIVE_NETNS.add(name)
    try:
        sysctl(
            name, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
            *sysctls,
        )  # fmt: skip
        ip("-n", name, "link", "set", "lo", "up")
    except BaseException:
        delete_netns(name)
        raise


def delete_netns(name: str) -> None:
    """Deleting the namespace destroys its veth pairs too (the peers outside die with them)."""
    ip("netns", "delete", name, check=False)
    with _LIVE_LOCK:
        _LIVE_NETNS.discard(name)


def _delete_all_live_netns() -> None:
    with _LIVE_LOCK:
        names = sorted(_LIVE_NETNS)
    for name in names:
        delete_netns(name)


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
                delete_netns(entry.name)
                removed.append(entry.name)
    return removed


def disable_tx_checksum_offload(netns: str, ifname: str) -> None:
    """``ethtool -K <ifname> tx off`` inside ``netns``, through the ioctl.

    A veth hands a TCP/UDP segment to its peer with the checksum still to be filled in
    (offloaded); OVS's userspace datapath reads it from the peer with an AF_PACKET socket and
    its conntrack then sees a bad checksum and marks the SYN invalid, so with ACLs that use
    conntrack TCP never connects (ICMP is not offloaded and passes)."""

    def set_off() -> None:
        value = array.array("B", struct.pack("II", ETHTOOL_STXCSUM, 0))
        ifreq = struct.pack("16sP", ifname.encode(), value.buffer_info()[0])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)

    in_netns(netns, set_off)


# ---------------------------------------------------------------------------------------------
# probes


def icmp_checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of an ICMP header and payload."""
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


def _read_net_file(name: str) -> str:
    return Path(f"/proc/thread-self/net/{name}").read_text()


@dataclass
class Endpoint:
    """A plugged interface: a namespace with ``ifname`` on ``br-int`` as the OVN port ``lsp``
    (host end ``veth``). ``ip`` is empty for a VNF's bridged NIC, which has no address."""

    netns: str
    veth: str
    lsp: str
    mac: str
    ip: str
    prefixlen: int
    gateway: str
    node: str
    ifname: str = "eth0"
    _sock: socket.socket | None = None
    _ident: int = 0
    _seq: int = 0

    def new_flow(self) -> None:
        """The next echo requests start a new ICMP "connection" (a new identifier).

        Conntrack keys ICMP echoes by identifier, and OVN decides steering when a connection is
        new: echoes that reuse the identifier of an earlier probe keep the path that probe
        took (until the entry expires) even after the rows changed. A probe of what a *new*
        connection does therefore needs a fresh identifier."""
        self._ident = secrets.randbelow(0xFFFF) + 1

    def ping(self, dst: str, timeout: float = 1.0) -> PingResult:
        """Send one ICMP echo request to ``dst`` from this namespace and wait for the reply
        (the same ICMP identifier as the previous echo unless :meth:`new_flow` was called)."""
        if self._sock is None:
            self._sock = in_netns(
                self.netns,
                lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
            )
        if not self._ident:
            self.new_flow()
        sock = self._sock
        while select.select([sock], [], [], 0)[0]:  # drop stale replies of earlier probes
            sock.recv(65535)
        self._seq = (self._seq + 1) & 0xFFFF
        header = struct.pack("!BBHHH", 8, 0, 0, self._ident, self._seq)
        payload = b"osc-gitops-datapath"
        packet = (
            struct.pack("!BBHHH", 8, 0, icmp_checksum(header + payload), self._ident, self._seq)
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

    def listen_tcp(self, port: int) -> TcpServer:
        """A TCP server on ``port`` in this namespace that accepts and closes every
        connection; stop it with ``with`` (or :meth:`TcpServer.close`)."""

        def listen() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.ip, port))
            sock.listen(64)
            return sock

        return TcpServer(in_netns(self.netns, listen), f"{self.lsp}:{port}")

    def tcp_connect(self, dst: str, port: int, timeout: float = 1.0) -> bool:
        """Whether a TCP connection from this namespace to ``dst:port`` is established within
        ``timeout`` (closed again at once)."""
        sock = in_netns(self.netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        with sock:
            sock.settimeout(timeout)
            try:
                sock.connect((dst, port))
            except OSError:
                return False
            return True

    def ip_counters(self) -> dict[str, int]:
        """The ``Ip:`` line of ``/proc/net/snmp`` in this namespace (``IpForwDatagrams`` …)."""
        lines = [
            ln.split() for ln in in_netns(self.netns, lambda: _read_net_file("snmp")).splitlines()
        ]
        names, values = (ln for ln in lines if ln and ln[0] == "Ip:")
        return {k: int(v) for k, v in zip(names[1:], values[1:], strict=True)}

    def tx_packets(self) -> int:
        """Frames this NIC sent (``/proc/net/dev``): for a bridging VNF with no address and
        IPv6 off, exactly the frames its bridge forwarded out of this NIC."""
        for line in in_netns(self.netns, lambda: _read_net_file("dev")).splitlines():
            name, sep, fields = line.partition(":")
            if sep and name.strip() == self.ifname:
                return int(fields.split()[9])
        raise DatapathError(f"{self.ifname} not found in namespace {self.netns}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class TcpServer:
    """A listening socket and a thread that accepts and closes every connection, so that any
    number of :meth:`Endpoint.tcp_connect` calls find room in the accept queue (the kernel
    completes the handshakes; nobody would accept them otherwise).

    :meth:`close` wakes the thread (``shutdown``), waits for it and only then closes the
    socket: a listening socket that a thread still polls stays bound, and the next server on
    the same port would fail with "Address already in use"."""

    def __init__(self, sock: socket.socket, name: str) -> None:
        self.sock = sock
        self._thread = threading.Thread(target=self._accept_all, name=f"tcp-{name}", daemon=True)
        self._thread.start()

    def _accept_all(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # shut down
                return
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        self.sock.close()

    def __enter__(self) -> TcpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FrameCounter:
    """Counts the IPv4 frames a NIC transmits, told apart by their addresses.

    Why not the NIC's ``tx_packets``: OVN's Network Function health probe (an ICMP echo from
    ``svc_monitor_ip`` to ``svc_monitor_ip_dst``, link-local by default) crosses a bridging
    VNF once per interval, so a plain counter cannot show that a pod's traffic did *not* cross.
    A packet socket bound to the NIC in its namespace sees every frame the NIC sends
    (``PACKET_OUTGOING``); frames whose source *and* destination are link-local are counted as
    health probes, every other IPv4 frame as pod traffic (a pod's own connection through a
    Service comes back from OVN-Kubernetes' link-local ``hairpin_snat_ip`` to a pod address:
    pod traffic). Frames are read when a count is
    asked for; the socket's buffer is enlarged so that the frames between two reads fit.
    """

    def __init__(self, netns: str, ifname: str) -> None:
        self.netns = netns
        self.ifname = ifname
        self.pod_frames = 0
        self.health_probes = 0

        def open_socket() -> socket.socket:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            try:
                sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root)
                sock.bind((ifname, ETH_P_ALL))
                sock.setblocking(False)
            except BaseException:
                sock.close()
                raise
            return sock

        self._sock: socket.socket | None = in_netns(netns, open_socket)

    def _drain(self) -> None:
        sock = self._sock
        if sock is None:
            raise DatapathError(f"frame counter of {self.ifname} in {self.netns} is closed")
        while True:
            try:
                frame, address = sock.recvfrom(65535)
            except BlockingIOError:
                return
            if address[2] != PACKET_OUTGOING or len(frame) < 34:
                continue
            ethertype, ip_at = struct.unpack("!H", frame[12:14])[0], 14
            if ethertype == ETH_P_8021Q and len(frame) >= 38:
                # a tag in the frame itself (Suricata's af-packet writes it there; a bridge
                # leaves it in the skb's metadata, which this socket does not show)
                ethertype, ip_at = struct.unpack("!H", frame[16:18])[0], 18
            if ethertype != ETH_P_IP:
                continue
            src = ipaddress.IPv4Address(frame[ip_at + 12 : ip_at + 16])
            dst = ipaddress.IPv4Address(frame[ip_at + 16 : ip_at + 20])
            if src in LINK_LOCAL and dst in LINK_LOCAL:  # svc_monitor_ip -> _dst
                self.health_probes += 1
            else:
                self.pod_frames += 1

    def counts(self) -> tuple[int, int]:
        """``(pod frames, health probe frames)`` sent by the NIC since the counter opened."""
        self._drain()
        return self.pod_frames, self.health_probes

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
