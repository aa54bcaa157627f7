"""Where osc-gitops does not roll VMs (router-policy steering: no health of each instance to
wait for), a VM running an older template than its spec stays pending in the plan until
someone restarts it; where it rolls them (Network Functions), that is the rollout's business."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.facts import Pending
from reconciler.core.model.observed import KubeObject, Observed
from reconciler.core.planning.full import make_plan
from reconciler.core.transitions.rollout import restarts_pending
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [("shop", "web-1", "node-1", {"app": "web"})]
FW = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
RESTART = Pending(
    "VirtualMachine", "security/fw-node-1", "node-1",
    "runs an older template than its spec: restart it (virtctl restart), one node at a time",
    "osc-gitops rolls restarts only where it reads each instance's health from OVN",
)  # fmt: skip


def with_vm_status(observed: Observed, status: dict[str, Any]) -> Observed:
    """``observed`` holding fw's VM of node-1 as compiled, with ``status``."""
    (vm,) = [r for r in compile_target(FW, observed, CompileOptions(steering="router-policy"))
             if r.kind == "VirtualMachine" and r.node == "node-1"]  # fmt: skip
    namespace, name = vm.key.split("/", 1)
    return replace(observed, kube_objects=(KubeObject(vm.kind, namespace, name, vm.fields,
                                                      status=status),))  # fmt: skip


LAGGING = {"observedGeneration": 1, "desiredGeneration": 2}


def test_a_vm_behind_its_spec_is_pending_under_router_policy_steering() -> None:
    observed = with_vm_status(cluster(PODS, nf=False), LAGGING)
    plan = make_plan(FW, observed, CompileOptions(steering="router-policy"))
    assert RESTART in plan.pending


def test_a_vm_being_restarted_or_up_to_date_is_not_pending() -> None:
    for status in ({**LAGGING, "stateChangeRequests": [{"action": "Stop"}]},
                   {"observedGeneration": 2, "desiredGeneration": 2}):  # fmt: skip
        observed = with_vm_status(cluster(PODS, nf=False), status)
        plan = make_plan(FW, observed, CompileOptions(steering="router-policy"))
        assert RESTART not in plan.pending, status


def test_where_osc_gitops_rolls_vms_a_lagging_vm_is_the_rollouts_business() -> None:
    observed = with_vm_status(cluster(PODS, nf=True), LAGGING)
    plan = make_plan(FW, observed, CompileOptions(steering="network-function"))
    assert RESTART not in plan.pending


def test_every_lagging_vm_is_pending_whatever_comes_before_it() -> None:
    """The scan goes over every object: a NetworkAttachmentDefinition, a VM being restarted
    or one without KubeVirt's status before a lagging VM does not hide it."""
    lagging = with_vm_status(cluster(PODS, nf=False), LAGGING).kube_objects
    others = (
        KubeObject("NetworkAttachmentDefinition", "security", "fw-node-1", {}, status=LAGGING),
        KubeObject("VirtualMachine", "security", "restarting", {},
                   status={**LAGGING, "stateChangeRequests": [{"action": "Stop"}]}),
        KubeObject("VirtualMachine", "security", "no-status", {}),
    )  # fmt: skip
    observed = replace(cluster(PODS, nf=False), kube_objects=(*others, *lagging))
    assert restarts_pending(observed) == [RESTART]
