"""Held steering and rolling updates, as a plan shows them (:attr:`Plan.held`,
:attr:`Plan.rollouts`: ``reconciler.core.steering.network_function.gating``,
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


def pending_lines(plan: Plan) -> list[str]:
    """``~ VirtualMachine osc-vnfs/fw-node-1: image fw:1.0 → fw:1.1, rolled node by node
    (…)`` per VM a rollout still has to restart (:attr:`Plan.pending`; held steering has lines
    of its own, :func:`held_lines`)."""
    return [f"~ {p.line}" for p in plan.pending if p.kind != "Binding"]


PENDING_HEAD = (
    "Pending (not written by this plan: the live state matches the manifests only once "
    "later passes write them; apply --wait or the run loop do):"
)


def not_converged(plan: Plan) -> str:
    """What a plan with nothing to write but something pending says instead of "No changes"."""
    return (
        f"No changes to write now, but the live state does not match the manifests yet: "
        f"{len(plan.pending)} pending (below)."
    )


def transition_lines(plan: Plan) -> list[str]:
    """The pending section (rollout VMs, then held steering) and the rollouts, headed, for the
    text plan (empty when nothing waits)."""
    lines: list[str] = []
    pending = [*pending_lines(plan), *held_lines(plan)]
    if pending:
        lines += ["", PENDING_HEAD]
        lines += [f"  {line}" for line in pending]
    rollouts = rollout_lines(plan)
    if rollouts:
        lines += ["", "Rolling updates (one node at a time, each after OVN saw it healthy):"]
        lines += [f"  {line}" for line in rollouts]
    return lines
