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
    assert data["summary"] == {"create": 1, "update": 1, "delete": 1, "pending": 0}
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


def test_many_rows_of_one_kind_and_origin_read_as_one_line_with_counts_and_v_lists_them():
    """Issue 33 item 6: a binding's rows read as a few lines with counts; ``-v`` every row."""
    many = [("shop", f"web-{i}", f"node-{i % 3 + 1}", {"app": "web"}) for i in range(9)]
    observed = cluster(many, nodes=("node-1", "node-2", "node-3"))
    both = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, redirection="both"))  # fmt: skip
    first = diff(compile_target(both, observed), {}, {"steering": "network-function"})
    text = render(first, "text")
    acls = [c for c in first.changes if c.kind == "ACL"]
    assert len(acls) > 3
    assert (
        f"  + {len(acls)} rows (Binding/web-fw, on node-1: {len(acls) // 3}, node-2: "
        f"{len(acls) // 3}, node-3: {len(acls) // 3}): {acls[0].key}, {acls[1].key}, "
        f"{acls[2].key}, … {len(acls) - 3} more\n"
    ) in text
    assert f"  + {acls[3].key}    (Binding/web-fw" not in text
    assert "(rows of one kind and origin are counted; -v lists every row)" in text
    verbose = render(first, "text", verbose=True)
    assert all(f"  + {a.key}    (Binding/web-fw, node {a.node})" in verbose for a in acls)
    assert "-v lists every row" not in verbose
    # updates say which fields they change, and how often
    live = apply_to({}, first)
    for key in [a.key for a in acls]:
        live[("ACL", key)]["priority"] = 1
    updated = render(diff(compile_target(both, observed), live), "text")
    assert f"  ~ {len(acls)} rows (Binding/web-fw" in updated
    assert f"      changed: priority ({len(acls)})\n" in updated


def test_pending_is_not_converged_in_text_markdown_and_json():
    """Issue 33 item 2: a plan with nothing to write but something pending never reads "No
    changes": it lists what waits, and the JSON counts it."""
    import dataclasses

    from reconciler.core.model.facts import Pending

    first, _ = plans()
    empty = dataclasses.replace(first, changes=())
    assert "No changes. The live state matches the manifests." in render(empty, "text")
    bump = Pending("VirtualMachine", "osc-vnfs/fw-node-1", "node-1",
                   "image fw:1.0 → fw:1.1, rolled node by node", "waits for its turn")  # fmt: skip
    pending = dataclasses.replace(empty, pending=(bump,))
    text = render(pending, "text")
    assert "No changes. The live state" not in text
    assert "No changes to write now, but the live state does not match the manifests yet: " \
           "1 pending (below)." in text  # fmt: skip
    assert "  ~ VirtualMachine osc-vnfs/fw-node-1: image fw:1.0 → fw:1.1, rolled node by node " \
           "(waits for its turn)\n" in text  # fmt: skip
    assert text.rstrip().endswith(
        "Pending: 1 (not written by this plan; not converged until they are)."
    )
    markdown = render(pending, "markdown")
    assert "**No changes to write now, but the live state does not match" in markdown
    assert "- ⏳ VirtualMachine osc-vnfs/fw-node-1: image fw:1.0 → fw:1.1" in markdown
    data = json.loads(render(pending, "json"))
    assert data["summary"]["pending"] == 1 and data["meta"]["pending"][0]["name"] == bump.name
