"""Protection changes and typo guards, pure (issue #24 items 1 and 2)."""

from __future__ import annotations

import pytest

from reconciler.core.views.protection import protection_changes, steering_of, vnfs_of
from reconciler.core.views.typos import one_edit, typo_warnings
from tests.support.builders import binding, cluster, desired, sg, vnf

PAYMENTS = [("payments", f"api-{i}", f"node-{i % 2 + 1}", {"app": "api", "tier": "edge"})
            for i in range(37)]  # fmt: skip
SHOP = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]
OBSERVED = cluster([*PAYMENTS, *SHOP],
                   node_labels={"node-1": {"zone": "dmz"}, "node-2": {"zone": "dmz"}})  # fmt: skip


def shop(*, namespaces: list[str] | None = None, label: str = "app=api", **vnf_spec: object):
    return desired(
        sg("payments", label, namespaces=namespaces or ["payments"]),
        sg("web", "app=web"),
        vnf("ids", **vnf_spec),
        binding("payments-ids", "payments", "ids", 10),
        binding("web-ids", "web", "ids", 10),
    )


def test_steering_of_names_pod_node_label_and_vnf() -> None:
    steering = steering_of(shop(), OBSERVED)
    assert len(steering["payments-ids"]) == 37
    web = steering["web-ids"][("shop", "web-2")]
    assert (web.node, web.label, web.vnfs) == ("node-2", "app=web", ("ids",))


def test_a_namespace_typo_stops_steering_and_the_warning_names_binding_count_and_typo() -> None:
    before, after = shop(), shop(namespaces=["paymnets"])
    changes = protection_changes(before, OBSERVED, after)
    (change,) = changes
    assert (change.binding, change.change, len(change.stop), change.start) == (
        "payments-ids", "changed", 37, ())  # fmt: skip
    assert (change.before, change.after) == (37, 0)
    warnings = typo_warnings(after, OBSERVED, changes)
    assert warnings[0] == (
        "Binding payments-ids stops steering 37 pods it steered before (payments: 37); likely "
        "typo: SecurityGroup payments: no pod runs in namespace 'paymnets' (did you mean "
        "'payments'?)"
    )
    assert len(warnings) == 1  # the cause is not repeated as a group warning


def test_a_label_value_typo_suggests_the_label_one_edit_away() -> None:
    after = shop(label="tier=egde")
    changes = protection_changes(shop(label="tier=edge"), OBSERVED, after)
    assert typo_warnings(after, OBSERVED, changes) == [
        "Binding payments-ids stops steering 37 pods it steered before (payments: 37); likely "
        "typo: SecurityGroup payments: no pod carries tier=egde (did you mean tier=edge?)"
    ]


def test_a_node_selector_typo_is_named() -> None:
    after = shop(nodeSelector={"zone": "dzm"})
    changes = protection_changes(shop(), OBSERVED, after)
    assert {c.binding for c in changes} == {"payments-ids", "web-ids"}
    warnings = typo_warnings(after, OBSERVED, changes)
    assert all("likely typo: VnfDeployment ids nodeSelector: no node carries zone=dzm (did you "
               "mean zone=dmz?)" in w for w in warnings)  # fmt: skip
    assert len(warnings) == 2


def test_guards_without_a_before() -> None:
    typo = desired(
        sg("pay", "app=api", namespaces=["paymnets"]),
        sg("idle", "app=nothing-like-it"),
        sg("edge", "tier=egde", "app=web"),
        vnf("ids", nodeSelector={"zone": "dzm"}),
    )
    assert typo_warnings(typo, OBSERVED) == [
        "SecurityGroup edge: no pod carries tier=egde (did you mean tier=edge?)",
        "SecurityGroup idle selects no pod: no pod carries app=nothing-like-it",
        "SecurityGroup pay selects no pod: no pod runs in namespace 'paymnets' (did you mean "
        "'payments'?)",
        "VnfDeployment ids: nodeSelector matches none of the 2 nodes (no node carries zone=dzm "
        "(did you mean zone=dmz?)): it runs nowhere and its bindings steer nothing",
    ]


