"""Network Function steering beside a load balancer on the node switches, with real packets.

OVN documents Network Function insertion together with a load balancer on the same switch as
unsupported, and OVN-Kubernetes puts its Service load-balancer group on every node switch, so
this is what users will meet. The product makes its VNF ports stateless there (and the plan
says so); this module records what OVN 26.03 does on one chassis (both node switches here are
served by one ovn-controller): a plain Service VIP ``10.96.0.10:80`` -> ``web-a:8080`` on both
node switches directly (``tests/datapath/test_services.py`` has OVN-Kubernetes' group and
options on two chassis), ``web-a`` steered both ways.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.datapath.world import VNF_NAMESPACE, World

pytestmark = pytest.mark.datapath

FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
VIP, VIP_PORT, PORT = "10.96.0.10", 80, 8080
HAIRPIN_CONNECT_TIMEOUT = 3.0
"""The first hairpin connection after others through the VIP sometimes needs the SYN
retransmitted (1 s later); the timeout leaves room for that."""


@pytest.fixture
def service(nf_fresh: World) -> Iterator[World]:
    """A Service load balancer on both node switches (as OVN-Kubernetes' group), ``web-a``
    labelled and applied; the load balancer is removed afterwards."""
    ovn = nf_fresh.cluster.ovn
    web = nf_fresh.pod("web-a")
    lb = ovn.nbctl("create", "Load_Balancer", "name=svc-web", "protocol=tcp",
                   f'vips:"{VIP}:{VIP_PORT}"="{web.ip}:{PORT}"').strip()  # fmt: skip
    for node in ("node-1", "node-2"):  # on the switches directly (OVN-Kubernetes: a group)
        ovn.nbctl("add", "Logical_Switch", node, "load_balancer", lb)
    try:
        nf_fresh.label("web-a", "web")
        nf_fresh.apply()
        yield nf_fresh
    finally:
        for node in ("node-1", "node-2"):
            ovn.nbctl("remove", "Logical_Switch", node, "load_balancer", lb)
        ovn.nbctl("destroy", "Load_Balancer", lb)
        nf_fresh.dp.wait_hv()


def test_the_plan_makes_the_vnf_ports_stateless_beside_load_balancers(service: World):
    plan = service.outputs[-1]
    assert "switches node-1, node-2 have load balancers" in plan
    matches = service.cluster.ovn.nbctl(
        "--bare", "--columns=match", "find", "ACL", "action=allow-stateless"
    ).split("\n")
    assert sorted(m for m in matches if m) == sorted(
        f"{side} == @osc._vnf_ports.{node} && ip"
        for node in ("node_1", "node_2")
        for side in ("inport", "outport")
    )


def test_direct_and_service_traffic_is_still_steered_both_ways_on_one_chassis(service: World):
    dp = service.dp
    web, other, client = service.pod("web-a"), service.pod("other-b"), service.pod("client-c")
    vnf = service.vnf("node-1")
    ping = dp.probe(client, web)
    assert ping.replies == 3 and ping.forwarded[FW1] == 6
    with web.listen_tcp(PORT):
        for src, dst, port in ((client, web.ip, PORT), (client, VIP, VIP_PORT),
                               (other, web.ip, PORT), (other, VIP, VIP_PORT)):  # fmt: skip
            before = vnf.forwarded_per_nic()
            tcp = dp.tcp_probe(src, dst, port, count=3)
            after = vnf.forwarded_per_nic()
            towards, away = (a - b for a, b in zip(after, before, strict=True))
            assert tcp.replies == 3 and tcp.through == [FW1], (src.lsp, dst, tcp)
            assert towards >= 6 and away >= 6, f"{src.lsp} -> {dst}: {towards}/{away} frames"


def test_a_pod_reaching_itself_through_the_vip_crosses_the_vnf_one_way(service: World):
    """Hairpin: OVN source-NATs the pod's own connection to the VIP; only the half towards
    the pod (the to-lport ACL) crosses the VNF."""
    dp = service.dp
    web, client = service.pod("web-a"), service.pod("client-c")
    vnf = service.vnf("node-1")
    with web.listen_tcp(PORT):
        assert dp.tcp_probe(client, VIP, VIP_PORT).replies == 1
        before = vnf.forwarded_per_nic()
        hairpin = dp.tcp_probe(web, VIP, VIP_PORT, count=3, timeout=HAIRPIN_CONNECT_TIMEOUT)
        after = vnf.forwarded_per_nic()
    towards, away = (a - b for a, b in zip(after, before, strict=True))
    assert hairpin.replies == 3
    assert towards >= 3 and away < towards, f"lopsided: {towards} towards, {away} away"
