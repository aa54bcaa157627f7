"""``osc-gitops status``: the last applied commit, when, and the result; with ``--all-nodes``,
one line per node of an interconnect cluster (``reconciler.engine.reporting.fleet``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from reconciler.cli import common


def configure_status(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    common.add_cache_dir_arg(parser, "as given to run/apply (default: ~/.cache/osc-gitops)")
    common.add_instance_arg(
        parser, "whose status, as given to run/apply (env OSC_INSTANCE; default osc-gitops)"
    )
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
        help="one line per node (and the traffic through each VNF instance its binder counts); "
        "exit 1 if any node failed, is silent or lags the central owner's revision, or "
        "published a running VNF VM's port that OVN has not bound",
    )  # fmt: skip
    common.add_status_namespace_arg(
        nodes, "where the agents' Leases are (default osc-gitops-agents)"
    )
    nodes.add_argument(
        "--central-namespace",
        default=env("OSC_LEASE_NAMESPACE", env("POD_NAMESPACE", "osc-gitops")), metavar="NS",
        help="where the central owner's Lease osc-gitops-central is (default osc-gitops)",
    )  # fmt: skip
    parser.add_argument(
        "--kubeconfig", default=env("KUBECONFIG"), metavar="FILE",
        help="kubeconfig file (env KUBECONFIG; default ~/.kube/config): the live rolling "
        "updates are read from the cluster's VirtualMachines, --all-nodes reads the Leases",
    )  # fmt: skip
    parser.add_argument("--context", default=None, metavar="NAME", help="kubeconfig context")
    parser.add_argument("--in-cluster", action="store_true", help="use the pod's service account")


def run_status(args: argparse.Namespace) -> int:
    if args.all_nodes:
        return run_all_nodes(args)
    from reconciler.engine.reporting import status

    st = status.read(status.status_path(common.cache_dir(args), common.status_name(args)))
    note = _read_live_rollouts(args, st)
    fill_traffic(args, st)
    failures, pending = status.failures(st), status.pending(st)
    if args.output == "json":
        data = st.to_json()
        data["rollouts_from"] = "status-file" if st.live_rollouts is None else "cluster"
        data["failures"], data["pending"] = failures, pending
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(status.render_text(st))
        if note:
            sys.stdout.write(f"({note})\n")
        if failures or pending:
            sys.stdout.write("Not converged:\n")
            sys.stdout.writelines(f"  {line}\n" for line in (*failures, *pending))
    # a halted rolling update needs a human as much as a failed pass does, and so does a VNF
    # VM whose ports OVN never bound; held steering and a rollout under way are not failures,
    # but the live state is not the manifests' yet
    if failures:
        return common.EXIT_ERROR
    return EXIT_PENDING if pending else common.EXIT_OK


EXIT_PENDING = 3
"""``status``: the last pass succeeded, but the live state is not yet what the manifests say
(steering held until a VNF instance is healthy, a rollout under way): some pods are not
protected as declared (as ``explain``'s 3)."""


def _read_live_rollouts(args: argparse.Namespace, st: object) -> str:
    """The rollouts as the cluster's VirtualMachines say them now, into ``st`` (issue 33: not
    what the last pass wrote); a note when the cluster cannot be read."""
    from reconciler.engine.reporting.status import Status

    assert isinstance(st, Status)
    reachable = (
        args.kubeconfig
        or args.in_cluster
        or "KUBERNETES_SERVICE_HOST" in os.environ
        or os.path.exists(os.path.expanduser("~/.kube/config"))
    )
    if not reachable:
        return (
            "rolling updates as the last pass saw them: pass --kubeconfig (or set KUBECONFIG) "
            "to read them live from the cluster"
        )
    from reconciler.adapters.kube.client import KubeCluster
    from reconciler.core.transitions.rollout import live_rollouts
    from reconciler.errors import OscError

    try:
        kube = KubeCluster(common.kube_settings(args), node=args.node)
        try:
            vms = kube.list_owned("VirtualMachine", args.instance)
        finally:
            kube.close()
    except OscError as exc:
        return f"rolling updates as the last pass saw them: cannot read the cluster: {exc}"
    st.live_rollouts = [r.to_json() for r in live_rollouts(vms)]
    return ""


def fill_traffic(args: argparse.Namespace, st: Any) -> None:
    """``st.traffic``: from the binder of this process's status (an agent's, ``bind``'s), else,
    where there are VNF instances, from the node binders' Leases in ``--status-namespace``
    (the central owner's status); ``st.traffic_problem`` says why they could not be read."""
    from reconciler.core.views.traffic import node_traffic, uncounted

    if st.binder:
        st.traffic = [t.to_json() for t in node_traffic(st.binder)]
        return
    if not (st.vnf_instances or st.unbound):
        return
    import datetime as dt

    from reconciler.adapters.kube.status_lease import StatusReader
    from reconciler.core.model.naming import BINDER_LEASE_PREFIX
    from reconciler.errors import OscError

    try:
        binders = StatusReader.for_settings(common.kube_settings(args)).agents(
            args.status_namespace, prefix=BINDER_LEASE_PREFIX
        )
    except OscError as exc:
        st.traffic_problem = f"cannot read the node binders' Leases: {exc}"
        return
    now = dt.datetime.now(dt.UTC)
    traffic = []
    for node, lease in sorted(binders.items()):
        age = lease.age(now)
        fresh = age is not None and (lease.duration is None or age <= lease.duration)
        record = lease.status
        if not fresh or record is None or record.get("instance", st.instance) != st.instance:
            continue
        traffic.extend(node_traffic(record, node))
    if not binders:
        st.traffic_problem = f"no node binder publishes in namespace {args.status_namespace}"
        return
    traffic += uncounted(st.vnf_instances, traffic)
    traffic.sort(key=lambda t: (t.verdict != "silent-while-pods-talked", t.node, t.instance))
    st.traffic = [t.to_json() for t in traffic]


def run_all_nodes(args: argparse.Namespace) -> int:
    """Judge every node that runs OVN from the published statuses (see ``reporting.fleet``)."""
    import datetime as dt

    from reconciler.adapters.kube.client import KubeCluster
    from reconciler.adapters.kube.errors import KubeForbidden
    from reconciler.adapters.kube.status_lease import CENTRAL_LEASE, PublishedStatus, StatusReader
    from reconciler.core.model.naming import BINDER_LEASE_PREFIX
    from reconciler.engine.reporting.fleet import Heartbeat, judge, render_text

    settings = common.kube_settings(args)
    reader = StatusReader.for_settings(settings)
    published = reader.agents(args.status_namespace)
    binders = reader.agents(args.status_namespace, prefix=BINDER_LEASE_PREFIX)
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
        {node: beat(status) for node, status in binders.items()},
    )
    if unlisted:
        verdict.notes.append(unlisted)
    if args.output == "json":
        json.dump(verdict.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(verdict))
    return common.EXIT_OK if verdict.ok else common.EXIT_ERROR


COMMAND = common.Command(
    name="status",
    help="show the last applied commit, when, and the result (--all-nodes: every node)",
    configure=configure_status,
    run=run_status,
    description=(
        "Read the status file written by run/apply in --cache-dir, or with --all-nodes the "
        "status every node agent and the central owner publish in their Leases."
    ),
    epilog=(
        "exit codes: 0 last reconcile ok and nothing pending (--all-nodes: every node ok), 1 "
        "error/refused/unreachable or no status, a rolling update halted, or a running VNF "
        "VM's port that OVN has not bound (--all-nodes: a node failed, is silent, lags or is "
        "missing, or published such a port), 3 not converged yet: steering held until a VNF "
        "instance is healthy (its pods are named: NOT protected) or a rolling update under way "
        "(read live from the cluster's VirtualMachines)\n\n"
        "examples:\n  kubectl -n osc-gitops exec deploy/osc-gitops -- osc-gitops status\n"
        "  osc-gitops status --all-nodes --kubeconfig ~/.kube/config\n"
        "  osc-gitops status --all-nodes -o json"
    ),
)