def test_new_and_removed_bindings_and_relabelled_pods() -> None:
    before = desired(sg("web", "app=web"), vnf("ids"), binding("old", "web", "ids", 10))
    after = desired(sg("web", "app=web"), vnf("ids"), binding("new", "web", "ids", 10))
    changes = {c.binding: c for c in protection_changes(before, OBSERVED, after)}
    assert changes["old"].change == "removed" and len(changes["old"].stop) == 2
    assert changes["new"].change == "added" and len(changes["new"].start) == 2
    assert typo_warnings(after, OBSERVED, tuple(changes.values()))[0] == (
        "Binding old stops steering 2 pods it steered before (shop: 2): the binding is removed"
    )
    relabelled = cluster([*PAYMENTS, SHOP[0], ("shop", "web-2", "node-2", {"app": "db"})])
    (change,) = protection_changes(after, OBSERVED, after, relabelled)
    assert [p.ref for p in change.stop] == ["shop/web-2"]


def test_a_chain_is_steered_only_where_every_hop_runs_as_the_rows_say() -> None:
    """A chain is wired on a node only where every hop runs (compile's ``chain_nodes``): the
    manifests' reading agrees with what the applied rows steer, route included."""
    from reconciler.core.views.protection import steering_in_rows

    chain = binding("web-chain", "web", ["fw", "ids"], 10)
    state = desired(sg("web", "app=web"), vnf("fw"), vnf("ids", nodeSelector={"zone": "a"}),
                    chain)  # fmt: skip
    assert vnfs_of(chain) == ("fw", "ids")
    labelled = cluster(SHOP, node_labels={"node-1": {"zone": "a"}})
    steering = steering_of(state, labelled)["web-chain"]
    assert steering[("shop", "web-1")].vnfs == ("fw", "ids")
    assert ("shop", "web-2") not in steering
    live, _ = applied(state, labelled)
    rows = steering_in_rows([(r.table, r.fields) for r in live.ovn_rows], live.pod_ports)
    assert rows.pods["web-chain"] == {
        ("shop", "web-1"): ("node-1", steering[("shop", "web-1")].route)
    }


def test_one_edit() -> None:
    assert one_edit("edge", "egde") and one_edit("payments", "paymnets")
    assert one_edit("dmz", "dzm") and one_edit("web", "webs") and one_edit("web", "wab")
    assert not one_edit("web", "web") and not one_edit("web", "api") and not one_edit("ab", "ba c")


# --- the live basis: what the owned OVN rows steer now against what they steer once planned


def applied(state, observed, steering: str | None = None):  # type: ignore[no-untyped-def]
    """``observed`` with ``state`` applied (its rows and objects live), and the options."""
    from reconciler.core.compiling.compile import CompileOptions
    from tests.support.simulate import converge

    options = CompileOptions(steering=steering)
    # with healthy VNFs (steering waits until northd reports them active: issue 22)
    return converge(state, observed, options), options


def live_of(before, after, observed, steering: str | None = None):  # type: ignore[no-untyped-def]
    from reconciler.core.planning.full import make_plan
    from reconciler.core.views.protection import live_changes

    live, options = applied(before, observed, steering)
    plan = make_plan(after, live, options)
    return live_changes(live, plan.changes, after), live


