"""A full plan (``reconciler.core.planning.full``): which Kubernetes objects are ours, what the
plan says of look-alikes that are not, the health index it was judged with, and the rows a
one-shot compile leaves out."""

from __future__ import annotations

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.facts import Finding
from reconciler.core.model.observed import KubeObject, Observed
from reconciler.core.planning.full import compile_plan, lookalike_findings, owned_only
from reconciler.core.steering import HealthIndex
from tests.support.builders import binding, cluster, desired, sg, vnf

OURS = frozenset({"security"})


def vm(namespace: str, name: str, kind: str = "VirtualMachine") -> KubeObject:
    return KubeObject(kind, namespace, name, {"metadata": {"labels": {"osc.io/owner": "x"}}})


def seen(*objects: KubeObject) -> Observed:
    return Observed(kube_objects=objects)


def test_only_objects_of_our_namespaces_are_ours() -> None:
    mine, other = vm("security", "fw-node-1"), vm("tenant-a", "fw-node-1")
    assert owned_only(seen(mine, other), OURS).kube_objects == (mine,)
    everything = seen(mine)
    assert owned_only(everything, OURS) is everything, "nothing to leave out: the same state"
    assert owned_only(seen(mine, other), frozenset({"security", "tenant-a"})).kube_objects == (
        mine, other,
    )  # fmt: skip


def test_the_same_objects_give_the_same_tuple_while_only_a_strangers_change() -> None:
    """The incremental planner compares ``Observed`` fields by identity: while a stranger's
    object exists, a pass that changed nothing of ours must not look like a change."""
    mine, other = vm("security", "fw-node-1"), vm("tenant-a", "x")
    objects = (mine, other)
    first = owned_only(Observed(kube_objects=objects), OURS).kube_objects
    assert owned_only(Observed(kube_objects=objects), OURS).kube_objects is first
    changed = owned_only(seen(mine, vm("tenant-a", "y")), OURS).kube_objects
    assert changed is first, "only a stranger's object changed"
    also = owned_only(seen(vm("tenant-b", "z"), mine), OURS).kube_objects
    assert also is first


def test_a_change_of_ours_is_seen_next_to_a_stranger() -> None:
    mine, other = vm("security", "fw-node-1"), vm("tenant-a", "x")
    owned_only(seen(mine, other), OURS)
    replaced = vm("security", "fw-node-1")
    assert owned_only(seen(replaced, other), OURS).kube_objects[0] is replaced
    added = vm("security", "fw-node-2")
    assert owned_only(seen(mine, added, other), OURS).kube_objects == (mine, added)
    assert owned_only(seen(other), OURS).kube_objects == ()
    # the same objects under other namespaces are filtered again
    objects = (mine, other)
    owned_only(Observed(kube_objects=objects), OURS)
    again = owned_only(Observed(kube_objects=objects), frozenset({"tenant-a", "x"}))
    assert again.kube_objects == (other,)
    assert owned_only(Observed(kube_objects=objects), frozenset({"x"})).kube_objects == ()


def test_a_namespace_of_lookalikes_is_one_finding_naming_three_of_them() -> None:
    objects = [vm("tenant-a", n) for n in ("d", "b", "e", "a")]
    objects.append(vm("tenant-a", "c", "NetworkAttachmentDefinition"))
    objects.append(vm("security", "fw-node-1"))
    objects.append(vm("tenant-b", "x"))
    found = lookalike_findings(seen(*objects), OURS)
    assert found == (
        Finding(
            "ownership", "Namespace/tenant-a", None,
            "5 object(s) in namespace tenant-a carry this instance's ownership labels "
            "(NetworkAttachmentDefinition c, VirtualMachine a, VirtualMachine b and 2 more), but "
            "no VnfDeployment names tenant-a (nor --vnf-namespaces): not ours, never changed or "
            "deleted; if a VnfDeployment removed from git left them, add tenant-a to "
            "--vnf-namespaces to prune them",
        ),
        Finding(
            "ownership", "Namespace/tenant-b", None,
            "1 object(s) in namespace tenant-b carry this instance's ownership labels "
            "(VirtualMachine x), but no VnfDeployment names tenant-b (nor --vnf-namespaces): "
            "not ours, never changed or deleted; if a VnfDeployment removed from git left "
            "them, add tenant-b to --vnf-namespaces to prune them",
        ),
    )  # fmt: skip
    three = lookalike_findings(seen(*(vm("t", n) for n in "abc")), OURS)
    assert "(VirtualMachine a, VirtualMachine b, VirtualMachine c), but" in three[0].text
    four = lookalike_findings(seen(*(vm("t", n) for n in "abcd")), OURS)
    assert "(VirtualMachine a, VirtualMachine b, VirtualMachine c and 1 more), but" in (
        four[0].text
    )
    assert lookalike_findings(seen(vm("security", "a")), OURS) == ()


WANT = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
PODS = [("shop", "web-1", "node-1", {"app": "web"})]
NF = CompileOptions(steering="network-function")


def test_a_full_plan_keeps_the_health_index_of_what_it_was_made_from() -> None:
    observed = cluster(PODS)
    made = compile_plan(WANT, observed, NF)
    assert isinstance(made.health, HealthIndex)
    assert made.health.observed is owned_only(observed, OURS)


@pytest.mark.parametrize("steering", ["network-function", "router-policy"])
def test_a_one_shot_compile_builds_no_rows_of_pairs_that_cannot_be_present(steering: str) -> None:
    """``fw`` runs on both nodes, ``web`` has a member on node-1 only: node-2's pair has no
    member and no live Port_Group. The incremental planner needs its rows ready; a one-shot
    plan does not build them, and the target is the same."""
    observed = cluster(PODS, nf=steering == "network-function")
    options = CompileOptions(steering=steering)
    kept = compile_plan(WANT, observed, options, potential=True)
    one_shot = compile_plan(WANT, observed, options, potential=False)
    nodes = {r.node for r in kept.compiled.potential.values() if r.origin == "Binding/web-fw"}
    assert nodes == {"node-1", "node-2"}
    assert {
        r.node for r in one_shot.compiled.potential.values() if r.origin == "Binding/web-fw"
    } == {"node-1"}
    assert one_shot.target == kept.target
    assert one_shot.plan == kept.plan
