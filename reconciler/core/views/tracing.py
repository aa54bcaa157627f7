"""``explain --trace``: which packets to trace for a pod, and what the traces say.

``explain`` judges rows; a trace judges what OVN does with a packet. For each Binding that steers
the pod on its node (``reconciler.core.views.explain``), this module builds one packet per direction
the binding steers, from its first traffic filter: towards the pod (``exit-lport``, the packet
comes from the peer) and from it (``entry-lport``, to the peer). ``ovn-trace`` runs it through the
logical flows northd wrote into the Southbound DB (``reconciler.adapters.ovn.trace``), and
:func:`verdict` says whether the packet reached a data port of the binding's VNF instance, or why
not: delivered without crossing a VNF, sent to another VNF (an earlier binding), or dropped (for
example no healthy instance and ``fail-close``).

Every value put into a microflow is checked here (LSP names, MAC and IPv4 addresses come from the
cluster, not from validated manifests): a name outside Kubernetes' syntax or an address that does
not parse is refused, never pasted. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reconciler.core.compiling.compile import members_by_group_and_node
from reconciler.core.model import naming
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed, PodPort
from reconciler.core.steering import chains
from reconciler.errors import UserError

Direction = Literal["to-pod", "from-pod"]
_LSP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?_[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_SWITCH = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_DEFAULT_PORT = {"tcp": 80, "udp": 53}
"""The destination port of a filter that lists none (any port matches it)."""


class TraceError(UserError):
    """A trace cannot be built (no peer, no address): the message says what to pass."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One packet to trace, and where it should go."""

    binding: str
    vnf: str
    direction: Direction
    source: str
    """LSP the packet enters from."""
    destination: str
    datapath: str
    """The logical switch of ``source`` (where ``ovn-trace`` starts)."""
    microflow: str
    packet: str
    """For people: ``tcp 10.244.1.9 -> 10.244.1.5:443``."""
    vnf_ports: tuple[str, ...]
    """The data ports of the VNF instance that should receive it."""


@dataclass(frozen=True, slots=True)
class Verdict:
    probe: Probe
    reached: bool
    detail: str
    outputs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "binding": self.probe.binding,
            "vnf": self.probe.vnf,
            "direction": self.probe.direction,
            "packet": self.probe.packet,
            "from": self.probe.source,
            "to": self.probe.destination,
            "datapath": self.probe.datapath,
            "microflow": self.probe.microflow,
            "expected": list(self.probe.vnf_ports),
            "outputs": list(self.outputs),
            "reachesVnf": self.reached,
            "detail": self.detail,
        }


def _checked(port: PodPort) -> tuple[str, str]:
    """``(mac, ipv4)`` of a pod port, refusing anything that is not an address."""
    if not _LSP.fullmatch(port.name) or not _SWITCH.fullmatch(port.switch):
        raise TraceError(f"port {port.name!r} on {port.switch!r} is not a pod port name to trace")
    # Not mutated (equivalent mutants): any stand-in for a missing MAC is refused like "" (no MAC)
    mac = (port.mac or "").lower()  # pragma: no mutate
    if not _MAC.fullmatch(mac):
        raise TraceError(f"pod port {port.name} has no MAC address to trace with")
    for ip in port.ips:
        try:
            address = ipaddress.ip_interface(ip).ip
        except ValueError:
            continue
        if address.version == 4:
            return mac, str(address)
    raise TraceError(f"pod port {port.name} has no IPv4 address to trace with")


def gateway_mac(observed: Observed, switch: str) -> str:
    """The MAC of a node switch's router port, as OVN-Kubernetes derives it from the subnet's
    gateway (``0a:58:`` + the first host's IPv4 bytes): where a pod sends a routed packet."""
    subnet = next((s.subnet for s in observed.switches if s.name == switch), None)
    try:
        # Not mutated (equivalent mutants): a missing subnet and any stand-in for it are refused
        # alike, strict=None is strict=False (strict=True is pinned by test_tracing_packets.py:
        # a subnet written as the gateway's address/prefix)
        network = ipaddress.ip_network(subnet or "", strict=False)  # pragma: no mutate
        gateway = next(network.hosts())
    except (ValueError, StopIteration):
        raise TraceError(
            f"switch {switch} has no IPv4 subnet: cannot route a trace to a peer on another node"
        ) from None
    if not isinstance(gateway, ipaddress.IPv4Address):
        raise TraceError(f"switch {switch} has no IPv4 subnet to route a trace with")
    return "0a:58:" + ":".join(f"{b:02x}" for b in gateway.packed)


def choose_peer(
    desired: Desired, observed: Observed, pod_port: PodPort, *, routed: bool = False
) -> PodPort:
    """A pod to trace against: on the same node (with ``routed``, for router-policy steering,
    which sees routed traffic only: on another node), steered by no group if there is one (its
    own steering would mix into the trace); else any other pod."""
    steered = {
        port.name
        for nodes in members_by_group_and_node(desired, observed.pods, observed.pod_ports).values()
        for ports in nodes.values()
        for port in ports
    }
    others = [p for p in observed.pod_ports if p.name != pod_port.name and _LSP.fullmatch(p.name)]
    ranked = sorted(
        others, key=lambda p: ((p.switch != pod_port.switch) != routed, p.name in steered, p.name)
    )
    if not ranked:
        raise TraceError("no other pod has an OVN port to trace against: pass --peer NS/POD")
    return ranked[0]


