"""What compile and explain warn about bindings: a binding is shadowed only when earlier ones
take every packet it would take (ICMP is its own protocol), and bindings are "tied" only when
two or more have the same order on a pod."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.planning.full import compile_plan
from reconciler.core.views.explain import explain_pod
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import converge

PODS = [("shop", "web-1", "node-1", {"app": "web", "tier": "front"})]
NF = CompileOptions(steering="network-function")


def shadowed(*traffic: Any) -> list[str]:
    """compile's shadowing warnings for ``first`` (order 10) and ``second`` (order 20) of one
    group, with these traffic filters (``None``: all traffic)."""
    first, second = traffic
    want = desired(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ips"),
        binding("first", "web", "fw", 10, **({"traffic": first} if first else {})),
        binding("second", "web", "ips", 20, **({"traffic": second} if second else {})),
    )
    return [w for w in compile_target(want, cluster(PODS)).warnings if "is shadowed" in w]


ICMP = {"protocol": "icmp"}
TCP_80 = {"protocol": "tcp", "ports": [80]}


@pytest.mark.parametrize(
    ("first", "second", "is_shadowed"),
    [
        (None, ICMP, True),  # all traffic takes ICMP too
        (ICMP, ICMP, True),
        (TCP_80, ICMP, False),  # tcp takes no ICMP packet
        ([TCP_80, {"protocol": "udp"}], ICMP, False),
        ([ICMP, TCP_80], [ICMP, TCP_80], True),
        ([ICMP], [ICMP, TCP_80], False),  # tcp 80 gets through
        ([TCP_80], [ICMP, TCP_80], False),  # ICMP gets through
        (ICMP, None, False),
    ],
)
def test_icmp_is_shadowed_only_by_filters_that_take_icmp(
    first: Any, second: Any, is_shadowed: bool
) -> None:
    warnings = shadowed(first, second)
    assert bool(warnings) is is_shadowed, warnings
    if is_shadowed:
        assert warnings == [
            "Binding second is shadowed for to-lport traffic by Binding first (evaluated first, "
            "takes every packet it would take): a packet is steered by the first matching "
            "binding only"
        ]


def explain_warnings(want: Any, name: str = "web-1") -> list[str]:
    obs = converge(want, cluster(PODS), NF)
    return list(explain_pod(want, obs, compile_plan(want, obs, NF), "shop", name).warnings)


def test_a_pod_with_bindings_of_different_orders_has_no_tie() -> None:
    want = desired(
        sg("web", "app=web"),
        sg("front", "tier=front"),
        vnf("fw"),
        vnf("ips"),
        binding("web-fw", "web", "fw", 10),
        binding("front-ips", "front", "ips", 20),
    )
    assert not [w for w in explain_warnings(want) if "same order" in w]


def test_a_pod_with_one_binding_has_no_tie() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    assert not [w for w in explain_warnings(want) if "same order" in w]


def test_bindings_of_two_groups_with_the_same_order_are_a_tie() -> None:
    want = desired(
        sg("web", "app=web"),
        sg("front", "tier=front"),
        vnf("fw"),
        vnf("ips"),
        binding("web-fw", "web", "fw", 10),
        binding("front-ips", "front", "ips", 10),
    )
    assert [w for w in explain_warnings(want) if "same order" in w] == [
        "Bindings front-ips, web-fw (different groups of this pod) have the same order and "
        "precedence: their rows have the same priority, and OVN picks either for a packet both "
        "match"
    ]


@pytest.mark.parametrize(("redirection", "tied"), [("exit-lport", True), ("entry-lport", False)])
def test_one_order_apart_is_a_tie_only_for_a_binding_that_also_steers_towards_the_pods(
    redirection: str, tied: bool
) -> None:
    """``back`` (order 10, both ways) lets traffic that crossed ips reach web by an ACL at
    the priority of order 9: ``front`` (order 9) ties with it only if ``front`` has to-lport
    ACLs of that priority, which an entry-lport binding has not."""
    want = desired(
        sg("web", "app=web"), sg("front", "tier=front"), vnf("fw"), vnf("ips"),
        binding("front", "front", "fw", 9, redirection=redirection),
        binding("back", "web", "ips", 10, redirection="both"),
    )  # fmt: skip
    findings = compile_target(want, cluster(PODS), NF).findings
    ties = [f.subject for f in findings if f.code == "tie"]
    assert ties == (["Binding/back"] if tied else [])


def test_ties_are_found_for_every_binding_when_nothing_steers_from_the_pods() -> None:
    """No binding steers from-lport (no crossed-traffic ACL to write), yet each binding is
    still checked for a tie, not only those before the first without one."""
    want = desired(
        sg("web", "app=web"), sg("front", "tier=front"), sg("db", "app=db"),
        vnf("fw"), vnf("ips"), vnf("ids"),
        binding("a-first", "db", "ids", 20),
        binding("b-back", "web", "ips", 10),
        binding("c-front", "front", "fw", 9),
    )  # fmt: skip
    findings = compile_target(want, cluster(PODS), NF).findings
    assert [f.subject for f in findings if f.code == "tie"] == ["Binding/b-back"]
