"""Issue #16 item 1 in the core: a list of traffic filters becomes ONE row per binding, node and
direction whose match ORs the filters; a single mapping compiles exactly as before (a list of
one); shadowing compares filters (and, with ACL steering, tiers)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.desired import Traffic
from reconciler.core.steering import common
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]
HTTP_DNS = [{"protocol": "tcp", "ports": [80, 443]}, {"protocol": "udp", "ports": [53]}]
HTTP_DNS_MATCH = "((tcp && (tcp.dst == 80 || tcp.dst == 443)) || (udp && udp.dst == 53))"


def rows(traffic: Any, steering: str = "network-function", **spec: Any) -> dict[str, Any]:
    extra = {} if traffic is None else {"traffic": traffic}
    target = compile_target(
        desired(
            sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10, **extra, **spec)
        ),
        cluster(PODS, nf=steering == "network-function"),
        CompileOptions(steering=steering),
    )
    return {res.key: res for res in target}


def matches(traffic: Any, steering: str = "network-function") -> dict[str, str]:
    return {
        key: res.fields["match"]
        for key, res in rows(traffic, steering).items()
        if "match" in res.fields
    }


@pytest.mark.parametrize("steering", ["network-function", "router-policy"])
@pytest.mark.parametrize(
    "single",
    [
        None,
        {"protocol": "any"},
        {"protocol": "icmp"},
        {"protocol": "tcp"},
        {"protocol": "udp", "ports": [53]},
        {"protocol": "tcp", "ports": [443, {"start": 8000, "end": 8080}]},
    ],
)
def test_a_single_mapping_compiles_exactly_as_a_list_of_one(
    single: dict[str, Any] | None, steering: str
) -> None:
    as_list = None if single is None else [single]
    one, listed = rows(single, steering), rows(as_list, steering)
    assert {k: r.fields for k, r in one.items()} == {k: r.fields for k, r in listed.items()}


def test_a_list_is_one_acl_per_node_and_direction_matching_any_filter() -> None:
    acls = {k: r for k, r in rows(HTTP_DNS, redirection="both").items() if r.kind == "ACL"}
    assert sorted(acls) == [
        "osc.web_fw.node_1.from",
        "osc.web_fw.node_1.to",
        "osc.web_fw.node_1.to.crossed",  # lets through what crossed fw already (same switch)
        "osc.web_fw.node_2.from",
        "osc.web_fw.node_2.to",
        "osc.web_fw.node_2.to.crossed",
    ]
    v6 = "{fd98::/64, fd97::/64}"  # node traffic left out (core.steering.node_traffic)
    assert acls["osc.web_fw.node_1.to"].fields["match"] == (
        "outport == @osc.web.node_1 && (ip4.src != {10.244.1.2, 100.64.0.0/16, 100.88.0.0/16} "
        f"|| ip6.src != {v6}) && {HTTP_DNS_MATCH}"
    )
    assert acls["osc.web_fw.node_2.from"].fields["match"] == (
        "inport == @osc.web.node_2 && (ip4.dst != {10.244.2.2, 100.64.0.0/16, 100.88.0.0/16} "
        f"|| ip6.dst != {v6}) && {HTTP_DNS_MATCH}"
    )
    assert acls["osc.web_fw.node_1.to.crossed"].fields["match"] == (
        f'outport == @osc.web.node_1 && inport == "nf_fw_node-1_out" && {HTTP_DNS_MATCH}'
    )
    # same rows as a single filter: a list changes matches, never the row count
    assert sorted(rows(HTTP_DNS, redirection="both")) == sorted(
        rows({"protocol": "tcp"}, redirection="both")
    )


def test_router_policies_match_any_filter_too() -> None:
    policies = matches(HTTP_DNS, "router-policy")
    assert policies["osc.web_fw.node_1.to"] == f"ip4.dst == $osc.web.node_1_ip4 && {HTTP_DNS_MATCH}"


@pytest.mark.parametrize(
    ("traffic", "expected"),
    [
        ([{"protocol": "icmp"}, {"protocol": "tcp", "ports": [22]}],
         "((icmp4 || icmp6) || (tcp && tcp.dst == 22))"),
        ([{"protocol": "tcp"}, {"protocol": "udp"}], "(tcp || udp)"),
        ([{"protocol": "tcp", "ports": [80]}, {"protocol": "any"}], "ip"),  # any takes all
        ([{"protocol": "udp", "ports": [53]}, {"protocol": "udp", "ports": [53]}],
         "udp && udp.dst == 53"),  # the same filter twice is one term
    ],
)  # fmt: skip
def test_filter_lists_become_one_parenthesised_disjunction(
    traffic: list[dict[str, Any]], expected: str
) -> None:
    filters = [Traffic.model_validate(t) for t in traffic]
    assert common.traffic_match(filters) == expected


PORT = st.integers(1, 65535)
FILTER = st.one_of(
    st.builds(dict, protocol=st.sampled_from(["any", "icmp", "tcp", "udp"])),
    st.builds(
        dict,
        protocol=st.sampled_from(["tcp", "udp"]),
        ports=st.lists(
            st.one_of(PORT, st.tuples(PORT, PORT).map(lambda p: {"start": min(p), "end": max(p)})),
            max_size=4,
        ),
    ),
)
TOKEN = re.compile(r"\(|\)|\|\||&&|==|<=|>=|ip|icmp4|icmp6|tcp\.dst|udp\.dst|tcp|udp|[0-9]+| ")


@settings(max_examples=300, deadline=None)
@given(st.lists(FILTER, min_size=1, max_size=5))
def test_any_filter_list_gives_a_balanced_match_of_known_tokens(
    traffic: list[dict[str, Any]],
) -> None:
    """Matches are built from enums and integers only: every character belongs to a token of
    OVN's syntax the builder emits, parentheses balance, and ``&&`` never meets ``||`` at one
    level (OVN refuses that unparenthesised)."""
    match = common.traffic_match([Traffic.model_validate(t) for t in traffic])
    assert "".join(TOKEN.findall(match)) == match
    depth, ops = 0, [set[str]()]
    for token in TOKEN.findall(match):
        if token == "(":
            depth += 1
            ops.append(set())
        elif token == ")":
            depth -= 1
            assert depth >= 0
            ops.pop()
        elif token in ("&&", "||"):
            ops[-1].add(token)
            assert len(ops[-1]) == 1, match
    assert depth == 0


# --- shadowing -----------------------------------------------------------------------------------


def shadow_warnings(*bindings: Any, steering: str = "network-function") -> list[str]:
    target = compile_target(
        desired(sg("web", "app=web"), vnf("fw"), vnf("ips"), vnf("av"), *bindings),
        cluster(PODS, nf=steering == "network-function"),
        CompileOptions(steering=steering),
    )
    return [w for w in target.warnings if "shadowed" in w]


def test_a_binding_whose_packets_an_earlier_one_all_takes_is_shadowed() -> None:
    warnings = shadow_warnings(
        binding("all-tcp", "web", "fw", 10, traffic={"protocol": "tcp"}),
        binding("http", "web", "ips", 20, traffic=[{"protocol": "tcp", "ports": [80, 443]}]),
    )
    assert warnings == [
        "Binding http is shadowed for to-lport traffic by Binding all-tcp (evaluated first, "
        "takes every packet it would take): a packet is steered by the first matching binding "
        "only"
    ]


def test_filters_of_several_earlier_bindings_shadow_together() -> None:
    warnings = shadow_warnings(
        binding("http", "web", "fw", 10, traffic={"protocol": "tcp", "ports": [80]}),
        binding("https", "web", "ips", 20, traffic={"protocol": "tcp", "ports": [443]}),
        binding("both", "web", "av", 30, traffic={"protocol": "tcp", "ports": [80, 443]}),
    )
    assert len(warnings) == 1
    assert "Binding both is shadowed for to-lport traffic by Bindings http, https" in warnings[0]


def test_partly_overlapping_or_other_direction_bindings_are_not_shadowed() -> None:
    assert not shadow_warnings(
        binding("http", "web", "fw", 10, traffic={"protocol": "tcp", "ports": [80]}),
        binding("web", "web", "ips", 20, traffic={"protocol": "tcp", "ports": [80, 443]}),
        binding("out", "web", "av", 30, redirection="entry-lport"),
    )


def test_with_acl_steering_precedence_comes_before_order() -> None:
    """OVN evaluates ACL tiers lowest first: a before-network-policy binding (tier 1) takes its
    packets before an after-network-policy one (tier 3) of a lower order ever sees them."""
    early = binding("early", "web", "fw", 10, traffic={"protocol": "tcp", "ports": [80]})
    enforcer = binding("enforcer", "web", "ips", 20, precedence="before-network-policy")
    warnings = shadow_warnings(early, enforcer)
    assert warnings == [
        "Binding early is shadowed for to-lport traffic by Binding enforcer (evaluated first, "
        "takes every packet it would take): a packet is steered by the first matching binding "
        "only"
    ]
    # router policies have no tiers: order alone decides, and the earlier binding is partial
    assert not shadow_warnings(early, enforcer, steering="router-policy")


def test_covers_and_overlaps() -> None:
    def f(*filters: dict[str, Any]) -> list[Traffic]:
        return [Traffic.model_validate(x) for x in filters]

    assert common.covers(f({"protocol": "any"}), f({"protocol": "icmp"}))
    assert common.covers(f({"protocol": "tcp"}), f({"protocol": "tcp", "ports": [1, 65535]}))
    assert common.covers(
        f({"protocol": "tcp", "ports": [{"start": 1, "end": 100}]},
          {"protocol": "tcp", "ports": [{"start": 101, "end": 65535}]}),
        f({"protocol": "tcp"}),
    )  # fmt: skip
    assert not common.covers(f({"protocol": "tcp"}, {"protocol": "udp"}), f({"protocol": "any"}))
    assert not common.covers(f({"protocol": "tcp"}), f({"protocol": "udp", "ports": [53]}))
    assert common.overlaps(f({"protocol": "any"}), f({"protocol": "udp", "ports": [53]}))
    assert not common.overlaps(
        f({"protocol": "tcp", "ports": [80]}), f({"protocol": "tcp", "ports": [81]})
    )
