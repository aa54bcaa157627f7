"""``explain --trace``'s pure half: which packets, built only from checked values, and what a
trace's end says (issue #24 item 7; the traces themselves run in
tests/functional/review/test_sandbox_session.py)."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.core.model.observed import PodPort
from reconciler.core.views.tracing import (
    Probe,
    TraceError,
    choose_peer,
    gateway_mac,
    probes,
    verdict,
)
from tests.support.builders import binding, cluster, desired, sg, vnf

OBSERVED = cluster([
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "cache-1", "node-1", {"app": "cache"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
])  # fmt: skip
DESIRED = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
PORTS = {p.pod: p for p in OBSERVED.pod_ports}


@dataclasses.dataclass
class View:  # the fields of reconciler.core.views.explain.BindingView a probe reads
    name: str
    vnf: str
    redirection: str
    traffic: list[dict[str, object]]
    steers: bool = True
    failure_policy: str = "fail-close"
    healthy: bool | None = None


@dataclasses.dataclass
class Explanation:
    bindings: list[View]


def test_the_peer_is_an_unsteered_pod_on_the_same_node() -> None:
    assert choose_peer(DESIRED, OBSERVED, PORTS["web-1"]).name == "shop_cache-1"
    assert choose_peer(DESIRED, OBSERVED, PORTS["web-2"]).name == "shop_cache-1"  # another node
    # router-policy steering sees routed traffic only: a peer on another node first
    assert choose_peer(DESIRED, OBSERVED, PORTS["web-1"], routed=True).name == "shop_web-2"


def test_probes_follow_the_redirection_and_the_first_filter() -> None:
    views = [View("a", "fw", "both", [{"protocol": "tcp", "ports": [{"start": 8000, "end": 9}]}]),
             View("b", "ips", "exit-lport", [{"protocol": "any", "ports": []}]),
             View("off", "x", "both", [], steers=False)]  # fmt: skip
    found = probes(Explanation(views), OBSERVED, PORTS["web-1"], PORTS["cache-1"], routed=False)
    assert [(p.binding, p.direction, p.packet) for p in found] == [
        ("a", "to-pod", "tcp 10.244.1.6 -> 10.244.1.5:8000"),
        ("a", "from-pod", "tcp 10.244.1.5 -> 10.244.1.6:8000"),
        ("b", "to-pod", "icmp echo 10.244.1.6 -> 10.244.1.5"),
    ]
    to_pod = found[0]
    assert to_pod.microflow == (
        'inport == "shop_cache-1" && eth.src == 0a:58:00:00:00:01 && eth.dst == '
        "0a:58:00:00:00:00 && ip4.src == 10.244.1.6 && ip4.dst == 10.244.1.5 && ip.ttl == 64 "
        "&& tcp.src == 40000 && tcp.dst == 8000 && tcp.flags == 0x002"
    )
    assert to_pod.vnf_ports == ("nf_fw_node-1_in", "nf_fw_node-1_out")


def test_a_peer_on_another_node_is_routed_through_the_gateway() -> None:
    (probe,) = probes(Explanation([View("a", "fw", "exit-lport", [])]), OBSERVED,
                      PORTS["web-1"], PORTS["web-2"], routed=False)  # fmt: skip
    assert probe.datapath == "node-2" and "eth.dst == 0a:58:0a:f4:02:01" in probe.microflow
    assert gateway_mac(OBSERVED, "node-1") == "0a:58:0a:f4:01:01"


@pytest.mark.parametrize(
    "port",
    [
        PodPort(
            'shop_x" || 1 == 1', "node-1", "shop", "x", None, "0a:58:00:00:00:01", ("1.2.3.4",)
        ),
        PodPort("shop_x", "node-1", "shop", "x", None, "0a:58:00:00:00:01 && 1", ("1.2.3.4",)),
        PodPort("shop_x", "node-1", "shop", "x", None, "0a:58:00:00:00:01", ("1.2.3.4 || 1",)),
    ],
)
def test_nothing_unchecked_reaches_a_microflow(port: PodPort) -> None:
    with pytest.raises(TraceError):
        probes(Explanation([View("a", "fw", "both", [])]), OBSERVED, port, PORTS["cache-1"],
               routed=False)  # fmt: skip


def probe() -> Probe:
    return Probe("web-fw", "fw", "to-pod", "shop_cache-1", "shop_web-1", "node-1", "f", "p",
                 ("nf_fw_node-1_in", "nf_fw_node-1_out"))  # fmt: skip


def test_verdicts() -> None:
    assert verdict(probe(), ["nf_fw_node-1_out"], "").detail == (
        "reaches VNF fw at its port nf_fw_node-1_out"
    )
    assert verdict(probe(), ["nf_ips_node-1_out"], "").detail.startswith(
        "goes to nf_ips_node-1_out instead of VNF fw (an earlier binding takes it)"
    )
    assert verdict(probe(), ["shop_web-1"], "").detail == (
        "delivered to shop_web-1 without crossing VNF fw"
    )
    dropped = verdict(probe(), [], "ls_out_network_function", [View("web-fw", "fw", "both", [])])
    assert not dropped.reached and dropped.detail == (
        "dropped in ls_out_network_function before reaching VNF fw; VNF fw is not healthy as "
        "OVN sees it and the binding fails close"
    )