@pytest.mark.parametrize("steering", [None, "router-policy"])
def test_the_rows_say_what_the_manifests_say_on_a_converged_cluster(steering: str | None) -> None:
    """On both backends, reading the applied rows gives every pod, node and VNF that reading
    the manifests gives (so the live basis and --base agree where the cluster converged)."""
    from reconciler.core.views.protection import steering_in_rows

    state = desired(sg("payments", "app=api", namespaces=["payments"]), sg("web", "app=web"),
                    vnf("ids", nodeSelector={"zone": "b"}), vnf("fw", nodeSelector={"zone": "a"}),
                    binding("payments-ids", "payments", "ids", 10, redirection="both"),
                    binding("web-fw", "web", "fw", 10, redirection="entry-lport"))  # fmt: skip
    zones = {"node-1": {"zone": "a"}, "node-2": {"zone": "b"}}
    observed = cluster([*PAYMENTS, *SHOP], node_labels=zones, nf=steering is None)
    live, _ = applied(state, observed, steering)
    rows = steering_in_rows([(r.table, r.fields) for r in live.ovn_rows], live.pod_ports)
    expected = steering_of(state, observed)
    by_manifests = {b: {i: (p.node, p.vnfs, p.route and p.route.redirection)
                        for i, p in pods.items()} for b, pods in expected.items()}  # fmt: skip
    by_rows = {b: {i: (node, route.vnfs, route.redirection) for i, (node, route) in pods.items()}
               for b, pods in rows.pods.items()}  # fmt: skip
    assert by_rows == by_manifests
    if steering is None:  # the function groups say the failure policy too (routers have none)
        assert {b: {i: r for i, (_, r) in pods.items()} for b, pods in rows.pods.items()} == {
            b: {i: p.route for i, p in pods.items()} for b, pods in expected.items()
        }
    assert rows.groups == {"payments-ids": "payments", "web-fw": "web"}
    assert len(rows.pods["payments-ids"]) == 18 and set(rows.pods["web-fw"]) == {("shop", "web-1")}


def test_live_a_label_typo_stops_steering_named_without_a_label() -> None:
    (change,), _ = live_of(shop(label="tier=edge"), shop(label="tier=egde"), OBSERVED)
    assert (change.binding, change.change, change.before, change.after) == (
        "payments-ids", "changed", 37, 0)  # fmt: skip
    assert {p.label for p in change.stop} == {None}  # no planned label of the group selects them
    stopped = {"namespace": "payments", "pod": "api-0", "node": "node-1", "label": None,
               "vnfs": ["ids"]}  # fmt: skip
    assert change.stop[0].to_json() == stopped
    assert typo_warnings(shop(label="tier=egde"), OBSERVED, (change,)) == [
        "Binding payments-ids stops steering 37 pods it steered before (payments: 37); likely "
        "typo: SecurityGroup payments: no pod carries tier=egde (did you mean tier=edge?)"
    ]


def test_live_a_namespace_or_node_selector_typo_keeps_the_label() -> None:
    (change,), _ = live_of(shop(), shop(namespaces=["paymnets"]), OBSERVED)
    assert len(change.stop) == 37 and {p.label for p in change.stop} == {"app=api"}
    changes, _ = live_of(shop(), shop(nodeSelector={"zone": "dzm"}), OBSERVED)
    assert {c.binding: len(c.stop) for c in changes} == {"payments-ids": 37, "web-ids": 2}


def test_live_an_empty_plan_changes_no_protection_and_a_relabelled_pod_shows() -> None:
    """Exact where manifests are not: the plan is empty, nothing starts or stops; a pod
    relabelled since the apply stops being steered, in the plan that drops it."""
    changes, live = live_of(shop(), shop(), OBSERVED)
    assert changes == ()
    from dataclasses import replace

    from reconciler.core.model.observed import Pod
    from reconciler.core.planning.full import make_plan
    from reconciler.core.views.protection import live_changes

    pods = tuple(Pod(p.namespace, p.name, p.uid, p.node, {"app": "db"}) if p.name == "web-2"
                 else p for p in live.pods)  # fmt: skip
    relabelled = replace(live, pods=pods)
    plan = make_plan(shop(), relabelled, applied(shop(), OBSERVED)[1])
    (change,) = live_changes(relabelled, plan.changes, shop())
    assert (change.binding, [p.ref for p in change.stop], change.stop[0].label) == (
        "web-ids", ["shop/web-2"], None)  # fmt: skip


def test_live_a_removed_binding_names_its_group_and_vnfs_from_the_rows() -> None:
    before = desired(sg("web", "app=web"), vnf("ids"), binding("old", "web", "ids", 10))
    after = desired(sg("web", "app=web"), vnf("ids"), binding("new", "web", "ids", 20))
    changes, _ = live_of(before, after, OBSERVED)
    by_name = {c.binding: c for c in changes}
    old, new = by_name["old"], by_name["new"]
    assert (old.change, old.security_group, old.vnfs, len(old.stop)) == (
        "removed", "web", ("ids",), 2)  # fmt: skip
    assert old.stop[0].label == "app=web"  # the group is still declared: its label is known
    assert (new.change, len(new.start), new.before) == ("added", 2, 0)
    assert {p.label for p in new.start} == {"app=web"}  # the label that selects them
    gone = desired(sg("web", "app=web"))
    (removed,), _ = live_of(before, gone, OBSERVED)
    assert (removed.security_group, removed.vnfs) == ("web", ("ids",))


