"""Node traffic is not steered unless a Binding asks (``steerNodeTraffic: true``).

A kubelet probes its pods from the node's management port (OVN-Kubernetes' ``ovn-k8s-mp0``,
the node subnet's second address, ``go-controller/pkg/util/net.go``
``GetNodeManagementIfAddr``), which OVN-Kubernetes lets through with a tier-2 ACL on the node
switch. Steered like pod traffic, a fail-close VNF outage would fail the liveness probe of
every protected pod on the node at once: a restart storm, and no VNF to blame in the pods'
events. OVN-Kubernetes' own routers speak from its join subnet (gateway routers) and, in
interconnect clusters, its transit subnet: traffic from a gateway router (e.g. a NodePort
connection it source-NATed) is node traffic too.

So every steering ACL's match leaves out, on the side facing the other end (``ip4.src`` of a
to-lport ACL, ``ip4.dst`` of a from-lport one): the management-port address of the node the
ACL is on, and the join and transit subnets. Built from parsed addresses only
(:mod:`ipaddress`), never from text as given: a node annotation or a flag that does not parse
is left out with a warning, and the match stays well-formed.

The address comes from the Node's ``k8s.ovn.org/node-subnets``; when a node has none (not set
up by OVN-Kubernetes yet, or an annotation that does not parse), from its switch's
``other_config:subnet`` in the NB, which OVN-Kubernetes writes from the same subnet. With
neither, the node's probes cannot be told apart: the plan says so.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reconciler.core.model.observed import Node, Switch

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MANAGEMENT_HOST = 2
"""The management port is the node subnet's ``.2`` (``.1`` is the router port)."""


@dataclass(frozen=True)
class NodeExclusion:
    """What one node's steering ACLs leave out, parsed and checked."""

    management: tuple[IpAddress, ...]
    """The node's management-port addresses (one per IP family of its subnets)."""
    infrastructure: tuple[IpNetwork, ...]
    """OVN-Kubernetes' join and transit subnets."""

    def match(self, direction: str) -> str:
        """The term to AND into a steering ACL's match, ``""`` when nothing is left out:
        ``(ip4.src != {…} || ip6.src != {…})`` (a family with nothing to leave out is the
        bare ``ip4``/``ip6``: a v4-only exclusion must not stop v6 traffic from being steered).
        ``src`` for to-lport (traffic towards the pod), ``dst`` for from-lport."""
        side = "src" if direction == "to-lport" else "dst"
        by_family: dict[int, list[str]] = {4: [], 6: []}
        for address in self.management:
            by_family[address.version].append(str(address))
        for network in self.infrastructure:
            by_family[network.version].append(str(network))
        if not by_family[4] and not by_family[6]:
            return ""
        terms = []
        for version, values in sorted(by_family.items()):
            if values:
                terms.append(f"ip{version}.{side} != {{{', '.join(values)}}}")
            else:
                terms.append(f"ip{version}")
        return "(" + " || ".join(terms) + ")"


def parse_networks(values: Iterable[str], what: str, warnings: list[str]) -> list[IpNetwork]:
    """``values`` as networks; each one that does not parse is named in ``warnings`` and left
    out."""
    out: list[IpNetwork] = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            warnings.append(
                f"{what} {value!r} is not an IP network: it is not left out of steering"
            )
    return out


def management_addresses(
    node: str, nodes: Sequence[Node], switches: Sequence[Switch], warnings: list[str]
) -> tuple[IpAddress, ...]:
    """The management-port addresses of ``node``: the ``.2`` of each of its pod subnets from
    ``k8s.ovn.org/node-subnets``, else of its switch's subnet; none (and a warning) when
    neither is there or parses."""
    obj = next((n for n in nodes if n.name == node), None)
    given = obj.subnets if obj is not None else ()
    subnets = parse_networks(given, f"node {node}: k8s.ovn.org/node-subnets", warnings)
    source = "k8s.ovn.org/node-subnets"
    if not subnets:
        switch = next((s for s in switches if s.name == node), None)
        if switch is not None and switch.subnet:
            subnets = parse_networks([switch.subnet], f"switch {node}: subnet", warnings)
            source = f"its logical switch's other_config:subnet ({switch.subnet})"
    if not subnets:
        warnings.append(
            f"node {node} has no k8s.ovn.org/node-subnets and its switch no subnet: its "
            "management-port address is unknown, so kubelet probes of its protected pods are "
            "steered like their traffic (a fail-close VNF outage fails their liveness probes)"
        )
        return ()
    addresses = []
    for subnet in subnets:
        if subnet.num_addresses <= MANAGEMENT_HOST:
            warnings.append(f"node {node}: subnet {subnet} from {source} has no management port")
            continue
        addresses.append(subnet.network_address + MANAGEMENT_HOST)
    return tuple(dict.fromkeys(addresses))


def exclusions(
    nodes_wanted: Iterable[str],
    nodes: Sequence[Node],
    switches: Sequence[Switch],
    join_subnets: Sequence[str],
    transit_subnets: Sequence[str],
    warnings: list[str],
) -> dict[str, NodeExclusion]:
    """Per node of ``nodes_wanted``: what its steering ACLs leave out."""
    infrastructure = tuple(
        dict.fromkeys(
            [
                *parse_networks(join_subnets, "join subnet", warnings),
                *parse_networks(transit_subnets, "transit subnet", warnings),
            ]
        )
    )
    return {
        node: NodeExclusion(management_addresses(node, nodes, switches, warnings), infrastructure)
        for node in sorted(set(nodes_wanted))
    }
