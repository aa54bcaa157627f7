"""Two chassis, as users run OVN-Kubernetes (issue 23), with real packets on OVN 26.03.

Each node is a chassis of its own (OVS 4.0 userspace datapath in its own network namespace, its
own ``ovn-controller``), the chassis talk Geneve over a veth underlay, and the product runs with
its default flags in both topologies (``osc_gitops_sandbox.datapath.world``, ``topology=``):

- ``central``: one NB/SB/northd, both chassis in it; ``osc-gitops apply``;
- ``zones``: OVN-Kubernetes interconnect: per node its own NB, SB, northd and chassis, the
  transit switch with remote ports bound to remote chassis; ``osc-gitops apply
  --kubernetes-only`` and one ``apply --node N --ovn-nb <zone N>`` per node.

``web-a`` and ``other-b`` live on node-1, ``client-c`` and ``client-d`` on node-2: every probe
between the two groups crosses the tunnel. Counts are frames each VNF guest passed on (3 pings
through a VNF count 6: request and reply).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from osc_gitops_sandbox.datapath.netns import FrameCounter
from osc_gitops_sandbox.datapath.world import (
    NAMESPACE,
    VNF_NAMESPACE,
    World,
    binding,
    security_group,
    vnf_deployment,
)
from osc_gitops_sandbox.ovn import ovsdb_rpc

pytestmark = pytest.mark.datapath

FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
FW2 = f"{VNF_NAMESPACE}/firewall-node-2"
ROUTED_TTL = {"central": 63, "zones": 62}
"""One router hop (``ovn_cluster_router``) with one NB; two with interconnect (each zone's
cluster router, joined by the transit switch)."""


def topology(w: World) -> str:
    return "zones" if w.dp.zoned else "central"


def wait_for(what: str, check: Callable[[], object], limit: float) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < limit, f"{what}: not within {limit} s"
        time.sleep(0.02)
    return time.monotonic() - start


def test_every_node_is_a_chassis_and_traffic_between_them_crosses_geneve(mc: World) -> None:
    dp = mc.dp
    c1, c2 = dp.chassis_of("node-1"), dp.chassis_of("node-2")
    assert c1 is not c2 and c1.netns != c2.netns and c1.encap_ip != c2.encap_ip
    assert len(dp.pids) == 6, "ovsdb-server, ovs-vswitchd and ovn-controller per chassis"
    for here, there in ((c1, c2), (c2, c1)):
        tunnels = here.vsctl("--bare", "--columns=options", "find", "Interface", "type=geneve")
        assert f"remote_ip={there.encap_ip}" in tunnels.split()
    if topology(mc) == "zones":
        for here, there in (("node-1", "node-2"), ("node-2", "node-1")):
            sb = dp.stack_of(here).sb_remote
            chassis, binding_ = ovsdb_rpc.transact(sb, "OVN_Southbound", [
                {"op": "select", "table": "Chassis", "where": [["name", "==", there]],
                 "columns": ["_uuid", "other_config"]},
                {"op": "select", "table": "Port_Binding",
                 "where": [["logical_port", "==", f"tstor-{there}"]], "columns": ["chassis"]},
            ])  # fmt: skip
            (remote,) = chassis["rows"]
            assert ovsdb_rpc.from_atom(remote["other_config"]) == {"is-remote": "true"}
            assert binding_["rows"][0]["chassis"] == remote["_uuid"], "northd bound it there"
        own = dp.stack_of("node-1").nbctl(
            "--bare", "--columns=name", "find", "Logical_Switch_Port", "external_ids:pod=true"
        )
        assert sorted(own.split()) == [f"{NAMESPACE}_other-b", f"{NAMESPACE}_web-a"]
    # a pod on node-2 to a pod on node-1: out of node-2's underlay NIC as Geneve
    counter = FrameCounter(c2.netns, "ul0")
    try:
        before = counter.counts()[0]
        probe = dp.probe(mc.pod("client-c"), mc.pod("web-a"))
        assert probe.replies == 3 and probe.ttl == ROUTED_TTL[topology(mc)]
        assert counter.counts()[0] - before >= 3, "the echo requests left node-2 encapsulated"
    finally:
        counter.close()
    assert probe.forwarded == {FW1: 0, FW2: 0}, "nothing is steered before anyone is labelled"


@pytest.mark.parametrize("redirection", ["exit-lport", "entry-lport", "both"])
def test_a_protected_pod_is_steered_at_its_own_node_across_chassis(
    mc: World, redirection: str
) -> None:
    dp = mc.dp
    mc.write_manifests(security_group(), vnf_deployment(), binding(redirection=redirection))
    mc.label("web-a", "web")
    mc.apply()
    web, client, other = mc.pod("web-a"), mc.pod("client-c"), mc.pod("other-b")
    towards = redirection in ("exit-lport", "both")
    away = redirection in ("entry-lport", "both")
    expect = {True: {FW1: 6, FW2: 0}, False: {FW1: 0, FW2: 0}}
    for src, dst, steered in ((client, web, towards), (web, client, away)):
        probe = dp.probe(src, dst)
        assert probe.replies == 3, (src.lsp, dst.lsp, probe)
        assert probe.forwarded == expect[steered], (redirection, src.lsp, dst.lsp, probe)
    with web.listen_tcp(8080), client.listen_tcp(8080):
        for src, dst, steered in ((client, web, towards), (web, client, away)):
            tcp = dp.tcp_probe(src, dst.ip, 8080, count=2)
            assert tcp.replies == 2 and tcp.through == ([FW1] if steered else []), (src, tcp)
    # the same switch is steered as before; pods outside the group never are
    assert dp.probe(other, web).through == ([FW1] if towards else [])
    assert dp.probe(mc.pod("client-d"), client).forwarded == {FW1: 0, FW2: 0}
    assert dp.probe(mc.pod("client-d"), other).forwarded == {FW1: 0, FW2: 0}
    assert dp.controller_errors() == [], "an ovn-controller rejected a logical flow"


def test_two_protected_pods_on_two_nodes_cross_both_vnfs_once_each(mc: World) -> None:
    dp = mc.dp
    mc.label("web-a", "web")
    mc.label("client-c", "web")
    mc.apply()
    web, client = mc.pod("web-a"), mc.pod("client-c")
    for src, dst in ((client, web), (web, client)):
        probe = dp.probe(src, dst)
        assert probe.replies == 3 and probe.forwarded == {FW1: 6, FW2: 6}, probe
    with web.listen_tcp(8080):
        tcp = dp.tcp_probe(client, web.ip, 8080, count=2)
        assert tcp.replies == 2 and tcp.through == [FW1, FW2]
    assert dp.probe(mc.pod("client-d"), mc.pod("other-b")).forwarded == {FW1: 0, FW2: 0}


def test_fail_close_drops_and_fail_open_bypasses_while_the_vnf_is_dead(mc: World) -> None:
    """One firewall on node-1 serves ``web`` (fail-close, web-a) and ``api`` (fail-open,
    other-b); client-c on node-2 probes both across the tunnel."""
    dp = mc.dp
    mc.write_manifests(
        security_group("web", ["app=web"]), security_group("api", ["app=api"]),
        vnf_deployment(), binding("web-firewall", group="web", failure_policy="fail-close"),
        binding("api-firewall", group="api", failure_policy="fail-open"),
    )  # fmt: skip
    mc.label("web-a", "web")
    mc.label("other-b", "api")
    mc.apply()
    client, web, other = mc.pod("client-c"), mc.pod("web-a"), mc.pod("other-b")
    assert dp.probe(client, web).through == [FW1] and dp.probe(client, other).through == [FW1]
    vnf = mc.vnf("node-1")
    dp.set_forwarding(vnf, False)

    def bypassed() -> bool:
        probe = dp.probe(client, other, count=1, timeout=0.05)
        return probe.replies == 1 and probe.through == []

    took = wait_for("fail-open bypasses the dead firewall", bypassed, 15)
    assert dp.probe(client, web, count=2, timeout=0.3).replies == 0, "fail-close drops"
    dp.set_forwarding(vnf, True)

    def steered() -> bool:
        probe = dp.probe(client, web, count=1, timeout=0.05)
        return probe.replies == 1 and probe.through == [FW1]

    back = wait_for("steered through the revived firewall", steered, 15)
    print(f"{topology(mc)}: fail-open bypass after {took:.2f} s, steered again {back:.2f} s")
    assert dp.probe(client, other).through == [FW1]


def test_a_protected_pod_moving_to_the_other_node_is_steered_there(mc: World) -> None:
    dp = mc.dp
    mc.label("web-a", "web")
    mc.apply()
    assert dp.probe(mc.pod("client-c"), mc.pod("web-a")).through == [FW1]
    try:
        moved = mc.move_pod("web-a", "node-2")  # rescheduled: new UID, address, node (zone)
        mc.apply()
        for src in ("client-d", "other-b"):  # now the same node, and across the tunnel
            probe = dp.probe(mc.pod(src), moved)
            assert probe.replies == 3 and probe.forwarded == {FW1: 0, FW2: 6}, (src, probe)
        if topology(mc) == "zones":
            ports = {
                node: json.dumps(dp.stack_of(node).nbctl("--bare", "--columns=name", "list",
                                                         "Logical_Switch_Port"))
                for node in ("node-1", "node-2")
            }  # fmt: skip
            assert "web-a" not in ports["node-1"] and "web-a" in ports["node-2"]
    finally:
        mc.move_pod("web-a", "node-1")
        mc.apply()
    assert dp.probe(mc.pod("client-c"), mc.pod("web-a")).through == [FW1]