# --- per hop (issue 33): chain order, hops lost and gained, direction, failure policy, pending

CHAIN = desired(sg("web", "app=web"), vnf("fw"), vnf("ids"),
                binding("web-chain", "web", ["fw", "ids"], 10))  # fmt: skip


def chain_of(*hops: str, **spec: object):  # type: ignore[no-untyped-def]
    return desired(sg("web", "app=web"), vnf("fw"), vnf("ids"),
                   binding("web-chain", "web", list(hops) if len(hops) > 1 else hops[0], 10,
                           **spec))  # fmt: skip


@pytest.mark.parametrize("basis", ["live", "base"])
def test_a_chain_reorder_is_a_route_change_of_every_pod(basis: str) -> None:
    before, after = chain_of("fw", "ids"), chain_of("ids", "fw")
    if basis == "live":
        (change,), _ = live_of(before, after, cluster(SHOP))
    else:
        (change,) = protection_changes(before, cluster(SHOP), after)
    assert (change.start, change.stop, change.change) == ((), (), "changed")
    (route,) = change.routes
    assert [p.ref for p in route.pods] == ["shop/web-1", "shop/web-2"]
    assert route.effects() == ["chain order changes: fw → ids becomes ids → fw"]
    assert route.summary == "2 pods of shop: chain order changes: fw → ids becomes ids → fw"
    data = change.to_json()["route_changes"][0]
    assert (data["before"], data["after"], data["lost"], data["order_changed"]) == (
        {"vnfs": ["fw", "ids"], "redirection": "exit-lport", "failure_policy": "fail-close"},
        {"vnfs": ["ids", "fw"], "redirection": "exit-lport", "failure_policy": "fail-close"},
        [], True)  # fmt: skip


@pytest.mark.parametrize("basis", ["live", "base"])
def test_a_removed_hop_is_lost_by_each_pod_and_named(basis: str) -> None:
    before, after = chain_of("fw", "ids"), chain_of("fw")
    if basis == "live":
        (change,), _ = live_of(before, after, cluster(SHOP))
    else:
        (change,) = protection_changes(before, cluster(SHOP), after)
    (route,) = change.routes
    assert route.lost == ("ids",) and change.lost == ("ids",)
    assert route.summary == "2 pods of shop lose ids (fw → ids becomes fw)"
    assert (change.before, change.after) == (2, 2)


@pytest.mark.parametrize("basis", ["live", "base"])
def test_direction_and_failure_policy_changes_are_named(basis: str) -> None:
    before = chain_of("fw")
    after = chain_of("fw", redirection="both", failurePolicy="fail-open")
    if basis == "live":
        (change,), _ = live_of(before, after, cluster(SHOP))
    else:
        (change,) = protection_changes(before, cluster(SHOP), after)
    (route,) = change.routes
    assert route.effects() == ["direction exit-lport becomes both",
                               "failure policy fail-close becomes fail-open"]  # fmt: skip


def test_a_new_binding_held_until_its_vnf_is_healthy_is_pending_not_unsteered() -> None:
    """The plan holds the new binding's steering (its VNF was never probed): its pods are
    pending, "will be steered once their VNFs are healthy", and not among those started."""
    from reconciler.core.compiling.compile import CompileOptions
    from reconciler.core.planning.full import make_plan
    from reconciler.core.views.protection import live_changes, with_pending

    observed = cluster(SHOP)
    plan = make_plan(CHAIN, observed, CompileOptions())
    held = {(h.binding, h.node) for h in plan.held}
    assert held == {("web-chain", "node-1"), ("web-chain", "node-2")}
    changes = live_changes(observed, plan.changes, CHAIN)
    assert changes == ()  # nothing is steered by this plan: the ACLs wait
    (change,) = with_pending(changes, CHAIN, observed, held)
    assert (change.change, change.start, [p.ref for p in change.pending]) == (
        "added", (), ["shop/web-1", "shop/web-2"])  # fmt: skip
    # --base counts them as started from the manifests: they move to pending
    (based,) = with_pending(protection_changes(desired(), observed, CHAIN), CHAIN, observed, held)
    assert (based.start, len(based.pending), based.after) == ((), 2, 0)


