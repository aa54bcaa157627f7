"""Renderers: Terraform-like text, versioned JSON, PR Markdown."""

from __future__ import annotations

import json

from reconciler.core.compiling.compile import compile_target
from reconciler.core.compiling.diff import diff
from reconciler.core.transitions.health import plan_report
from reconciler.render import render
from reconciler.render.markdown import MARKER
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to

PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]
DESIRED = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))


def plans():
    target = compile_target(DESIRED, cluster(PODS))
    first = diff(target, {}, {"steering": "network-function"})
    live = apply_to({}, first)
    live[("Port_Group", "osc.web.node_1")]["ports"] = ["shop_gone"]
    del live[("VirtualMachine", "security/fw-node-2")]
    live[("ACL", "osc.stale")] = {"external_ids": {"osc.io/resource": "Binding/old"}}
    return first, diff(target, live)


def test_text_has_symbols_groups_and_summary():
    first, mixed = plans()
    text = render(mixed, "text")
    assert "  ~ osc.web.node_1    (SecurityGroup/web, node node-1)" in text
    assert "ports: + shop_web-1  - shop_gone" in text
    assert "  + security/fw-node-2    (VnfDeployment/fw, node node-2)" in text
    assert "  - osc.stale    (Binding/old)" in text
    assert text.rstrip().endswith("Plan: 1 to create, 1 to change, 1 to delete.")
    assert (
        render(first, "text")
        .rstrip()
        .endswith(f"Plan: {len(first.changes)} to create, 0 to change, 0 to delete.")
    )


def test_no_changes_text():
    target = compile_target(DESIRED, cluster(PODS))
    empty = diff(target, apply_to({}, diff(target, {})))
    text = render(empty, "text")
    assert "No changes." in text and "Plan: 0 to create, 0 to change, 0 to delete." in text


def test_json_contract():
    _, mixed = plans()
    data = json.loads(render(mixed, "json"))
    assert data["format_version"] == "1"
    assert data["summary"] == {"create": 1, "update": 1, "delete": 1}
    update = next(c for c in data["changes"] if c["action"] == "update")
    assert update["resource"] == {
        "kind": "Port_Group",
        "name": "osc.web.node_1",
        "node": "node-1",
        "origin": "SecurityGroup/web",
    }
    assert update["before"]["ports"] == ["shop_gone"]
    assert update["after"]["ports"] == ["shop_web-1"]
    assert update["changed"] == ["['ports']"]
    create = next(c for c in data["changes"] if c["action"] == "create")
    assert create["before"] is None and create["after"]["spec"]["runStrategy"] == "Always"


def test_markdown_for_pull_requests():
    _, mixed = plans()
    md = render(mixed, "markdown")
    assert md.startswith(MARKER)
    assert "**Plan: 1 to create, 1 to change, 1 to delete.**" in md
    assert "| `~` | Port_Group | `osc.web.node_1` | node-1 | SecurityGroup/web |" in md
    assert "```diff" in md and "</details>" in md


def test_health_and_id_budget_beside_the_changes():
    """Added in format_version 1 as new ``meta`` keys: ``vnf_instances`` and ``nf_ids``."""
    observed = cluster(PODS)
    target = compile_target(DESIRED, observed)
    meta = {"steering": "network-function", **plan_report(target, observed)}
    plan = diff(target, {}, meta)
    text = render(plan, "text")
    assert text.splitlines()[0] == "steering: network-function"  # lists and maps not inline
    assert "VNF instances (health as OVN reports it):\n" in text
    assert "  fw on node-1: unknown (not in the Northbound DB yet)\n" in text
    assert (
        "NF ids in this Northbound DB after this plan: "
        "Network_Function 2/255 (ours: 2 nodes x up to 1), "
        "Network_Function_Group 2/255 (ours: 2 nodes x up to 1)\n" in text
    )
    # NB_Global belongs to no manifest: no empty parentheses
    assert "\nNB_Global\n  + options\n      options: {svc_monitor_ip=" in text
    data = json.loads(render(plan, "json"))
    assert data["format_version"] == "1"
    assert data["meta"]["vnf_instances"][0] == {
        "vnf": "fw",
        "node": "node-1",
        "health": "unknown",
        "detail": "not in the Northbound DB yet",
    }
    assert data["meta"]["nf_ids"]["Network_Function"] == {
        "used": 2, "max": 255, "ours": 2, "nodes": 2, "per_node": 1
    }  # fmt: skip
    md = render(plan, "markdown")
    assert "| fw | node-1 | ❔ unknown | not in the Northbound DB yet |" in md
    assert "**NF ids** in this Northbound DB after this plan: Network_Function 2/255" in md
