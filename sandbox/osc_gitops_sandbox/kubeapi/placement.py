"""Where the scheduler would put a VMI's pod, for the emulator's KubeVirt and the data path's
virt-handler: the node a required node affinity on ``metadata.name`` names (how a DaemonSet, and
the reconciler, pin a pod to one node), else a ``kubernetes.io/hostname`` nodeSelector (the
reconciler's older VMs), else none. No scheduler runs here: other terms are not evaluated."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["pinned_node"]


def pinned_node(spec: Mapping[str, Any]) -> str | None:
    """The one node ``spec`` (a VMI's or pod's spec) is pinned to, or ``None``."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or ():
        for field in term.get("matchFields") or ():
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and values:
                return str(values[0])
    node = (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")
    return str(node) if node else None
