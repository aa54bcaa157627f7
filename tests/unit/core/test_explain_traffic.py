"""What ``explain`` says of a hop's VM ports and traffic (issue 28): each port OVN has not
bound, with the cause the node's binder gives, and whether the VNF saw the steered pods' traffic.
Pure: the binders' records are given as ``BinderReport``s, as the CLI reads them from Leases."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.observed import Observed
from reconciler.core.planning.full import compile_plan
from reconciler.core.views.explain import Explanation, HopView, explain_pod
from reconciler.core.views.traffic import BinderReport
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import converge

WANT = desired(sg("web", "app=web"), vnf("firewall"), binding("b", "web", "firewall", 10))
NF = CompileOptions(steering="network-function")
IN = "nf_firewall_node-1_in"
VM = "security/firewall-node-1"
NOT_BOUND = f"port {IN} (in) of VirtualMachine {VM} is not bound: "
NOT_LOOKED_UP = (
    "the CNI did not set iface-id (ovs-cni up to v0.39.0 never does); whether a binder runs on "
    "node-1 was not looked up"
)
UNKNOWN = "traffic unknown (no binder counts it on this node)"


def running(up: dict[str, bool], chassis: dict[str, bool] | None = None) -> Observed:
    """The applied cluster with its VMs running and the NB's (and SB's) verdict on the ports;
    web-1 and web-2 on node-1, web-3 on node-2, all in group web."""
    base = cluster([("shop", "web-1", "node-1", {"app": "web"}),
                    ("shop", "web-2", "node-1", {"app": "web"}),
                    ("shop", "web-3", "node-2", {"app": "web"})])  # fmt: skip
    live = converge(WANT, base, NF)
    vms = tuple(
        dataclasses.replace(o, status={"printableStatus": "Running"})
        if o.kind == "VirtualMachine" else o
        for o in live.kube_objects
    )  # fmt: skip
    return dataclasses.replace(live, kube_objects=vms, ports_up=up, ports_chassis=chassis or {})


def explain(
    obs: Observed, binders: dict[str, BinderReport] | None, pod: str = "web-1"
) -> Explanation:
    return explain_pod(WANT, obs, compile_plan(WANT, obs, NF), "shop", pod, binders)


def hop_of(e: Explanation) -> HopView:
    (view,) = e.bindings
    (hop,) = view.hops
    return hop


def counted(
    crossed: int, talking: dict[str, int], instance: str = "firewall-node-1"
) -> dict[str, BinderReport]:
    record = {"ok": True, "traffic": [{"instance": instance, "crossed_last_minute": crossed}],
              "pods_talking": talking, "traffic_sampled_at": "2026-11-27T10:00:00Z"}  # fmt: skip
    return {"node-1": BinderReport("node-1", record, fresh=True)}


@pytest.mark.parametrize(
    ("binders", "cause"),
    [
        (None, NOT_LOOKED_UP),
        ({}, "the CNI did not set iface-id: ovs-cni older than commit 42291151 (v0.39.0, the "
             "latest release, and every release before it) reads the OVN port only from "
             "CNI_ARGS, which Multus and KubeVirt never fill with it, and no binder runs on "
             "node-1"),
        (counted(0, {}), "the binder on node-1 does not know the NIC yet (its VM or pod is "
                         "newer than its last pass)"),
    ],
)  # fmt: skip
def test_an_unbound_port_of_the_hops_vm_is_named_with_its_cause_and_warned_first(
    binders: dict[str, BinderReport] | None, cause: str
) -> None:
    e = explain(running({IN: False}), binders)
    hop = hop_of(e)
    assert hop.unbound == (NOT_BOUND + cause,)
    assert e.warnings[0] == f"VNF firewall on node-1: {NOT_BOUND}{cause}"


def test_a_port_without_a_chassis_in_the_southbound_says_so_before_the_cause() -> None:
    hop = hop_of(explain(running({IN: True}, chassis={IN: False}), None))
    assert hop.unbound == (
        f"{NOT_BOUND}its Southbound Port_Binding has no chassis; {NOT_LOOKED_UP}",
    )


def test_a_vnf_that_saw_nothing_while_its_steered_pods_talked_is_a_warning() -> None:
    """Only the pods of the binding's group on the instance's node count (web-3 runs on
    node-2: its packets say nothing of this VNF)."""
    talking = {"shop_web-1": 40, "shop_web-2": 2, "shop_web-3": 1000}
    e = explain(running({}), counted(0, talking))
    hop = hop_of(e)
    text = (
        "NOTHING crossed it in the last minute while its steered pods (shop_web-1, shop_web-2) "
        "sent and received 42 packets: their traffic does not reach the VNF"
    )
    assert (hop.unbound, hop.traffic, hop.traffic_verdict) == ((), text, "silent-while-pods-talked")
    assert e.warnings == [f"VNF firewall on node-1: {text}"]


def test_traffic_that_crossed_or_is_not_counted_is_no_warning() -> None:
    crossed = hop_of(explain(running({}), counted(7, {"shop_web-1": 3})))
    assert (crossed.traffic_verdict, crossed.traffic) == (
        "crossed",
        "traffic crossed it in the last minute (7 pod packets into its out port)",
    )
    other = hop_of(explain(running({}), counted(0, {"shop_web-1": 3}, instance="other")))
    assert (other.traffic_verdict, other.traffic) == (
        "unknown", "traffic unknown (the binder does not count this instance)")  # fmt: skip
    nothing: list[dict[str, BinderReport] | None] = [None, {}]
    for binders in nothing:
        e = explain(running({}), binders)
        assert (hop_of(e).traffic_verdict, hop_of(e).traffic, e.warnings) == (
            "unknown",
            UNKNOWN,
            [],
        )


def test_a_hop_without_an_instance_on_the_pods_node_says_nothing_of_ports_or_traffic() -> None:
    """web-3's node has its own instance, whose ports are up: nothing of node-1's is said."""
    e = explain(running({IN: False}), {}, pod="web-3")
    hop = hop_of(e)
    assert (hop.instance, hop.unbound, hop.traffic_verdict) == (
        "security/firewall-node-2", (), "unknown")  # fmt: skip
    assert e.warnings == []
