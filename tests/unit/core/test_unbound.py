"""Unbound VNF ports (``reconciler.core.steering.port_binding``, read through the health index:
``HealthIndex.unbound``) and why they are unbound, from what the node's binder published
(``reconciler.core.views.traffic``)."""

from __future__ import annotations

import dataclasses

from reconciler.core.compiling.compile import compile_target
from reconciler.core.model.facts import UnboundPort
from reconciler.core.model.observed import KubeObject, Observed
from reconciler.core.steering import HealthIndex
from reconciler.core.transitions.health import plan_report
from reconciler.core.views.traffic import BinderReport, unbound_cause
from tests.support.builders import binding, cluster, desired, sg, vnf

IN, OUT = "nf_firewall_node-1_in", "nf_firewall_node-1_out"
VM = "security/firewall-node-1"


def observed(up: dict[str, bool], printable: str = "Running") -> Observed:
    base = cluster([("shop", "web-1", "node-1", {"app": "web"})])
    target = compile_target(
        desired(sg("web", "app=web"), vnf("firewall"), binding("b", "web", "firewall", 10)), base
    )
    vms = tuple(
        KubeObject(r.kind, *r.key.split("/", 1), body=r.fields,
                   status={"printableStatus": printable})
        for r in target.resources.values()
        if r.kind == "VirtualMachine"
    )  # fmt: skip
    return dataclasses.replace(base, kube_objects=vms, ports_up=up)


def unbound_ports(observed: Observed) -> list[UnboundPort]:
    return list(HealthIndex(observed).unbound)


def test_a_running_vm_whose_port_is_not_up_is_unbound() -> None:
    found = unbound_ports(observed({IN: False, OUT: True, "nf_firewall_node-2_in": True}))
    assert [(u.vm, u.port, u.side, u.node) for u in found] == [(VM, IN, "in", "node-1")]
    assert "iface-id=" + IN in found[0].cause


def test_nothing_is_said_without_a_verdict_or_a_running_vm() -> None:
    assert unbound_ports(observed({})) == [], "no northd has judged the ports"
    assert unbound_ports(observed({IN: False}, printable="Starting")) == []


def test_where_the_southbound_was_read_a_port_without_a_chassis_is_unbound() -> None:
    """The Southbound's Port_Binding.chassis (``--ovn-sb``) is read beside the NB's ``up``."""
    seen = observed({IN: True, OUT: True})
    chassis = dataclasses.replace(seen, ports_chassis={IN: False, OUT: True})
    (found,) = unbound_ports(chassis)
    assert (found.port, found.side) == (IN, "in")
    assert found.cause.startswith("its Southbound Port_Binding has no chassis although northd")
    # not up in the NB and no chassis in the SB: both said, the NB's cause after the SB's
    both = dataclasses.replace(observed({IN: False, OUT: True}), ports_chassis={IN: False})
    (found,) = unbound_ports(both)
    assert found.cause.startswith("its Southbound Port_Binding has no chassis; OVN has not")
    # an NB without the up column: the Southbound alone decides
    sb_only = dataclasses.replace(observed({}), ports_chassis={IN: True, OUT: False})
    assert [u.port for u in unbound_ports(sb_only)] == [OUT]
    # a chassis in the SB does not hide what the NB says (northd not caught up the other way)
    bound_sb = dataclasses.replace(observed({IN: False}), ports_chassis={IN: True})
    assert [u.port for u in unbound_ports(bound_sb)] == [IN]
    # no Southbound read (empty), or a port without a Port_Binding row: the NB alone decides
    assert unbound_ports(dataclasses.replace(seen, ports_chassis={})) == []
    assert unbound_ports(dataclasses.replace(seen, ports_chassis={"nf_other_in": False})) == []


