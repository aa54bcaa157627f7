"""Interconnect clusters in the pull-request workflow: ``osc-gitops snapshot --all-nodes``
assembles one zoned snapshot from what the node agents publish, and ``osc-gitops plan
--observed`` plans it zone by zone (``reconciler.core.planning.zoned`` says why and what it
costs)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_all_nodes_args(parser: argparse.ArgumentParser) -> None:
    """``snapshot --all-nodes`` and where the agents publish."""
    from reconciler.cli.common import add_status_namespace_arg

    group = parser.add_argument_group(
        "interconnect clusters",
        "--all-nodes reads no NB: each zone comes from its agent's last published view (its "
        "status Lease), the Kubernetes side from the API.",
    )
    group.add_argument(
        "--all-nodes",
        action="store_true",
        help="one zoned snapshot of every node (for plan --observed in pull requests)",
    )
    add_status_namespace_arg(
        group, "where the agents' status Leases are (default osc-gitops-agents)"
    )


def snapshot_all_nodes(args: argparse.Namespace) -> Any:
    """The zoned snapshot of the cluster (``reconciler.core.planning.zoned.ZonedSnapshot``)."""
    from reconciler.adapters.kube.client import KubeCluster
    from reconciler.adapters.kube.status_lease import StatusReader
    from reconciler.cli.common import kube_settings
    from reconciler.core.planning.slicing import kubernetes_observed
    from reconciler.core.planning.zoned import ZonedSnapshot, decode_slice

    settings = kube_settings(args)
    with KubeCluster(settings) as kube:
        nodes = kube.list_node_subnets()
        objects = [
            *kube.list_owned("NetworkAttachmentDefinition", args.instance),
            *kube.list_owned("VirtualMachine", args.instance),
        ]
        central = kubernetes_observed(nodes, objects, kube.network_policies())
    published = StatusReader.for_settings(settings).agents(args.status_namespace)
    slices: dict[str, tuple[Any, str | None, str | None]] = {}
    missing: list[str] = []
    for node in (node.name for node, subnet in nodes if subnet):
        status = published.get(node)
        if status is None or status.observed is None:
            missing.append(node)
            continue
        try:
            view = decode_slice(status.observed)
        except ValueError as exc:
            print(f"warning: node {node}: {exc}", file=sys.stderr)
            missing.append(node)
            continue
        record = status.status or {}
        slices[node] = (view, record.get("updated_at"), record.get("revision"))
    return ZonedSnapshot.assemble(central, slices, tuple(missing))


def write_snapshot_all_nodes(args: argparse.Namespace) -> None:
    snapshot = snapshot_all_nodes(args)
    text = json.dumps(snapshot.to_json(), indent=1, sort_keys=True) + "\n"
    if args.file == "-":
        sys.stdout.write(text)
        return
    Path(args.file).write_text(text, encoding="utf-8")
    missing = f", no view from {', '.join(snapshot.missing)}" if snapshot.missing else ""
    print(
        f"wrote {args.file}: {len(snapshot.zones)} zone(s){missing}, "
        f"{len(snapshot.central.nodes)} nodes, {len(snapshot.central.kube_objects)} owned objects",
        file=sys.stderr,
    )


def plan_zoned(args: argparse.Namespace, data: dict[str, Any], desired: Any, options: Any) -> Any:
    """``plan --observed`` of a zoned snapshot: every zone and the Kubernetes side, or the one
    ``--node`` / ``--kubernetes-only`` asks for."""
    from reconciler.core.planning.zoned import ZonedSnapshot, zoned_plan
    from reconciler.errors import UserError

    try:
        snapshot = ZonedSnapshot.from_json(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"{args.observed} is not a zoned osc-gitops snapshot: {exc}") from exc
    return zoned_plan(
        desired,
        snapshot,
        options,
        node=getattr(args, "node", None) or None,
        kubernetes_only=bool(getattr(args, "kubernetes_only", False)),
    )
