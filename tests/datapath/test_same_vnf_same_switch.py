"""The same VNF instance twice on one switch, with real packets on OVN 26.03.

With ``redirection: both``, a packet between two steered pods of one node is steered from-lport
into the node's firewall by its sender's ACL and leaves it by the function's out port; the
receiver's to-lport ACL would then send it into the same function again, and OVN drops it there
(no reply, no TCP). The product writes, per to-lport steering ACL through a VNF that some
binding enters from-lport, a twin one priority above it, same tier
(``osc.<binding>.<node>.to.crossed``): ``allow-related``, no function group, its match ``&&
inport == "<the function's out port>"``.

Evidence as in ``test_network_function_packets.py``: echo replies and TCP handshakes, and the
pod frames each VNF guest sent out of its NICs. A packet crossing the bridge once leaves it by
one NIC once, so 3 echo requests and their replies count 3 frames out of each NIC; a packet
sent in twice shows up as a NIC count above 3 (or, as before the fix, 0 replies). Pods:
``web-a`` and ``other-b`` on node-1, ``client-c`` on node-2.
"""

from __future__ import annotations

import time

import pytest
from osc_gitops_sandbox.datapath.world import (
    ROUTED_TTL,
    SAME_SWITCH_TTL,
    VNF_NAMESPACE,
    World,
    binding,
    security_group,
    vnf_deployment,
)
from osc_gitops_sandbox.ovn import ovsdb_rpc

from reconciler.cli.app import main

pytestmark = pytest.mark.datapath

FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
FW2 = f"{VNF_NAMESPACE}/firewall-node-2"
INSPECTOR = f"{VNF_NAMESPACE}/inspector-node-1"
PORT = 8080
TCP_CONNECTIONS = 2
MAX_SEGMENTS = 8
"""Frames one short TCP connection (handshake, FIN/ACK both ways) puts through a VNF crossed once,
with room for one retransmission; crossed twice, it would be at least twice the 6-7 seen."""


def _nic_counts(w: World) -> tuple[int, int]:
    return w.vnf("node-1").forwarded_per_nic()


def _assert_pair_crosses_once(w: World, src: str, dst: str, *, through: list[str]) -> None:
    """ICMP and TCP from ``src`` to ``dst`` (same node) are answered, through ``through`` only,
    and node-1's firewall passes each echo request and reply once (3 frames out of each NIC)."""
    dp = w.dp
    a, b = w.pod(src), w.pod(dst)
    before = _nic_counts(w)
    ping = dp.probe(a, b)
    after = _nic_counts(w)
    assert ping.replies == 3 and ping.ttl == SAME_SWITCH_TTL, (src, dst, ping)
    assert ping.through == through, (src, dst, ping)
    if FW1 in through:
        assert (after[0] - before[0], after[1] - before[1]) == (3, 3), (src, dst, before, after)
    with b.listen_tcp(PORT):
        tcp = dp.tcp_probe(a, b.ip, PORT, count=TCP_CONNECTIONS)
    assert tcp.replies == TCP_CONNECTIONS and tcp.through == through, (src, dst, tcp)
    for vnf in through:
        assert tcp.forwarded[vnf] <= TCP_CONNECTIONS * MAX_SEGMENTS, (src, dst, tcp)


def _crossed_acls(w: World) -> list[str]:
    """``osc.io/key`` of every ACL of ours without a function group (the twins), as in the NB."""
    rows = ovsdb_rpc.transact(w.cluster.nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "ACL", "where": [],
         "columns": ["external_ids", "network_function_group"]},
    ])[0]["rows"]  # fmt: skip
    keys = []
    for row in rows:
        ids = ovsdb_rpc.from_atom(row["external_ids"])
        if (
            "osc.io/key" in ids
            and ovsdb_rpc.from_atom(row["network_function_group"]) == []
            and "_vnf_ports" not in ids["osc.io/key"]  # beside load balancers: stateless ports
        ):
            keys.append(ids["osc.io/key"])
    return sorted(keys)


def test_two_members_of_one_group_on_one_node_cross_their_vnf_once(nf_fresh: World):
    """The default manifests (``both``, ``fail-close``), ``web-a`` and ``other-b`` in ``web``:
    each answers the other, every packet through node-1's firewall once; routed pairs as
    before; ovn-controller accepted every flow; a plan right after the apply is empty."""
    nf_fresh.label("web-a", "web")
    nf_fresh.label("other-b", "web")
    nf_fresh.apply()
    # web has members on node-1 only: its rows (the twin among them) are there only
    assert _crossed_acls(nf_fresh) == ["osc.web_firewall.node_1.to.crossed"]

    _assert_pair_crosses_once(nf_fresh, "web-a", "other-b", through=[FW1])
    _assert_pair_crosses_once(nf_fresh, "other-b", "web-a", through=[FW1])
    dp = nf_fresh.dp
    for src, dst in (("client-c", "web-a"), ("web-a", "client-c"), ("client-c", "other-b")):
        routed = dp.probe(nf_fresh.pod(src), nf_fresh.pod(dst))
        assert routed.replies == 3 and routed.ttl == ROUTED_TTL, (src, dst, routed)
        assert routed.forwarded == {FW1: 6, FW2: 0}, (src, dst, routed)
    assert dp.controller_errors() == [], "ovn-controller rejected a logical flow"
    plan = [a if a != "apply" else "plan" for a in nf_fresh.apply_args]
    assert main(plan) == 0, "plan after apply must report no changes (exit 0)"


