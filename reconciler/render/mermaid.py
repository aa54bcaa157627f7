"""A Mermaid diagram of a SecurityGroup's bindings, for the pull-request comment.

GitHub renders ```` ```mermaid ```` blocks, so a reviewer sees the path a group's traffic takes
(bindings in evaluation order, each with its direction, filters, failure policy, precedence and
chain of VNFs) instead of reconstructing it from ACL priorities. :func:`group_bindings` turns the
manifests into the plain data the plan carries (:attr:`Plan.group_bindings`);
:func:`diagram` draws one group. Every text in a diagram comes from validated names, labels
and numbers (no free text reaches Mermaid's syntax).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.core.model.desired import Desired, Traffic
from reconciler.render.md import code, fence


def _traffic(filters: Iterable[Traffic]) -> str:
    parts = []
    for f in filters:
        ports = ",".join(str(p) if isinstance(p, int) else f"{p.start}-{p.end}" for p in f.ports)
        parts.append(f"{f.protocol.value} {ports}".strip() if ports else f.protocol.value)
    text = "; ".join(parts)
    return "all IP" if text == "any" else text


def group_bindings(desired: Desired, groups: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per group (of those named that ``desired`` declares): its labels, namespaces and its
    bindings in evaluation order, as plain data."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(groups)):
        group = desired.security_groups.get(name)
        if group is None:
            continue
        bindings = sorted(
            (b for b in desired.bindings.values() if b.spec.securityGroup == name),
            key=lambda b: (b.spec.order, b.metadata.name),
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
                }
                for b in bindings
            ],
        }
    return out


def diagram(group: str, data: dict[str, Any]) -> list[str]:
    """Mermaid ``flowchart LR`` lines for one group: the group, then each binding in order
    with the VNFs of its chain."""
    labels = ", ".join(data["labels"])
    where = f"<br/>in {', '.join(data['namespaces'])}" if data.get("namespaces") else ""
    root = "sg"
    lines = ["flowchart LR", f'  {root}(["SecurityGroup {group}<br/>{labels}{where}"])']
    if not data["bindings"]:
        lines.append(f'  {root} -.- none["no binding: not steered"]')
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
