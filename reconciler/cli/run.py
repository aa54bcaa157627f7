"""``osc-gitops run``: the long-running reconciler (or ``--once``, the CronJob mode)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.cli import common
from reconciler.errors import OscError, UserError

if TYPE_CHECKING:
    import threading

    from reconciler.adapters.kube.client import KubeCluster
    from reconciler.core.planning.slicing import Scope
    from reconciler.engine.binder import Binder
    from reconciler.engine.loop import Loop, LoopConfig
    from reconciler.engine.providers import KubeProvider, LeaseProvider, StatusPublisher
    from reconciler.engine.reporting.metrics import Metrics
    from reconciler.engine.sources import ManifestSource

CACHED_KINDS_BY_SCOPE: dict[str, tuple[str, ...]] = {
    # What each role's RBAC lets it watch (deploy/overlays/interconnect): a kind it may only
    # list is read from the live API once per pass instead.
    "node": ("Pod", "VirtualMachine"),
    "kubernetes-only": ("VirtualMachine",),
}


def configure_run(parser: argparse.ArgumentParser) -> None:
    common.add_reconcile_args(parser)
    common.add_ovs_args(parser, required=False)
    common.add_notify_args(parser)
    common.add_status_namespace_arg(
        parser,
        "with --node: where the agent publishes its status Lease osc-gitops-agent-<node> "
        "(default osc-gitops-agents; --kubernetes-only publishes osc-gitops-central in "
        "--lease-namespace)",
    )
    _add_loop_args(parser.add_argument_group("loop"))
    _add_ha_args(parser.add_argument_group("high availability and observability"))


def _add_loop_args(loop: argparse._ArgumentGroup) -> None:
    loop.add_argument(
        "--once",
        action="store_true",
        help="reconcile once and exit (CronJob mode; exit codes as apply)",
    )
    common.add_number(loop, "--interval", 60.0, "periodic reconcile, +-10%% jitter")
    common.add_number(loop, "--debounce", 0.2, "quiet time after a pod/VM event before reconciling")
    common.add_number(
        loop, "--git-interval", 30.0, "how often to fetch --repo", note="SIGHUP fetches at once"
    )
    common.add_number(
        loop, "--full-resync", 600.0, note="0: every pass",
        help="compile everything at least this often; passes in between re-plan only the "
        "nodes whose pods or rows changed",
    )  # fmt: skip
    common.add_number(
        loop, "--backoff-max", 300.0, "cap of the exponential backoff after failed reconciles"
    )
    loop.add_argument(
        "--no-watch",
        action="store_true",
        help="do not watch pods and VMs (interval and git changes only)",
    )
    loop.add_argument(
        "--allow-empty",
        action="store_true",
        help="allow an empty manifest set to delete everything this instance owns",
    )
    loop.add_argument("--revision", default=None, help=argparse.SUPPRESS)


def _add_ha_args(ha: argparse._ArgumentGroup) -> None:
    env = os.environ.get
    ha.add_argument(
        "--leader-elect", action="store_true", help="only the replica holding the Lease writes"
    )
    ha.add_argument(
        "--lease-name", default=env("OSC_LEASE_NAME", "osc-gitops"), metavar="NAME",
        help="the coordination.k8s.io Lease of --leader-elect (env OSC_LEASE_NAME; default "
        "osc-gitops)",
    )  # fmt: skip
    ha.add_argument(
        "--lease-namespace",
        default=env("OSC_LEASE_NAMESPACE", env("POD_NAMESPACE", "osc-gitops")), metavar="NS",
        help="namespace of that Lease (env OSC_LEASE_NAMESPACE, else the pod's POD_NAMESPACE; "
        "default osc-gitops)",
    )  # fmt: skip
    common.add_number(
        ha, "--lease-duration", 15.0, "how long a leader's Lease stays valid without renewal: "
        "the longest a standby waits after the leader dies",
    )  # fmt: skip
    common.add_number(ha, "--lease-renew", 2.0, "how often the leader renews its Lease")
    common.add_service_args(ha)


def run_run(args: argparse.Namespace) -> int:
    from reconciler.engine.loop import Loop
    from reconciler.engine.reporting.metrics import Metrics, PrometheusReporter

    stopping = common.start_service(args)  # first: a SIGTERM while connecting exits 0 too
    scope = common.scope_of(args)
    source = _source(args)
    config = _loop_config(args, scope)
    metrics = Metrics({"node": args.node} if args.node else None)
    publisher = _publisher(args, scope)
    binder = _binder(args, metrics)
    with contextlib.ExitStack() as connected:
        try:
            kube, ovn = connected.enter_context(common.connections(args, scope=scope))
        except OscError as exc:
            if publisher is not None:
                # The agent's NB (or the API) is down at start: say so where status
                # --all-nodes looks before exiting (the kubelet restarts us).
                _publish_failure(publisher, args, exc)
            raise
        lease = _lease(args, kube) if args.leader_elect else None
        reporter = PrometheusReporter(metrics)
        outbox = common.outbox_for(args, reporter)
        connected.callback(outbox.close)
        loop = Loop(
            config, source, _reader(args, kube, scope, stopping), ovn, lease=lease,
            reporter=reporter, outbox=outbox, publisher=publisher, stopping=stopping,
        )  # fmt: skip
        if binder is not None:
            binder.sinks.append(loop.status_book.binder)
        if stopping.is_set():
            return common.EXIT_OK
        if args.once:
            code = loop.run_once()
            return max(code, binder.run_once()) if binder is not None else code
        return _serve(args, loop, metrics, binder, stopping)


def _source(args: argparse.Namespace) -> ManifestSource:
    """The manifests: a git repository (``--repo``) or a folder."""
    from reconciler.engine.sources import GitManifestSource, LocalSource

    if args.repo:
        if args.path != ".":
            raise UserError(f"give either PATH ({args.path}) or --repo, not both")
        return GitManifestSource(common.git_source(args))
    if not Path(args.path).exists():
        raise UserError(f"cannot read manifests at {args.path}: no such file or directory")
    from reconciler.cli.saved import refuse_as_manifests

    refuse_as_manifests(args.path)
    return LocalSource(args.path, args.revision)


def _loop_config(args: argparse.Namespace, scope: Scope) -> LoopConfig:
    from reconciler.engine.loop import LoopConfig
    from reconciler.engine.reporting import status

    return LoopConfig(
        options=common.compile_options(args),
        interval=args.interval,
        debounce=args.debounce,
        git_interval=args.git_interval,
        backoff_max=args.backoff_max,
        full_resync=args.full_resync,
        allow_empty=args.allow_empty,
        watch=not args.no_watch,
        status_file=status.status_path(common.cache_dir(args), common.status_name(args)),
        scope=scope,
        told_file=common.told_path(args, common.status_name(args)) if args.once else None,
    )


def _reader(
    args: argparse.Namespace, kube: KubeCluster, scope: Scope, stopping: threading.Event
) -> KubeProvider:
    """Where the loop reads Kubernetes: the long-running loop from an informer cache (list
    once, then watch: no LIST per pass, and its pod events reach the loop after the cache),
    ``--once`` and ``--no-watch`` from the API."""
    if args.once or args.no_watch:
        return kube
    from reconciler.adapters.kube.cache import CACHED_KINDS, KubeCache

    cache = KubeCache(kube)
    cache.start(stopping, args.instance, CACHED_KINDS_BY_SCOPE.get(scope.name, CACHED_KINDS))
    return cache


def _binder(args: argparse.Namespace, metrics: Metrics) -> Binder | None:
    """The node binder a node agent runs beside its loop (``--node`` with ``--ovs-db``)."""
    if not args.ovs_db:
        return None
    if not args.node:
        raise UserError(
            f"--ovs-db {args.ovs_db}: the binder binds one node's VNF NICs: give --node too "
            "(a node agent), or run `osc-gitops bind --node NODE` beside a central run"
        )
    return common.make_binder(args, args.node, metrics)


def _serve(
    args: argparse.Namespace,
    loop: Loop,
    metrics: Metrics,
    binder: Binder | None,
    stopping: threading.Event,
) -> int:
    """Run the loop, with ``/metrics``, ``/healthz`` and ``/readyz`` served beside it, and the
    node binder (if any) in a thread of its own, stopped with the loop."""
    import threading

    binder_thread = None
    if binder is not None:
        binder_thread = threading.Thread(
            target=binder.run, args=(stopping,), daemon=True, name="binder"
        )
        binder_thread.start()
    server = common.serve_metrics(args, metrics, loop.health, loop.readiness, loop.supervised)
    try:
        return loop.run(install_signals=True)
    finally:
        stopping.set()
        if binder_thread is not None:
            binder_thread.join(timeout=10)
        if server is not None:
            server.stop()


def _identity() -> str:
    """This replica's name in its Leases: the pod's name in a cluster, else host and pid."""
    from reconciler.adapters.kube.lease import default_identity

    return os.environ.get("POD_NAME") or default_identity()


def _publisher(args: argparse.Namespace, scope: Scope) -> StatusPublisher | None:
    """The status Lease a node agent or the central owner publishes into (none otherwise)."""
    from reconciler.adapters.kube.status_lease import CENTRAL_LEASE, StatusLease, agent_lease_name

    # A heartbeat older than three periodic passes means the publisher stopped.
    duration = max(30.0, 3 * args.interval)
    if args.node:
        return StatusLease.for_settings(
            common.kube_settings(args), args.status_namespace, agent_lease_name(args.node),
            identity=_identity(), duration=duration, owner_node=args.node,
        )  # fmt: skip
    if scope.name == "kubernetes-only":
        return StatusLease.for_settings(
            common.kube_settings(args), args.lease_namespace, CENTRAL_LEASE,
            identity=_identity(), duration=duration,
        )  # fmt: skip
    return None


def _publish_failure(publisher: StatusPublisher, args: argparse.Namespace, exc: OscError) -> None:
    from reconciler.engine.reporting.fleet import status_record
    from reconciler.engine.reporting.status import Status

    record = status_record(
        Status(instance=args.instance, result="error", message=str(exc)),
        role="agent" if args.node else "central",
        node=args.node,
        rows={},
    )
    try:
        publisher.publish(record)
    except OscError as failed:
        print(f"warning: cannot publish the status to {publisher.where}: {failed}",
              file=sys.stderr)  # fmt: skip


def _lease(args: argparse.Namespace, kube: Any) -> LeaseProvider:
    from reconciler.adapters.kube.lease import LeaseLock, LeaseSettings, api_client

    return LeaseLock(
        api_client(kube.settings),
        LeaseSettings(
            name=args.lease_name,
            namespace=args.lease_namespace,
            lease_duration=args.lease_duration,
            renew_interval=args.lease_renew,
        ),
    )


COMMAND = common.Command(
    name="run",
    help="reconcile continuously: interval, pod/VM events, git changes (or --once)",
    configure=configure_run,
    run=run_run,
    description=(
        "The long-running reconciler: reacts to pod and VirtualMachine events within "
        "~--debounce seconds, fetches --repo every --git-interval, keeps the last good "
        "commit when git is unreachable or a commit is invalid, serves /metrics, /healthz "
        "and /readyz, and with --leader-elect writes only while holding the Lease."
    ),
    epilog=(
        "exit codes: 0 after SIGTERM (clean shutdown); --once: 0 ok, 1 error\n\n"
        "examples:\n"
        "  osc-gitops run --repo https://github.com/acme/policies --ref main --path prod \\\n"
        "      --in-cluster --ovn-nb ssl:ovnkube-db:6641 --leader-elect\n"
        "  osc-gitops run policies/ --once --ovn-nb tcp:10.0.0.5:6641   # CronJob\n"
        "  osc-gitops run --repo URL --in-cluster --kubernetes-only --leader-elect\n"
        '  osc-gitops run --repo URL --in-cluster --node "$OSC_NODE_NAME" \\\n'
        "      --ovn-nb unix:/var/run/ovn/ovnnb_db.sock          # interconnect: one per node\n"
        '  osc-gitops run --repo URL --in-cluster --node "$OSC_NODE_NAME" \\\n'
        "      --ovn-nb unix:/var/run/ovn/ovnnb_db.sock --ovs-db unix:/var/run/openvswitch/db.sock"
        "   # and bind the node's VNF NICs (ovs-cni <= v0.39.0)"
    ),
)
