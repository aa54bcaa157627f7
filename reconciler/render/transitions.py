"""Held steering and rolling updates, as a plan shows them (:attr:`Plan.held`,
:attr:`Plan.rollouts`: ``reconciler.core.transitions.gating``,
``reconciler.core.transitions.rollout``)."""

from __future__ import annotations

from reconciler.core.model.plan import Plan


def held_lines(plan: Plan) -> list[str]:
    """``~ held: Binding/web-firewall on node-2: waiting for firewall-node-2 to become
    healthy`` per held (binding, node)."""
    return [f"~ held: Binding/{h.binding} on {h.node}: {h.reason}" for h in plan.held]


def rollout_lines(plan: Plan) -> list[str]:
    """``VnfDeployment/firewall: 1 of 3 nodes updated (firewall-node-2 booting)`` per rollout."""
    return [rollout.summary for rollout in plan.rollouts]


def transition_lines(plan: Plan) -> list[str]:
    """Both sections, headed, for the text plan (empty when nothing waits)."""
    lines: list[str] = []
    held = held_lines(plan)
    if held:
        lines += ["", "Held until OVN reports the VNF instance healthy (not written yet):"]
        lines += [f"  {line}" for line in held]
    rollouts = rollout_lines(plan)
    if rollouts:
        lines += ["", "Rolling updates (one node at a time, each after OVN saw it healthy):"]
        lines += [f"  {line}" for line in rollouts]
    return lines
