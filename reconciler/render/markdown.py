"""Markdown for a pull-request comment: the protection changes first, a diagram of each changed
group's bindings, the warnings, then a summary, a table of rows and the full text plan folded.

Every value from the plan (keys, nodes, origins, warnings, health details) goes through
:mod:`reconciler.render.md`: code spans and fences longer than any backtick run in them, and
plain text escaped, so nothing in a snapshot or an NB can add a heading, a link, an image or a
mention to the comment."""

from __future__ import annotations

from reconciler.core.model.plan import Plan
from reconciler.render import protection
from reconciler.render.md import code, fence, text
from reconciler.render.mermaid import markdown_diagrams
from reconciler.render.text import SYMBOL, budget_line, render_text, summary_line
from reconciler.render.transitions import held_lines, not_converged, pending_lines, rollout_lines

MARKER = "<!-- osc-gitops-plan -->"
"""Lets the PR workflow find and update its one sticky comment."""
_MAX_ROWS = 50
_HEALTH_ICON = {"healthy": "✅", "not healthy": "❌", "unknown": "❔"}


def render_markdown(plan: Plan, verbose: bool = False) -> str:
    """The comment leads with the protection changes, then a diagram of each changed group's
    bindings, then the warnings (the typo guards among them), then the rows."""
    lines = [MARKER, "### osc-gitops plan", ""]
    lines += protection.markdown_section(plan.protection)
    lines += markdown_diagrams(plan.group_bindings)
    if plan.warnings:
        lines += ["**Warnings**", ""]
        lines += [f"- ⚠️ {text(w)}" for w in plan.warnings]
        lines.append("")
    lines += ["#### Rows", ""]
    if plan.converged:
        lines.append("**No changes.** The live state matches the manifests.")
    elif plan.empty:
        lines.append(f"**{not_converged(plan)}**")
    else:
        lines.append(f"**{summary_line(plan)}**")
        lines += ["", "| | kind | name | node | from |", "|---|---|---|---|---|"]
        for change in plan.changes[:_MAX_ROWS]:
            lines.append(
                f"| `{SYMBOL[change.action]}` | {text(change.kind)} | {code(change.key)} | "
                f"{text(change.node or '')} | {text(change.origin)} |"
            )
        if len(plan.changes) > _MAX_ROWS:
            lines.append(f"| | … {len(plan.changes) - _MAX_ROWS} more | | | |")
    held, rollouts = held_lines(plan), rollout_lines(plan)
    pending = pending_lines(plan)
    if pending:
        lines += ["", "**Pending** (not written by this plan: rolled node by node)", ""]
        lines += [f"- ⏳ {text(line.removeprefix('~ '))}" for line in pending]
    if held:
        lines += ["", "**Held** until OVN reports the VNF instance healthy", ""]
        lines += [f"- ⏳ {text(line.removeprefix('~ held: '))}" for line in held]
    if rollouts:
        lines += ["", "**Rolling updates**", ""]
        lines += [f"- 🔄 {text(line)}" for line in rollouts]
    if plan.vnf_instances:
        lines += ["", "**VNF instances** (health as OVN reports it)", ""]
        lines += ["| VNF | node | health | |", "|---|---|---|---|"]
        for inst in plan.vnf_instances:
            icon = _HEALTH_ICON.get(inst.health, "")
            lines.append(
                f"| {text(inst.vnf)} | {text(inst.node)} | {icon} {text(inst.health)} | "
                f"{text(inst.detail)} |"
            )
    if plan.unbound:
        lines += ["", "**Unbound VNF ports**: the VM runs, OVN has not bound its port", ""]
        lines += ["| VNF | node | port | VirtualMachine | cause |", "|---|---|---|---|---|"]
        for port in plan.unbound:
            lines.append(
                f"| {text(port.vnf)} | {text(port.node)} | {code(port.port)} "
                f"({text(port.side)}) | {text(port.vm)} | ❗ {text(port.cause)} |"
            )
    budget = budget_line(plan)
    if budget:
        lines += ["", f"**NF ids** in this Northbound DB after this plan: {text(budget)}"]
    lines += ["", "<details><summary>Full plan</summary>", ""]
    lines += fence(render_text(plan, verbose), "diff")
    lines += ["", "</details>", ""]
    return "\n".join(lines)
