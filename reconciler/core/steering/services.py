"""Network Function insertion beside load balancers (Kubernetes Services): what the
``network-function`` backend does about them, and the one wording of it (plan and explain).

**The fault** (OVN 26.03.1; ``docs/upstream/nf-from-lport-lb-reply-dropped.sh``): a pod whose
egress is steered through a Network Function (a from-lport ACL with a
``network_function_group``: ``entry-lport`` or ``both``) opens a connection to a load-balancer
VIP on its own switch. The SYN is DNATed in the pod's conntrack zone, crosses the function, is
committed again in the function's *out port*'s zone (with the backend's address) and reaches
the backend; the reply is un-DNATed in the pod's zone, then looked up in the out port's zone,
where its tuple (VIP -> pod) matches nothing: ``ct.inv``, dropped. OVN-Kubernetes puts its
Service load-balancer group on every node switch, so such a pod could reach no ClusterIP
Service at all.

**What the backend does**: the function's ports need no connection state of their own. The
pod's zone (and the peer's) track the connection and remember where its replies go
(``ct_label`` there); a bump in the wire changes no header. So on every node switch that has
load balancers, the VNF data ports of ours there are made *stateless*: one ``Port_Group`` per
node, ``osc._vnf_ports.<node>``, holding the inport and outport of every Network_Function of
ours on the node (single VNFs and chains), with two ACLs on it, ``allow-stateless``, tier 0:
from-lport ``inport == @pg && ip`` and to-lport ``outport == @pg && ip``. OVN then skips
conntrack (and the load balancer) for packets entering or leaving the switch through those
ports. Measured with packets (``tests/datapath/test_services.py``, one NB and interconnect,
two chassis): the Service connections an ``entry-lport``/``both`` pod opens then complete and
cross the VNF both ways, as its direct ones; nothing else in the Services truth table changes,
and the rest of the data-path suite passes unchanged with a Service on every node switch
(``OSC_DATAPATH_SERVICES=1``). Both directions on both ports are needed: with the to-lport
row alone the reply crosses the VNF and dies in the *in* port's zone; with the from-lport row
alone even direct connections fail.

Why this and not something else: leaving the VIPs out of the from-lport steering (an ACL one
priority above, matching the load balancers' VIPs) keeps connectivity but inspects none of
the pod's Service traffic, and needs every Service's VIP observed and written into an
Address_Set; refusing ``entry-lport``/``both`` where a switch has load balancers refuses them
on every OVN-Kubernetes cluster; warning only leaves every protected pod without Services.
This keeps the Binding's meaning (every connection the pod opens crosses the VNF), costs
three rows per node whatever the number of Services, and reads nothing new from the NB (a
switch's load balancers are already in ``Observed.switches``).

Tier 0 and ``allow-stateless`` end ACL evaluation for these packets before any other tier: no
other ACL is meant to see them (OVN-Kubernetes' ACLs sit on port groups of pods, ours on the
security groups' port groups), and the packet was already judged at the pod's own port.

Only where the switch has load balancers: elsewhere no row changes (no upgrade churn).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set

from reconciler.core.model import naming
from reconciler.core.steering import common
from reconciler.core.steering.base import TargetBuilder

__all__ = [
    "STATELESS_NAME",
    "STATELESS_PRIORITY",
    "STATELESS_TIER",
    "emit_stateless_ports",
    "plan_note",
    "pod_note",
    "stateless_port_group",
]

STATELESS_TIER = 0
STATELESS_PRIORITY = common.ACL_PRIORITY_BASE
STATELESS_NAME = "osc-vnf-ports"
"""``ACL.name`` of the two rows (what ``ovn-nbctl acl-list`` shows)."""
UPSTREAM = "docs/upstream/nf-from-lport-lb-reply-dropped.sh"
_SHOWN = 5
"""Names listed in a note before "and N more"."""


def stateless_port_group(instance: str, node: str) -> str:
    """``osc._vnf_ports.<node>``. The leading ``_`` keeps it apart from every security group's
    ``osc.<group>.<node>``: a DNS-1123 name never starts with ``-``."""
    return naming.ovn_ident(instance, "_vnf_ports", node)


def emit_stateless_ports(
    ports: Mapping[str, Set[str]], lb_switches: Set[str], out: TargetBuilder
) -> None:
    """Per node whose switch has load balancers: the Port_Group of our function ports there
    (``ports``: node -> the inport and outport of every Network_Function of ours on it) and
    its two ``allow-stateless`` ACLs. Ungated: they exist while the functions do, members or
    not (like the functions themselves). No manifest alone asks for them: origin ``""``."""
    for node in sorted(lb_switches & ports.keys()):
        pg = stateless_port_group(out.instance, node)
        out.ovn("Port_Group", pg, "", node, {"name": pg, "ports": sorted(ports[node])})
        for direction, side in (("from-lport", "inport"), ("to-lport", "outport")):
            fields = {
                "port_group": pg,
                "name": STATELESS_NAME,
                "direction": direction,
                "priority": STATELESS_PRIORITY,
                "tier": STATELESS_TIER,
                "match": f"{side} == @{pg} && ip",
                "action": "allow-stateless",
                "network_function_group": None,
            }
            out.ovn("ACL", f"{pg}.{direction.split('-')[0]}", "", node, fields)


def _listed(names: Iterable[str]) -> str:
    unique = sorted(set(names))
    shown = ", ".join(unique[:_SHOWN])
    return shown + (f" and {len(unique) - _SHOWN} more" if len(unique) > _SHOWN else "")


_MEASURED = (
    "measured on OVN 26.03.1 with OVN-Kubernetes' ClusterIP load balancers (2 chassis, one NB "
    "and interconnect)"
)


def plan_note(
    instance: str,
    steered: Iterable[tuple[str, str]],
    twice: Iterable[tuple[tuple[str, ...], str]] = (),
) -> str | None:
    """The plan's one note about load balancers, for the (binding, node) pairs that steer on a
    switch with load balancers; ``None`` when there are none. ``twice``: (VNFs, node) where
    one VNF instance (or chain) is entered from-lport by some binding and to-lport by another
    beside load balancers (where the ACLs that let already-crossed traffic through exist):
    traffic between such pods through a Service never connects (:data:`SAME_VNF_LIMIT`)."""
    pairs = sorted(set(steered))
    if not pairs:
        return None
    nodes = sorted({node for _, node in pairs})
    bindings = [binding for binding, _ in pairs]
    which = "switch " if len(nodes) == 1 else "switches "
    verb = "has" if len(nodes) == 1 else "have"
    pg = stateless_port_group(instance, nodes[0]) + (" per node" if len(nodes) > 1 else "")
    return (
        f"{which}{_listed(nodes)} {verb} load balancers (OVN-Kubernetes' Services), beside "
        "which OVN does not support Network Function insertion: osc-gitops makes its VNF ports "
        f"there stateless (Port_Group {pg}, two allow-stateless ACLs), without which "
        f"OVN 26.03 drops the replies of every Service connection an entry-lport or both pod "
        f"opens ({UPSTREAM}); {_MEASURED}: Service connections of Binding "
        f"{_listed(bindings)}'s pods are steered exactly as direct ones, both ways, except a "
        "pod reaching itself through its own Service, which crosses the VNF one way only "
        "(exit-lport, both) or not at all (entry-lport)" + _twice_text(twice)
    )


SAME_VNF_LIMIT = (
    "OVN routes load-balanced traffic through the cluster router (the pod sends it to its "
    "gateway), so it comes back to the switch from the router port, not from the VNF's out "
    "port, and the destination's to-lport ACL sends it into the same VNF a second time; the "
    "reply then crosses it on the backend's side and is dropped where the caller's side would "
    "send it in again; direct connections between them are fine"
)
"""Why a Service connection between two pods steered through one VNF instance (the caller
entry-lport or both, the backend exit-lport or both) never connects (measured:
``tests/datapath/test_services.py``)."""


def _twice_text(twice: Iterable[tuple[tuple[str, ...], str]]) -> str:
    pairs = sorted(set(twice))
    if not pairs:
        return ""
    vnfs = _listed(" -> ".join(hops) for hops, _ in pairs)
    nodes = _listed(node for _, node in pairs)
    return (
        f". Not solved: a pod steered entry-lport or both through {vnfs} cannot connect "
        "through a Service to a pod the same VNF instance steers exit-lport or both on its "
        f"own node ({nodes}): {SAME_VNF_LIMIT}"
    )


def pod_note(instance: str, node: str, bindings: Iterable[str], *, twice: bool = False) -> str:
    """``explain``'s note for a pod steered on a switch with load balancers; ``twice``: some
    VNF instance there is entered both from-lport and to-lport (:data:`SAME_VNF_LIMIT`)."""
    pg = stateless_port_group(instance, node)
    return (
        f"switch {node} has load balancers (OVN-Kubernetes' Services): osc-gitops makes the VNF "
        f"ports there stateless (Port_Group {pg}), without which OVN 26.03 "
        f"drops the replies of the Service connections this pod opens when Binding "
        f"{_listed(bindings)} steers it entry-lport or both ({UPSTREAM}); {_MEASURED}: its "
        "Service connections are steered exactly as its direct ones, except through its own "
        "Service (one way only with exit-lport or both, not at all with entry-lport)"
        + (
            ". Not solved: a Service connection between two pods steered through one VNF "
            "instance on this node, the caller entry-lport or both and the backend exit-lport "
            f"or both, never connects: {SAME_VNF_LIMIT}"
            if twice
            else ""
        )
    )