def test_a_vnf_deployment_no_binding_uses_is_a_warning_and_a_used_one_is_not() -> None:
    from reconciler.core.views.typos import unused_vnfs

    state = desired(sg("web", "app=web"), vnf("fw"), vnf("ids"), vnf("spare"),
                    binding("web-chain", "web", ["fw", "ids"], 10))  # fmt: skip
    assert unused_vnfs(state) == [(
        "spare",
        "VnfDeployment spare: no Binding refers to it, so its VMs run on every selected node "
        "and steer no traffic (add a Binding with vnf: spare, or remove it)",
    )]  # fmt: skip
    # the review words it as a finding of its own kind
    from reconciler.cli.review import annotate
    from reconciler.core.compiling.compile import CompileOptions
    from reconciler.core.planning.full import make_plan

    plan = annotate(make_plan(state, OBSERVED, CompileOptions()), state, OBSERVED, (),
                    {"source": "live", "detail": "now"})  # fmt: skip
    (unused,) = [f for f in plan.findings if f.code == "unused"]
    assert (unused.subject, unused.text) == ("VnfDeployment/spare", unused_vnfs(state)[0][1])


@pytest.mark.parametrize(
    ("before", "after", "warnings"),
    [
        (chain_of("fw", "ids"), chain_of("fw"),
         ["Binding web-chain: 2 pods stop crossing ids (fw → ids becomes fw)"]),
        (desired(sg("web", "app=web"), vnf("fw"), vnf("ids"), vnf("ips"),
                 binding("web-chain", "web", ["fw", "ids", "ips"], 10)),
         desired(sg("web", "app=web"), vnf("fw"), vnf("ids"), vnf("ips"),
                 binding("web-chain", "web", "ips", 10)),
         ["Binding web-chain: 2 pods stop crossing fw and ids (fw → ids → ips becomes ips)"]),
        (chain_of("fw"), chain_of("fw", failurePolicy="fail-open"),
         ["Binding web-chain: 2 pods fail open where they failed closed: while fw is unhealthy "
          "their traffic bypasses it instead of being dropped"]),
        (chain_of("fw", "ids"), chain_of("ids", failurePolicy="fail-open"),
         ["Binding web-chain: 2 pods stop crossing fw (fw → ids becomes ids)",
          "Binding web-chain: 2 pods fail open where they failed closed: while ids is unhealthy "
          "their traffic bypasses it instead of being dropped"]),
        # failing closed again or a new order weakens nothing; a hop lost where the pods
        # already failed open is named, but not as a change to failing open
        (chain_of("fw", failurePolicy="fail-open"), chain_of("fw"), []),
        (chain_of("fw", "ids"), chain_of("ids", "fw"), []),
        (chain_of("fw", "ids", failurePolicy="fail-open"),
         chain_of("fw", failurePolicy="fail-open"),
         ["Binding web-chain: 2 pods stop crossing ids (fw → ids becomes fw)"]),
    ],
)  # fmt: skip
def test_a_route_that_loses_a_hop_or_starts_failing_open_is_a_review_warning(
    before: object, after: object, warnings: list[str]
) -> None:
    from reconciler.core.views.typos import route_warnings

    changes = protection_changes(before, cluster(SHOP), after)  # type: ignore[arg-type]
    assert route_warnings(changes) == [("web-chain", text) for text in warnings]


# --- the words a review shows: pod lists, routes and their changes


def pod(namespace: str, name: str, node: str = "node-1"):  # type: ignore[no-untyped-def]
    from reconciler.core.views.protection import SteeredPod

    return SteeredPod(namespace, name, node, "app=web")


