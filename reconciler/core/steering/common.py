"""What both steering backends share: traffic matches, priorities, tiers and shadowing.

Every string that reaches an OVN ``match`` is built here from enums, integers and names that
``reconciler.core.model.naming`` produced from validated manifest names. No user text is ever
pasted in.

A Binding's ``traffic`` is one filter or a list of them; a packet matching ANY filter is
steered. A list becomes ONE row per binding, node and direction whose match ORs the filters'
matches (``((tcp && tcp.dst == 80) || (udp && udp.dst == 53))``), not one row per filter: the
row count (and the plan) stays the same whatever the filters, every filter of a binding shares
the binding's priority anyway, and a single mapping compiles exactly as a list of one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from reconciler.core.model.desired import (
    MAX_ORDER,
    Binding,
    PortRange,
    Precedence,
    Protocol,
    Traffic,
)
from reconciler.core.model.facts import Finding
from reconciler.core.model.naming import NameError_
from reconciler.core.steering.base import directions

ACL_TIER = {
    # OVN-Kubernetes: tier 0 UDN isolation, 1 AdminNetworkPolicy, 2 NetworkPolicy, 3 Baseline ANP.
    Precedence.BEFORE_NETWORK_POLICY: 1,
    Precedence.AFTER_NETWORK_POLICY: 3,
}
ACL_PRIORITY_BASE = 100
"""ACL priorities 100..1100 (a binding's steering ACL 100..1099, the ACL one above it that lets a
packet which already crossed its VNF through up to 1100): below OVN-Kubernetes'
AdminNetworkPolicy (tier 1) and Baseline ANP (tier 3, 1650-1750) rules, so admin policies keep
precedence inside the tier we share, and clear of its NetworkPolicy priorities (tier 2,
1000-1001), a tier we never use."""
FROM_LPORT_OPTIONS = {"apply-after-lb": "true"}
"""The ``options`` of every from-lport steering ACL: OVN evaluates it in
``ls_in_acl_after_lb_eval``, the stage where OVN-Kubernetes puts every egress NetworkPolicy,
AdminNetworkPolicy and baseline ACL (``go-controller/pkg/libovsdb/util/acl.go``
``LportEgressAfterLB``). Without it OVN evaluates it earlier, in ``ls_in_acl_eval``, whose
tiers and priorities are independent of the after-LB stage: ``precedence`` would mean nothing
for ``entry-lport`` (a NetworkPolicy egress deny would still drop steered traffic, and an
egress allow would not keep traffic out of the VNF). Measured on OVN 26.03.1: a Network
Function redirects from there (its registers are read in ``ls_in_network_function``, after the
after-LB stages), pod-to-pod and through a Service; tests/datapath/test_policy_stage.py. After
load balancing, a Service connection's destination is the backend pod and its port (the
Service's ``targetPort``), as for a to-lport ACL."""
ROUTER_POLICY_PRIORITY_BASE = 2000
"""Router-policy priorities 2000..2999: above OVN-Kubernetes' pod-to-pod and egress-IP
"no-reroute" allow policies (101-102, 1004 for node traffic), or those would win and nothing
would ever be steered."""
ALL_PORTS = (1, 65535)
_PORT_NAME = re.compile(r"[A-Za-z0-9_.\-]+")

TrafficSpec = Traffic | Sequence[Traffic] | None
"""A binding's ``spec.traffic`` as written: one filter, a list of them, or omitted (all IP)."""


def priority(base: int, order: int) -> int:
    """Lower ``order`` = earlier in the chain = higher OVN priority."""
    return base + (MAX_ORDER - order)


def port_literal(name: str) -> str:
    """A logical port name as an OVN string constant (``"nf_firewall_node-1_out"``), for
    ``inport ==``/``outport ==``. Only names ``reconciler.core.model.naming`` built from validated
    names come here; anything that could close the quotes or escape is refused all the same."""
    if not _PORT_NAME.fullmatch(name):
        raise NameError_(f"not a safe logical port name for a match: {name!r}")
    return f'"{name}"'


