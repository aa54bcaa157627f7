"""``osc-gitops plan``: what apply would change (exit 0 none, 2 changes, 1 error)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reconciler.cli.common import (
    EXIT_CHANGES,
    EXIT_OK,
    Command,
    add_compile_args,
    add_connection_args,
    add_source_args,
    compile_options,
    connections,
    load_source,
)
from reconciler.errors import UserError


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
    from reconciler.core.health import plan_report
    from reconciler.core.observed import Observed
    from reconciler.core.planning import compile_plan
    from reconciler.engine.pipeline import observe, with_meta
    from reconciler.render import render

    desired, revision = load_source(args)
    options = compile_options(args)
    if args.observed:
        observed = read_snapshot(args.observed)
    else:
        with connections(args, read_only=True) as (kube, ovn):
            observed = observe(kube, ovn, options.instance)
    assert isinstance(observed, Observed)
    planned = compile_plan(desired, observed, options)
    # Beside the changes: each VNF instance's health as OVN reports it, and the NF id budget.
    the_plan = with_meta(planned.plan, **plan_report(planned.target, observed))
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


COMMAND = Command(
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
        "  OSC_OVN_NB=unix:/run/ovn/ovnnb_db.sock osc-gitops plan -o json ."
    ),
)
