"""The plan's facts are typed fields with one JSON form each: the JSON plan's ``meta`` follows
from their declaration (``reconciler.core.model.plan.fact``), in declaration order, leaving out
what says nothing, and a saved plan read back is the plan that was saved."""

from __future__ import annotations

import dataclasses
import json

from reconciler.core.model.facts import (
    Finding,
    Hold,
    InstanceHealth,
    Pending,
    Protection,
    ProtectionBasis,
    UnboundPort,
    VmRollout,
    VnfRollout,
)
from reconciler.core.model.plan import Change, Plan
from reconciler.render.json_render import plan_from_dict, plan_to_dict

CHANGE = Change("create", "Port_Group", "osc.web.node_1", "SecurityGroup/web", "node-1", None,
                {"name": "osc.web.node_1", "ports": []})  # fmt: skip
HOLD = Hold("web-fw", "node-1", ("fw-node-1",), ("osc.fw.node_1.fail_close",),
            (("ACL", "osc.web_fw.node_1.to"),), "new", ("fw",))  # fmt: skip
ROLLOUT = VnfRollout("fw", 1, 600.0, 7.0, 1, 2, (VmRollout("security/fw-node-1", "node-1", "",
                     "osc.fw.node_1", True, phase="restarting"),))  # fmt: skip
EVERY_FACT = Plan(
    (CHANGE,),
    (Finding("note", "", None, "a warning"),),
    instance="osc-gitops",
    steering="network-function",
    nb_schema="7.18.0",
    scope="interconnect, 2 zone(s)",
    zones={"node-1": "2026-11-27T10:00:00Z"},
    rollouts=(ROLLOUT,),
    held=(HOLD,),
    pending=(Pending("VirtualMachine", "osc-vnfs/fw-node-1", "node-1",
                     "image fw:1.0 → fw:1.1, rolled node by node", "waits for its turn"),),
    node="node-1",
    vnf_instances=(InstanceHealth("fw", "node-1", "unknown", "no health check"),),
    unbound=(UnboundPort("fw", "node-1", "vnfs/fw-node-1", "nf_fw_node-1_in", "in", "no iface"),),
    nf_ids={"Network_Function": {"used": 2, "max": 255, "ours": 2, "nodes": 2, "per_node": 1}},
    revision="abc123",
    protection=Protection(({"binding": "web-fw", "start": [], "stop": []},),
                          ProtectionBasis("live", "what the live OVN rows steer now")),
    group_bindings={"web": {"labels": ["app=web"], "bindings": []}},
)  # fmt: skip


def test_every_fact_survives_the_json_plan() -> None:
    data = json.loads(json.dumps(plan_to_dict(EVERY_FACT)))
    assert plan_from_dict(data) == EVERY_FACT


def test_meta_follows_the_declaration_order_and_leaves_out_what_says_nothing() -> None:
    data = plan_to_dict(EVERY_FACT)
    assert list(data["meta"]) == [
        "instance", "steering", "nb_schema", "scope", "zones", "rollout", "held", "pending",
        "node", "vnf_instances", "unbound", "nf_ids", "revision", "protection_basis",
        "group_bindings",
    ]  # fmt: skip
    assert data["protection_changes"] == [{"binding": "web-fw", "start": [], "stop": []}]
    assert data["meta"]["held"][0]["reason"] == "waiting for fw-node-1 to become healthy (new)"
    assert data["meta"]["rollout"][0]["summary"] == (
        "VnfDeployment/fw: 1 of 2 nodes updated (fw-node-1 restarting)"
    )
    bare = plan_to_dict(Plan((CHANGE,), instance="osc-gitops", nb_schema=""))
    assert bare["meta"] == {"instance": "osc-gitops", "nb_schema": ""}
    assert bare["protection_changes"] is None and bare["warnings"] == []


def test_the_text_plan_heads_with_the_plain_string_facts() -> None:
    plan = dataclasses.replace(EVERY_FACT, nb_schema="")
    assert plan.header() == [
        ("instance", "osc-gitops"), ("steering", "network-function"),
        ("scope", "interconnect, 2 zone(s)"), ("node", "node-1"), ("revision", "abc123"),
    ]  # fmt: skip


def test_warnings_are_the_findings_wording() -> None:
    assert EVERY_FACT.warnings == ("a warning",)
    assert plan_to_dict(EVERY_FACT)["warnings"] == ["a warning"]
