"""``explain`` of a pod that is not steered says why, word for word: not scheduled, a node the
cluster does not list, a nodeSelector that leaves its node out, a node without its switch, an
incomplete chain; and rows a removed binding left behind are shown as stale."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.observed import Node, Observed, Pod
from reconciler.core.planning.full import compile_plan
from reconciler.core.views.explain import Explanation, explain_pod
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import converge

NF = CompileOptions(steering="network-function")
PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]


def explain(want: Any, obs: Observed, name: str = "web-1") -> Explanation:
    return explain_pod(want, obs, compile_plan(want, obs, NF), "shop", name)


def reasons(e: Explanation) -> dict[str, str]:
    return {b.name: b.reason for b in e.bindings}


def test_a_vnf_whose_node_selector_leaves_the_pods_node_out() -> None:
    want = desired(sg("web", "app=web"), vnf("ips", nodeSelector={"zone": "a", "disk": "ssd"}),
                   binding("web-ips", "web", "ips", 10))  # fmt: skip
    obs = cluster(PODS, node_labels={"node-1": {"zone": "a"}})
    e = explain(want, obs)
    assert reasons(e) == {
        "web-ips": "VnfDeployment ips does not run on node node-1: its nodeSelector wants disk=ssd"
    }
    (view,) = e.bindings
    assert not view.steers and view.instance is None
    assert view.health_detail == "no VNF instance on the pod's node"
    none_match = cluster(PODS)
    assert reasons(explain(want, none_match)) == {
        "web-ips": "VnfDeployment ips does not run on node node-1: its nodeSelector wants "
        "disk=ssd, zone=a"
    }


def test_a_node_without_its_switch_and_a_node_the_cluster_does_not_list() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    obs = cluster(PODS)
    no_switch = replace(obs, switches=tuple(s for s in obs.switches if s.name != "node-1"))
    assert reasons(explain(want, no_switch)) == {
        "web-fw": "node node-1 has no OVN logical switch named after it: VNF fw is not deployed"
    }
    unlisted = replace(obs, nodes=(Node("node-2"),))
    assert reasons(explain(want, unlisted)) == {
        "web-fw": "node node-1 is not a Kubernetes node osc-gitops knows"
    }


def test_a_pod_not_scheduled_yet() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    obs = cluster(PODS)
    pending = replace(
        obs,
        pods=(*obs.pods, Pod("shop", "web-3", "uid-3", None, {"app": "web"})),
    )
    e = explain(want, pending, "web-3")
    assert e.node is None
    assert not e.bindings[0].steers
    assert e.bindings[0].health_detail == "no VNF instance on the pod's node"
    assert e.bindings[0].reason == "the pod has no OVN port of its own yet"


def test_an_incomplete_chain_names_the_vnf_missing_on_the_node() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"), vnf("ips", nodeSelector={"zone": "b"}),
                   binding("web-chain", "web", ["fw", "ips"], 10))  # fmt: skip
    obs = converge(want, cluster(PODS, node_labels={"node-2": {"zone": "b"}}), NF)
    e = explain(want, obs)
    assert reasons(e) == {
        "web-chain": "its chain fw -> ips is incomplete there: VnfDeployment ips does not run "
        "on node node-1: its nodeSelector wants zone=b"
    }
    (view,) = e.bindings
    assert [h.vnf for h in view.hops] == ["fw", "ips"]
    assert view.hops[0].instance == "security/fw-node-1" and view.hops[1].instance is None
    assert view.hops[1].health_detail == "no VNF instance on the pod's node"
    assert view.vm_state == "ok"  # the one VM there is as compiled
    whole = explain(want, obs, "web-2").bindings[0]
    assert whole.steers and whole.vm_state == "ok"
    assert [h.instance for h in whole.hops] == ["security/fw-node-2", "security/ips-node-2"]


def test_rows_a_removed_binding_left_are_stale_with_their_origin_and_node() -> None:
    before = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    live = converge(before, cluster(PODS), NF)
    after = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw2", "web", "fw", 20))
    e = explain(after, live)
    stale = [r for r in e.ovn if r.state == "stale"]
    assert stale, [(r.table, r.name, r.state) for r in e.ovn]
    assert {r.origin for r in stale} == {"Binding/web-fw"}
    assert {r.node for r in stale} == {"node-1"}
    new = [r for r in e.ovn if r.origin == "Binding/web-fw2"]
    assert new and {r.state for r in new} == {"missing"}
    # a stale row shows its live fields, a missing one what compile made; neither repeats
    # the external_ids the origin and node were read from
    assert all(r.fields and "external_ids" not in r.fields for r in e.ovn)
    assert "node-1" in {r.node for r in new}
    (acl,) = [r for r in stale if r.table == "ACL" and r.name.endswith(".to")]
    assert acl.fields["match"].startswith("outport == @osc.web.node_1")


def test_every_group_the_pod_carries_a_label_of_is_judged_in_name_order() -> None:
    """A group that does not look in the pod's namespace is said (with the namespaces it looks
    in) and does not stop the later groups from selecting the pod."""
    want = desired(
        sg("a-other", "app=web", namespaces=["ops", "payments"]), sg("b-none", "app=none"),
        sg("c-web", "app=web"), vnf("fw"), binding("web-fw", "c-web", "fw", 10),
    )  # fmt: skip
    e = explain(want, converge(want, cluster(PODS), NF))
    assert [(g.name, g.label, g.bound) for g in e.groups] == [("c-web", "app=web", True)]
    assert e.warnings[0] == (
        "SecurityGroup a-other: the pod carries app=web, but the group only looks in "
        "namespace(s) ops, payments: not a member"
    )
