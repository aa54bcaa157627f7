"""``osc-gitops plan``: what apply would change (exit 0 none, 2 changes, 1 error)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from reconciler.cli import common
from reconciler.cli.review import add_base_arg
from reconciler.errors import UserError


def configure_plan(parser: argparse.ArgumentParser) -> None:
    common.add_reconcile_args(parser)
    parser.add_argument(
        "-o", "--output", choices=("text", "json", "markdown"), default="text",
        help="text (default), json (the versioned contract in reconciler/render/json_render.py) "
        "or markdown (a pull-request comment)",
    )  # fmt: skip
    parser.add_argument(
        "--observed", metavar="FILE",
        help="plan offline against a snapshot written by `osc-gitops snapshot` (with "
        "--all-nodes: every zone of an interconnect cluster)",
    )  # fmt: skip
    add_base_arg(parser)
    common.add_verbose_arg(parser)
    parser.add_argument(
        "-out", "--out", dest="out", default=None, metavar="FILE",
        help="also save the plan to FILE: `osc-gitops apply FILE` applies exactly it, and "
        "refuses when the live state changed since",
    )  # fmt: skip
    parser.add_argument(
        "--allow-empty", action="store_true",
        help="plan an empty manifest set that deletes everything this instance owns (as apply "
        "--allow-empty; without it such a plan is refused, as apply refuses it)",
    )  # fmt: skip


def run_plan(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from reconciler.core.planning.zoned import is_zoned
    from reconciler.engine.pipeline import Pipeline, preview

    desired, revision = common.load_source(args)
    options = common.compile_options(args)
    scope = common.scope_of(args)
    if args.observed:
        data = common.read_json(args.observed)
        if is_zoned(data):  # an interconnect cluster: every zone, as its agent published it
            from reconciler.cli.review import merged_zones
            from reconciler.cli.zones import plan_zoned

            if args.out:
                raise UserError(
                    "-out: a zoned snapshot's plan is applied zone by zone by the node agents; "
                    "save plans per node (--node) against its NB instead"
                )
            the_plan = plan_zoned(args, data, desired, options)
            if revision:
                the_plan = replace(the_plan, revision=revision)
            return finish_plan(args, desired, the_plan, merged_zones(data))
        observed = common.parse_snapshot(args.observed, data)
        shown = preview(desired, observed, options, scope=scope, revision=revision)
    else:
        with common.connections(args, read_only=True, scope=scope) as (kube, ovn):
            shown = Pipeline(kube, ovn, options, scope=scope).preview(desired, revision)
    return finish_plan(args, desired, shown.plan, shown.observed)


def finish_plan(args: argparse.Namespace, desired: Any, the_plan: Any, observed: Any) -> int:
    """What every plan gets after it is made: the protection changes and typo guards
    (``reconciler.cli.review``), the empty-set guard exactly as apply enforces it, then
    printing."""
    from reconciler.cli.review import review
    from reconciler.engine.pipeline import guard_empty

    the_plan = review(args, the_plan, desired, observed)
    guard_empty(desired, the_plan, args.allow_empty)
    code = print_plan(the_plan, args.output, getattr(args, "verbose", False))
    if args.out:
        from reconciler.cli import saved

        saved.write(args, args.out, desired, the_plan.revision, the_plan)
    return code


def print_plan(the_plan: Any, output: str, verbose: bool = False) -> int:
    """Print the plan; the exit code says whether it has changes."""
    from reconciler.render import render

    sys.stdout.write(render(the_plan, output, verbose))
    # pending (a template waiting for its rollout, held steering) is not converged either
    return common.EXIT_OK if the_plan.converged else common.EXIT_CHANGES


COMMAND = common.Command(
    name="plan",
    help="show what apply would change (exit 0 none, 2 changes, 1 error)",
    configure=configure_plan,
    run=run_plan,
    description=(
        "Read the manifests, the cluster (pods, nodes, owned VMs) and the OVN Northbound DB "
        "(or a snapshot), and print the changes that would make them match."
    ),
    epilog=(
        "exit codes: 0 no changes, 2 changes, 1 error (Terraform's -detailed-exitcode)\n\n"
        "examples:\n"
        "  osc-gitops plan examples/policies --ovn-nb tcp:10.0.0.5:6641 \\\n"
        "      --kubeconfig ~/.kube/config\n"
        "  osc-gitops plan policies/ -o markdown --observed snapshot.json   # offline, in CI\n"
        "  OSC_OVN_NB=unix:/run/ovn/ovnnb_db.sock osc-gitops plan -o json .\n"
        "  osc-gitops plan policies/ --node node-1 --ovn-nb unix:/var/run/ovn/ovnnb_db.sock\n"
        "  osc-gitops plan policies/ --kubernetes-only   # the central owner's share"
    ),
)
