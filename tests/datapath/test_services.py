"""Services beside Network Function steering, with real packets on two chassis (issue 23).

OVN documents Network Function insertion together with a load balancer on the same switch as
unsupported, and OVN-Kubernetes puts its cluster load-balancer group on every node switch, so
every steered pod meets it. Each world here holds three ClusterIP Services written as
OVN-Kubernetes writes them (``osc_gitops_sandbox.ovn.services``: ``clusterLBGroup`` on every node
switch, in every NB, its load-balancer options):

- ``web`` ``10.96.0.10:80`` -> ``web-a:8080`` (the protected pod, node-1),
- ``client`` ``10.96.0.11:80`` -> ``client-c:8080`` (node-2, the other chassis),
- ``peer`` ``10.96.0.12:80`` -> ``other-b:8080`` (node-1, web-a's switch),

and ``web-a`` is protected with each redirection in turn. Each case is three TCP connections,
classified by the frames node-1's firewall passed on out of each NIC: ``data-in`` carries what
travels towards the protected pod, ``data-out`` what travels away from it. The table is the one
in docs/datapath.md ("Services"); it is the same in both topologies (and on one chassis).

Beside load balancers the product makes the VNF ports stateless
(``reconciler.core.steering.services``); without that, OVN 26.03 dropped the replies of every
Service connection an ``entry-lport``/``both`` pod opened (the "protected pod -> Service" rows
were "never connects": ``docs/upstream/nf-from-lport-lb-reply-dropped.sh``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.datapath.world import (
    VNF_NAMESPACE,
    World,
    binding,
    security_group,
    vnf_deployment,
)
from osc_gitops_sandbox.ovn import ovsdb_rpc

pytestmark = pytest.mark.datapath

PORT = 8080
FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
SERVICES = {"web": ("10.96.0.10", "web-a"), "client": ("10.96.0.11", "client-c"),
            "peer": ("10.96.0.12", "other-b")}  # fmt: skip
STEERED, NOT, TOWARDS_ONLY = "steered both ways", "not steered", "towards the pod only"
CASES = {
    # case: (source pod, Service or pod) -> outcome per redirection (exit, entry, both)
    "other node -> Service -> protected pod": (("client-c", "web"), (STEERED, NOT, STEERED)),
    "same switch -> Service -> protected pod": (("other-b", "web"), (STEERED, NOT, STEERED)),
    "protected pod -> own Service (hairpin)": (("web-a", "web"), (TOWARDS_ONLY, NOT, TOWARDS_ONLY)),
    "protected pod -> Service -> other node": (("web-a", "client"), (NOT, STEERED, STEERED)),
    "protected pod -> Service -> same switch": (("web-a", "peer"), (NOT, STEERED, STEERED)),
    "protected pod -> other node, direct": (("web-a", "client-c"), (NOT, STEERED, STEERED)),
    "unprotected -> Service -> other node": (("other-b", "client"), (NOT, NOT, NOT)),
}
REDIRECTIONS = ("exit-lport", "entry-lport", "both")


def stateless_acls(w: World) -> dict[str, str]:
    """Our ``allow-stateless`` ACLs in every NB: ``osc.io/key`` -> match."""
    found = {}
    for stack in w.dp.stacks:
        rows = ovsdb_rpc.transact(stack.nb_remote, "OVN_Northbound", [
            {"op": "select", "table": "ACL", "where": [["action", "==", "allow-stateless"]],
             "columns": ["external_ids", "match"]},
        ])[0]["rows"]  # fmt: skip
        for row in rows:
            found[ovsdb_rpc.from_atom(row["external_ids"])["osc.io/key"]] = row["match"]
    return found


@pytest.fixture
def services(mc: World) -> Iterator[World]:
    with mc.service("web", *_vip("web")), mc.service("client", *_vip("client")), \
            mc.service("peer", *_vip("peer")):  # fmt: skip
        listeners = [mc.pod(p).listen_tcp(PORT) for p in ("web-a", "client-c", "other-b")]
        try:
            yield mc
        finally:
            for listener in listeners:
                listener.close()


def _vip(name: str) -> tuple[str, int, list[str], int]:
    vip, backend = SERVICES[name]
    return vip, 80, [backend], PORT


def outcome(w: World, src: str, dst: str) -> tuple[str, tuple[int, int]]:
    """Connect 3 times from ``src`` to a Service (by name) or a pod (directly); every
    connection must complete. Classified by what node-1's firewall passed on: (outcome,
    (frames towards the pod, frames away from it)). node-2's firewall never sees any of it
    (web-a lives on node-1)."""
    ip, port = (SERVICES[dst][0], 80) if dst in SERVICES else (w.pod(dst).ip, PORT)
    vnf, other = w.vnf("node-1"), w.vnf("node-2")
    before, other_before = vnf.forwarded_per_nic(), other.forwarded
    # timeout 1.5 s: a first hairpin connection may need its SYN retransmitted (after 1 s)
    tcp = w.dp.tcp_probe(w.pod(src), ip, port, count=3, timeout=1.5)
    after = vnf.forwarded_per_nic()
    assert other.forwarded == other_before, f"{src} -> {dst} crossed node-2's firewall"
    towards, away = (a - b for a, b in zip(after, before, strict=True))
    assert tcp.replies == 3, f"{src} -> {dst}: {tcp.replies}/3 connected ({towards}/{away})"
    if towards and away > 1:
        return STEERED, (towards, away)
    if towards and away <= 1:
        return TOWARDS_ONLY, (towards, away)
    assert (towards, away) == (0, 0), f"{src} -> {dst}: {towards}/{away} frames"
    return NOT, (towards, away)


@pytest.mark.parametrize("redirection", REDIRECTIONS)
def test_service_traffic_of_a_protected_pod(services: World, redirection: str) -> None:
    w = services
    w.write_manifests(security_group(), vnf_deployment(), binding(redirection=redirection))
    w.label("web-a", "web")
    w.apply()
    plan = w.outputs[-1]
    assert "have load balancers" in plan or "has load balancers" in plan
    assert "makes its VNF ports there stateless" in plan
    assert stateless_acls(w) == {
        f"osc._vnf_ports.{n}.{d}": f"{side} == @osc._vnf_ports.{n} && ip"
        for n in ("node_1", "node_2")
        for d, side in (("from", "inport"), ("to", "outport"))
    }
    column = REDIRECTIONS.index(redirection)
    seen = {case: outcome(w, src, dst) for case, ((src, dst), _) in CASES.items()}
    print(f"\n{'zones' if w.dp.zoned else 'central'} {redirection}: "
          + "; ".join(f"{c}: {o} {f}" for c, (o, f) in seen.items()))  # fmt: skip
    for case, (_, expected) in CASES.items():
        got, frames = seen[case]
        assert got == expected[column], f"{case} ({redirection}): {got}, frames {frames}"


def test_two_protected_pods_through_a_service(mc: World) -> None:
    """``web-a`` (node-1), ``client-c`` (node-2) and ``other-b`` (node-1) all protected
    ``both`` through the firewall. Through a Service, web-a reaches client-c across its own
    node's firewall and then client-c's, once each way each, like the direct connection. It
    does NOT reach other-b, protected by the same firewall instance on its own switch: OVN
    routes load-balanced traffic through the cluster router (the pod sends it to its gateway's
    MAC), so it comes back to the switch from the router port, not from the firewall's out
    port, and other-b's to-lport ACL sends it into the same firewall a second time (the ACL
    that lets already-crossed traffic through matches ``inport`` = the out port); the direct
    connection is fine. The stateless rows go with the last load balancer."""
    w = mc
    w.write_manifests(security_group(), vnf_deployment(), binding(redirection="both"))
    for pod in ("web-a", "client-c", "other-b"):
        w.label(pod, "web")
    web = w.pod("web-a")
    fw1, fw2 = w.vnf("node-1"), w.vnf("node-2")

    def connect(dst: str, port: int, count: int = 3) -> tuple[int, tuple[int, ...]]:
        before = (*fw1.forwarded_per_nic(), *fw2.forwarded_per_nic())
        tcp = w.dp.tcp_probe(web, dst, port, count=count, timeout=1.5)
        after = (*fw1.forwarded_per_nic(), *fw2.forwarded_per_nic())
        return tcp.replies, tuple(a - b for a, b in zip(after, before, strict=True))

    peer, client = w.pod("other-b"), w.pod("client-c")
    with w.service("peer", *_vip("peer")), w.service("client", *_vip("client")), \
            peer.listen_tcp(PORT), client.listen_tcp(PORT):  # fmt: skip
        plan = w.apply()
        assert stateless_acls(w)
        assert "Not solved: a pod steered entry-lport or both through firewall" in plan
        seen = {
            "other node, direct": connect(client.ip, PORT),
            "other node, Service": connect(SERVICES["client"][0], 80),
            "same switch, direct": connect(peer.ip, PORT),
            "same switch, Service": connect(SERVICES["peer"][0], 80, count=1),  # fails alike
        }
    print(f"\n{'zones' if w.dp.zoned else 'central'} all protected, web-a -> (replies, frames "
          f"out of fw1 in/out, fw2 in/out): {seen}")  # fmt: skip
    for case in ("other node, direct", "other node, Service"):
        replies, frames = seen[case]
        assert replies == 3 and all(frames), (case, seen[case])  # both firewalls, both ways
    replies, frames = seen["same switch, direct"]
    assert replies == 3 and all(frames[:2]) and not any(frames[2:]), seen
    assert seen["same switch, Service"][0] == 0, seen  # the limit above, measured
    w.apply()
    if os.environ.get("OSC_DATAPATH_SERVICES") != "1":  # else a Service stays on every switch
        assert not stateless_acls(w), "the stateless rows outlived the load balancers"
