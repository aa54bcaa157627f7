"""``osc-gitops status``: the last applied commit, when, and the result; with ``--all-nodes``,
one line per node of an interconnect cluster (``reconciler.engine.reporting.fleet``)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, Command, cache_dir, status_name


def configure_status(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--cache-dir", default=env("OSC_CACHE_DIR"), metavar="DIR",
        help="as given to run/apply (default: ~/.cache/osc-gitops)",
    )  # fmt: skip
    parser.add_argument(
        "--instance", default=env("OSC_INSTANCE", "osc-gitops"), metavar="NAME",
        help="whose status, as given to run/apply (env OSC_INSTANCE; default osc-gitops)",
    )  # fmt: skip
    parser.add_argument(
        "--node", default=None, metavar="NAME",
        help="the status file of the node agent of NAME (run/apply --node) in --cache-dir",
    )  # fmt: skip
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text",
        help="text (default) or json (on stdout, also when there is no status)",
    )  # fmt: skip
    nodes = parser.add_argument_group(
        "interconnect clusters",
        "--all-nodes reads what every node agent and the central owner publish in their status "
        "Leases, instead of a status file.",
    )
    nodes.add_argument(
        "--all-nodes", action="store_true",
        help="one line per node; exit 1 if any node failed, is silent or lags the central "
        "owner's revision",
    )  # fmt: skip
    nodes.add_argument(
        "--status-namespace", default=env("OSC_STATUS_NAMESPACE", "osc-gitops-agents"),
        metavar="NS", help="where the agents' Leases are (default osc-gitops-agents)",
    )  # fmt: skip
    nodes.add_argument(
        "--central-namespace",
        default=env("OSC_LEASE_NAMESPACE", env("POD_NAMESPACE", "osc-gitops")), metavar="NS",
        help="where the central owner's Lease osc-gitops-central is (default osc-gitops)",
    )  # fmt: skip
    nodes.add_argument(
        "--kubeconfig", default=env("KUBECONFIG"), metavar="FILE",
        help="kubeconfig file (env KUBECONFIG; default ~/.kube/config)",
    )  # fmt: skip
    nodes.add_argument("--context", default=None, metavar="NAME", help="kubeconfig context")
    nodes.add_argument("--in-cluster", action="store_true", help="use the pod's service account")


def run_status(args: argparse.Namespace) -> int:
    if args.all_nodes:
        return run_all_nodes(args)
    from reconciler.engine.reporting import status

    st = status.read(status.status_path(cache_dir(args), status_name(args)))
    if args.output == "json":
        json.dump(st.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(status.render_text(st))
    # a halted rolling update needs a human as much as a failed pass does
    ok = st.result in ("applied", "unchanged") and not status.halted(st)
    return EXIT_OK if ok else EXIT_ERROR


def run_all_nodes(args: argparse.Namespace) -> int:
    """Judge every node that runs OVN from the published statuses (see ``reporting.fleet``)."""
    import datetime as dt

    from reconciler.adapters.kube.client import KubeCluster
    from reconciler.adapters.kube.errors import KubeForbidden
    from reconciler.adapters.kube.status_lease import CENTRAL_LEASE, PublishedStatus, StatusReader
    from reconciler.cli.common import kube_settings
    from reconciler.engine.reporting.fleet import Heartbeat, judge, render_text

    settings = kube_settings(args)
    reader = StatusReader.for_settings(settings)
    published = reader.agents(args.status_namespace)
    central = reader.one(args.central_namespace, CENTRAL_LEASE)
    kube = KubeCluster(settings)
    try:
        # The nodes that run OVN (they carry a pod subnet): each should have an agent.
        nodes = [node.name for node, subnet in kube.list_node_subnets() if subnet]
        unlisted = ""
    except KubeForbidden:
        nodes = sorted(published)
        unlisted = "cannot list nodes (RBAC): judged the nodes that published a status only"
    finally:
        kube.close()

    def beat(status: PublishedStatus) -> Heartbeat:
        return Heartbeat(status.status, status.renewed_at, status.duration, status.problem)

    verdict = judge(
        nodes,
        {node: beat(status) for node, status in published.items()},
        beat(central) if central is not None else None,
        dt.datetime.now(dt.UTC),
    )
    if unlisted:
        verdict.notes.append(unlisted)
    if args.output == "json":
        json.dump(verdict.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(verdict))
    return EXIT_OK if verdict.ok else EXIT_ERROR


COMMAND = Command(
    name="status",
    help="show the last applied commit, when, and the result (--all-nodes: every node)",
    configure=configure_status,
    run=run_status,
    description=(
        "Read the status file written by run/apply in --cache-dir, or with --all-nodes the "
        "status every node agent and the central owner publish in their Leases."
    ),
    epilog=(
        "exit codes: 0 last reconcile ok (--all-nodes: every node ok), 1 error/refused/"
        "unreachable or no status, or a rolling update halted (--all-nodes: a node failed, is "
        "silent, lags or is missing)\n\n"
        "examples:\n  kubectl -n osc-gitops exec deploy/osc-gitops -- osc-gitops status\n"
        "  osc-gitops status --all-nodes --kubeconfig ~/.kube/config\n"
        "  osc-gitops status --all-nodes -o json"
    ),
)
