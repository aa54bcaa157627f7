"""What both steering backends share, said of bindings as users write them: which packets two
bindings both take, which binding loses what to an earlier one and in which direction, which
bindings are shadowed or tied, and the words and matches filters become."""

from __future__ import annotations

import pytest

from reconciler.core.model.desired import Precedence, Traffic
from reconciler.core.model.facts import Finding
from reconciler.core.model.naming import NameError_
from reconciler.core.steering.common import (
    describe_filters,
    evaluation_key,
    filter_match,
    first_match_losses,
    intersect,
    network_policy_effects,
    port_literal,
    shadowed_finding,
    shadowing,
    tied,
    uses_tiers,
)
from tests.support.builders import binding

ALL = {"protocol": "any"}
BEFORE, AFTER = Precedence.BEFORE_NETWORK_POLICY, Precedence.AFTER_NETWORK_POLICY


def t(protocol: str, *ports: object) -> Traffic:
    return Traffic.model_validate({"protocol": protocol, "ports": list(ports)})


def tcp(*ports: int) -> dict[str, object]:
    return {"protocol": "tcp", "ports": list(ports)}


def test_icmp_is_common_to_two_filter_lists_only_when_both_take_it() -> None:
    icmp, web = t("icmp"), t("tcp", 80)
    assert intersect([icmp], [web]) == ()
    assert intersect([web], [icmp]) == ()
    assert intersect([icmp, web], [icmp]) == (icmp,)


def test_a_binding_losing_nothing_to_one_earlier_binding_may_lose_to_the_next() -> None:
    """``chain`` (order 5) ends in ``ids``: ``deep`` (ids, order 30) loses nothing to it; ``fw``
    (order 10) takes tcp 80 before ``deep`` all the same."""
    bindings = [
        binding("chain", "web", ["fw", "ids"], 5),
        binding("fw", "web", "fw", 10, traffic=tcp(80)),
        binding("deep", "web", "ids", 30),
    ]
    losses = [
        (later.metadata.name, earlier.metadata.name, direction, lost)
        for later, earlier, direction, _, lost in first_match_losses(bindings, tiered=False)
    ]
    assert ("deep", "chain") not in {(a, b) for a, b, _, _ in losses}
    assert ("deep", "fw", "to-lport", ["ids"]) in losses


def test_an_earlier_binding_of_other_packets_does_not_stop_the_search_for_losses() -> None:
    bindings = [
        binding("dns", "web", "fw", 10, traffic={"protocol": "udp", "ports": [53]}),
        binding("web", "web", "fw", 20, traffic=tcp(80)),
        binding("ids", "web", "ids", 30, traffic=tcp(80)),
    ]
    pairs = {
        (later.metadata.name, earlier.metadata.name)
        for later, earlier, *_ in first_match_losses(bindings, tiered=False)
    }
    assert pairs == {("ids", "web")}  # dns takes no packet ids would take


def test_a_loss_is_told_only_in_the_directions_both_bindings_steer() -> None:
    both = binding("fw", "web", "fw", 10, redirection="both")
    towards = binding("ids-in", "web", "ids", 20, redirection="exit-lport")
    away = binding("av-out", "web", "av", 30, redirection="entry-lport")
    found = {
        (later.metadata.name, earlier.metadata.name, direction)
        for later, earlier, direction, _, _ in first_match_losses(
            [both, towards, away], tiered=False
        )
    }
    assert found == {("ids-in", "fw", "to-lport"), ("av-out", "fw", "from-lport")}


def test_a_binding_is_shadowed_by_the_earlier_ones_that_overlap_it_skipping_the_others() -> None:
    bindings = [
        binding("dns", "web", "fw", 10, traffic={"protocol": "udp", "ports": [53]}),
        binding("web", "web", "fw", 20, traffic=tcp(80, 443)),
        binding("https", "web", "ids", 30, traffic=tcp(443)),
    ]
    assert shadowing(bindings, tiered=False) == {
        "https": {"to-lport": ["web"]}  # towards the pods: a binding's default direction
    }


def test_the_shadowed_finding_names_its_binding_as_subject() -> None:
    assert shadowed_finding("https", "to-lport", ["web", "all"]) == Finding(
        "shadowed",
        "Binding/https",
        None,
        "Binding https is shadowed for to-lport traffic by Bindings web, all (evaluated first, "
        "takes every packet it would take): a packet is steered by the first matching binding "
        "only",
    )


def test_equal_orders_tie_only_within_one_acl_tier() -> None:
    bindings = [
        binding("early", "web", "fw", 10, precedence="before-network-policy"),
        binding("late", "db", "fw", 10, precedence="after-network-policy"),
    ]
    assert tied(bindings, tiered=True) == []
    assert tied(bindings, tiered=False) == [["early", "late"]]


def test_router_policies_have_no_tiers() -> None:
    early = binding("early", "web", "fw", 10, precedence="before-network-policy")
    assert evaluation_key(early, tiered=False) == (0, 10, "early")
    assert evaluation_key(early, tiered=True) == (1, 10, "early")
    assert uses_tiers(object()) is False  # a backend that says nothing of tiers


def test_a_filter_in_words_and_as_a_match() -> None:
    assert describe_filters([t("tcp", 80, {"start": 8000, "end": 8080})]) == ["tcp 80,8000-8080"]
    assert filter_match(Traffic()) == "ip"


def test_a_routed_steering_is_decided_by_the_policy_first_in_each_direction() -> None:
    assert network_policy_effects(
        ("Ingress", "Egress"), {("to-lport", BEFORE), ("from-lport", AFTER)}, tiered=False
    ) == [
        "towards them (exit-lport), it decides first whatever the precedence (router policies "
        "come after every ACL): what it denies is dropped, what it allows is steered",
        "from them (entry-lport), it decides first whatever the precedence (router policies "
        "come after every ACL): what it denies is dropped, what it allows is steered",
    ]


def test_a_port_name_that_could_escape_a_match_is_refused_naming_it() -> None:
    with pytest.raises(NameError_) as refused:
        port_literal('nf" || 1 == 1 || "')
    assert str(refused.value) == (
        "not a safe logical port name for a match: 'nf\" || 1 == 1 || \"'"
    )