def _packet(filters: Sequence[dict[str, Any]]) -> tuple[str, int | None]:
    """The protocol and destination port of a packet the first filter takes."""
    # Not mutated (equivalent mutants): no filter means all traffic, and every protocol but tcp
    # and udp is traced as ICMP, so the default's spelling cannot change the packet
    first = filters[0] if filters else {"protocol": "any", "ports": []}  # pragma: no mutate
    protocol = str(first.get("protocol", "any"))  # pragma: no mutate
    if protocol not in ("tcp", "udp"):
        return "icmp", None
    ports = first.get("ports") or []
    if not ports:
        return protocol, _DEFAULT_PORT[protocol]
    port = ports[0]
    return protocol, int(port["start"] if isinstance(port, dict) else port)


def _microflow(
    src: PodPort, dst: PodPort, eth_dst: str, protocol: str, port: int | None
) -> tuple[str, str]:
    src_mac, src_ip = _checked(src)
    _, dst_ip = _checked(dst)
    flow = (
        f'inport == "{src.name}" && eth.src == {src_mac} && eth.dst == {eth_dst} && '
        f"ip4.src == {src_ip} && ip4.dst == {dst_ip} && ip.ttl == 64"
    )
    if protocol == "icmp":
        return f"{flow} && icmp4.type == 8 && icmp4.code == 0", f"icmp echo {src_ip} -> {dst_ip}"
    flow += f" && {protocol}.src == 40000 && {protocol}.dst == {port}"
    if protocol == "tcp":
        flow += " && tcp.flags == 0x002"
    return flow, f"{protocol} {src_ip} -> {dst_ip}:{port}"


def probes(
    explanation: Any, observed: Observed, pod_port: PodPort, peer: PodPort, routed: bool
) -> list[Probe]:
    """One probe per direction of every binding that steers the pod (``explanation.bindings``
    with ``steers``), deduplicated. With a ``routed`` backend (``SteeringBackend.routed_only``:
    it steers at the router) the VNF instance that should see a packet is the one on the
    destination's node."""
    result: list[Probe] = []
    seen: set[tuple[str, str]] = set()
    for b in explanation.bindings:
        if not b.steers:
            continue
        protocol, port = _packet(b.traffic)
        wanted: list[Direction] = []
        if b.redirection in ("exit-lport", "both"):
            wanted.append("to-pod")
        if b.redirection in ("entry-lport", "both"):
            wanted.append("from-pod")
        for direction in wanted:
            src, dst = (peer, pod_port) if direction == "to-pod" else (pod_port, peer)
            eth_dst = (
                _checked(dst)[0] if src.switch == dst.switch else gateway_mac(observed, src.switch)
            )
            flow, packet = _microflow(src, dst, eth_dst, protocol, port)
            vnf = b.vnf if isinstance(b.vnf, str) else " -> ".join(b.vnf)  # one, or a chain
            if (flow, vnf) in seen:
                continue
            seen.add((flow, vnf))
            node = dst.switch if routed else pod_port.switch
            if isinstance(b.vnf, list):  # a chain: the ports of its function for this direction
                wiring = chains.EXIT if direction == "to-pod" else chains.ENTRY
                ports = tuple(chains.port_name(b.vnf, wiring, node, s) for s in ("in", "out"))
            else:
                ports = tuple(naming.vnf_port(b.vnf, node, side) for side in ("in", "out"))
            probe = Probe(
                b.name, vnf, direction, src.name, dst.name, src.switch, flow, packet, ports
            )
            result.append(probe)
    return result


def verdict(probe: Probe, outputs: Sequence[str], last_stage: str, bindings: Any = ()) -> Verdict:
    """What a trace of ``probe`` that ended in ``outputs`` (the ports it was output to, in
    order; none: dropped, ``last_stage`` names where) says."""
    outs = tuple(outputs)
    reached = next((o for o in outs if o in probe.vnf_ports), None)
    if reached:
        return Verdict(probe, True, f"reaches VNF {probe.vnf} at its port {reached}", outs)
    vnf_ports = [o for o in outs if o.startswith(("nf_", "nfc"))]
    if vnf_ports:
        return Verdict(
            probe,
            False,
            f"goes to {vnf_ports[0]} instead of VNF {probe.vnf} (an earlier binding takes it)",
            outs,
        )
    if probe.destination in outs:
        return Verdict(
            probe, False, f"delivered to {probe.destination} without crossing VNF {probe.vnf}", outs
        )
    if not outs:
        binding = next((b for b in bindings if b.name == probe.binding), None)
        why = ""
        if (
            binding is not None
            and binding.failure_policy == "fail-close"
            and binding.healthy is not True
        ):
            why = f"; VNF {probe.vnf} is not healthy as OVN sees it and the binding fails close"
        where = f" in {last_stage}" if last_stage else ""
        return Verdict(probe, False, f"dropped{where} before reaching VNF {probe.vnf}{why}", outs)
    return Verdict(probe, False, f"output to {', '.join(outs)}, not to VNF {probe.vnf}", outs)
