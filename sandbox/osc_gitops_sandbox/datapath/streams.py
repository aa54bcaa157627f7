"""Continuous probes for the transition packet tests (issue 22), ``bench/datapath_transitions.py``
and ``osc-gitops demo --datapath``: ICMP echoes every 20 ms and a TCP echo stream, counting
what is lost while something changes.

- :class:`IcmpStream`: one echo request every ``interval`` from a pod to each target, each
  target one ICMP "connection" (a fixed identifier: conntrack keeps it one flow, as a
  long-lived connection is); lost = requests with no reply; the longest gap is the outage.
- :class:`TcpStream`: a TCP connection carrying a small message every ``interval`` that the
  target echoes; lost = segments TCP had to retransmit (``RetransSegs`` of both namespaces),
  the longest gap between two echoes is the stall.
"""

from __future__ import annotations

import itertools
import secrets
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from osc_gitops_sandbox.datapath.netns import Endpoint, icmp_checksum, in_netns

INTERVAL = 0.02


@dataclass
class StreamResult:
    sent: int
    answered: int
    longest_gap: float
    """Seconds between two answered requests, the outage if there was one."""
    error: str = ""
    """Why a TCP stream broke before it was stopped (``Connection reset by peer``), or empty."""

    @property
    def lost(self) -> int:
        return self.sent - self.answered


@dataclass
class _Target:
    ip: str
    ident: int
    sent: dict[int, float] = field(default_factory=dict)
    answered: set[int] = field(default_factory=set)


class IcmpStream:
    """Echo requests from ``src`` to every target every ``interval`` until :meth:`stop`."""

    def __init__(self, src: Endpoint, targets: dict[str, str], interval: float = INTERVAL):
        self.interval = interval
        self.sock = in_netns(
            src.netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        )
        self.targets = {
            name: _Target(ip, secrets.randbelow(0xFFFE) + 1) for name, ip in targets.items()
        }
        self._by_ident = {t.ident: t for t in self.targets.values()}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._send, daemon=True),
            threading.Thread(target=self._receive, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _send(self) -> None:
        seq = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            seq = (seq + 1) & 0xFFFF
            for target in self.targets.values():
                header = struct.pack("!BBHHH", 8, 0, 0, target.ident, seq)
                payload = b"osc-gitops-stream"
                packet = (
                    struct.pack("!BBHHH", 8, 0, icmp_checksum(header + payload), target.ident, seq)
                    + payload
                )
                with self._lock:
                    target.sent[seq] = time.monotonic()
                self.sock.sendto(packet, (target.ip, 0))
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _receive(self) -> None:
        while not self._stop.is_set() or select.select([self.sock], [], [], 0)[0]:
            if not select.select([self.sock], [], [], 0.1)[0]:
                continue
            data = self.sock.recv(65535)
            ihl = (data[0] & 0x0F) * 4
            kind, _, _, ident, seq = struct.unpack("!BBHHH", data[ihl : ihl + 8])
            target = self._by_ident.get(ident)
            if kind == 0 and target is not None:
                with self._lock:
                    target.answered.add(seq)

    def stop(self, grace: float = 0.5) -> dict[str, StreamResult]:
        """Stop sending, give the last replies ``grace`` seconds, and count."""
        stop_sending = self._threads[0]
        self._stop.set()
        stop_sending.join(5)
        time.sleep(grace)
        self._threads[1].join(5)
        self.sock.close()
        results = {}
        for name, target in self.targets.items():
            times = sorted(t for s, t in target.sent.items() if s in target.answered)
            marks = [min(target.sent.values(), default=0.0), *times,
                     max(target.sent.values(), default=0.0)]  # fmt: skip
            gap = max((b - a for a, b in itertools.pairwise(marks)), default=0.0)
            results[name] = StreamResult(len(target.sent), len(target.answered), gap)
        return results


def _retrans(netns: str) -> int:
    text = in_netns(netns, lambda: open("/proc/thread-self/net/snmp", encoding="ascii").read())  # noqa: SIM115
    names, values = (ln.split() for ln in text.splitlines() if ln.startswith("Tcp:"))
    return int(dict(zip(names, values, strict=True))["RetransSegs"])


class TcpStream:
    """A message every ``interval`` from ``src`` to an echo server on ``dst``."""

    def __init__(self, src: Endpoint, dst: Endpoint, port: int, interval: float = INTERVAL):
        self.src, self.dst, self.interval = src, dst, interval

        def listen() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((dst.ip, port))
            sock.listen(1)
            return sock

        self.server = in_netns(dst.netns, listen)
        self._stop = threading.Event()
        self.sent = self.answered = 0
        self.longest_gap = 0.0
        self.error: BaseException | None = None
        self._retrans0 = _retrans(src.netns) + _retrans(dst.netns)
        echo = threading.Thread(target=self._echo, daemon=True)
        echo.start()
        self.client = in_netns(src.netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        self.client.settimeout(10)
        self.client.connect((dst.ip, port))
        self._threads = [echo, threading.Thread(target=self._talk, daemon=True)]
        self._threads[1].start()

    def _echo(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            conn.settimeout(1.0)
            while not self._stop.is_set():
                try:
                    data = conn.recv(64)
                except TimeoutError:
                    continue
                if not data:
                    return
                conn.sendall(data)

    def _talk(self) -> None:
        last = time.monotonic()
        try:
            while not self._stop.is_set():
                self.client.sendall(b"x" * 8)
                self.sent += 1
                got = b""
                while len(got) < 8:
                    chunk = self.client.recv(8 - len(got))
                    if not chunk:
                        raise ConnectionError("the echo server closed the stream")
                    got += chunk
                self.answered += 1
                now = time.monotonic()
                self.longest_gap = max(self.longest_gap, now - last)
                last = now
                self._stop.wait(self.interval)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> tuple[StreamResult, int]:
        """The stream's result (``error``: why it broke, if it did) and the segments TCP
        retransmitted meanwhile (both ends)."""
        self._stop.set()
        self._threads[1].join(15)
        retrans = _retrans(self.src.netns) + _retrans(self.dst.netns) - self._retrans0
        self.client.close()
        self._threads[0].join(5)
        self.server.close()
        error = "" if self.error is None else str(self.error) or type(self.error).__name__
        return StreamResult(self.sent, self.answered, self.longest_gap, error), retrans
