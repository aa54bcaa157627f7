"""Typo guards, word for word: a namespace no pod runs in, a label no pod carries (with the
neighbour one edit away, or none), a nodeSelector no node matches, and what a Binding that stops
steering pods says."""

from __future__ import annotations

import pytest

from reconciler.core.model.observed import Observed
from reconciler.core.views.protection import protection_changes
from reconciler.core.views.typos import one_edit, typo_warnings
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [
    ("shop", "web-1", "node-1", {"app": "web", "tier": "edge"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
    ("ops", "tool", "node-1", {"app": "tool"}),
]
NODES = {"node-1": {"zone": "dmz", "disk": "ssd"}, "node-2": {"zone": "core"}}


def observed() -> Observed:
    return cluster(PODS, node_labels=NODES)


@pytest.mark.parametrize(
    ("a", "b", "close"),
    [("ab", "xyb", False), ("axc", "abyc", False), ("aba", "bxb", False), ("abcd", "badc", False)],
)
def test_more_than_one_edit_is_no_typo(a: str, b: str, close: bool) -> None:
    assert one_edit(a, b) is close and one_edit(b, a) is close


def test_a_namespace_without_pods_with_and_without_a_neighbour() -> None:
    want = desired(
        sg("a", "app=web", namespaces=["shp"]),  # one edit from shop
        sg("b", "app=web", namespaces=["billing"]),  # nothing near
        sg("c", "app=web", namespaces=["billing", "shop"]),  # one of them has pods
    )
    assert typo_warnings(want, observed()) == [
        "SecurityGroup a selects no pod: no pod runs in namespace 'shp' (did you mean 'shop'?)",
        "SecurityGroup b selects no pod: no pod runs in namespace 'billing'",
        "SecurityGroup c: no pod runs in namespace 'billing'",
    ]


def test_a_label_no_pod_carries_with_and_without_a_neighbour() -> None:
    want = desired(
        sg("a", "app=wbe"),  # a swap: web
        sg("b", "app=nothing-like-it"),
        sg("c", "app=web", "tier=egde"),  # selects pods; its typo is still named
        sg("d", "app=web", "app=nothing-like-it"),  # selects pods; no neighbour: said nothing
        sg("e", "app=tol", namespaces=["shop"]),  # the neighbour is in another namespace
    )
    assert typo_warnings(want, observed()) == [
        "SecurityGroup a selects no pod: no pod carries app=wbe (did you mean app=web?)",
        "SecurityGroup b selects no pod: no pod carries app=nothing-like-it",
        "SecurityGroup c: no pod carries tier=egde (did you mean tier=edge?)",
        "SecurityGroup e selects no pod: no pod carries app=tol (did you mean app=tool?)",
    ]


def test_without_pods_no_group_selects_nothing_and_with_part_of_them_nothing_is_judged() -> None:
    """A cluster without pods: no group "selects no pod" (nothing could), a namespace without
    pods is still named; a partial view (an agent's node): nothing at all."""
    want = desired(sg("a", "app=wbe"), sg("b", "app=x", namespaces=["nope"]))
    assert typo_warnings(want, cluster([], node_labels=NODES)) == [
        "SecurityGroup b: no pod runs in namespace 'nope'"
    ]
    assert typo_warnings(want, observed(), all_pods=False) == []


def test_a_node_selector_no_node_matches() -> None:
    want = desired(
        vnf("a", nodeSelector={"zone": "dzm"}),  # one edit from dmz
        vnf("b", nodeSelector={"zone": "nowhere", "disk": "ssd"}),
        vnf("c", nodeSelector={"zone": "core", "disk": "ssd"}),  # each carried, never together
        vnf("d", nodeSelector={"zone": "dmz"}),  # matches
        vnf("e"),  # no selector: every node
    )
    assert typo_warnings(want, observed()) == [
        "VnfDeployment a: nodeSelector matches none of the 2 nodes (no node carries zone=dzm "
        "(did you mean zone=dmz?)): it runs nowhere and its bindings steer nothing",
        "VnfDeployment b: nodeSelector matches none of the 2 nodes (no node carries "
        "zone=nowhere): it runs nowhere and its bindings steer nothing",
        "VnfDeployment c: nodeSelector matches none of the 2 nodes (no node carries all of its "
        "labels together): it runs nowhere and its bindings steer nothing",
    ]
    one_node = cluster(PODS[:1], nodes=("node-1",), node_labels=NODES)
    assert typo_warnings(desired(vnf("a", nodeSelector={"zone": "x"})), one_node) == [
        "VnfDeployment a: nodeSelector matches none of the 1 node (no node carries zone=x): it "
        "runs nowhere and its bindings steer nothing"
    ]
    assert typo_warnings(want, observed(), all_nodes=False) == []


def test_a_binding_that_stops_steering_names_the_pods_per_namespace_and_the_cause() -> None:
    before = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    after = desired(sg("web", "app=wbe"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    obs = observed()
    changes = protection_changes(before, obs, after)
    assert typo_warnings(after, obs, changes) == [
        "Binding web-fw stops steering 2 pods it steered before (shop: 2); likely typo: "
        "SecurityGroup web: no pod carries app=wbe (did you mean app=web?)"
    ]
    removed = desired(sg("web", "app=web"), vnf("fw"))
    changes = protection_changes(before, obs, removed)
    assert typo_warnings(removed, obs, changes) == [
        "Binding web-fw stops steering 2 pods it steered before (shop: 2): the binding is removed"
    ]


def test_a_binding_stopping_for_a_reason_no_guard_knows_says_so_plainly() -> None:
    """web-2 is relabelled: the group is fine, nothing to suggest; one pod is counted as one."""
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    before = observed()
    after = cluster([PODS[0], ("shop", "web-2", "node-2", {"app": "db"}), PODS[2]],
                    node_labels=NODES)  # fmt: skip
    changes = protection_changes(want, before, want, after)
    assert typo_warnings(want, after, changes) == [
        "Binding web-fw stops steering 1 pod it steered before (shop: 1)"
    ]


def test_a_binding_whose_vnf_runs_nowhere_names_the_node_selector() -> None:
    before = desired(sg("web", "app=web"), vnf("fw", nodeSelector={"zone": "dmz"}),
                     binding("web-fw", "web", "fw", 10))  # fmt: skip
    after = desired(sg("web", "app=web"), vnf("fw", nodeSelector={"zone": "dzm"}),
                    binding("web-fw", "web", "fw", 10))  # fmt: skip
    obs = observed()
    changes = protection_changes(before, obs, after)
    assert typo_warnings(after, obs, changes) == [
        "Binding web-fw stops steering 1 pod it steered before (shop: 1); likely typo: "
        "VnfDeployment fw nodeSelector: no node carries zone=dzm (did you mean zone=dmz?)"
    ]


def test_many_namespaces_are_cut_after_five() -> None:
    pods = [(f"ns{i}", "p", "node-1", {"app": "web"}) for i in range(7)]
    obs = cluster(pods, node_labels=NODES)
    before = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    after = desired(sg("web", "app=web"), vnf("fw"))
    (warning,) = typo_warnings(after, obs, protection_changes(before, obs, after))
    assert warning == (
        "Binding web-fw stops steering 7 pods it steered before (ns0: 1, ns1: 1, ns2: 1, ns3: 1, "
        "ns4: 1, … 2 more namespaces): the binding is removed"
    )


def test_several_causes_are_joined_and_each_said_once() -> None:
    want = desired(
        sg("a", "app=wbe", "tier=egde", namespaces=["shp", "shop"]),
        vnf("fw", nodeSelector={"zone": "dzm", "disk": "sdd"}),
    )
    assert typo_warnings(want, observed()) == [
        "SecurityGroup a selects no pod: no pod runs in namespace 'shp' (did you mean 'shop'?); "
        "no pod carries app=wbe (did you mean app=web?); no pod carries tier=egde (did you mean "
        "tier=edge?)",
        "VnfDeployment fw: nodeSelector matches none of the 2 nodes (no node carries disk=sdd "
        "(did you mean disk=ssd?); no node carries zone=dzm (did you mean zone=dmz?)): it runs "
        "nowhere and its bindings steer nothing",
    ]


def test_causes_quoted_by_bindings_are_not_repeated_and_other_groups_still_are() -> None:
    """Group ``a``'s cause is in its binding's warning; group ``b`` (after it) is still named,
    and a binding whose change stops no pod (0-new, first) says nothing."""
    before = desired(sg("a", "app=web"), sg("b", "app=tool"), vnf("fw"), vnf("av"),
                     binding("a-fw", "a", "fw", 10), binding("b-av", "b", "av", 20))  # fmt: skip
    after = desired(sg("a", "app=wbe"), sg("b", "app=tol"), vnf("fw"), vnf("av"),
                    binding("a-fw", "a", "fw", 10), binding("b-av", "b", "av", 20),
                    binding("0-new", "a", "av", 30))  # fmt: skip
    obs = observed()
    changes = protection_changes(before, obs, after)
    assert typo_warnings(after, obs, changes) == [
        "Binding a-fw stops steering 2 pods it steered before (shop: 2); likely typo: "
        "SecurityGroup a: no pod carries app=wbe (did you mean app=web?)",
        "Binding b-av stops steering 1 pod it steered before (ops: 1); likely typo: "
        "SecurityGroup b: no pod carries app=tol (did you mean app=tool?)",
    ]
    # the binding's group and VNF are not judged (an agent's partial view): no likely typo
    assert typo_warnings(after, obs, changes, all_pods=False, all_nodes=False) == [
        "Binding a-fw stops steering 2 pods it steered before (shop: 2)",
        "Binding b-av stops steering 1 pod it steered before (ops: 1)",
    ]


def test_a_binding_with_two_likely_causes_names_both() -> None:
    before = desired(sg("web", "app=web"), vnf("fw", nodeSelector={"zone": "dmz"}),
                     binding("web-fw", "web", "fw", 10))  # fmt: skip
    after = desired(sg("web", "app=wbe"), vnf("fw", nodeSelector={"zone": "dzm"}),
                    binding("web-fw", "web", "fw", 10))  # fmt: skip
    obs = observed()
    assert typo_warnings(after, obs, protection_changes(before, obs, after)) == [
        "Binding web-fw stops steering 1 pod it steered before (shop: 1); likely typo: "
        "SecurityGroup web: no pod carries app=wbe (did you mean app=web?); VnfDeployment fw "
        "nodeSelector: no node carries zone=dzm (did you mean zone=dmz?)"
    ]


def test_no_node_selector_is_judged_without_nodes() -> None:
    want = desired(vnf("a", nodeSelector={"zone": "x"}))
    assert typo_warnings(want, cluster([], nodes=())) == []


@pytest.mark.parametrize(("count", "tail"), [(5, "ns4: 1)"), (6, "ns4: 1, … 1 more namespaces)")])
def test_five_namespaces_are_listed_and_a_sixth_is_counted(count: int, tail: str) -> None:
    pods = [(f"ns{i}", "p", "node-1", {"app": "web"}) for i in range(count)]
    obs = cluster(pods, node_labels=NODES)
    before = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    after = desired(sg("web", "app=web"), vnf("fw"))
    (warning,) = typo_warnings(after, obs, protection_changes(before, obs, after))
    assert warning.endswith(f"{tail}: the binding is removed")


def test_a_removed_binding_before_a_changed_one_and_a_group_after_a_quoted_one() -> None:
    before = desired(
        sg("web", "app=web"),
        sg("tool", "app=tool"),
        vnf("fw"),
        binding("a-gone", "tool", "fw", 5),
        binding("b-web", "web", "fw", 10),
    )
    after = desired(
        sg("web", "app=wbe"),
        sg("tool", "app=tool"),
        sg("z", "app=web", "tier=egde", "app=tol"),  # selects pods, and names two typos
        vnf("fw"),
        binding("b-web", "web", "fw", 10),
    )
    obs = observed()
    assert typo_warnings(after, obs, protection_changes(before, obs, after)) == [
        "Binding a-gone stops steering 1 pod it steered before (ops: 1): the binding is removed",
        "Binding b-web stops steering 2 pods it steered before (shop: 2); likely typo: "
        "SecurityGroup web: no pod carries app=wbe (did you mean app=web?)",
        "SecurityGroup z: no pod carries tier=egde (did you mean tier=edge?); no pod carries "
        "app=tol (did you mean app=tool?)",
    ]
