"""Terraform-like human plan: ``+`` create, ``~`` update, ``-`` delete, grouped by resource kind."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from itertools import groupby
from typing import Any

from reconciler.core.model.plan import Change, Plan
from reconciler.render import protection
from reconciler.render.transitions import not_converged, transition_lines

SYMBOL = {"create": "+", "update": "~", "delete": "-"}
_MAX_LIST = 8


def summary_line(plan: Plan) -> str:
    s = plan.summary()
    return f"Plan: {s['create']} to create, {s['update']} to change, {s['delete']} to delete."


def pending_line(plan: Plan) -> str | None:
    """``Pending: 8 (not written by this plan; not converged until they are).``"""
    if not plan.pending:
        return None
    return f"Pending: {len(plan.pending)} (not written by this plan; not converged until they are)."


def _short(value: Any) -> str:
    if isinstance(value, list):
        shown = ", ".join(_short(v) for v in value[:_MAX_LIST])
        more = f", … {len(value) - _MAX_LIST} more" if len(value) > _MAX_LIST else ""
        return f"[{shown}{more}]"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_short(v)}" for k, v in sorted(value.items())) + "}"
    return json.dumps(value)


def _get(data: Any, path: str) -> Any:
    """Follow a deepdiff path like ``['options']['is-nf']`` through nested dicts/lists."""
    cur = data
    for part in path.strip("[]").split("]["):
        if cur is None:
            return None
        key: Any = part.strip("'\"") if part.startswith(("'", '"')) else int(part)
        try:
            cur = cur[key]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def _update_lines(change: Change) -> list[str]:
    lines = []
    before, after = change.before or {}, change.after or {}
    for path in change.changed:
        old, new = _get(before, path), _get(after, path)
        label = path.replace("['", ".").replace("']", "").lstrip(".")
        if (
            isinstance(old, list)
            and isinstance(new, list)
            and all(isinstance(v, str) for v in [*old, *new])
        ):
            added = sorted(set(new) - set(old))
            removed = sorted(set(old) - set(new))
            parts = [f"+ {v}" for v in added[:_MAX_LIST]] + [f"- {v}" for v in removed[:_MAX_LIST]]
            extra = len(added) + len(removed) - len(parts)
            lines.append(f"{label}: " + "  ".join(parts) + (f"  (… {extra} more)" if extra else ""))
        else:
            lines.append(f"{label}: {_short(old)} -> {_short(new)}")
    return lines


def _create_lines(change: Change) -> list[str]:
    after = change.after or {}
    if not change.is_ovn:
        spec = after.get("spec", {})
        if "runStrategy" in spec:
            image = (
                spec.get("template", {})
                .get("spec", {})
                .get("volumes", [{}])[0]
                .get("containerDisk", {})
                .get("image")
            )
            return [f"runStrategy: {spec['runStrategy']}", f"image: {image}"]
        return []
    return [f"{k}: {_short(v)}" for k, v in after.items() if k not in ("external_ids", "name")]


def health_lines(plan: Plan) -> list[str]:
    """The plan's VNF instances with their health as OVN reports it (:attr:`Plan.vnf_instances`,
    see ``reconciler.core.transitions.health``)."""
    lines: list[str] = []
    for inst in plan.vnf_instances:
        detail = f" ({inst.detail})" if inst.detail else ""
        lines.append(f"{inst.vnf} on {inst.node}: {inst.health}{detail}")
    return lines


def budget_line(plan: Plan) -> str | None:
    """``Network_Function 3/255, Network_Function_Group 5/255`` (:attr:`Plan.nf_ids`)."""
    budget = plan.nf_ids or {}
    if not budget:
        return None
    return ", ".join(
        f"{table} {ids['used']}/{ids['max']}{_how(ids)}" for table, ids in budget.items()
    )


def _how(ids: Mapping[str, Any]) -> str:
    """`` (ours: 100 nodes x up to 3)`` when ours span several nodes (``core.health``)."""
    if ids.get("nodes", 0) < 2:
        return ""
    return f" (ours: {ids['nodes']} nodes x up to {ids['per_node']})"


GROUP_ROWS = 3
"""Rows of one kind, action and origin listed one by one; above that, one line with a count
(``-v``/``verbose``: every row)."""
_SHOWN_KEYS = 3


def _where(change: Change) -> str:
    node = f"node {change.node}" if change.node else ""
    return ", ".join(part for part in (change.origin, node) if part)


def _row_lines(change: Change) -> list[str]:
    where = _where(change)
    suffix = f"    ({where})" if where else ""  # NB_Global comes from no manifest
    detail = (
        _update_lines(change)
        if change.action == "update"
        else _create_lines(change)
        if change.action == "create"
        else []
    )
    return [f"  {SYMBOL[change.action]} {change.key}{suffix}", *(f"      {d}" for d in detail)]


def _group_lines(changes: list[Change]) -> list[str]:
    """One line for many rows of one kind, action and origin: ``+ 12 rows (Binding/web-ips on
    node-1: 6, node-2: 6): osc.web_ips.node_1.to, …``; for updates, the fields they change."""
    first = changes[0]
    nodes = Counter(c.node for c in changes if c.node)
    on = ", ".join(f"{n}: {k}" for n, k in sorted(nodes.items()))
    where = ", ".join(part for part in (first.origin, f"on {on}" if on else "") if part)
    keys = ", ".join(c.key for c in changes[:_SHOWN_KEYS])
    more = f", … {len(changes) - _SHOWN_KEYS} more" if len(changes) > _SHOWN_KEYS else ""
    lines = [f"  {SYMBOL[first.action]} {len(changes)} rows ({where}): {keys}{more}"]
    if first.action == "update":
        fields = Counter(
            path.replace("['", ".").replace("']", "").lstrip(".")
            for c in changes
            for path in c.changed
        )
        lines.append("      changed: " + ", ".join(f"{f} ({n})" for f, n in sorted(fields.items())))
    return lines


def change_lines(plan: Plan, verbose: bool = False) -> list[str]:
    """The rows under each kind: one by one, or (not ``verbose``) more than :data:`GROUP_ROWS`
    rows of one action and origin as one line with their count."""
    out: list[str] = []
    for kind, of_kind in groupby(plan.changes, key=lambda c: c.kind):
        out += ["", kind]
        groups: dict[tuple[str, str], list[Change]] = {}
        for change in of_kind:
            groups.setdefault((change.action, change.origin), []).append(change)
        for rows in groups.values():
            if verbose or len(rows) <= GROUP_ROWS:
                for change in rows:
                    out += _row_lines(change)
            else:
                out += _group_lines(rows)
    return out


def render_text(plan: Plan, verbose: bool = False) -> str:
    out: list[str] = []
    bits = [f"{key}: {value}" for key, value in plan.header()]
    if bits:
        out.append(" · ".join(bits))
        out.append("")
    out += protection.text_section(plan.protection)
    if plan.converged:
        out.append("No changes. The live state matches the manifests.")
    elif plan.empty:
        out.append(not_converged(plan))
    else:
        out.append("osc-gitops will perform the following actions:")
        out += change_lines(plan, verbose)
        if not verbose and any(line.startswith("  ") and " rows (" in line for line in out):
            out += ["", "(rows of one kind and origin are counted; -v lists every row)"]
    if plan.warnings:
        out.append("")
        out.append("Warnings:")
        out.extend(f"  ! {w}" for w in plan.warnings)
    out.extend(transition_lines(plan))
    health = health_lines(plan)
    if health:
        out.append("")
        out.append("VNF instances (health as OVN reports it):")
        out.extend(f"  {line}" for line in health)
    if plan.unbound:
        out.append("")
        out.append("Unbound VNF ports (the VM runs, OVN has not bound its port; steering waits):")
        out.extend(f"  ! {port.line()}" for port in plan.unbound)
    budget = budget_line(plan)
    if budget:
        out.append("")
        out.append(f"NF ids in this Northbound DB after this plan: {budget}")
    out.append("")
    out.append(summary_line(plan))
    pending = pending_line(plan)
    if pending:
        out.append(pending)
    return "\n".join(out) + "\n"
