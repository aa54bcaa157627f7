"""``explain --trace``: the packet each binding's traffic asks for, which VNF ports should see it
(one VNF, a chain, router-policy's destination node), the checks of every value put into a
microflow, and each verdict with its JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reconciler.core.model.observed import PodPort, Switch
from reconciler.core.steering import chains
from reconciler.core.views.tracing import (
    Probe,
    TraceError,
    choose_peer,
    gateway_mac,
    probes,
    verdict,
)
from tests.support.builders import binding, cluster, desired, sg, vnf

OBSERVED = cluster(
    [
        ("shop", "web-1", "node-1", {"app": "web"}),
        ("shop", "cache-1", "node-1", {"app": "cache"}),
        ("shop", "web-2", "node-2", {"app": "web"}),
    ]
)
PORTS = {p.pod: p for p in OBSERVED.pod_ports}
NF = False
"""A backend that steers at the pod's own port (network-function): not routed only."""
ROUTED = True
"""router-policy: sees routed traffic only, rerouted on the destination's node."""


@dataclasses.dataclass
class View:  # what a probe reads of reconciler.core.views.explain.BindingView
    name: str
    vnf: str | list[str]
    redirection: str
    traffic: list[dict[str, Any]]
    steers: bool = True
    failure_policy: str = "fail-close"
    healthy: bool | None = None


@dataclasses.dataclass
class Explanation:
    bindings: list[View]


def packets(*views: View, peer: str = "cache-1", routed: bool = NF) -> list[str]:
    found = probes(Explanation(list(views)), OBSERVED, PORTS["web-1"], PORTS[peer], routed)
    return [f"{p.binding} {p.direction} {p.packet}" for p in found]


@pytest.mark.parametrize(
    ("traffic", "packet"),
    [
        ([], "icmp echo 10.244.1.6 -> 10.244.1.5"),  # all traffic: a ping
        ([{"protocol": "any"}], "icmp echo 10.244.1.6 -> 10.244.1.5"),
        ([{"protocol": "icmp"}], "icmp echo 10.244.1.6 -> 10.244.1.5"),
        ([{"protocol": "tcp"}], "tcp 10.244.1.6 -> 10.244.1.5:80"),  # any port: 80
        ([{"protocol": "udp"}], "udp 10.244.1.6 -> 10.244.1.5:53"),  # any port: 53
        ([{"protocol": "udp", "ports": [5353, 53]}], "udp 10.244.1.6 -> 10.244.1.5:5353"),
        ([{"protocol": "tcp", "ports": [{"start": 8000, "end": 8080}]}],
         "tcp 10.244.1.6 -> 10.244.1.5:8000"),
        ([{"protocol": "udp", "ports": [9]}, {"protocol": "tcp", "ports": [1]}],
         "udp 10.244.1.6 -> 10.244.1.5:9"),  # the first filter
    ],
)  # fmt: skip
def test_the_packet_is_one_the_first_filter_takes(traffic: list[Any], packet: str) -> None:
    assert packets(View("a", "fw", "exit-lport", traffic)) == [f"a to-pod {packet}"]


def test_microflows_of_udp_and_icmp() -> None:
    views = [View("u", "fw", "entry-lport", [{"protocol": "udp", "ports": [53]}]),
             View("i", "ips", "entry-lport", [{"protocol": "icmp"}])]  # fmt: skip
    udp, icmp = probes(Explanation(views), OBSERVED, PORTS["web-1"], PORTS["cache-1"], NF)
    assert udp.microflow == (
        'inport == "shop_web-1" && eth.src == 0a:58:00:00:00:00 && eth.dst == 0a:58:00:00:00:01 '
        "&& ip4.src == 10.244.1.5 && ip4.dst == 10.244.1.6 && ip.ttl == 64 && udp.src == 40000 "
        "&& udp.dst == 53"
    )
    assert icmp.microflow == (
        'inport == "shop_web-1" && eth.src == 0a:58:00:00:00:00 && eth.dst == 0a:58:00:00:00:01 '
        "&& ip4.src == 10.244.1.5 && ip4.dst == 10.244.1.6 && ip.ttl == 64 && icmp4.type == 8 "
        "&& icmp4.code == 0"
    )
    assert (udp.source, udp.destination, udp.datapath) == ("shop_web-1", "shop_cache-1", "node-1")


@pytest.mark.parametrize(
    ("redirection", "directions"),
    [("exit-lport", ["to-pod"]), ("entry-lport", ["from-pod"]), ("both", ["to-pod", "from-pod"])],
)
def test_one_probe_per_direction_the_binding_steers(
    redirection: str, directions: list[str]
) -> None:
    got = packets(View("a", "fw", redirection, []))
    assert [p.split()[1] for p in got] == directions