def as_filters(traffic: TrafficSpec) -> tuple[Traffic, ...]:
    """The filters of ``traffic`` in either form; omitted = one filter taking every IP packet."""
    if traffic is None:
        return (Traffic(),)
    if isinstance(traffic, Traffic):
        return (traffic,)
    return tuple(traffic)


def filter_match(traffic: Traffic) -> str:
    """The L3/L4 match of ONE filter, built from enums and integers only."""
    if traffic.protocol is Protocol.ANY:
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


def traffic_match(traffic: TrafficSpec) -> str:
    """The L3/L4 part of a binding's match: its filters' matches ORed (``ip`` when one filter
    takes everything). One filter gives exactly its own match, so a single mapping and a list
    of one compile to the same row. OVN refuses ``&&`` and ``||`` mixed without parentheses,
    so a filter with ``&&`` is parenthesised, and so is the whole disjunction."""
    filters = as_filters(traffic)
    if any(covers_all(f) for f in filters):
        return "ip"
    terms: list[str] = []
    for f in filters:
        term = filter_match(f)
        if term not in terms:  # the same filter twice adds nothing
            terms.append(term)
    if len(terms) == 1:
        return terms[0]
    return "(" + " || ".join(f"({t})" if " && " in t else t for t in terms) + ")"


def covers_all(traffic: TrafficSpec) -> bool:
    """True when a binding's filters take every IP packet (later bindings are then shadowed)."""
    return any(f.protocol is Protocol.ANY and not f.ports for f in as_filters(traffic))


def describe_filters(traffic: TrafficSpec) -> list[str]:
    """Each filter in words, for humans: ``all IP``, ``icmp``, ``tcp 80,443,8000-8080``."""
    out: list[str] = []
    for f in as_filters(traffic):
        if f.protocol is Protocol.ANY:
            out.append("all IP")
        elif not f.ports:
            out.append(f"{f.protocol.value} (all ports)")
        else:
            ports = [str(p) if isinstance(p, int) else f"{p.start}-{p.end}" for p in f.ports]
            out.append(f"{f.protocol.value} {','.join(ports)}")
    return out


def filters_json(traffic: TrafficSpec) -> list[dict[str, Any]]:
    """The filters as plain data (always the list form), for JSON output."""
    out: list[dict[str, Any]] = []
    for f in as_filters(traffic):
        ports: list[Any] = [
            p if isinstance(p, int) else {"start": p.start, "end": p.end} for p in f.ports
        ]
        out.append({"protocol": f.protocol.value, "ports": ports})
    return out


# --- shadowing -----------------------------------------------------------------------------------

Intervals = list[tuple[int, int]]


def _merge(intervals: Iterable[tuple[int, int]]) -> Intervals:
    merged: Intervals = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _ports(f: Traffic) -> Intervals:
    if not f.ports:
        return [ALL_PORTS]
    return _merge((p, p) if isinstance(p, int) else (p.start, p.end) for p in f.ports)


def _within(inner: Intervals, outer: Intervals) -> bool:
    return all(any(a <= s and e <= b for a, b in outer) for s, e in inner)


def covers(earlier: Iterable[Traffic], later: Iterable[Traffic]) -> bool:
    """Whether every packet ``later``'s filters take is taken by one of ``earlier``'s (their
    union: ``tcp 80`` and ``tcp 443`` together cover ``tcp 80,443``)."""
    earlier = list(earlier)
    if covers_all(earlier):
        return True
    icmp = any(f.protocol is Protocol.ICMP for f in earlier)
    ports = {
        proto: _merge(i for f in earlier if f.protocol is proto for i in _ports(f))
        for proto in (Protocol.TCP, Protocol.UDP)
    }
    for f in later:
        if f.protocol is Protocol.ANY:
            return False  # all IP is more than tcp, udp and icmp together
        if f.protocol is Protocol.ICMP:
            if not icmp:
                return False
        elif not _within(_ports(f), ports[f.protocol]):
            return False
    return True


