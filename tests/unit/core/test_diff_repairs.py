"""diff repairs what users do to our objects, whatever shape their edit leaves, and a delete
keeps where the object was and which manifest it came from."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.core.compiling.compile import compile_target
from reconciler.core.compiling.diff import diff
from reconciler.core.model.target import Target
from reconciler.engine.apply import ApplyReport, notify_security_managers
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]
MANAGER = {"url": "https://secmgr.example/events"}
DESIRED = desired(
    sg("web", "app=web"), vnf("fw", securityManager=MANAGER), binding("web-fw", "web", "fw", 10)
)
VM = ("VirtualMachine", "security/fw-node-2")


def target() -> Target:
    return compile_target(DESIRED, cluster(PODS))


def live_of(t: Target) -> dict[tuple[str, str], dict[str, Any]]:
    return {r.ident: copy.deepcopy(r.fields) for r in t}


def vm_spec(live: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    return live[VM]["spec"]["template"]["spec"]


def repaired(t: Target, live: dict[tuple[str, str], dict[str, Any]]) -> list[tuple[Any, ...]]:
    plan = diff(t, live)
    return [(c.action, c.kind, c.key, c.changed) for c in plan.changes]


def test_a_field_a_user_nulled_is_set_again() -> None:
    """``spec.template.spec.domain: null`` in the live VM (where the target has a mapping) is
    one update of that field, whose after is the target's."""
    t = target()
    live = live_of(t)
    vm_spec(live)["domain"] = None
    changes = diff(t, live).changes
    assert [(c.action, c.key, c.changed) for c in changes] == [
        ("update", "security/fw-node-2", ("['spec']['template']['spec']['domain']",))
    ]
    assert changes[0].after == t.resources[VM].fields
    assert changes[0].before is not None
    assert changes[0].before["spec"]["template"]["spec"]["domain"] is None


def test_a_mapping_a_user_turned_into_a_scalar_or_a_list_is_set_again() -> None:
    """Also the metadata of a hand-written snapshot (``--observed``), which no API server
    checked."""
    t = target()
    for value in ("oops", ["a"], 3, None):
        live = live_of(t)
        live[VM]["metadata"] = value
        assert repaired(t, live) == [
            ("update", "VirtualMachine", "security/fw-node-2", ("['metadata']",))
        ], value


def test_networks_and_interfaces_of_another_length_are_set_again() -> None:
    """A user removed a data NIC (or added one): the managed lists are compared whole."""
    t = target()
    live = live_of(t)
    del vm_spec(live)["networks"][2]
    del vm_spec(live)["domain"]["devices"]["interfaces"][2]
    assert repaired(t, live) == [
        (
            "update",
            "VirtualMachine",
            "security/fw-node-2",
            (
                "['spec']['template']['spec']['domain']['devices']['interfaces']",
                "['spec']['template']['spec']['networks']",
            ),
        )
    ]
    live = live_of(t)
    vm_spec(live)["networks"].append({"name": "extra", "pod": {}})
    assert repaired(t, live) == [
        (
            "update",
            "VirtualMachine",
            "security/fw-node-2",
            ("['spec']['template']['spec']['networks']",),
        )
    ]


def test_a_list_of_the_same_length_is_projected_item_by_item() -> None:
    """Defaults KubeVirt adds inside list items are not drift; a changed value inside one is."""
    t = target()
    live = live_of(t)
    for nic in vm_spec(live)["domain"]["devices"]["interfaces"]:
        nic["model"] = "virtio"  # KubeVirt's default
    assert repaired(t, live) == []
    vm_spec(live)["networks"][1]["multus"]["networkName"] = "elsewhere"
    assert repaired(t, live) == [
        (
            "update",
            "VirtualMachine",
            "security/fw-node-2",
            ("['spec']['template']['spec']['networks'][1]['multus']['networkName']",),
        )
    ]


def test_a_deleted_vm_keeps_its_node_and_origin() -> None:
    """The VM's node and manifest come from its labels and annotations (a Kubernetes object has
    no ``external_ids``): the plan names them, and so does the security manager's event."""
    obs = cluster(PODS)
    live = live_of(compile_target(DESIRED, obs))
    gone = desired(
        sg("web", "app=web"), vnf("fw", securityManager=MANAGER, nodeSelector={"x": "y"})
    )
    plan = diff(compile_target(gone, obs), live)
    deleted = {(c.kind, c.key): c for c in plan.changes if c.action == "delete"}
    vm = deleted[VM]
    assert (vm.origin, vm.node) == ("VnfDeployment/fw", "node-2")
    nad = deleted[("NetworkAttachmentDefinition", "security/fw-node-1-in")]
    assert (nad.origin, nad.node) == ("VnfDeployment/fw", "node-1")
    lsp = deleted[("Logical_Switch_Port", "nf_fw_node-2_in")]
    assert (lsp.origin, lsp.node) == ("VnfDeployment/fw", "node-2")

    told: list[dict[str, Any]] = []
    notify_security_managers(plan, gone, lambda url, e: told.append(e), ApplyReport(plan))
    assert sorted(told, key=lambda e: e["node"]) == [
        {
            "event": "removed",
            "vnf": "fw",
            "node": node,
            "virtualMachine": f"security/fw-{node}",
            "ovnPorts": {"in": f"nf_fw_{node}_in", "out": f"nf_fw_{node}_out"},
        }
        for node in ("node-1", "node-2")
    ]


