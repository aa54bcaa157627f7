"""Renderers: Terraform-like text, versioned JSON, PR Markdown."""

from __future__ import annotations

import json

from reconciler.core.compile import compile_target
from reconciler.core.diff import diff
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
