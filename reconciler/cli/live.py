"""Subcommands that talk to the live world: ``plan``, ``apply``, ``snapshot``, ``demo``.

Kept apart from ``cli`` (manifest-only commands) so that ``osc-gitops validate`` never imports
the Kubernetes client or ovsdbapp. Connection flags follow kubectl (``--kubeconfig``,
``--context``) and fall back to environment variables, so a CronJob or CI job sets them once:

| flag | environment |
|---|---|
| ``--ovn-nb`` | ``OSC_OVN_NB`` |
| ``--ovn-private-key`` | ``OSC_OVN_PRIVATE_KEY`` |
| ``--ovn-certificate`` | ``OSC_OVN_CERTIFICATE`` |
| ``--ovn-ca-cert`` | ``OSC_OVN_CA_CERT`` |
| ``--kubeconfig`` | ``KUBECONFIG`` (in a pod without either: the service account) |
| ``--instance`` | ``OSC_INSTANCE`` |

Exit codes, as Terraform's ``-detailed-exitcode``: ``plan`` 0 = no changes, 2 = changes, 1 = error;
``apply`` 0 = applied and converged (or nothing to do), 1 = error or not converged.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reconciler.errors import UserError

EXIT_OK, EXIT_ERROR, EXIT_CHANGES = 0, 1, 2


def add_source_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", nargs="?", default=".", metavar="PATH", help="manifest folder or file (default .)"
    )
    env = os.environ.get
    git = parser.add_argument_group(
        "git source (instead of PATH)",
        "Read the manifests of one exact commit. Credentials: an https token from "
        "$OSC_GIT_TOKEN or --git-token-file (sent as an HTTP header, never put in the URL), "
        "or an ssh key with --git-ssh-key.",
    )
    git.add_argument(
        "--repo",
        default=env("OSC_GIT_REPO"),
        metavar="URL|PATH",
        help="git remote (https://, ssh://, git@host:path, or a local path)",
    )
    git.add_argument(
        "--ref",
        default=env("OSC_GIT_REF", "main"),
        metavar="BRANCH|TAG|SHA",
        help="what to check out (default: main)",
    )
    git.add_argument(
        "--path",
        dest="repo_path",
        default=env("OSC_GIT_PATH", "."),
        metavar="DIR",
        help="manifest folder inside the repository (default: the root)",
    )
    git.add_argument(
        "--cache-dir",
        default=env("OSC_CACHE_DIR"),
        metavar="DIR",
        help="clone cache and status file (default: ~/.cache/osc-gitops)",
    )
    git.add_argument("--git-token-file", default=env("OSC_GIT_TOKEN_FILE"), metavar="FILE")
    git.add_argument("--git-ssh-key", default=env("OSC_GIT_SSH_KEY"), metavar="FILE")
    git.add_argument("--git-timeout", type=float, default=60.0, metavar="SECONDS")


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    ovn = parser.add_argument_group("OVN Northbound")
    ovn.add_argument(
        "--ovn-nb",
        default=env("OSC_OVN_NB"),
        metavar="REMOTE",
        help="tcp:HOST:PORT, ssl:HOST:PORT, unix:PATH, or a comma-separated list (Raft cluster)",
    )
    ovn.add_argument("--ovn-private-key", default=env("OSC_OVN_PRIVATE_KEY"), metavar="FILE")
    ovn.add_argument("--ovn-certificate", default=env("OSC_OVN_CERTIFICATE"), metavar="FILE")
    ovn.add_argument("--ovn-ca-cert", default=env("OSC_OVN_CA_CERT"), metavar="FILE")
    ovn.add_argument(
        "--ovn-timeout", type=float, default=10.0, metavar="SECONDS", help="connect+sync timeout"
    )
    kube = parser.add_argument_group("Kubernetes")
    kube.add_argument("--kubeconfig", default=env("KUBECONFIG"), metavar="FILE")
    kube.add_argument("--context", default=None, metavar="NAME", help="kubeconfig context")
    kube.add_argument(
        "--in-cluster", action="store_true", help="use the pod's service account (in a cluster)"
    )
    parser.add_argument(
        "--instance",
        default=env("OSC_INSTANCE", "osc-gitops"),
        metavar="NAME",
        help="owner name written to osc.io/owner; only rows with this owner are ever changed",
    )


def add_compile_args(parser: argparse.ArgumentParser) -> None:
    from reconciler.core.compile import STEERING_CHOICES

    parser.add_argument(
        "--steering",
        choices=STEERING_CHOICES,
        default=None,
        help="steering backend (default: network-function when the NB schema has it)",
    )


def compile_options(args: argparse.Namespace) -> Any:
    import re

    from reconciler.core.compile import CompileOptions
    from reconciler.core.model import DNS1123_LABEL

    if not re.fullmatch(DNS1123_LABEL, args.instance):
        raise UserError(f"--instance {args.instance!r} must be a DNS-1123 label")
    return CompileOptions(instance=args.instance, steering=args.steering)


@contextlib.contextmanager
def connections(args: argparse.Namespace, *, read_only: bool = False) -> Iterator[tuple[Any, Any]]:
    """Kubernetes and OVN adapters from the flags; adapter errors become ``UserError``s.

    ``read_only``: the OVN side is a one-shot snapshot reader instead of a live IDL mirror
    (for commands that only read the NB once)."""
    from reconciler.adapters.kube.client import KubeCluster, KubeError, KubeSettings
    from reconciler.adapters.ovn.northbound import OvnError, OvnNorthbound, OvnSettings
    from reconciler.adapters.ovn.snapshot import OvnSnapshot

    if not args.ovn_nb:
        raise UserError("no OVN Northbound given: pass --ovn-nb REMOTE or set OSC_OVN_NB")
    in_cluster = args.in_cluster or (
        not args.kubeconfig and "KUBERNETES_SERVICE_HOST" in os.environ
    )
    if not args.kubeconfig and not in_cluster:
        default = Path.home() / ".kube" / "config"
        if not default.exists():
            raise UserError(
                "no Kubernetes credentials: pass --kubeconfig FILE, set KUBECONFIG, or run "
                "in a cluster (--in-cluster)"
            )
    try:
        kube = KubeCluster(
            KubeSettings(kubeconfig=args.kubeconfig, context=args.context, in_cluster=in_cluster)
        )
        settings = OvnSettings(
            remote=args.ovn_nb,
            private_key=args.ovn_private_key,
            certificate=args.ovn_certificate,
            ca_cert=args.ovn_ca_cert,
            timeout=args.ovn_timeout,
            instance=args.instance,
        )
        # Read-only commands read the NB once with one raw select transaction: mirroring it
        # into the ovs IDL first (what a writer needs for its lock and transaction) cost
        # 10.8 s and 394 MiB at 10,000 pods, the snapshot 2.0 s and 180 MiB (benchmarks.md).
        ovn = OvnSnapshot(settings) if read_only else OvnNorthbound.connect(settings)
    except (KubeError, OvnError) as exc:
        raise UserError(str(exc)) from exc
    try:
        yield kube, ovn
    except (KubeError, OvnError) as exc:
        raise UserError(str(exc)) from exc
    finally:
        ovn.close()


def cache_dir(args: argparse.Namespace) -> Path:
    from reconciler.adapters.git import default_cache_dir

    return Path(args.cache_dir) if getattr(args, "cache_dir", None) else default_cache_dir()


def git_source(args: argparse.Namespace) -> Any:
    """A :class:`reconciler.adapters.git.GitSource` from the flags (``--repo`` given)."""
    from reconciler.adapters.git import TOKEN_ENV, GitSettings, GitSource

    return GitSource(
        GitSettings(
            repo=args.repo,
            ref=args.ref,
            path=args.repo_path,
            cache_dir=str(cache_dir(args)),
            token=os.environ.get(TOKEN_ENV),
            token_file=args.git_token_file,
            ssh_key=args.git_ssh_key,
            timeout=args.git_timeout,
        )
    )


def load_source(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The manifests from PATH or ``--repo``: ``(Desired, revision)`` (revision = commit)."""
    if not getattr(args, "repo", None):
        return _load(args.path), getattr(args, "revision", None)
    if args.path != ".":
        raise UserError(f"give either PATH ({args.path}) or --repo, not both")
    checkout = git_source(args).sync()
    print(f"{checkout.repo}@{checkout.ref}: commit {checkout.commit}", file=sys.stderr)
    return _load_checkout(checkout), checkout.commit