def test_a_deleted_object_without_our_marks_has_no_node_and_no_origin() -> None:
    """An object of ours that lost its labels and annotations (edited by hand) is still
    deleted; nothing is made up about it."""
    t = compile_target(desired(sg("web", "app=web")), cluster(PODS))
    live = {VM: {"metadata": {}, "spec": {}}, ("Port_Group", "osc.x.node_1"): {"name": "x"}}
    plan = diff(t, live)
    assert sorted((c.action, c.key, c.origin, c.node) for c in plan.changes) == [
        ("delete", "osc.x.node_1", "", None),
        ("delete", "security/fw-node-2", "", None),
    ]


PG = ("Port_Group", "osc.web.node_1")


def test_a_row_from_before_the_presence_key_is_not_rewritten_for_it_alone() -> None:
    """``osc.io/presence`` is written with every write of a Port_Group but is never a reason
    for one: a live row without it (an older release wrote it) is no drift; a row that changes
    for another reason gets it."""
    t = target()
    live = live_of(t)
    assert live[PG]["external_ids"]["osc.io/presence"] == "members"
    del live[PG]["external_ids"]["osc.io/presence"]
    assert repaired(t, live) == []
    live[PG]["ports"] = []
    (change,) = diff(t, live).changes
    assert (change.action, change.key, change.changed) == (
        "update",
        "osc.web.node_1",
        ("['external_ids']['osc.io/presence']", "['ports']"),
    )
    assert change.after is not None
    assert change.after["external_ids"]["osc.io/presence"] == "members"
    assert change.after["ports"] == ["shop_web-1"]


def test_the_revision_is_no_drift_in_either_kind_and_foreign_keys_are_not_ours() -> None:
    t = target()
    live = live_of(t)
    live[PG]["external_ids"]["osc.io/revision"] = "abc"
    live[PG]["external_ids"]["k8s.ovn.org/owner"] = "someone"
    live[VM]["metadata"]["annotations"]["osc.io/revision"] = "abc"
    assert repaired(t, live) == []
    live[PG]["external_ids"]["osc.io/resource"] = "SecurityGroup/other"  # ours: drift
    assert repaired(t, live) == [
        ("update", "Port_Group", "osc.web.node_1", ("['external_ids']['osc.io/resource']",))
    ]
    (change,) = diff(t, live).changes
    assert change.before is not None
    assert "k8s.ovn.org/owner" not in change.before["external_ids"]
    assert "osc.io/revision" not in change.before["external_ids"]


def test_an_ovn_column_missing_from_the_live_row_is_drift() -> None:
    t = target()
    live = live_of(t)
    del live[PG]["ports"]
    (change,) = diff(t, live).changes
    assert change.changed == ("['ports']",)
    assert change.before is not None and change.before["ports"] is None


def test_live_state_indexes_rows_and_objects_by_kind_and_key() -> None:
    from reconciler.core.compiling.diff import live_state
    from reconciler.core.model.observed import KubeObject, OvnRow

    row = OvnRow("ACL", "osc.x.to", {"a": 1})
    obj = KubeObject("VirtualMachine", "security", "fw-node-1", {"b": 2})
    assert live_state([row], [obj]) == {
        ("ACL", "osc.x.to"): {"a": 1},
        ("VirtualMachine", "security/fw-node-1"): {"b": 2},
    }


def test_a_plan_carries_the_targets_warnings_and_the_meta_given() -> None:
    from dataclasses import replace as replaced

    from reconciler.core.model.observed import Node

    obs = cluster(PODS)
    obs = replaced(obs, nodes=(*obs.nodes, Node("node-3")))  # no switch: a warning
    t = compile_target(DESIRED, obs)
    assert t.warnings
    plan = diff(t, live_of(t), {"steering": "network-function"})
    assert plan.empty and plan.warnings == t.warnings
    assert plan.meta["steering"] == "network-function"
