"""The health index (``reconciler.core.steering.HealthIndex``) read from hand-made NB rows: each
VNF instance's health and why, the steering groups of a VNF on a node, and when a function a
rollout drains has left them."""

from __future__ import annotations

from typing import Any

from reconciler.core.model import naming
from reconciler.core.model.facts import HEALTHY, NOT_HEALTHY, UNKNOWN, InstanceHealth
from reconciler.core.model.observed import NbGlobal, Observed, OvnRow
from reconciler.core.steering import HealthIndex, why_not_healthy

OWNER = "osc-gitops"
OPTIONS = {"svc_monitor_ip": "169.254.254.1", "svc_monitor_ip_dst": "169.254.254.2"}


def ids(vnf: str, node: str) -> dict[str, str]:
    return {"osc.io/owner": OWNER, "osc.io/resource": f"VnfDeployment/{vnf}", "osc.io/node": node}


def nf(vnf: str, node: str, slot: Any = "") -> str:
    return naming.network_function(OWNER, vnf, node, slot)


def function(vnf: str, node: str, slot: Any = "", checked: bool = True) -> list[OvnRow]:
    name = nf(vnf, node, slot)
    rows = [OvnRow("Network_Function", name, {"name": name, "external_ids": ids(vnf, node)})]
    if checked:
        rows.append(OvnRow("Network_Function_Health_Check", name, {"network_function": name}))
    return rows


def group(name: str, vnf: str, node: str, *functions: str) -> OvnRow:
    fields = {"name": name, "network_function": list(functions), "external_ids": ids(vnf, node)}
    return OvnRow("Network_Function_Group", name, fields)


def steering(vnf: str, node: str) -> str:
    return naming.network_function_group(OWNER, vnf, node, "fail_close")


def index(*rows: OvnRow | list[OvnRow], active: dict[str, str | None] | None = None) -> Any:
    flat: list[OvnRow] = []
    for row in rows:
        flat += row if isinstance(row, list) else [row]
    observed = Observed(ovn_rows=tuple(flat), nf_active=active or {},
                        nb_global=NbGlobal(OPTIONS, {}))  # fmt: skip
    return HealthIndex(observed)


def test_each_instance_s_health_and_why_whole() -> None:
    fw1, fw2, ids1 = steering("fw", "node-1"), steering("fw", "node-2"), steering("ids", "node-1")
    health = index(
        function("fw", "node-1"),
        group(fw1, "fw", "node-1", nf("fw", "node-1")),
        function("fw", "node-2"),
        group(fw2, "fw", "node-2", nf("fw", "node-2")),
        function("ids", "node-1", checked=False),
        group(ids1, "ids", "node-1", nf("ids", "node-1")),
        # checked, but only its probe group holds it: no binding steers through it
        function("av", "node-1"),
        group(naming.probe_group(OWNER, "av", "node-1"), "av", "node-1", nf("av", "node-1")),
        # checked, and no group at all
        function("av", "node-2"),
        active={fw1: nf("fw", "node-1"), fw2: None},
    )
    assert health.instances([("fw", "node-3")]) == {
        ("av", "node-1"): InstanceHealth("av", "node-1", UNKNOWN, "no binding steers through it"),
        ("av", "node-2"): InstanceHealth("av", "node-2", UNKNOWN, "no binding steers through it"),
        ("fw", "node-1"): InstanceHealth("fw", "node-1", HEALTHY),
        ("fw", "node-2"): InstanceHealth(
            "fw", "node-2", NOT_HEALTHY, why_not_healthy(health.observed, False)
        ),
        ("fw", "node-3"): InstanceHealth("fw", "node-3", UNKNOWN, "not in the Northbound DB yet"),
        ("ids", "node-1"): InstanceHealth("ids", "node-1", UNKNOWN, "no health check"),
    }  # fmt: skip


def test_the_steering_groups_of_a_vnf_on_a_node_are_its_own_and_no_probe_group() -> None:
    a, b = nf("fw", "node-1"), nf("fw", "node-1", "b")
    close, open_ = (
        steering("fw", "node-1"),
        naming.network_function_group(OWNER, "fw", "node-1", "fail_open"),
    )
    health = index(
        group(close, "fw", "node-1", a, b), group(open_, "fw", "node-1", a),
        group(naming.probe_group(OWNER, "fw", "node-1", "b"), "fw", "node-1", b),
        group(steering("fw", "node-2"), "fw", "node-2", nf("fw", "node-2")),
        group(steering("ids", "node-1"), "ids", "node-1", nf("ids", "node-1")),
    )  # fmt: skip
    assert health.steering_groups("fw", "node-1") == [(close, (a, b)), (open_, (a,))]
    assert health.steering_groups("fw", "node-9") == []


