"""Label matching: Kubernetes ``LabelSelector`` semantics for NetworkPolicy pod selectors, and
security-group membership (OR over labels, optional namespaces, one entry per pod)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.compiling.compile import compile_target
from reconciler.core.model.observed import NetworkPolicy, Pod
from reconciler.core.model.selectors import LabelIndex, matches_selector
from tests.support.builders import binding, cluster, desired, sg, vnf

WEB = {"app": "web", "tier": "front"}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ({}, True),  # NetworkPolicy's podSelector {}: every pod of the namespace
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "web", "tier": "front"}}, True),
        ({"matchLabels": {"app": "web", "tier": "back"}}, False),  # AND over matchLabels
        ({"matchLabels": {"zone": "a"}}, False),
        ({"matchExpressions": [expr("app", "In", "db", "web")]}, True),
        ({"matchExpressions": [expr("app", "In", "db")]}, False),
        ({"matchExpressions": [expr("zone", "In", "a")]}, False),  # no such label: not in
        ({"matchExpressions": [expr("app", "NotIn", "db")]}, True),
        ({"matchExpressions": [expr("app", "NotIn", "db", "web")]}, False),
        ({"matchExpressions": [expr("zone", "NotIn", "a")]}, True),  # no such label: not in
        ({"matchExpressions": [expr("app", "Exists")]}, True),
        ({"matchExpressions": [expr("zone", "Exists")]}, False),
        ({"matchExpressions": [expr("zone", "DoesNotExist")]}, True),
        ({"matchExpressions": [expr("app", "DoesNotExist")]}, False),
        # every expression must hold, and matchLabels with them
        ({"matchExpressions": [expr("app", "Exists"), expr("tier", "In", "back")]}, False),
        ({"matchExpressions": [expr("tier", "In", "back"), expr("app", "Exists")]}, False),
        ({"matchExpressions": [expr("app", "In", "web"), expr("tier", "NotIn", "back")]}, True),
        ({"matchLabels": {"app": "db"}, "matchExpressions": [expr("app", "Exists")]}, False),
        ({"matchLabels": {"app": "web"}, "matchExpressions": [expr("tier", "In", "x")]}, False),
        ({"matchLabels": {"app": "web"}, "matchExpressions": [expr("tier", "Exists")]}, True),
    ],
)
def test_label_selector_semantics(selector: dict[str, Any], selected: bool) -> None:
    assert matches_selector(WEB, selector) is selected


def test_an_operator_applies_to_its_own_key_only() -> None:
    """``app NotIn [web]`` says nothing about a pod whose ``app`` is missing but whose other
    label has the value ``web``; ``In`` with no values selects nothing."""
    assert matches_selector({"role": "web"}, {"matchExpressions": [expr("app", "NotIn", "web")]})
    assert not matches_selector(WEB, {"matchExpressions": [expr("app", "In")]})


def pod(namespace: str, name: str, labels: dict[str, str]) -> Pod:
    return Pod(namespace, name, f"uid-{namespace}-{name}", "node-1", labels)


def test_members_in_the_groups_namespaces_whatever_the_order_of_the_pods() -> None:
    """A pod outside the namespaces that comes first with the label does not hide the ones
    inside that come after it."""
    index = LabelIndex(
        [
            pod("ops", "a", {"app": "web"}),
            pod("shop", "b", {"app": "web"}),
            pod("ops", "c", {"app": "web"}),
            pod("shop", "a", {"app": "web"}),
        ]
    )
    got = index.members([("app", "web")], ["shop"])
    assert [(p.namespace, p.name) for p in got] == [("shop", "a"), ("shop", "b")]
    everywhere = index.members([("app", "web")], None)
    assert [(p.namespace, p.name) for p in everywhere] == [
        ("ops", "a"),
        ("ops", "c"),
        ("shop", "a"),
        ("shop", "b"),
    ]


def test_members_are_an_or_over_labels_once_per_pod() -> None:
    both = pod("shop", "both", {"app": "web", "tier": "front"})
    index = LabelIndex([both, pod("shop", "db", {"app": "db"}), pod("shop", "x", {"tier": "x"})])
    got = index.members([("app", "web"), ("tier", "front"), ("app", "db")], None)
    assert [p.name for p in got] == ["both", "db"]
    assert index.members([("app", "nope")], None) == []
    assert index.members([("app", "web")], []) == []  # an empty namespace list selects none


def test_a_group_limited_to_namespaces_steers_its_pods_behind_one_outside_them() -> None:
    """Through compile: ``ops/a`` (outside the group's namespaces) carries the label and comes
    first; ``shop/b`` on the same node is still in the Port_Group."""
    obs = cluster([("ops", "a", "node-1", {"app": "web"}), ("shop", "b", "node-1", {"app": "web"})])
    want = desired(
        sg("web", "app=web", namespaces=["shop"]), vnf("fw"), binding("b", "web", "fw", 1)
    )
    target = compile_target(want, obs)
    pgs = {r.key: r.fields for r in target if r.kind == "Port_Group"}
    assert pgs["osc.web.node_1"]["ports"] == ["shop_b"]


def test_a_network_policy_with_match_expressions_is_warned_about() -> None:
    """compile warns about a NetworkPolicy that selects steered pods, matchExpressions
    included; one whose expressions select none of them is not mentioned."""
    obs = cluster(
        [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "db", "node-1", {"app": "db"})],
        network_policies=(
            NetworkPolicy("shop", "web-in", {"matchExpressions": [expr("app", "In", "web")]}),
            NetworkPolicy("shop", "not-web", {"matchExpressions": [expr("app", "NotIn", "web")]}),
            NetworkPolicy("shop", "no-app", {"matchExpressions": [expr("app", "DoesNotExist")]}),
            NetworkPolicy("shop", "any-app", {"matchExpressions": [expr("app", "Exists")]}),
        ),
    )
    want = desired(sg("web", "app=web"), vnf("fw"), binding("b", "web", "fw", 1))
    warned = [w for w in compile_target(want, obs).warnings if w.startswith("NetworkPolicy")]
    assert [w.split(" selects")[0] for w in warned] == [
        "NetworkPolicy shop/any-app",
        "NetworkPolicy shop/web-in",
    ]