def test_pod_lists_name_up_to_four_pods_per_namespace_and_count_the_rest() -> None:
    from reconciler.core.views.protection import pod_names

    assert pod_names([pod("shop", "web-1")]) == "shop/web-1"
    assert pod_names([pod("shop", "web-2"), pod("shop", "web-1")]) == "shop/web-1 and web-2"
    four = [pod("shop", f"web-{i}") for i in (4, 2, 3, 1)]
    assert pod_names(four) == "shop/web-1, web-2, web-3 and web-4"
    five = [pod("pay", f"api-{i}") for i in range(5)]
    assert pod_names(five) == "pay/api-0, api-1, api-2, … (5 pods)"
    assert pod_names(five, shown=5) == "pay/api-0, api-1, api-2, api-3 and api-4"
    assert pod_names([pod("shop", "web-1"), *five[:2]]) == "pay/api-0 and api-1; shop/web-1"
    assert pod_names([]) == ""


def route(directions: list[str], vnfs: list[str], policy: str | None = "fail-close"):  # type: ignore[no-untyped-def]
    from reconciler.core.views.protection import Route

    return Route.of(directions, vnfs, policy)


def test_a_binding_with_a_row_per_direction_has_one_route_with_both_legs() -> None:
    """Merged routes keep each direction's VNFs; a direction both name keeps the VNFs of both,
    in order, and the first one's failure policy."""
    exit_fw, entry_ids = route(["exit"], ["fw"]), route(["entry"], ["ids"], "fail-open")
    both = exit_fw.merged(entry_ids)
    assert both.legs == (("entry", ("ids",), "fail-open"), ("exit", ("fw",), "fail-close"))
    assert (both.redirection, both.vnfs, both.failure_policy) == ("both", ("fw", "ids"), None)
    same = exit_fw.merged(route(["exit"], ["fw", "ips"], "fail-open"))
    assert same.legs == (("exit", ("fw", "ips"), "fail-close"),)
    assert exit_fw.merged(route(["exit"], ["ids"])).legs == (("exit", ("fw", "ids"), "fail-close"),)
    assert route([], []).redirection == "none"


def change(before, after, *pods):  # type: ignore[no-untyped-def]
    from reconciler.core.views.protection import RouteChange

    return RouteChange(tuple(pods) or (pod("shop", "web-1"), pod("shop", "web-2")), before, after)


@pytest.mark.parametrize(
    ("before", "after", "effects"),
    [
        (route(["exit"], ["fw"]), route(["exit"], ["fw", "ids", "ips"]),
         ["newly cross ids and ips (fw becomes fw → ids → ips)"]),
        (route(["exit"], ["fw", "ids", "ips"]), route(["exit"], ["ips"]),
         ["lose fw and ids (fw → ids → ips becomes ips)"]),
        (route(["exit"], ["fw"]), route(["exit"], ["ids"]),
         ["lose fw, newly cross ids (fw becomes ids)"]),
        (route(["exit"], ["fw"]), route(["exit"], []), ["lose fw (fw becomes nothing)"]),
        (route(["exit"], ["fw"]), route(["entry"], ["fw"], "fail-open"),
         ["direction exit-lport becomes entry-lport",
          "failure policy fail-close becomes fail-open"]),
        # the same VNFs, direction and policy, but another VNF on each leg
        (route(["exit"], ["fw", "ids"]).merged(route(["entry"], ["fw"])),
         route(["exit"], ["fw"]).merged(route(["entry"], ["fw", "ids"])),
         ["steered differently per direction (fw → ids becomes fw → ids)"]),
        # a router policy has no failure policy: no policy change is named, only that the
        # steering differs (a switch of backends)
        (route(["exit"], ["fw"], None), route(["exit"], ["fw"], "fail-open"),
         ["steered differently per direction (fw becomes fw)"]),
    ],
)  # fmt: skip
def test_what_a_route_change_does_is_said_in_a_reviewers_words(
    before: object, after: object, effects: list[str]
) -> None:
    assert change(before, after).effects() == effects