def _load_checkout(checkout: Any) -> Any:
    from reconciler.errors import ValidationFailed
    from reconciler.manifests.load import load_path

    try:
        return load_path(checkout.directory)
    except ValidationFailed as failed:
        prefix = str(checkout.root) + os.sep
        for issue in failed.issues:
            print(str(issue).replace(prefix, ""), file=sys.stderr)
        raise UserError(
            f"commit {checkout.commit} of {checkout.repo}: {len(failed.issues)} problem(s) in "
            "the manifests"
        ) from None


def _load(path: str) -> Any:
    from reconciler.errors import ValidationFailed
    from reconciler.manifests.load import load_path

    try:
        return load_path(path)
    except ValidationFailed as failed:
        for issue in failed.issues:
            print(issue, file=sys.stderr)
        raise UserError(f"{path}: {len(failed.issues)} problem(s) in the manifests") from None


# --- plan ---------------------------------------------------------------------------------------


def configure_plan(parser: argparse.ArgumentParser) -> None:
    add_source_args(parser)
    add_connection_args(parser)
    add_compile_args(parser)
    parser.add_argument("-o", "--output", choices=("text", "json", "markdown"), default="text")
    parser.add_argument(
        "--observed",
        metavar="FILE",
        help="plan offline against a snapshot written by `osc-gitops snapshot`",
    )