def _gaps(taken: Intervals) -> Intervals:
    """The ports of ``ALL_PORTS`` that ``taken`` (merged) leaves out: a difference of port
    ranges is their intersection (``_intervals_and``) with these."""
    low, high = ALL_PORTS
    gaps: Intervals = []
    for start, end in taken:
        gaps.append((low, start - 1))
        low = end + 1
    gaps.append((low, high))
    return [(start, end) for start, end in gaps if start <= end]


def subtract(filters: Iterable[Traffic], taken: Iterable[Traffic]) -> tuple[Traffic, ...]:
    """Filters for the TCP, UDP and ICMP packets ``filters`` take and ``taken`` does not.

    OVN cannot say "not TCP": ``tcp``, ``ip.proto`` and ``eth.type`` are nominal, and
    ovn-controller refuses them negated (the row would be silently inert). So the difference
    is written positively, protocol by protocol and port range by port range; what ``all IP``
    takes beyond TCP, UDP and ICMP (SCTP, GRE, ...) cannot be written and is left out.
    Empty when nothing is left."""
    filters, taken = list(filters), list(taken)
    if covers_all(taken):
        return ()
    everything = covers_all(filters)
    out: list[Traffic] = []
    if (everything or any(f.protocol is Protocol.ICMP for f in filters)) and not any(
        f.protocol is Protocol.ICMP for f in taken
    ):
        out.append(Traffic(protocol=Protocol.ICMP))
    for proto in (Protocol.TCP, Protocol.UDP):
        if everything:
            mine = [ALL_PORTS]
        else:
            mine = [i for f in filters if f.protocol is proto for i in _ports(f)]
        gone = [i for f in taken if f.protocol is proto for i in _ports(f)]
        left = _intervals_and(_merge(mine), _gaps(_merge(gone)))
        if left:
            out.append(_traffic_of(proto, left))
    return tuple(out)


def overlaps(a: Iterable[Traffic], b: Iterable[Traffic]) -> bool:
    """Whether some packet is taken by a filter of ``a`` and by one of ``b``."""
    b = list(b)
    for fa in a:
        for fb in b:
            if Protocol.ANY in (fa.protocol, fb.protocol) or (
                fa.protocol is fb.protocol is Protocol.ICMP
            ):
                return True
            if fa.protocol is fb.protocol and any(
                s <= e2 and s2 <= e for s, e in _ports(fa) for s2, e2 in _ports(fb)
            ):
                return True
    return False


def _intervals_and(a: Intervals, b: Intervals) -> Intervals:
    out: Intervals = []
    for s1, e1 in a:
        for s2, e2 in b:
            lo, hi = max(s1, s2), min(e1, e2)
            if lo <= hi:
                out.append((lo, hi))
    return _merge(out)


def intersect(a: Iterable[Traffic], b: Iterable[Traffic]) -> tuple[Traffic, ...]:
    """Filters for the packets both ``a`` and ``b`` take (empty when none): ``all IP`` when
    both take everything, else TCP, UDP and ICMP, port range by port range."""
    a, b = list(a), list(b)
    if covers_all(a):
        return tuple(b)
    if covers_all(b):
        return tuple(a)
    out: list[Traffic] = []
    if any(f.protocol is Protocol.ICMP for f in a) and any(f.protocol is Protocol.ICMP for f in b):
        out.append(Traffic(protocol=Protocol.ICMP))
    for proto in (Protocol.TCP, Protocol.UDP):
        mine = _merge(i for f in a if f.protocol is proto for i in _ports(f))
        theirs = _merge(i for f in b if f.protocol is proto for i in _ports(f))
        both = _intervals_and(mine, theirs)
        if both:
            out.append(_traffic_of(proto, both))
    return tuple(out)