def test_two_groups_bound_to_one_vnf_cross_it_once_whatever_their_policies(nf_fresh: World):
    """``web`` (``fail-close``) and ``api`` (``fail-open``) both through ``firewall``: two
    function groups, one function. Then the directions split: ``web`` entry-lport only and
    ``api`` exit-lport only still meet in the same function once; the reverse is not steered."""
    nf_fresh.label("web-a", "web")
    nf_fresh.label("other-b", "api")
    nf_fresh.write_manifests(
        security_group("web", ["app=web"]),
        security_group("api", ["app=api"]),
        vnf_deployment("firewall"),
        binding("web-firewall", group="web", failure_policy="fail-close"),
        binding("api-firewall", group="api", order=20, failure_policy="fail-open"),
    )
    nf_fresh.apply()
    _assert_pair_crosses_once(nf_fresh, "web-a", "other-b", through=[FW1])
    _assert_pair_crosses_once(nf_fresh, "other-b", "web-a", through=[FW1])

    nf_fresh.write_manifests(
        security_group("web", ["app=web"]),
        security_group("api", ["app=api"]),
        vnf_deployment("firewall"),
        binding("web-firewall", group="web", redirection="entry-lport"),
        binding("api-firewall", group="api", order=20, redirection="exit-lport"),
    )
    nf_fresh.apply()
    assert _crossed_acls(nf_fresh) == ["osc.api_firewall.node_1.to.crossed"]
    _assert_pair_crosses_once(nf_fresh, "web-a", "other-b", through=[FW1])
    _assert_pair_crosses_once(nf_fresh, "other-b", "web-a", through=[])
    assert nf_fresh.dp.controller_errors() == []


def test_a_chained_binding_one_order_earlier_still_takes_its_share(nf_fresh: World):
    """``web-ids`` (order 9, exit-lport, tcp/80, VNF ``inspector``) right before ``web-fw``
    (order 10, both, ``firewall``): their rows share a priority with the twin of ``web-fw``,
    whose match leaves tcp/80 out. Between members on one node, tcp/80 crosses the sender's
    firewall and the receiver's inspector, as it would across nodes; the rest crosses the
    firewall once."""
    nf_fresh.write_manifests(
        security_group(),
        vnf_deployment(),
        vnf_deployment("inspector", node="node-1"),
        binding("web-ids", vnf="inspector", order=9, redirection="exit-lport",
                protocol="tcp", ports=[80]),
        binding("web-fw", vnf="firewall", order=10),
    )  # fmt: skip
    nf_fresh.label("web-a", "web")
    nf_fresh.label("other-b", "web")
    nf_fresh.apply()
    dp = nf_fresh.dp
    web, other = nf_fresh.pod("web-a"), nf_fresh.pod("other-b")

    ping = dp.probe(other, web)
    assert ping.replies == 3 and ping.forwarded == {FW1: 6, FW2: 0, INSPECTOR: 0}
    with web.listen_tcp(80):
        http = dp.tcp_probe(other, web.ip, 80, count=TCP_CONNECTIONS)
    assert http.replies == TCP_CONNECTIONS and http.through == [FW1, INSPECTOR], http
    assert all(v <= TCP_CONNECTIONS * MAX_SEGMENTS for v in http.forwarded.values()), http
    _assert_pair_crosses_once(nf_fresh, "web-a", "other-b", through=[FW1])  # tcp/8080
    assert dp.controller_errors() == [], "ovn-controller rejected a logical flow"


def _wait_for_active(w: World, group: str, active: bool, limit: float = 30.0) -> None:
    """Until OVN counts ``group``'s function as ``active`` (or not); bounded by ``limit``."""
    start = time.monotonic()
    while (w.active_functions().get(group) is not None) != active:
        if time.monotonic() - start > limit:
            raise AssertionError(f"{group} active={active}: not within {limit} s")
        time.sleep(0.05)
    w.dp.wait_hv()


def test_the_failure_policy_still_decides_between_members_of_one_node(nf_fresh: World):
    """The twins have no function group, so health is still the steering ACLs' business: with
    the firewall dead, ``fail-open`` members on one node reach each other bypassing it and
    ``fail-close`` ones do not; when it forwards again they cross it once."""
    group = "osc.firewall.node_1.fail_open"
    nf_fresh.write_manifests(security_group(), vnf_deployment(),
                             binding(failure_policy="fail-open"))  # fmt: skip
    nf_fresh.label("web-a", "web")
    nf_fresh.label("other-b", "web")
    nf_fresh.apply()
    dp = nf_fresh.dp
    web, other = nf_fresh.pod("web-a"), nf_fresh.pod("other-b")
    vnf = nf_fresh.vnf("node-1")

    dp.set_forwarding(vnf, False)
    _wait_for_active(nf_fresh, group, active=False)
    bypass = dp.probe(web, other)
    assert bypass.replies == 3 and bypass.through == [], "fail-open: around the dead firewall"

    nf_fresh.write_manifests(security_group(), vnf_deployment(), binding())  # fail-close
    nf_fresh.apply(wait=False)
    nf_fresh.dp.wait_hv()
    assert dp.probe(web, other, count=2, timeout=0.3).replies == 0, "fail-close: dropped"

    dp.set_forwarding(vnf, True)
    _wait_for_active(nf_fresh, "osc.firewall.node_1.fail_close", active=True)
    _assert_pair_crosses_once(nf_fresh, "other-b", "web-a", through=[FW1])