def test_a_route_change_summary_counts_pods_per_namespace() -> None:
    lose = (route(["exit"], ["fw", "ids"]), route(["exit"], ["fw"]))
    one = change(*lose, pod("shop", "web-1"))
    assert one.summary == "1 pod of shop lose ids (fw → ids becomes fw)"
    two_namespaces = change(*lose, pod("shop", "web-1"), pod("pay", "api-1"), pod("pay", "api-2"))
    assert two_namespaces.summary == "3 pods lose ids (fw → ids becomes fw)"
    policy = change(route(["exit"], ["fw"]), route(["exit"], ["fw"], "fail-open"))
    assert policy.summary == "2 pods of shop: failure policy fail-close becomes fail-open"
    assert policy.to_json() == {
        "pods": [p.to_json() for p in policy.pods],
        "before": {"vnfs": ["fw"], "redirection": "exit-lport", "failure_policy": "fail-close"},
        "after": {"vnfs": ["fw"], "redirection": "exit-lport", "failure_policy": "fail-open"},
        "lost": [],
        "gained": [],
        "order_changed": False,
        "summary": "2 pods of shop: failure policy fail-close becomes fail-open",
    }
    gain = change(route(["exit"], ["fw"]), route(["exit"], ["fw", "ids"]))
    assert (gain.to_json()["gained"], gain.to_json()["lost"]) == (["ids"], [])


# --- pending: pods of a held binding (its VNF not healthy yet) that it does not steer now

FW_ONLY = desired(sg("web", "app=web"), vnf("fw"), vnf("ids"), binding("a-fw", "web", "fw", 10))
FW_AND_IDS = desired(
    sg("web", "app=web"), vnf("fw"), vnf("ids"),
    binding("a-fw", "web", "fw", 10), binding("b-ids", "web", "ids", 20),
)  # fmt: skip


def test_pods_a_held_binding_steers_now_are_not_pending_and_the_others_are() -> None:
    """a-fw steers both pods (applied); the plan holds a-fw and the new b-ids on node-1: only
    b-ids' pod there waits, and a-fw, whose pods are steered, has nothing to show."""
    from reconciler.core.views.protection import with_pending

    live, _ = applied(FW_ONLY, cluster(SHOP))
    held = [("a-fw", "node-1"), ("b-ids", "node-1"), ("gone", "node-1")]
    (waiting,) = with_pending((), FW_AND_IDS, live, held)
    assert (waiting.binding, waiting.security_group, waiting.vnfs, waiting.change) == (
        "b-ids", "web", ("ids",), "added")  # fmt: skip
    assert (waiting.start, waiting.stop, waiting.before, waiting.after) == ((), (), 0, 0)
    assert [p.ref for p in waiting.pending] == ["shop/web-1"]
    # known to the --base manifests: changed, not added
    (based,) = with_pending((), FW_AND_IDS, live, held, before=FW_AND_IDS)
    assert based.change == "changed"


def test_a_base_review_moves_held_pods_from_started_to_pending() -> None:
    from reconciler.core.views.protection import protection_changes, with_pending

    live, _ = applied(FW_ONLY, cluster(SHOP))
    changes = protection_changes(desired(), live, FW_AND_IDS)
    assert [(c.binding, len(c.start)) for c in changes] == [("a-fw", 2), ("b-ids", 2)]
    fw, ids = with_pending(changes, FW_AND_IDS, live, [("a-fw", "node-1"), ("b-ids", "node-1")])
    assert fw == changes[0]  # steered now: nothing pending
    assert [p.ref for p in ids.start] == ["shop/web-2"] and ids.after == 1
    assert [p.ref for p in ids.pending] == ["shop/web-1"]


def test_a_held_binding_whose_group_selects_no_pod_has_nothing_pending() -> None:
    from reconciler.core.views.protection import with_pending

    state = desired(sg("web", "app=web"), sg("none", "app=none"), vnf("fw"),
                    binding("c-fw", "none", "fw", 10))  # fmt: skip
    assert with_pending((), state, cluster(SHOP), [("c-fw", "node-1")]) == ()
    assert with_pending((), state, cluster(SHOP), []) == ()