def test_the_cause_says_what_the_binder_reports() -> None:
    no_binder = unbound_cause(IN, "node-1", VM, BinderReport("node-1"))
    assert no_binder.startswith("the CNI did not set iface-id: ovs-cni older than commit 42291151")
    assert no_binder.endswith("and no binder runs on node-1")
    stale = unbound_cause(IN, "node-1", VM, BinderReport("node-1", {"ok": True}, fresh=False))
    assert "no binder runs on node-1" in stale
    skipped = unbound_cause(IN, "node-1", VM, BinderReport("node-1", {
        "ok": True, "skipped": [{"reason": "mac-mismatch",
                                 "subject": f"VirtualMachine {VM} NIC data-in",
                                 "detail": "pod reports MAC 02:00:00:00:00:99"}],
    }, fresh=True))  # fmt: skip
    assert skipped.startswith("the binder on node-1 skipped it (mac-mismatch)")
    failing = unbound_cause(IN, "node-1", VM, BinderReport(
        "node-1", {"ok": False, "error": "Open_vSwitch DB at unix:/x: Permission denied"},
        fresh=True))  # fmt: skip
    assert "Permission denied" in failing
    unread = unbound_cause(IN, "node-1", VM, BinderReport("node-1", problem="403 Forbidden"))
    assert "unknown: 403 Forbidden" in unread


def test_an_unbound_port_names_the_full_node_of_a_shortened_label() -> None:
    long_node = ".".join(["node-1", "a" * 63, "b" * 63, "c" * 60])
    base = cluster([("shop", "web-1", long_node, {"app": "web"})], nodes=(long_node,))
    target = compile_target(
        desired(sg("web", "app=web"), vnf("firewall"), binding("b", "web", "firewall", 10)), base
    )
    vms = tuple(
        KubeObject(r.kind, *r.key.split("/", 1), body=r.fields,
                   status={"printableStatus": "Running"})
        for r in target.resources.values()
        if r.kind == "VirtualMachine"
    )  # fmt: skip
    (vm,) = vms
    port = dict(p.split("=") for p in vm.body["metadata"]["annotations"]["osc.io/ports"].split(","))
    found = unbound_ports(dataclasses.replace(base, kube_objects=vms, ports_up={port["in"]: False}))
    assert [(u.node, u.port) for u in found] == [(long_node, port["in"])]
    assert f"OVS interface on {long_node}. " in found[0].cause


def test_each_cause_names_the_port_and_its_node_whole() -> None:
    """What ``status``, ``explain`` and ``apply --wait`` print for an unbound port."""
    nb = (
        f"OVN has not bound it (its Logical_Switch_Port is not up): nothing set "
        f"external_ids:iface-id={IN} on the NIC's OVS interface on node-1. ovs-cni up to v0.39.0 "
        "never does (it reads the OVN port only from CNI_ARGS); run the node binder there "
        "(`osc-gitops bind`, or the node agent's `run --ovs-db`)"
    )
    causes = {
        "not up": ({IN: False, OUT: True}, {}),
        "no chassis": ({IN: False, OUT: True}, {IN: False}),
        "no chassis, up": ({IN: True, OUT: True}, {IN: False}),
    }
    found = {
        what: [u.cause for u in unbound_ports(
            dataclasses.replace(observed(up), ports_chassis=chassis))]
        for what, (up, chassis) in causes.items()
    }  # fmt: skip
    assert found == {
        "not up": [nb],
        "no chassis": [f"its Southbound Port_Binding has no chassis; {nb}"],
        "no chassis, up": [
            "its Southbound Port_Binding has no chassis although northd still reports the "
            "Logical_Switch_Port up (the chassis that claimed it released it, or northd lags): "
            f"nothing on node-1 holds external_ids:iface-id={IN} now; see ovn-controller and the "
            "binder there"
        ],
    }


def test_a_vm_that_does_not_run_does_not_hide_the_next_ones_ports() -> None:
    """VMs are read whole: firewall-node-1 is stopped and says nothing; firewall-node-2, after
    it, runs with an unbound port."""
    seen = observed({IN: False, "nf_firewall_node-2_in": False})
    first, second = sorted(seen.kube_objects, key=lambda o: o.name)
    stopped = dataclasses.replace(first, status={"printableStatus": "Stopped"})
    found = unbound_ports(dataclasses.replace(seen, kube_objects=(stopped, second)))
    assert [(u.vm, u.port) for u in found] == [
        ("security/firewall-node-2", "nf_firewall_node-2_in")
    ]


def test_the_plan_report_lists_the_unbound_ports_and_only_when_there_are() -> None:
    seen = observed({IN: False, OUT: True})
    target = compile_target(
        desired(sg("web", "app=web"), vnf("firewall"), binding("b", "web", "firewall", 10)), seen
    )
    assert plan_report(target, seen)["unbound"] == HealthIndex(seen).unbound
    assert [u.port for u in plan_report(target, seen)["unbound"]] == [IN]
    assert "unbound" not in plan_report(target, observed({IN: True, OUT: True}))
