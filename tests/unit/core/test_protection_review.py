"""Protection changes in a review: every binding whose pods change is listed, whatever comes
before it; a pod recreated under the same name is a new pod; pods gone from the cluster that our
rows still steer are named from the rows."""

from __future__ import annotations

from dataclasses import replace

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.observed import Observed
from reconciler.core.planning.full import make_plan
from reconciler.core.views.protection import live_changes, protection_changes, steering_of
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import converge

PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
    ("shop", "db-1", "node-1", {"app": "db"}),
]
OBSERVED = cluster(PODS)
NF = CompileOptions(steering="network-function")


def manifests(db_label: str = "app=db"):  # type: ignore[no-untyped-def]
    return desired(
        sg("web", "app=web"),
        sg("db", db_label),
        vnf("fw"),
        binding("a-web-fw", "web", "fw", 10),  # sorts first, and does not change
        binding("b-db-fw", "db", "fw", 20),
    )


def test_a_binding_after_an_unchanged_one_is_still_reviewed() -> None:
    (change,) = protection_changes(manifests(), OBSERVED, manifests(db_label="app=dbb"))
    assert (change.binding, change.change, [p.ref for p in change.stop]) == (
        "b-db-fw",
        "changed",
        ["shop/db-1"],
    )


def test_live_a_binding_after_an_unchanged_one_is_still_reviewed() -> None:
    live = converge(manifests(), OBSERVED, NF)
    after = manifests(db_label="app=dbb")
    (change,) = live_changes(live, make_plan(after, live, NF).changes, after)
    assert (change.binding, [p.ref for p in change.stop]) == ("b-db-fw", ["shop/db-1"])


def recreated(observed: Observed, name: str) -> Observed:
    """``name`` deleted and created again: a new UID, while OVN still has the old pod's LSP."""
    pods = tuple(replace(p, uid=f"{p.uid}-new") if p.name == name else p for p in observed.pods)
    return replace(observed, pods=pods)


def test_a_leftover_port_of_a_recreated_pod_is_not_a_member() -> None:
    """web-2 was recreated; its LSP still records the old UID: not steered until OVN has the
    new pod's port, as compile decides (a port that records no UID is taken as the pod's)."""
    steering = steering_of(manifests(), recreated(OBSERVED, "web-2"))
    assert sorted(p.ref for p in steering["a-web-fw"].values()) == ["shop/web-1"]
    unrecorded = recreated(OBSERVED, "web-2")
    unrecorded = replace(
        unrecorded,
        pod_ports=tuple(
            replace(p, pod_uid=None) if p.pod == "web-2" else p for p in unrecorded.pod_ports
        ),
    )
    steering = steering_of(manifests(), unrecorded)
    assert sorted(p.ref for p in steering["a-web-fw"].values()) == ["shop/web-1", "shop/web-2"]
    (change,) = protection_changes(manifests(), OBSERVED, manifests(), recreated(OBSERVED, "web-2"))
    assert (change.binding, [(p.ref, p.node) for p in change.stop]) == (
        "a-web-fw",
        [("shop/web-2", "node-2")],
    )


def test_live_pods_gone_from_the_cluster_are_named_from_our_rows() -> None:
    """Our rows still steer ``shop_web-2`` (its pod and LSP are gone, the plan removes it from
    the Port_Group): the review names the pod, its namespace and the node of the group."""
    live = converge(manifests(), OBSERVED, NF)
    gone = replace(
        live,
        pods=tuple(p for p in live.pods if p.name != "web-2"),
        pod_ports=tuple(p for p in live.pod_ports if p.pod != "web-2"),
    )
    plan = make_plan(manifests(), gone, NF)
    (change,) = live_changes(gone, plan.changes, manifests())
    assert change.binding == "a-web-fw" and change.start == ()
    (pod,) = change.stop
    assert pod.to_json() == {
        "namespace": "shop",
        "pod": "web-2",
        "node": "node-2",
        "label": None,  # no pod: no label selects it
        "vnfs": ["fw"],
    }
    assert (change.before, change.after) == (2, 1)


def test_live_a_removed_chain_is_named_from_its_rows() -> None:
    """The binding is gone from the manifests: its group and its chain's VNFs, in order, come
    from the rows it leaves (a chain's rows carry its hops)."""
    chain = desired(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ips"),
        binding("web-chain", "web", ["ips", "fw"], 10),
    )
    live = converge(chain, OBSERVED, NF)
    after = desired(sg("web", "app=web"), vnf("fw"), vnf("ips"))
    (change,) = live_changes(live, make_plan(after, live, NF).changes, after)
    assert (change.binding, change.change, change.security_group) == (
        "web-chain",
        "removed",
        "web",
    )
    assert change.vnfs == ("ips", "fw")
    assert [(p.ref, p.node, p.vnfs, p.label) for p in change.stop] == [
        ("shop/web-1", "node-1", ("ips", "fw"), "app=web"),
        ("shop/web-2", "node-2", ("ips", "fw"), "app=web"),
    ]


def test_live_a_removed_router_policy_binding_is_named_from_its_next_hops() -> None:
    rp = CompileOptions(steering="router-policy")
    obs = cluster(PODS, nf=False)
    live = converge(manifests(), obs, rp)
    after = desired(sg("web", "app=web"), sg("db", "app=db"), vnf("fw"))
    changes = live_changes(live, make_plan(after, live, rp).changes, after)
    by_name = {c.binding: c for c in changes}
    assert set(by_name) == {"a-web-fw", "b-db-fw"}
    web = by_name["a-web-fw"]
    assert (web.change, web.security_group, web.vnfs) == ("removed", "web", ("fw",))
    assert sorted((p.ref, p.vnfs) for p in web.stop) == [
        ("shop/web-1", ("fw",)),
        ("shop/web-2", ("fw",)),
    ]