def test_a_function_is_drained_once_no_steering_group_holds_it_nor_names_it_active() -> None:
    a, b = nf("fw", "node-1"), nf("fw", "node-1", "b")
    close = steering("fw", "node-1")
    probe = naming.probe_group(OWNER, "fw", "node-1", "b")
    elsewhere = steering("fw", "node-2")

    def drained(members: tuple[str, ...], active: str | None) -> bool:
        health = index(
            group(close, "fw", "node-1", *members), group(probe, "fw", "node-1", b),
            group(elsewhere, "fw", "node-2", b),
            active={close: active, probe: b, elsewhere: b},
        )  # fmt: skip
        return bool(health.drained(b, "fw", "node-1"))

    assert drained((a,), a), "out of its group, and northd moved the traffic"
    assert not drained((a, b), a), "still a member, even while the other one is active"
    assert not drained((a,), b), "out of the group, but northd has not moved its traffic yet"
    assert not drained((a, b), b)


def test_why_ovn_does_not_count_a_function_healthy_whole() -> None:
    probe = (
        "probe failing: OVN's probe gets no answer, or northd has not judged it yet{}; next: "
        "check that the guest forwards between its two data NICs, that svc_monitor_ip is "
        "reachable from the node, and that the VM's ports are bound"
    )
    observed = Observed(nb_global=NbGlobal(OPTIONS, {}))
    assert why_not_healthy(observed, None) == probe.format("")
    assert why_not_healthy(observed, True) == probe.format(
        "; its bindings' failure policy acts (fail-close drops, fail-open bypasses the VNF)"
    )
    assert why_not_healthy(observed, False) == probe.format(
        "; no traffic is steered to it yet (its steering is held: the pods' traffic flows "
        "unsteered)"
    )
    assert why_not_healthy(Observed(), True) == (
        "NB_Global options:svc_monitor_ip and svc_monitor_ip_dst not set: OVN never probes, so "
        "it never counts the function healthy; next: set them (--svc-monitor-ip, "
        "--svc-monitor-ip-dst)"
    )
    one = Observed(nb_global=NbGlobal({"svc_monitor_ip": "169.254.254.1"}, {}))
    assert why_not_healthy(one).startswith("NB_Global options:svc_monitor_ip_dst not set: ")


def test_only_rows_of_a_vnfdeployment_on_a_node_are_a_vnf_instance_s() -> None:
    from reconciler.core.steering.network_function.health import vnf_node

    assert vnf_node({"external_ids": ids("fw", "node-1")}) == ("fw", "node-1")
    binding = {"external_ids": {"osc.io/resource": "Binding/web-fw", "osc.io/node": "node-1"}}
    assert vnf_node(binding) is None, "a chain's group is a Binding's"
    assert vnf_node({"external_ids": {"osc.io/resource": "VnfDeployment/fw"}}) is None
    assert (
        vnf_node({"external_ids": {"osc.io/resource": "VnfDeployment/", "osc.io/node": "n"}})
        is None
    )
    assert vnf_node({"external_ids": None}) is None and vnf_node({}) is None


def test_a_function_row_without_external_ids_is_no_function_of_ours() -> None:
    name = nf("fw", "node-1")
    health = index(OvnRow("Network_Function", name, {"name": name}), function("fw", "node-2"))
    assert list(health.members) == [nf("fw", "node-2")]


def test_an_acl_steering_to_a_chain_puts_every_hop_of_it_in_service() -> None:
    chain = "osc.chain2_exit.ngfw.ids.node_1.fail_close"
    chain_ids = {"osc.io/owner": OWNER, "osc.io/resource": "Binding/pci", "osc.io/node": "node-1",
                 "osc.io/chain": "ngfw,ids"}  # fmt: skip
    fw = steering("fw", "node-1")
    rows = (
        OvnRow("Network_Function_Group", chain, {"name": chain, "external_ids": chain_ids,
                                                 "network_function": ["osc.chain2_exit.x"]}),
        group(fw, "fw", "node-1", nf("fw", "node-1")), *function("fw", "node-1"),
        OvnRow("ACL", "a", {"network_function_group": chain}),
        OvnRow("ACL", "b", {"network_function_group": None}),
        OvnRow("Port_Group", "pg", {"network_function_group": fw}),
    )  # fmt: skip
    assert index(*rows).in_service == {("ngfw", "node-1"), ("ids", "node-1")}
    unsteered = tuple(r for r in rows if r.key != "a")
    assert index(*unsteered).in_service == frozenset()
