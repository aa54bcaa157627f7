"""Held steering and rolling updates, as a plan shows them (``meta["held"]``, ``meta["rollout"]``:
``reconciler.core.transitions.gating``, ``reconciler.core.transitions.rollout``)."""

from __future__ import annotations

from typing import Any


def held_lines(meta: dict[str, Any]) -> list[str]:
    """``~ held: Binding/web-firewall on node-2: waiting for firewall-node-2 to become
    healthy`` per held (binding, node)."""
    return [
        f"~ held: Binding/{hold['binding']} on {hold['node']}: {hold['reason']}"
        for hold in meta.get("held") or ()
    ]


def rollout_lines(meta: dict[str, Any]) -> list[str]:
    """``VnfDeployment/firewall: 1 of 3 nodes updated (firewall-node-2 booting)`` per rollout."""
    return [str(rollout["summary"]) for rollout in meta.get("rollout") or ()]


def transition_lines(meta: dict[str, Any]) -> list[str]:
    """Both sections, headed, for the text plan (empty when nothing waits)."""
    lines: list[str] = []
    held = held_lines(meta)
    if held:
        lines += ["", "Held until OVN reports the VNF instance healthy (not written yet):"]
        lines += [f"  {line}" for line in held]
    rollouts = rollout_lines(meta)
    if rollouts:
        lines += ["", "Rolling updates (one node at a time, each after OVN saw it healthy):"]
        lines += [f"  {line}" for line in rollouts]
    return lines
