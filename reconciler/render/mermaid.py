"""A Mermaid diagram of a SecurityGroup's bindings, for the pull-request comment.

GitHub renders ```` ```mermaid ```` blocks, so a reviewer sees the path a group's traffic takes
(bindings in evaluation order, each with its direction, filters, failure policy, precedence and
chain of VNFs) instead of reconstructing it from ACL priorities. :func:`group_bindings` turns the
manifests into the plain data the plan carries (:attr:`Plan.group_bindings`);
:func:`diagram` draws one group. Every text in a diagram comes from validated names, labels
and numbers (no free text reaches Mermaid's syntax).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.core.model.desired import Desired, Traffic
from reconciler.core.views.protection import BindingProtection
from reconciler.render.md import code, fence


def _traffic(filters: Iterable[Traffic]) -> str:
    parts = []
    for f in filters:
        ports = ",".join(str(p) if isinstance(p, int) else f"{p.start}-{p.end}" for p in f.ports)
        parts.append(f"{f.protocol.value} {ports}".strip() if ports else f.protocol.value)
    text = "; ".join(parts)
    return "all IP" if text == "any" else text


def group_bindings(
    desired: Desired,
    groups: Iterable[str],
    changes: Sequence[BindingProtection] = (),
    before: Desired | None = None,
) -> dict[str, dict[str, Any]]:
    """Per group (of those named that ``desired`` declares): its labels, namespaces and its
    bindings in evaluation order, as plain data; with the protection ``changes``, each
    binding's hops its pods stop crossing (``removed_vnfs``) and the bindings removed
    (``removed``), which the diagram strikes through."""
    lost = {c.binding: list(c.lost) for c in changes if c.lost}
    gone = {c.binding: c for c in changes if c.change == "removed"}
    if before is not None:  # --base: hops the manifests drop, whether or not a pod runs there
        for name, old in before.bindings.items():
            new = desired.bindings.get(name)
            if new is not None:
                dropped = [v for v in old.spec.vnfs if v not in new.spec.vnfs]
                if dropped:
                    lost[name] = list(dict.fromkeys([*lost.get(name, []), *dropped]))
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(groups)):
        group = desired.security_groups.get(name)
        if group is None:
            continue
        bindings = sorted(
            (b for b in desired.bindings.values() if b.spec.securityGroup == name),
            key=lambda b: (b.spec.order, b.metadata.name),
        )
        removed = sorted(
            {
                *(c.binding for c in gone.values() if c.security_group == name),
                *(
                    b.metadata.name
                    for b in (before.bindings.values() if before is not None else ())
                    if b.spec.securityGroup == name and b.metadata.name not in desired.bindings
                ),
            }
        )
        out[name] = {
            "labels": list(group.spec.labels),
            "namespaces": list(group.spec.namespaces) if group.spec.namespaces else None,
            "bindings": [
                {
                    "name": b.metadata.name,
                    "order": b.spec.order,
                    "redirection": b.spec.redirection.value,
                    "failurePolicy": b.spec.failurePolicy.value,
                    "precedence": b.spec.precedence.value,
                    "traffic": _traffic(b.spec.traffic_filters()),
                    "vnfs": list(b.spec.vnfs),
                    "removed_vnfs": lost.get(b.metadata.name, []),
                }
                for b in bindings
            ],
            "removed": [{"name": r, "vnfs": list(_removed_vnfs(r, gone, before))} for r in removed],
        }
    return out


def _removed_vnfs(
    name: str, gone: dict[str, BindingProtection], before: Desired | None
) -> tuple[str, ...]:
    if before is not None and name in before.bindings:
        return before.bindings[name].spec.vnfs
    return gone[name].vnfs if name in gone else ()


def diagram(group: str, data: dict[str, Any]) -> list[str]:
    """Mermaid ``flowchart LR`` lines for one group: the group, then each binding in order
    with the VNFs of its chain."""
    labels = ", ".join(data["labels"])
    where = f"<br/>in {', '.join(data['namespaces'])}" if data.get("namespaces") else ""
    root = "sg"
    lines = ["flowchart LR", f'  {root}(["SecurityGroup {group}<br/>{labels}{where}"])']
    if not data["bindings"]:
        lines.append(f'  {root} -.- none["no binding: not steered"]')
    struck: list[str] = []
    for number, b in enumerate(data["bindings"]):
        edge = (
            f"order {b['order']} · {b['redirection']} · {b['traffic']} · {b['failurePolicy']}"
            f" · {b['precedence']}"
        )
        previous = root
        for index, vnf in enumerate(b["vnfs"]):
            # Ids by position, never by name: "fw" -> ips-0-scan and "fw-0-ips" -> scan once
            # made the same id from their names, and a reviewer saw one binding, not two.
            node = f"b{number}h{index}"
            title = f"Binding {b['name']}<br/>VNF {vnf}" if index == 0 else f"VNF {vnf}"
            lines.append(f'  {node}["{title}"]')
            label = f'|"{edge}"|' if index == 0 else ""
            lines.append(f"  {previous} -->{label} {node}")
            previous = node
        for index, vnf in enumerate(b.get("removed_vnfs") or ()):  # hops its pods stop crossing
            node = f"b{number}x{index}"
            lines.append(f'  {node}["<s>VNF {vnf}</s><br/>removed"]')
            lines.append(f"  {previous} -.- {node}")
            struck.append(node)
    for number, r in enumerate(data.get("removed") or ()):
        node = f"r{number}"
        chain = " → ".join(r["vnfs"]) or "?"
        lines.append(f'  {node}["<s>Binding {r["name"]}<br/>VNF {chain}</s><br/>removed"]')
        lines.append(f"  {root} -.- {node}")
        struck.append(node)
    if struck:
        lines.append("  classDef removed stroke-dasharray: 4 3,color:#999")
        lines.append(f"  class {','.join(struck)} removed")
    return lines


def markdown_diagrams(groups: Mapping[str, Any] | None) -> list[str]:
    """One ```` ```mermaid ```` block per changed group (:attr:`Plan.group_bindings`)."""
    groups = groups or {}
    if not groups:
        return []
    lines = ["#### Bindings of the changed groups", ""]
    for group, data in sorted(groups.items()):
        lines += [f"SecurityGroup {code(group)}:", ""]
        lines += [*fence("\n".join(diagram(group, data)), "mermaid"), ""]
    return lines
