"""Who plans what: a node agent's view of a shared NB (its rows, the ids the other nodes' rows
take), the Kubernetes side's view (objects by node, switches from node subnets), and what each
scope's plan says about itself."""

from __future__ import annotations

from dataclasses import replace

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.observed import KubeObject, Node, Observed, OvnRow, Switch
from reconciler.core.planning.full import compile_plan
from reconciler.core.planning.slicing import (
    KubernetesScope,
    NodeScope,
    kubernetes_observed,
    node_switches,
    object_node,
)
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import converge

WANT = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
OPTIONS = CompileOptions()
PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]


def vm(labels: object, metadata: bool = True) -> KubeObject:
    body = {"metadata": {"labels": labels}} if metadata else {"spec": {}}
    return KubeObject("VirtualMachine", "security", "x", body)  # type: ignore[arg-type]


def test_the_node_of_one_of_our_objects_is_its_node_label() -> None:
    assert object_node(vm({"osc.io/node": "node-1", "x": "y"})) == "node-1"
    assert object_node(vm({"x": "y"})) is None
    assert object_node(vm({"osc.io/node": 3})) is None  # not a name
    assert object_node(vm(None)) is None
    assert object_node(vm({}, metadata=False)) is None
    assert object_node(KubeObject("VirtualMachine", "s", "x", {"metadata": None})) is None


def test_switches_of_the_nodes_with_a_pod_subnet() -> None:
    nodes = [(Node("a"), "10.244.1.0/24"), (Node("b"), None), (Node("c"), "10.244.3.0/24")]
    assert node_switches(nodes) == (Switch("a", "10.244.1.0/24"), Switch("c", "10.244.3.0/24"))
    obs = kubernetes_observed(nodes, (vm({"osc.io/node": "a"}),))
    assert obs.switches == node_switches(nodes) and obs.nodes == (Node("a"), Node("b"), Node("c"))
    assert obs.pods == () and obs.ovn_rows == () and obs.network_policies == ()
    assert obs.capabilities.network_function is False and obs.capabilities.schema_version == ""


def test_the_kubernetes_side_plans_objects_only_and_says_so() -> None:
    scope = KubernetesScope()
    assert scope.desired(WANT).bindings == {} and scope.desired(WANT).vnfs == WANT.vnfs
    assert scope.desired(WANT) is scope.desired(WANT)  # the same object while the input is
    unbound = desired(sg("web", "app=web"), vnf("fw"))
    assert scope.desired(unbound) is unbound
    central = kubernetes_observed([(Node("node-1"), "10.244.1.0/24")], ())
    view = scope.view(central)
    plan = scope.restrict(compile_plan(scope.desired(WANT), view.observed, OPTIONS).plan, view)
    assert {c.kind for c in plan.changes} == {"VirtualMachine", "NetworkAttachmentDefinition"}
    assert plan.meta["scope"] == "kubernetes-only"
    assert "steering" not in plan.meta and "nb_schema" not in plan.meta
    assert plan.meta["instance"] == "osc-gitops"


def shared_nb() -> Observed:
    """One NB both nodes' agents write, after a central apply (ids allocated for both)."""
    return converge(WANT, cluster(PODS), OPTIONS)


def test_an_agent_sees_its_rows_and_counts_the_ids_of_the_others_as_taken() -> None:
    obs = shared_nb()
    ids = {
        (r.table, r.fields["id"])
        for r in obs.ovn_rows
        if isinstance(r.fields.get("id"), int) and r.fields.get("external_ids", {}).get(
            "osc.io/node"
        ) == "node-2"
    }  # fmt: skip
    assert ids, "node-2 has rows with ids"
    obs = replace(obs, used_ids={"Network_Function": (200,)})
    view = NodeScope("node-1").view(obs)
    mine = {r.fields.get("external_ids", {}).get("osc.io/node") for r in view.observed.ovn_rows}
    assert mine <= {"node-1", None}
    for table, taken in ids:
        assert taken in view.observed.used_ids[table], (table, taken)
    assert 200 in view.observed.used_ids["Network_Function"]
    assert all(list(v) == sorted(v) for v in view.observed.used_ids.values())
    assert [p.name for p in view.observed.pods] == ["web-1"]
    assert [n.name for n in view.observed.nodes] == ["node-1"]


def test_an_agent_in_its_own_nb_sees_it_all() -> None:
    obs = converge(WANT, cluster(PODS[:1], nodes=("node-1",)), OPTIONS)
    view = NodeScope("node-1").view(obs)
    assert view.observed.ovn_rows == obs.ovn_rows and not view.foreign_checks


def test_an_agent_of_a_node_the_cluster_does_not_list_warns() -> None:
    obs = cluster(PODS)
    scope = NodeScope("node-9")
    view = scope.view(obs)
    plan = scope.restrict(compile_plan(WANT, view.observed, scope.options(OPTIONS)).plan, view)
    assert "node node-9 is not in the cluster's node list: its agent keeps no rows there" in (
        plan.warnings
    )
    assert plan.meta["node"] == "node-9"


def test_an_agent_names_the_kubernetes_objects_it_leaves_to_the_central_owner() -> None:
    obs = cluster(PODS)
    scope = NodeScope("node-1")
    view = scope.view(obs)
    plan = scope.restrict(compile_plan(WANT, view.observed, scope.options(OPTIONS)).plan, view)
    assert all(c.is_ovn for c in plan.changes)
    (note,) = [w for w in plan.warnings if "Kubernetes objects" in w]
    assert note == (
        "node node-1's Kubernetes objects are not yet as the manifests say (create "
        "NetworkAttachmentDefinition security/fw-node-1-in, create NetworkAttachmentDefinition "
        "security/fw-node-1-out, create VirtualMachine security/fw-node-1): the central owner "
        "(run --kubernetes-only) makes them so; an agent never writes Kubernetes"
    )
    silent = NodeScope("node-1", report_kubernetes=False)
    view = silent.view(obs)
    quiet = silent.restrict(compile_plan(WANT, view.observed, silent.options(OPTIONS)).plan, view)
    assert not [w for w in quiet.warnings if "Kubernetes objects" in w]


def test_more_than_three_objects_are_counted() -> None:
    two = desired(*WANT.all(), vnf("ips"), binding("web-ips", "web", "ips", 5))
    scope = NodeScope("node-1")
    view = scope.view(cluster(PODS))
    plan = scope.restrict(compile_plan(two, view.observed, scope.options(OPTIONS)).plan, view)
    (note,) = [w for w in plan.warnings if "Kubernetes objects" in w]
    assert " and 3 more): the central owner" in note


def test_an_agent_marks_and_keeps_only_its_own_rows() -> None:
    target = compile_target(WANT, cluster(PODS))
    rows = tuple(
        OvnRow(r.kind, r.key, r.fields) for r in target if r.is_ovn and r.node in ("node-2",)
    )
    obs = replace(cluster(PODS), ovn_rows=rows)
    view = NodeScope("node-1").view(obs)
    assert view.observed.ovn_rows == ()