def run_plan(args: argparse.Namespace) -> int:
    from reconciler.core.observed import Observed
    from reconciler.engine.pipeline import make_plan, observe, with_meta
    from reconciler.render import render

    desired, revision = load_source(args)
    options = compile_options(args)
    if args.observed:
        observed = read_snapshot(args.observed)
    else:
        with connections(args, read_only=True) as (kube, ovn):
            observed = observe(kube, ovn, options.instance)
    assert isinstance(observed, Observed)
    the_plan = make_plan(desired, observed, options)
    if revision:
        the_plan = with_meta(the_plan, revision=revision)
    sys.stdout.write(render(the_plan, args.output))
    return EXIT_CHANGES if the_plan.changes else EXIT_OK


def read_snapshot(path: str) -> Any:
    from reconciler.core.observed import Observed

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Observed.from_json(data)
    except OSError as exc:
        raise UserError(f"cannot read snapshot {path}: {exc.strerror or exc}") from exc
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"{path} is not an osc-gitops snapshot: {exc}") from exc


# --- apply --------------------------------------------------------------------------------------


def configure_apply(parser: argparse.ArgumentParser) -> None:
    add_source_args(parser)
    add_connection_args(parser)
    add_compile_args(parser)
    parser.add_argument(
        "-o", "--output", choices=("text", "json", "markdown"), default="text",
        help="how to print the plan that is applied",
    )  # fmt: skip
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="allow an empty manifest set to delete everything this instance owns",
    )
    parser.add_argument("--revision", default=None, help=argparse.SUPPRESS)


def run_apply(args: argparse.Namespace) -> int:
    from reconciler.adapters.notify import post_json
    from reconciler.engine.pipeline import reconcile
    from reconciler.render import render

    desired, revision = load_source(args)
    options = compile_options(args)
    with connections(args) as (kube, ovn):
        report = reconcile(
            desired,
            kube,
            ovn,
            options,
            revision=revision,
            notify=post_json,
            allow_empty=args.allow_empty,
        )
    if args.repo or args.cache_dir:
        _record_apply(args, revision, report)
    sys.stdout.write(render(report.plan, args.output))
    for error in report.notification_errors:
        print(f"warning: {error}", file=sys.stderr)
    if report.plan.changes:
        print(
            f"Apply complete: {report.applied} change(s) applied, converged "
            f"(OVN transaction {report.seconds.get('ovn_transaction', 0) * 1000:.0f} ms).",
            file=sys.stderr,
        )
    return EXIT_OK


def _record_apply(args: argparse.Namespace, revision: str | None, report: Any) -> None:
    """Write the status file read by ``osc-gitops status`` (only with --repo/--cache-dir)."""
    from reconciler.engine import status

    path = status.status_path(cache_dir(args), args.instance)
    try:
        st = status.read(path) if path.exists() else status.Status(instance=args.instance)
    except UserError:
        st = status.Status(instance=args.instance)
    st.result = "applied" if report.plan.changes else "unchanged"
    st.message, st.errors = "", []
    st.revision = st.attempted = revision
    st.revision_applied_at = status.now_iso()
    st.source = args.repo or args.path
    st.ref = args.ref if args.repo else None
    st.changes = report.plan.summary()
    try:
        status.write(path, st)
    except OSError as exc:
        print(f"warning: cannot write status file {path}: {exc}", file=sys.stderr)


