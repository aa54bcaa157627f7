"""The "Protection changes" section every plan starts with (text and Markdown).

It reads the plan's :attr:`Plan.protection`: the changes in their JSON form (of
``reconciler.core.views.protection.BindingProtection``) and what they are compared with, so a
plan made anywhere renders the same. Per binding: how many pods start and stop being steered,
then the pods themselves, one line each, or grouped by namespace with counts when a namespace
has more than :data:`LIST_PODS`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.core.model.facts import Protection
from reconciler.render.md import fence, text

LIST_PODS = 5
"""Pods of one namespace listed one per line; above that, a count and the first few names."""
_SHOWN_NAMES = 3


def _count(n: int) -> str:
    return f"{n} pod{'' if n == 1 else 's'}"


def basis_line(protection: Protection) -> str:
    """What the protection changes are compared with."""
    return protection.basis.detail


def _pods(pods: Sequence[Mapping[str, Any]]) -> str:
    """``2 shop-backend pods``: the count, with the namespace when all are in one."""
    namespaces = {pod["namespace"] for pod in pods}
    where = f"{next(iter(namespaces))} " if len(namespaces) == 1 else ""
    return f"{len(pods)} {where}pod{'' if len(pods) == 1 else 's'}"


def headline(change: Mapping[str, Any]) -> str:
    """One line per binding saying what happens to its pods, as a reviewer would say it
    ("37 payments pods lose their ids"): ``Binding db-fw (SecurityGroup db → fw): 2
    shop-backend pods lose their fw; 2 → 0 pods steered``, ``New Binding web-ips (SecurityGroup
    web → ips): 2 shop-frontend pods newly steered through ips``, ``Binding old-ids removed
    (…): …``. A new binding's counts would only repeat its start (0 → n), a removed one's its
    stop, so only a changed binding shows them."""
    vnfs = " → ".join(change.get("vnfs") or ()) or "?"
    through = f"chain {vnfs}" if len(change.get("vnfs") or ()) > 1 else vnfs
    effects: list[str] = []
    if change["start"]:
        effects.append(f"{_pods(change['start'])} newly steered through {through}")
    if change["stop"]:
        one = len(change["stop"]) == 1
        effects.append(f"{_pods(change['stop'])} {'loses its' if one else 'lose their'} {through}")
    effects += [str(route["summary"]) for route in change.get("route_changes") or ()]
    pending = change.get("pending") or ()
    if pending:
        where = _namespaces_of(pending)
        effects.append(
            f"{_count(len(pending))}{where} will be steered once their VNFs are healthy"
            if len(pending) > 1
            else f"1 pod{where} will be steered once its VNFs are healthy"
        )
    what = ", ".join(effects)
    target = f"(SecurityGroup {change['security_group']} → {vnfs})"
    if change["change"] == "added":
        return f"New Binding {change['binding']} {target}: {what}"
    if change["change"] == "removed":
        return f"Binding {change['binding']} removed {target}: {what}"
    before, after = change.get("steered_before"), change.get("steered_after")
    counts = (
        ""
        if before is None or after is None or before == after
        else f"; {before} → {_count(after)} steered"
    )
    return f"Binding {change['binding']} {target}: {what}{counts}"


def _namespaces_of(pods: Any) -> str:
    """`` of shop-frontend`` when every pod is in one namespace."""
    namespaces = {pod["namespace"] for pod in pods}
    return f" of {next(iter(namespaces))}" if len(namespaces) == 1 else ""


def binding_lines(change: Mapping[str, Any]) -> list[str]:
    """The pods of one binding's entry: ``+`` start, ``-`` stop, ``~`` a changed route (per
    route change), ``+`` with ``once healthy`` pending."""
    lines = pod_lines(change["start"], "+")
    lines += pod_lines(change["stop"], "-")
    for route in change.get("route_changes") or ():
        lines += pod_lines(route["pods"], "~")
    lines += [f"{line}, once healthy" for line in pod_lines(change.get("pending") or [], "+")]
    return lines


def pod_lines(pods: Iterable[Mapping[str, Any]], sign: str) -> list[str]:
    """``+ ns/pod on node (via label)`` per pod, or per namespace ``- ns: 37 pods (api-0, …;
    node-1: 19, node-2: 18)`` when it has more than :data:`LIST_PODS`."""
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        grouped[pod["namespace"]].append(pod)
    lines: list[str] = []
    for namespace, members in sorted(grouped.items()):
        members.sort(key=lambda p: p["pod"])
        if len(members) <= LIST_PODS:
            lines += [f"{sign} {namespace}/{p['pod']} on {p['node']}{_via(p)}" for p in members]
            continue
        names = ", ".join(p["pod"] for p in members[:_SHOWN_NAMES])
        nodes = Counter(p["node"] for p in members)
        per_node = ", ".join(f"{node}: {n}" for node, n in sorted(nodes.items()))
        labels = ", ".join(sorted({p["label"] for p in members if p["label"]}))
        via = f"; via {labels}" if labels else ""
        lines.append(f"{sign} {namespace}: {_count(len(members))} ({names}, …; {per_node}{via})")
    return lines


def _via(pod: Mapping[str, Any]) -> str:
    """`` (via app=web)``: the group label that selects the pod (none when the planned
    manifests no longer select a pod steered now)."""
    return f" (via {pod['label']})" if pod.get("label") else ""


def text_section(protection: Protection | None) -> list[str]:
    """The section for the text plan (empty when the plan carries no protection data)."""
    if protection is None:
        return []
    changes = protection.changes
    basis = basis_line(protection)
    if changes is None:
        return [f"Protection changes: unknown ({basis})", ""]
    head = "Protection changes" + (f", compared with {basis}" if basis else "") + ":"
    if not changes:
        return [f"{head} no pod starts or stops being steered, and no route changes.", ""]
    lines = [head]
    for change in changes:
        lines.append(f"  {headline(change)}")
        lines += [f"      {line}" for line in binding_lines(change)]
    return [*lines, ""]


def markdown_section(protection: Protection | None) -> list[str]:
    """The section for the pull-request comment: one bullet per binding, the pods in a
    ``diff`` block (``+`` start, ``-`` stop) that GitHub colours. Names come from the observed
    state (a snapshot a pull request may change): the bullets are escaped text and the block's
    fence is longer than any backtick run in it (``reconciler.render.md``)."""
    if protection is None:
        return []
    changes = protection.changes
    basis = basis_line(protection)
    if changes is None:
        return ["#### Protection changes", "", f"Unknown: {text(basis)}", ""]
    lines = ["#### Protection changes", ""]
    if basis:
        lines += [f"_Compared with {text(basis)}._", ""]
    if not changes:
        return [*lines, "No pod starts or stops being steered, and no route changes.", ""]
    for change in changes:
        lines.append(f"- {_icon(change)} {text(headline(change))}")
    block: list[str] = []
    for change in changes:
        block.append(f"# Binding {change['binding']}")
        block += binding_lines(change)
    return [*lines, "", *fence("\n".join(block), "diff"), ""]


def _icon(change: Mapping[str, Any]) -> str:
    """🔴 pods lose protection (stop, or a hop lost), 🟡 a changed route or pending steering,
    🟢 pods gain it."""
    routes = change.get("route_changes") or ()
    if change["stop"] or any(r.get("lost") for r in routes):
        return "🔴"
    if routes or change.get("pending"):
        return "🟡"
    return "🟢"
