"""What a plan shows a reviewer beyond its rows: protection changes, typo guards, diagrams.

``plan`` and ``apply`` (``apply FILE`` too) both call :func:`review` on the plan they made. The
protection changes (``reconciler.core.views.protection``) say which pods start and stop being
steered when the plan is applied, compared with, in this order:

1. ``--base DIR``: a folder of manifests given explicitly (in a pull request: the base
   branch), both sides judged from manifests on the cluster observed (``source: base``);
2. the live OVN rows, whenever OVN rows are observed (a plan against the NB, ``plan --observed``
   of a snapshot, zoned or not, ``apply``, a node agent's ``--node``): what the owned rows
   steer now against what they steer once the plan's changes are made, both read by the same
   function (``source: live``; ``nothing-applied`` when this instance owns no row or object
   yet, so nothing is steered now);
3. otherwise (``--kubernetes-only`` reads no OVN) unknown: the plan says so
   (``protection_changes: null``) and how to tell.

Why the live rows and not a record of the last apply: in the flows that matter (``run`` in the
cluster, a pull request's plan of a ``snapshot``, a plan on a laptop against a cluster someone
else applied) no local record exists, while the NB always says what is steered; and the rows
are exact where a record of manifests is not (pods created, deleted or relabelled since).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

BASE_HELP = (
    "compare the protection changes with the manifests in DIR (e.g. a checkout of the pull "
    "request's base branch) instead of what the live OVN rows steer now"
)


def add_base_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", default=None, metavar="DIR", help=BASE_HELP)


def owns_nothing(observed: Any) -> bool:
    return not observed.ovn_rows and not observed.kube_objects


def protection_of(
    args: argparse.Namespace, plan: Any, desired: Any, observed: Any
) -> tuple[Any, dict[str, str], Any]:
    """The protection changes of ``plan`` (``None``: unknown), their basis
    (``Plan.protection``), and the manifests compared with (``--base`` only)."""
    from reconciler.cli.common import load_manifests
    from reconciler.core.views.protection import live_changes, protection_changes

    base = getattr(args, "base", None)
    if base:
        before = load_manifests(base)
        return (
            protection_changes(before, observed, desired),
            {"source": "base", "detail": f"the manifests in {base}"},
            before,
        )
    if getattr(args, "kubernetes_only", False):
        return None, {
            "source": "none",
            "detail": "a --kubernetes-only plan reads no OVN rows: each node agent's plan "
            "(--node) shows the pods that start and stop being steered on its node (or pass "
            "--base DIR to compare with other manifests)",
        }, None  # fmt: skip
    changes = live_changes(observed, plan.changes, desired)
    if owns_nothing(observed):
        return changes, {
            "source": "nothing-applied",
            "detail": "nothing applied (this instance owns no row or object yet)",
        }, None  # fmt: skip
    snapshot = getattr(args, "observed", None)
    when = f"when {snapshot} was taken" if snapshot else "now"
    return changes, {
        "source": "live",
        "detail": f"what the live OVN rows of this instance steer {when}",
    }, None  # fmt: skip


def review(args: argparse.Namespace, plan: Any, desired: Any, observed: Any) -> Any:
    """``plan`` annotated for a reviewer (:func:`annotate`), compared as :func:`protection_of`
    says."""
    changes, basis, before = protection_of(args, plan, desired, observed)
    # A node agent's plan sees its node's pods and Node only (a zoned snapshot's: all of them),
    # --kubernetes-only no pod: the typo guards judge nothing from a part of the cluster.
    agent = getattr(args, "node", None)
    node = bool(agent) and all(n.name == agent for n in observed.nodes)
    no_pods = bool(getattr(args, "kubernetes_only", False))
    return annotate(plan, desired, observed, changes, basis, before=before,
                    all_pods=not (node or no_pods), all_nodes=not node)  # fmt: skip


def annotate(
    plan: Any,
    desired: Any,
    observed: Any,
    changes: Any,
    basis: dict[str, str],
    *,
    before: Any | None = None,
    all_pods: bool = True,
    all_nodes: bool = True,
) -> Any:
    """``plan`` with its protection ``changes`` (``None``: unknown), typo warnings first among
    its warnings (``all_pods``/``all_nodes``: whether ``observed`` holds the whole cluster's,
    see ``typo_warnings``), and the bindings of each changed group (for the pull-request
    diagram)."""
    from reconciler.core.model.facts import Finding, Protection, ProtectionBasis
    from reconciler.core.views.protection import to_json, with_pending
    from reconciler.core.views.typos import route_warnings, typo_warnings, unused_vnfs
    from reconciler.render.mermaid import group_bindings

    if changes is not None:  # steering the plan holds until the VNFs are healthy: pending
        held = {(h.binding, h.node) for h in plan.held}
        changes = with_pending(changes, desired, observed, held, before)
    warnings = typo_warnings(
        desired, observed, changes or (), all_pods=all_pods, all_nodes=all_nodes
    )
    groups = {c.security_group for c in changes or ()}
    for change in plan.changes:
        kind, _, name = change.origin.partition("/")
        if kind == "SecurityGroup":
            groups.add(name)
        elif kind == "Binding":
            binding = desired.bindings.get(name) or (before.bindings.get(name) if before else None)
            if binding is not None:
                groups.add(binding.spec.securityGroup)
    protection = Protection(
        tuple(to_json(changes)) if changes is not None else None,
        ProtectionBasis(basis["source"], basis["detail"]),
    )
    typos = tuple(Finding("typo", "", None, text) for text in warnings)
    routes = tuple(
        Finding("route", f"Binding/{binding}", None, text)
        for binding, text in route_warnings(changes or ())
    )
    unused = tuple(Finding("unused", f"VnfDeployment/{vnf}", None, text)
                   for vnf, text in unused_vnfs(desired))  # fmt: skip
    return replace(
        plan,
        findings=(*typos, *routes, *unused, *plan.findings),
        protection=protection,
        group_bindings=group_bindings(desired, groups, changes or (), before),
    )


def merged_zones(snapshot_data: dict[str, Any]) -> Any:
    """One ``Observed`` of a zoned snapshot's pods, ports, nodes and switches (what protection
    changes read), with the owned rows of every zone."""
    from reconciler.core.model.observed import Observed
    from reconciler.core.planning.zoned import ZonedSnapshot

    snapshot = ZonedSnapshot.from_json(snapshot_data)
    zones = [zone.observed for zone in snapshot.zones.values()]
    return Observed(
        pods=tuple(p for z in zones for p in z.pods),
        nodes=snapshot.central.nodes,
        kube_objects=snapshot.central.kube_objects,
        pod_ports=tuple(p for z in zones for p in z.pod_ports),
        switches=tuple(s for z in zones for s in z.switches),
        ovn_rows=tuple(r for z in zones for r in z.ovn_rows),
    )