# --- run ----------------------------------------------------------------------------------------


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
    from reconciler.engine import status
    from reconciler.engine.loop import (
        GitManifestSource,
        LocalSource,
        Loop,
        LoopConfig,
        setup_logging,
    )
    from reconciler.engine.metrics import Metrics, MetricsServer

    # Installed first: a SIGTERM while connecting must also end in a clean exit 0.
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    setup_logging(args.log_format, args.log_level)
    options = compile_options(args)
    if args.repo:
        if args.path != ".":
            raise UserError(f"give either PATH ({args.path}) or --repo, not both")
        source: Any = GitManifestSource(git_source(args))
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
        reader: Any = kube
        if not args.once and not args.no_watch:
            # The long-running loop reads Kubernetes from an informer cache (list once, then
            # watch): no LIST per pass, and its pod events reach the loop after the cache.
            from reconciler.adapters.kube.cache import KubeCache

            reader = KubeCache(kube)
            reader.start(stopping, args.instance)
        loop = Loop(
            config, source, reader, ovn,
            lease=lease, metrics=metrics, notify=post_json, stopping=stopping,
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


def _lease(args: argparse.Namespace, kube: Any) -> Any:
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


# --- status -------------------------------------------------------------------------------------


def configure_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache-dir",
        default=os.environ.get("OSC_CACHE_DIR"),
        metavar="DIR",
        help="as given to run/apply (default: ~/.cache/osc-gitops)",
    )
    parser.add_argument(
        "--instance", default=os.environ.get("OSC_INSTANCE", "osc-gitops"), metavar="NAME"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run_status(args: argparse.Namespace) -> int:
    from reconciler.engine import status

    st = status.read(status.status_path(cache_dir(args), args.instance))
    if args.output == "json":
        json.dump(st.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(status.render_text(st))
    return EXIT_OK if st.result in ("applied", "unchanged") else EXIT_ERROR


# --- snapshot -----------------------------------------------------------------------------------


def configure_snapshot(parser: argparse.ArgumentParser) -> None:
    add_connection_args(parser)
    parser.add_argument(
        "-f", "--file", default="-", metavar="FILE", help="where to write (default: stdout)"
    )


def run_snapshot(args: argparse.Namespace) -> int:
    from reconciler.engine.pipeline import observe

    with connections(args, read_only=True) as (kube, ovn):
        observed = observe(kube, ovn, args.instance)
    text = json.dumps(observed.to_json(), indent=1, sort_keys=True) + "\n"
    if args.file == "-":
        sys.stdout.write(text)
    else:
        Path(args.file).write_text(text, encoding="utf-8")
        print(
            f"wrote {args.file}: {len(observed.pods)} pods, {len(observed.nodes)} nodes, "
            f"{len(observed.ovn_rows)} owned OVN rows",
            file=sys.stderr,
        )
    return EXIT_OK


# --- demo ---------------------------------------------------------------------------------------


def configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policies", default=None, metavar="DIR", help="default: examples/policies"
    )
    parser.add_argument("--cluster", default=None, metavar="DIR", help="default: examples/cluster")
    parser.add_argument(
        "--steering", choices=("network-function", "router-policy"), default=None,
        help="default: network-function if OVN 26.03's NB schema is available",
    )  # fmt: skip
    parser.add_argument(
        "--datapath",
        action="store_true",
        help="also run a real OVS/ovn-controller data path and show packets through the VNF",
    )


def run_demo(args: argparse.Namespace) -> int:
    """The demo lives in the sandbox distribution (``osc-gitops-sandbox``), which registers it
    under the entry-point group ``osc_gitops.demo``: the product never imports the sandbox, and
    the wheel and image hold no emulator."""
    from importlib.metadata import entry_points

    found = entry_points(group="osc_gitops.demo", name="run")
    if not found:
        raise UserError(
            "the demo needs the osc-gitops sandbox: `make setup` in a source checkout installs "
            "it (pip install -e ./sandbox)"
        )
    run = next(iter(found)).load()
    return int(run(args.policies, args.cluster, args.steering, datapath=args.datapath))
