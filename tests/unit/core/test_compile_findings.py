"""compile's findings about bindings, whole: each carries its code, its subject and its node
(the JSON plan's ``findings``, which tools filter on) and a text naming every VNF, node and
filter it concerns."""

from __future__ import annotations

from typing import Any

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.facts import Finding
from reconciler.core.model.target import Target
from tests.support.builders import binding, cluster, desired, sg, vnf

NF = CompileOptions(steering="network-function")
NODES = ("node-1", "node-2", "node-3")
PODS = [
    ("shop", "pci-1", "node-1", {"app": "pci"}),
    ("shop", "pci-2", "node-2", {"app": "pci"}),
    ("shop", "pci-3", "node-3", {"app": "pci"}),
    ("shop", "pci-4", "node-3", {"app": "pci"}),
]


def _compile(*manifests: Any, labels: dict[str, dict[str, str]] | None = None) -> Target:
    want = desired(sg("pci", "app=pci"), *manifests)
    return compile_target(want, cluster(PODS, nodes=NODES, node_labels=labels), NF)


def _coded(target: Target, code: str) -> list[Finding]:
    return [f for f in target.findings if f.code == code]


def test_pods_of_a_node_without_the_vnf_are_unsteered_there_and_the_finding_names_the_node() -> (
    None
):
    target = _compile(
        vnf("ips", nodeSelector={"ips": "yes"}),
        binding("pci-ips", "pci", "ips", 10),
        labels={"node-1": {"ips": "yes"}},
    )
    assert _coded(target, "unsteered") == [
        Finding(
            "unsteered",
            "Binding/pci-ips",
            "node-2",
            "1 pod(s) of SecurityGroup pci on node node-2 are not steered by Binding pci-ips: "
            "VnfDeployment ips does not run there",
        ),
        Finding(
            "unsteered",
            "Binding/pci-ips",
            "node-3",
            "2 pod(s) of SecurityGroup pci on node node-3 are not steered by Binding pci-ips: "
            "VnfDeployment ips does not run there",
        ),
    ]


def test_an_incomplete_chain_names_every_vnf_missing_on_the_node() -> None:
    target = _compile(
        vnf("ngfw"),
        vnf("ids", nodeSelector={"full": "yes"}),
        vnf("av", nodeSelector={"full": "yes"}),
        binding("pci-chain", "pci", ["ngfw", "ids", "av"], 10),
        labels={"node-1": {"full": "yes"}, "node-2": {"full": "yes"}},
    )
    assert _coded(target, "unsteered") == [
        Finding(
            "unsteered",
            "Binding/pci-chain",
            "node-3",
            "2 pod(s) of SecurityGroup pci on node node-3 are not steered by Binding pci-chain: "
            "its chain ngfw -> ids -> av is incomplete there (VnfDeployment ids, av does not run "
            "there), and a chain steers only where every VNF of it runs",
        )
    ]


def test_a_first_match_loss_names_the_nodes_filters_and_vnfs_it_concerns() -> None:
    """ngfw (order 10) takes tcp 443 and udp 53 on node-2 and node-3 only; the chain ids -> av
    (order 20) runs on every node: there, those packets never cross ids or av."""
    ngfw = binding(
        "pci-ngfw",
        "pci",
        "ngfw",
        10,
        traffic=[{"protocol": "tcp", "ports": [443]}, {"protocol": "udp", "ports": [53]}],
    )
    target = _compile(
        vnf("ngfw", nodeSelector={"ngfw": "yes"}),
        vnf("ids"),
        vnf("av"),
        ngfw,
        binding("pci-deep", "pci", ["ids", "av"], 20),
        labels={"node-2": {"ngfw": "yes"}, "node-3": {"ngfw": "yes"}},
    )
    assert _coded(target, "first-match") == [
        Finding(
            "first-match",
            "Binding/pci-deep",
            None,
            "Binding pci-deep (VNF ids -> av) never gets tcp 443, udp 53 of SecurityGroup pci "
            "(to-lport) on node-2, node-3: Binding pci-ngfw (order 10, VNF ngfw) is evaluated "
            "first and takes it, and a packet is steered by the first matching binding only, so "
            "it never crosses ids, av. To send it through ngfw and then ids and then av, give "
            "Binding pci-ngfw the chain vnf: [ngfw, ids, av]",
        )
    ]


def test_bindings_that_never_steer_on_one_node_lose_nothing_to_each_other() -> None:
    """a (order 10) runs on node-1 only, b (order 20) on node-2 only: no packet meets both. c
    (order 30) runs everywhere: what a and b take, it loses, where they run."""
    target = _compile(
        vnf("fw-a", nodeSelector={"a": "yes"}),
        vnf("fw-b", nodeSelector={"b": "yes"}),
        vnf("fw-c"),
        binding("a", "pci", "fw-a", 10),
        binding("b", "pci", "fw-b", 20, traffic={"protocol": "tcp", "ports": [80]}),
        binding("c", "pci", "fw-c", 30, traffic={"protocol": "tcp", "ports": [80]}),
        labels={"node-1": {"a": "yes"}, "node-2": {"b": "yes"}},
    )
    found = [(f.subject, f.text.partition(": ")[0]) for f in _coded(target, "first-match")]
    assert found == [
        ("Binding/c", "Binding c (VNF fw-c) never gets tcp 80 of SecurityGroup pci (to-lport) on "
         "node-1"),
        ("Binding/c", "Binding c (VNF fw-c) never gets tcp 80 of SecurityGroup pci (to-lport) on "
         "node-2"),
    ]  # fmt: skip


def test_a_binding_before_network_policy_is_evaluated_before_a_lower_order_after_it() -> None:
    """ACL steering evaluates tier 1 (before-network-policy) before tier 3 whatever the orders:
    the later binding is the one after network policy, though its order is lower."""
    target = _compile(
        vnf("fw"),
        vnf("ips"),
        binding("late-tier", "pci", "fw", 10, precedence="after-network-policy"),
        binding("early-tier", "pci", "ips", 20, precedence="before-network-policy"),
    )
    (finding,) = _coded(target, "first-match")
    assert finding.subject == "Binding/late-tier"
    assert finding.text.startswith(
        "Binding late-tier (VNF fw) never gets all IP of SecurityGroup pci (to-lport): Binding "
        "early-tier (order 20, VNF ips) is evaluated first"
    )
