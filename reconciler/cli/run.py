"""``osc-gitops run``: the long-running reconciler (or ``--once``, the CronJob mode)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.cli.common import (
    EXIT_OK,
    Command,
    add_compile_args,
    add_connection_args,
    add_source_args,
    cache_dir,
    compile_options,
    connections,
    git_source,
)
from reconciler.errors import UserError

if TYPE_CHECKING:
    from reconciler.engine.providers import KubeProvider, LeaseProvider


def configure_run(parser: argparse.ArgumentParser) -> None:
    add_source_args(parser)
    add_connection_args(parser)
    add_compile_args(parser)
    env = os.environ.get
    loop = parser.add_argument_group("loop")
    loop.add_argument(
        "--once",
        action="store_true",
        help="reconcile once and exit (CronJob mode; exit codes as apply)",
    )
    loop.add_argument(
        "--interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="periodic reconcile, +-10%% jitter (default 60)",
    )
    loop.add_argument(
        "--debounce",
        type=float,
        default=0.2,
        metavar="SECONDS",
        help="quiet time after a pod/VM event before reconciling (default 0.2)",
    )
    loop.add_argument(
        "--git-interval",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how often to fetch --repo (default 30; SIGHUP fetches at once)",
    )
    loop.add_argument(
        "--full-resync",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="compile everything at least this often; passes in between re-plan only the "
        "nodes whose pods or rows changed (default 600; 0: every pass)",
    )
    loop.add_argument(
        "--backoff-max",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="cap of the exponential backoff after failed reconciles",
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
    ha = parser.add_argument_group("high availability and observability")
    ha.add_argument(
        "--leader-elect", action="store_true", help="only the replica holding the Lease writes"
    )
    ha.add_argument("--lease-name", default=env("OSC_LEASE_NAME", "osc-gitops"), metavar="NAME")
    ha.add_argument(
        "--lease-namespace",
        default=env("OSC_LEASE_NAMESPACE", env("POD_NAMESPACE", "osc-gitops")),
        metavar="NS",
    )
    ha.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS")
    ha.add_argument("--lease-renew", type=float, default=2.0, metavar="SECONDS")
    ha.add_argument(
        "--metrics-addr",
        default=env("OSC_METRICS_ADDR", "127.0.0.1:9090"),
        metavar="HOST:PORT",
        help="/metrics, /healthz, /readyz (port 0: any; 'off' to disable)",
    )
    ha.add_argument("--log-format", choices=("json", "text"), default="json")
    ha.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                    default="info")  # fmt: skip


def run_run(args: argparse.Namespace) -> int:
    import signal
    import threading

    from reconciler.adapters.notify import post_json
    from reconciler.engine.loop import Loop, LoopConfig
    from reconciler.engine.reporting import status
    from reconciler.engine.reporting.logs import setup_logging
    from reconciler.engine.reporting.metrics import Metrics, MetricsServer, PrometheusReporter
    from reconciler.engine.sources import GitManifestSource, LocalSource, ManifestSource

    # Installed first: a SIGTERM while connecting must also end in a clean exit 0.
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    setup_logging(args.log_format, args.log_level)
    options = compile_options(args)
    if args.repo:
        if args.path != ".":
            raise UserError(f"give either PATH ({args.path}) or --repo, not both")
        source: ManifestSource = GitManifestSource(git_source(args))
    else:
        if not Path(args.path).exists():
            raise UserError(f"cannot read manifests at {args.path}: no such file or directory")
        source = LocalSource(args.path, args.revision)
    config = LoopConfig(
        options=options,
        interval=args.interval,
        debounce=args.debounce,
        git_interval=args.git_interval,
        backoff_max=args.backoff_max,
        full_resync=args.full_resync,
        allow_empty=args.allow_empty,
        watch=not args.no_watch,
        status_file=status.status_path(cache_dir(args), args.instance),
    )
    metrics = Metrics()
    with connections(args) as (kube, ovn):
        lease = _lease(args, kube) if args.leader_elect else None
        reader: KubeProvider = kube
        if not args.once and not args.no_watch:
            # The long-running loop reads Kubernetes from an informer cache (list once, then
            # watch): no LIST per pass, and its pod events reach the loop after the cache.
            from reconciler.adapters.kube.cache import KubeCache

            cache = KubeCache(kube)
            cache.start(stopping, args.instance)
            reader = cache
        loop = Loop(
            config, source, reader, ovn, lease=lease, reporter=PrometheusReporter(metrics),
            notify=post_json, stopping=stopping,
        )  # fmt: skip
        if stopping.is_set():
            return EXIT_OK
        if args.once:
            return loop.run_once()
        server = None
        if args.metrics_addr != "off":
            try:
                server = MetricsServer(args.metrics_addr, metrics, loop.health, loop.readiness)
            except OSError as exc:
                raise UserError(str(exc)) from exc
            server.start()
            print(json.dumps({"msg": "serving", "metrics_addr": server.address}),
                  file=sys.stderr, flush=True)  # fmt: skip
        try:
            return loop.run(install_signals=True)
        finally:
            if server is not None:
                server.stop()


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


COMMAND = Command(
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
        "  osc-gitops run policies/ --once --ovn-nb tcp:10.0.0.5:6641   # CronJob"
    ),
)