def test_the_same_packet_to_the_same_vnf_is_traced_once() -> None:
    """Two bindings of one VNF and the same first filter make one probe; another VNF, or a
    binding that does not steer the pod, another (or none)."""
    got = packets(
        View("off", "av", "both", [], steers=False),
        View("a", "fw", "exit-lport", []),
        View("b", "fw", "both", []),
        View("c", "ips", "exit-lport", []),
    )
    assert got == [
        "a to-pod icmp echo 10.244.1.6 -> 10.244.1.5",
        "b from-pod icmp echo 10.244.1.5 -> 10.244.1.6",
        "c to-pod icmp echo 10.244.1.6 -> 10.244.1.5",
    ]


def test_the_vnf_ports_of_one_vnf_a_chain_and_router_policy() -> None:
    def ports(view: View, peer: str, routed: bool) -> list[tuple[str, str, tuple[str, ...]]]:
        found = probes(Explanation([view]), OBSERVED, PORTS["web-1"], PORTS[peer], routed)
        return [(p.direction, p.vnf, p.vnf_ports) for p in found]

    assert ports(View("a", "fw", "both", []), "web-2", NF) == [
        ("to-pod", "fw", ("nf_fw_node-1_in", "nf_fw_node-1_out")),
        ("from-pod", "fw", ("nf_fw_node-1_in", "nf_fw_node-1_out")),
    ]
    # router-policy: the instance on the destination's node reroutes the packet
    assert ports(View("a", "fw", "both", []), "web-2", ROUTED) == [
        ("to-pod", "fw", ("nf_fw_node-1_in", "nf_fw_node-1_out")),
        ("from-pod", "fw", ("nf_fw_node-2_in", "nf_fw_node-2_out")),
    ]
    chain = ["fw", "ips"]
    exit_ports = tuple(chains.port_name(chain, chains.EXIT, "node-1", s) for s in ("in", "out"))
    entry_ports = tuple(chains.port_name(chain, chains.ENTRY, "node-1", s) for s in ("in", "out"))
    assert exit_ports != entry_ports
    assert ports(View("c", chain, "both", []), "cache-1", NF) == [
        ("to-pod", "fw -> ips", exit_ports),
        ("from-pod", "fw -> ips", entry_ports),
    ]


def test_a_peer_on_another_node_is_sent_to_the_gateway_of_the_senders_switch() -> None:
    to_pod, from_pod = probes(
        Explanation([View("a", "fw", "both", [])]), OBSERVED, PORTS["web-1"], PORTS["web-2"], NF
    )
    assert "eth.dst == 0a:58:0a:f4:02:01" in to_pod.microflow and to_pod.datapath == "node-2"
    assert "eth.dst == 0a:58:0a:f4:01:01" in from_pod.microflow and from_pod.datapath == "node-1"


@pytest.mark.parametrize(
    ("subnet", "mac"),
    [
        ("10.244.7.0/24", "0a:58:0a:f4:07:01"),
        ("10.128.0.0/14", "0a:58:0a:80:00:01"),
        ("10.244.7.1/24", "0a:58:0a:f4:07:01"),  # written as the gateway's address/prefix
    ],
)
def test_the_gateway_mac_is_derived_from_the_first_host(subnet: str, mac: str) -> None:
    obs = dataclasses.replace(OBSERVED, switches=(Switch("n", subnet),))
    assert gateway_mac(obs, "n") == mac


@pytest.mark.parametrize("subnet", [None, "", "not-a-subnet", "fd00::/64"])
def test_no_gateway_mac_without_an_ipv4_subnet(subnet: str | None) -> None:
    obs = dataclasses.replace(OBSERVED, switches=(Switch("n", subnet),))
    with pytest.raises(TraceError, match="switch n has no IPv4 subnet"):
        gateway_mac(obs, "n")
    with pytest.raises(TraceError, match="switch gone has no IPv4 subnet"):
        gateway_mac(obs, "gone")


def port(name: str = "shop_x", switch: str = "node-1", mac: str | None = "0a:58:00:00:00:09",
         ips: tuple[str, ...] = ("10.244.1.9/24",)) -> PodPort:  # fmt: skip
    return PodPort(name, switch, "shop", "x", None, mac, ips)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (port(name="shop-x"), "port 'shop-x' on 'node-1' is not a pod port name to trace"),
        (port(name="Shop_x"), "is not a pod port name to trace"),
        (port(name="shop_x-"), "is not a pod port name to trace"),
        (port(switch="node 1"), "'?node 1'? "),  # refused by name or for want of a subnet
        (port(switch="-node"), "'?-node'? "),
        (port(mac=None), "pod port shop_x has no MAC address to trace with"),
        (port(mac="0a:58:00:00:00"), "has no MAC address"),
        (port(mac="0a:58:00:00:00:0g"), "has no MAC address"),
        (port(mac="0a:58:00:00:00:01:02"), "has no MAC address"),
        (port(ips=()), "pod port shop_x has no IPv4 address to trace with"),
        (port(ips=("fd00::9",)), "has no IPv4 address"),
        (port(ips=("dynamic",)), "has no IPv4 address"),
    ],
)
def test_a_value_that_is_no_name_or_address_is_refused(bad: PodPort, message: str) -> None:
    for pod, peer in ((bad, PORTS["cache-1"]), (PORTS["cache-1"], bad)):
        with pytest.raises(TraceError, match=message):
            probes(Explanation([View("a", "fw", "both", [])]), OBSERVED, pod, peer, NF)