def _traffic_of(proto: Protocol, intervals: Intervals) -> Traffic:
    """A filter of ``proto`` on the (non-empty) port ``intervals``: every port, or the list."""
    if intervals == [ALL_PORTS]:
        return Traffic(protocol=proto)
    ports: list[int | PortRange] = [
        s if s == e else PortRange(start=s, end=e) for s, e in intervals
    ]
    return Traffic(protocol=proto, ports=ports)


def first_match_losses(
    bindings: Sequence[Binding], *, tiered: bool
) -> list[tuple[Binding, Binding, str, tuple[Traffic, ...], list[str]]]:
    """Per later binding, earlier binding (in evaluation order) and direction where both steer:
    the packets the earlier one takes that the later one also would, and the later one's VNFs
    those packets therefore never cross (``(later, earlier, direction, packets, vnfs)``).
    A packet is steered by the first matching binding only; when the earlier binding's own VNFs
    include the later one's (a chain ending in them), nothing is lost and nothing is listed."""
    ordered = evaluation_order(bindings, tiered=tiered)
    out: list[tuple[Binding, Binding, str, tuple[Traffic, ...], list[str]]] = []
    for i, later in enumerate(ordered):
        for earlier in ordered[:i]:
            lost = [v for v in later.spec.vnfs if v not in earlier.spec.vnfs]
            if not lost:
                continue
            both = intersect(earlier.spec.traffic_filters(), later.spec.traffic_filters())
            if not both:
                continue
            mine = directions(later.spec.redirection)
            for direction in directions(earlier.spec.redirection):
                if direction in mine:
                    out.append((later, earlier, direction, both, lost))
    return out


def evaluation_key(binding: Binding, *, tiered: bool) -> tuple[int, int, str]:
    """Where a binding's rows are evaluated among others on the same port: OVN evaluates ACLs
    tier by tier (lowest first) and by priority within a tier, so with ``tiered`` (ACL steering)
    a ``before-network-policy`` binding (tier 1) comes before every ``after-network-policy`` one
    (tier 3) whatever their orders; router policies have no tiers. The name breaks ties (equal
    orders in different groups), which OVN does not: :func:`tied` finds those."""
    tier = ACL_TIER[binding.spec.precedence] if tiered else 0
    return (tier, binding.spec.order, binding.metadata.name)


def evaluation_order(bindings: Iterable[Binding], *, tiered: bool) -> list[Binding]:
    """``bindings`` in the order OVN evaluates their rows (:func:`evaluation_key`)."""
    return sorted(bindings, key=lambda b: evaluation_key(b, tiered=tiered))


def shadowing(bindings: Sequence[Binding], *, tiered: bool) -> dict[str, dict[str, list[str]]]:
    """Binding name -> direction -> the earlier bindings that together take every packet it
    would take in that direction (so it steers nothing there: a packet is steered by the first
    matching row only). Only shadowed directions are listed; the earlier bindings are the ones
    whose filters overlap it, in evaluation order, up to the one that completes the cover."""
    seen: dict[str, list[Binding]] = {}
    result: dict[str, dict[str, list[str]]] = {}
    for binding in evaluation_order(bindings, tiered=tiered):
        mine = binding.spec.traffic_filters()
        for direction in directions(binding.spec.redirection):
            before = seen.setdefault(direction, [])
            taken: list[Traffic] = []
            names: list[str] = []
            for other in before:
                theirs = other.spec.traffic_filters()
                if not overlaps(theirs, mine):
                    continue
                taken += theirs
                names.append(other.metadata.name)
                if covers(taken, mine):
                    result.setdefault(binding.metadata.name, {})[direction] = names
                    break
            before.append(binding)
    return result


def shadow_text(names: Sequence[str]) -> str:
    """``Binding a`` or ``Bindings a, b``, for messages."""
    return ("Binding " if len(names) == 1 else "Bindings ") + ", ".join(names)


