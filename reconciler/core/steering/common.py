"""What both steering backends share: traffic matches, priorities and tiers.

Every string that reaches an OVN ``match`` is built here from enums, integers and names that
``reconciler.core.naming`` produced from validated manifest names. No user text is ever pasted in.
"""

from __future__ import annotations

from reconciler.core.model import MAX_ORDER, Precedence, Protocol, Traffic

ACL_TIER = {
    # OVN-Kubernetes: tier 0 UDN isolation, 1 AdminNetworkPolicy, 2 NetworkPolicy, 3 Baseline ANP.
    Precedence.BEFORE_NETWORK_POLICY: 1,
    Precedence.AFTER_NETWORK_POLICY: 3,
}
ACL_PRIORITY_BASE = 100
"""ACL priorities 100..1099: below OVN-Kubernetes' AdminNetworkPolicy (tier 1) and Baseline ANP
(tier 3, 1650-1750) rules, so admin policies keep precedence inside the tier we share, and clear
of its NetworkPolicy priorities (tier 2, 1000-1001), a tier we never use."""
ROUTER_POLICY_PRIORITY_BASE = 2000
"""Router-policy priorities 2000..2999: above OVN-Kubernetes' pod-to-pod and egress-IP
"no-reroute" allow policies (101-102, 1004 for node traffic), or those would win and nothing
would ever be steered."""


def priority(base: int, order: int) -> int:
    """Lower ``order`` = earlier in the chain = higher OVN priority."""
    return base + (MAX_ORDER - order)


def traffic_match(traffic: Traffic | None) -> str:
    """The L3/L4 part of a match, built from enums and integers only."""
    if traffic is None or traffic.protocol is Protocol.ANY:
        return "ip"
    if traffic.protocol is Protocol.ICMP:
        return "(icmp4 || icmp6)"
    proto = traffic.protocol.value  # "tcp" | "udp", from the enum
    if not traffic.ports:
        return proto
    terms: list[str] = []
    for port in traffic.ports:
        if isinstance(port, int):
            terms.append(f"{proto}.dst == {int(port)}")
        else:
            terms.append(f"({proto}.dst >= {int(port.start)} && {proto}.dst <= {int(port.end)})")
    joined = terms[0] if len(terms) == 1 else "(" + " || ".join(terms) + ")"
    return f"{proto} && {joined}"


def covers_all(traffic: Traffic | None) -> bool:
    """True when a binding's filter takes every IP packet (later bindings are then shadowed)."""
    return traffic is None or (traffic.protocol is Protocol.ANY and not traffic.ports)