def test_the_first_ipv4_address_of_a_port_is_used_and_a_mac_is_lowered() -> None:
    mixed = port(
        mac="0A:58:00:00:00:09", ips=("nonsense", "fd00::9/64", "10.244.1.9/24", "10.1.1.1")
    )
    (probe,) = probes(
        Explanation([View("a", "fw", "entry-lport", [])]), OBSERVED, mixed, PORTS["cache-1"], NF
    )
    assert "eth.src == 0a:58:00:00:00:09 && " in probe.microflow
    assert probe.packet == "icmp echo 10.244.1.9 -> 10.244.1.6"


def test_the_peer_prefers_the_same_node_then_unsteered_then_the_name() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    obs = cluster(
        [
            ("shop", "web-1", "node-1", {"app": "web"}),
            ("shop", "web-3", "node-1", {"app": "web"}),
            ("shop", "b", "node-2", {}),
            ("shop", "a", "node-2", {}),
        ]
    )
    ports = {p.pod: p for p in obs.pod_ports}
    assert choose_peer(want, obs, ports["web-1"]).name == "shop_web-3"  # same node, steered
    assert choose_peer(want, obs, ports["web-1"], routed=True).name == "shop_a"
    assert choose_peer(want, obs, ports["a"]).name == "shop_b"
    assert choose_peer(want, obs, ports["a"], routed=True).name == "shop_web-1"
    # ports that are not a pod's (a VNF's, a join port) are never peers
    odd = dataclasses.replace(obs, pod_ports=(ports["web-1"], port(name="nf_fw_node-1_in")))
    with pytest.raises(
        TraceError, match=r"^no other pod has an OVN port to trace against: pass --peer NS/POD$"
    ):
        choose_peer(want, odd, ports["web-1"])


def probe() -> Probe:
    return Probe("web-fw", "fw", "to-pod", "shop_cache-1", "shop_web-1", "node-1", "flow",
                 "icmp echo a -> b", ("nf_fw_node-1_in", "nf_fw_node-1_out"))  # fmt: skip


def test_a_verdict_says_where_the_packet_went() -> None:
    views = [View("other", "x", "both", []), View("web-fw", "fw", "both", [])]
    cases = [
        (["shop_web-1", "nf_fw_node-1_in"], True, "reaches VNF fw at its port nf_fw_node-1_in"),
        (["nfc_abc_in"], False,
         "goes to nfc_abc_in instead of VNF fw (an earlier binding takes it)"),
        (["shop_web-1"], False, "delivered to shop_web-1 without crossing VNF fw"),
        (["shop_zzz", "ovn-k8s-mp0"], False, "output to shop_zzz, ovn-k8s-mp0, not to VNF fw"),
        ([], False, "dropped before reaching VNF fw; VNF fw is not healthy as OVN sees it and "
                    "the binding fails close"),
    ]  # fmt: skip
    for outputs, reached, detail in cases:
        got = verdict(probe(), outputs, "", views)
        assert (got.reached, got.detail, got.outputs) == (reached, detail, tuple(outputs))
        assert got.probe == probe()


@pytest.mark.parametrize(
    ("view", "why"),
    [
        (None, ""),  # the binding is not among the views
        (View("web-fw", "fw", "both", [], failure_policy="fail-open"), ""),
        (View("web-fw", "fw", "both", [], healthy=True), ""),
        (View("web-fw", "fw", "both", [], healthy=False),
         "; VNF fw is not healthy as OVN sees it and the binding fails close"),
    ],
)  # fmt: skip
def test_a_drop_names_the_unhealthy_vnf_only_when_the_binding_fails_close(
    view: View | None, why: str
) -> None:
    got = verdict(probe(), [], "ls_in_acl", [] if view is None else [view])
    assert got.detail == f"dropped in ls_in_acl before reaching VNF fw{why}"
    assert got.probe == probe() and not got.reached


def test_a_verdict_as_json() -> None:
    assert verdict(probe(), ["nf_fw_node-1_out"], "").to_json() == {
        "binding": "web-fw",
        "vnf": "fw",
        "direction": "to-pod",
        "packet": "icmp echo a -> b",
        "from": "shop_cache-1",
        "to": "shop_web-1",
        "datapath": "node-1",
        "microflow": "flow",
        "expected": ["nf_fw_node-1_in", "nf_fw_node-1_out"],
        "outputs": ["nf_fw_node-1_out"],
        "reachesVnf": True,
        "detail": "reaches VNF fw at its port nf_fw_node-1_out",
    }