def shadowed_finding(binding: str, direction: str, by: Sequence[str]) -> Finding:
    """Binding ``binding`` is shadowed in ``direction`` by the bindings ``by`` (compile says it
    per group, ``explain`` per pod across its groups: one wording)."""
    return Finding(
        "shadowed",
        f"Binding/{binding}",
        None,
        f"Binding {binding} is shadowed for {direction} traffic by {shadow_text(by)} "
        "(evaluated first, takes every packet it would take): a packet is steered by the first "
        "matching binding only",
    )


def tied(bindings: Iterable[Binding], *, tiered: bool) -> list[list[str]]:
    """Names of bindings whose rows would have the same tier and priority (equal orders in
    different groups, on a pod of both): OVN then picks either one for a packet both match."""
    by_key: dict[tuple[int, int], list[str]] = {}
    for binding in bindings:
        tier, order, name = evaluation_key(binding, tiered=tiered)
        by_key.setdefault((tier, order), []).append(name)
    return [sorted(names) for _, names in sorted(by_key.items()) if len(names) > 1]


def uses_tiers(backend: object) -> bool:
    """Whether a steering backend's rows are tiered ACLs (its ``acl_tiers`` attribute; a backend
    without one, e.g. router policies, has no tiers)."""
    return bool(getattr(backend, "acl_tiers", False))


# --- NetworkPolicy beside the steering -----------------------------------------------------------

POLICY_TYPE_DIRECTION = {"Ingress": "to-lport", "Egress": "from-lport"}
"""Which steering direction a NetworkPolicy's ``policyTypes`` entry governs: ``Ingress`` the
traffic towards its pods (our to-lport ACLs, ``exit-lport``), ``Egress`` the traffic from them
(our from-lport ACLs, ``entry-lport``)."""
_TOWARDS = {"to-lport": "towards them (exit-lport)", "from-lport": "from them (entry-lport)"}


def network_policy_effects(
    policy_types: Iterable[str], steered: Iterable[tuple[str, Precedence]], *, tiered: bool
) -> list[str]:
    """What a NetworkPolicy of ``policy_types`` does to pods it selects that are steered in
    ``steered`` ``(direction, precedence)`` pairs, in words, one item per direction it
    governs and the pods are steered in (empty: the policy and the steering never meet).

    With tiered ACL steering (Network Functions), OVN evaluates our ACL and the policy's in
    one stage per direction (to-lport: ``ls_out_acl_eval``; from-lport: both after the load
    balancer, ``ls_in_acl_after_lb_eval``, :data:`FROM_LPORT_OPTIONS`), tier by tier: tier 1
    (``before-network-policy``) before the policy's tier 2, tier 3 (``after-network-policy``)
    after it. Router policies come after every ACL: the policy always decides first."""
    governed = {POLICY_TYPE_DIRECTION[t] for t in policy_types if t in POLICY_TYPE_DIRECTION}
    by_direction: dict[str, set[Precedence]] = {}
    for direction, precedence in steered:
        if direction in governed:
            by_direction.setdefault(direction, set()).add(precedence)
    effects: list[str] = []
    for direction in ("to-lport", "from-lport"):
        precedences = by_direction.get(direction)
        if not precedences:
            continue
        where = _TOWARDS[direction]
        if not tiered:
            effects.append(
                f"{where}, it decides first whatever the precedence (router policies come "
                "after every ACL): what it denies is dropped, what it allows is steered"
            )
            continue
        if Precedence.AFTER_NETWORK_POLICY in precedences:
            effects.append(
                f"{where}, flows it allows are not steered (precedence after-network-policy)"
            )
        if Precedence.BEFORE_NETWORK_POLICY in precedences:
            effects.append(
                f"{where}, its denies do not apply to steered flows (before-network-policy)"
            )
    return effects
