"""``osc-gitops apply``: make the cluster and OVN match the manifests, then verify."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from reconciler.cli.approve import add_approve_arg
from reconciler.cli.common import (
    EXIT_OK,
    Command,
    add_compile_args,
    add_connection_args,
    add_scope_args,
    add_source_args,
    cache_dir,
    compile_options,
    connections,
    load_source,
    scope_of,
)
from reconciler.cli.review import add_base_arg

if TYPE_CHECKING:
    from reconciler.core.observed import Observed
    from reconciler.core.plan import Plan
    from reconciler.engine.apply import ApplyReport


def configure_apply(parser: argparse.ArgumentParser) -> None:
    add_source_args(parser)
    add_connection_args(parser)
    add_compile_args(parser)
    add_scope_args(parser)
    parser.add_argument(
        "-o", "--output", choices=("text", "json", "markdown"), default="text",
        help="how to print the plan that is applied",
    )  # fmt: skip
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="allow an empty manifest set to delete everything this instance owns",
    )
    add_approve_arg(parser)
    add_base_arg(parser)
    parser.add_argument("--revision", default=None, help=argparse.SUPPRESS)


class _Settled:
    """A pipeline listener that keeps the live state the apply ended with (for the status
    file's VNF health)."""

    def __init__(self) -> None:
        self.last: Observed | None = None

    def observed(self, observed: Observed) -> None:
        pass

    def applying(self, plan: object) -> None:
        pass

    def applied(self, report: object, observed: Observed) -> None:
        pass

    def settled(self, observed: Observed) -> None:
        self.last = observed


def run_apply(args: argparse.Namespace) -> int:
    from reconciler.adapters.notify import post_json
    from reconciler.cli import saved as saved_plans
    from reconciler.cli.approve import ReviewListener, asks
    from reconciler.cli.review import review as reviewed_plan
    from reconciler.engine.pipeline import Pipeline
    from reconciler.render import render

    saved = None if args.repo else saved_plans.load(args.path)  # apply FILE: a saved plan
    if saved is not None:
        saved_plans.adopt(args, saved)
        desired, revision = saved.desired(), saved.body.get("revision")
    else:
        desired, revision = load_source(args)
    options = compile_options(args)
    scope = scope_of(args)
    settled = _Settled()

    def reviewed(plan: Plan, observed: Observed) -> Plan:
        return reviewed_plan(args, plan, desired, observed)  # protection changes, typo guards

    def show(plan: Plan) -> None:
        sys.stdout.write(render(plan, args.output))
        sys.stdout.flush()

    def unchanged(plan: Plan, observed: Observed) -> None:
        assert saved is not None
        saved_plans.check(saved, plan)

    review = ReviewListener(
        settled, reviewed, ask=asks(args) and saved is None, show=show,
        check=unchanged if saved is not None else None,
    )  # fmt: skip
    with connections(args, one_shot=True, scope=scope) as (kube, ovn):
        pipeline = Pipeline(kube, ovn, options, notify=post_json, allow_empty=args.allow_empty,
                            scope=scope)  # fmt: skip
        report = pipeline.run(desired, revision, review).report
    if saved is not None and report.plan.empty:
        saved_plans.check(saved, report.plan)  # an empty fresh plan must be what was saved
    _record_apply(args, revision, report, settled.last)
    if not review.shown:
        shown = review.plan if review.plan is not None else reviewed(report.plan, review.first)
        sys.stdout.write(render(shown, args.output))
    for error in report.notification_errors:
        print(f"warning: {error}", file=sys.stderr)
    if report.plan.changes:
        print(
            f"Apply complete: {report.applied} change(s) applied, converged "
            f"(OVN transaction {report.seconds.get('ovn_transaction', 0) * 1000:.0f} ms).",
            file=sys.stderr,
        )
    return EXIT_OK


def _record_apply(
    args: argparse.Namespace,
    revision: str | None,
    report: ApplyReport,
    observed: Observed | None,
) -> None:
    """Write the status file read by ``osc-gitops status`` (in ``--cache-dir``, default
    ``~/.cache/osc-gitops``), with each VNF instance's health as OVN reported it when the apply
    ended. A status that cannot be written is a warning: the apply stands."""
    from reconciler.core.health import health_meta, vnf_health
    from reconciler.engine.reporting import status

    path = status.status_path(cache_dir(args), status_name(args))
    instances = health_meta(vnf_health(observed)) if observed is not None else []
    try:
        status.record_apply(
            path,
            args.instance,
            revision=revision,
            plan=report.plan,
            source=args.repo or args.path,
            ref=args.ref if args.repo else None,
            vnf_instances=instances,
        )
    except OSError as exc:
        print(f"warning: cannot write status file {path}: {exc}", file=sys.stderr)


def status_name(args: argparse.Namespace) -> str:
    """The status file's name: the instance, plus the scope when it is not the whole (a node
    agent and the central owner of one instance may share a cache dir)."""
    if getattr(args, "node", None):
        return f"{args.instance}.node.{args.node}"
    if getattr(args, "kubernetes_only", False):
        return f"{args.instance}.kubernetes"
    return str(args.instance)


COMMAND = Command(
    name="apply",
    help="make the cluster and OVN match the manifests, then verify convergence",
    configure=configure_apply,
    run=run_apply,
    description=(
        "Kubernetes writes first (VNF VMs), then all OVN changes in ONE transaction, then "
        "Kubernetes deletes; finally a fresh plan must be empty."
    ),
    epilog=(
        "On a terminal, apply shows the plan and asks before writing (--auto-approve: do not "
        "ask); without a terminal it never asks. apply FILE applies exactly the plan `plan -out "
        "FILE` saved, without asking, and refuses it when the live state changed since.\n\n"
        "exit codes: 0 applied and converged (or nothing to do), 1 error, not converged or "
        "cancelled\n\n"
        "examples:\n"
        "  osc-gitops apply examples/policies --ovn-nb tcp:10.0.0.5:6641\n"
        "  osc-gitops plan policies/ -out plan.json && osc-gitops apply plan.json\n"
        "  osc-gitops apply policies/ --steering router-policy   # OVN < 26.03\n"
        "  osc-gitops apply policies/ --kubernetes-only          # interconnect: VMs, NADs\n"
        "  osc-gitops apply policies/ --node node-1 --ovn-nb unix:/var/run/ovn/ovnnb_db.sock"
    ),
)
