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
    from reconciler.compile import STEERING_CHOICES

    parser.add_argument(
        "--steering",
        choices=STEERING_CHOICES,
        default=None,
        help="steering backend (default: network-function when the NB schema has it)",
    )


def compile_options(args: argparse.Namespace) -> Any:
    import re

    from reconciler.compile import CompileOptions
    from reconciler.model import DNS1123_LABEL

    if not re.match(DNS1123_LABEL, args.instance):
        raise UserError(f"--instance {args.instance!r} must be a DNS-1123 label")
    return CompileOptions(instance=args.instance, steering=args.steering)


@contextlib.contextmanager
def connections(args: argparse.Namespace) -> Iterator[tuple[Any, Any]]:
    """Kubernetes and OVN adapters from the flags; adapter errors become ``UserError``s."""
    from reconciler.adapters.kube import KubeCluster, KubeError, KubeSettings
    from reconciler.adapters.ovn import OvnError, OvnNorthbound, OvnSettings

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
        ovn = OvnNorthbound.connect(
            OvnSettings(
                remote=args.ovn_nb,
                private_key=args.ovn_private_key,
                certificate=args.ovn_certificate,
                ca_cert=args.ovn_ca_cert,
                timeout=args.ovn_timeout,
                instance=args.instance,
            )
        )
    except (KubeError, OvnError) as exc:
        raise UserError(str(exc)) from exc
    try:
        yield kube, ovn
    except (KubeError, OvnError) as exc:
        raise UserError(str(exc)) from exc
    finally:
        ovn.close()


def _load(path: str) -> Any:
    from reconciler.errors import ValidationFailed
    from reconciler.load import load_path

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
    from reconciler.observed import Observed
    from reconciler.reconcile import make_plan, observe
    from reconciler.render import render

    desired = _load(args.path)
    options = compile_options(args)
    if args.observed:
        observed = read_snapshot(args.observed)
    else:
        with connections(args) as (kube, ovn):
            observed = observe(kube, ovn, options.instance)
    assert isinstance(observed, Observed)
    the_plan = make_plan(desired, observed, options)
    sys.stdout.write(render(the_plan, args.output))
    return EXIT_CHANGES if the_plan.changes else EXIT_OK


def read_snapshot(path: str) -> Any:
    from reconciler.observed import Observed

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
    from reconciler.reconcile import reconcile
    from reconciler.render import render

    desired = _load(args.path)
    options = compile_options(args)
    with connections(args) as (kube, ovn):
        report = reconcile(
            desired,
            kube,
            ovn,
            options,
            revision=args.revision,
            notify=post_json,
            allow_empty=args.allow_empty,
        )
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


# --- snapshot -----------------------------------------------------------------------------------


def configure_snapshot(parser: argparse.ArgumentParser) -> None:
    add_connection_args(parser)
    parser.add_argument(
        "-f", "--file", default="-", metavar="FILE", help="where to write (default: stdout)"
    )


def run_snapshot(args: argparse.Namespace) -> int:
    from reconciler.reconcile import observe

    with connections(args) as (kube, ovn):
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
    from reconciler.demo import run

    return run(args.policies, args.cluster, args.steering, datapath=args.datapath)
