"""``osc-gitops show FILE``: print a plan saved by ``plan -out FILE`` (Terraform's ``terraform
show FILE``), without reading the cluster.

The plan is printed as ``plan`` printed it when it was saved (text, JSON or Markdown: the
JSON is the saved plan's own, the contract of ``reconciler.render.json_render``), after one line
on stderr saying when, from what and for which instance it was made, and followed by how to
apply exactly it. The file is checked as ``apply FILE`` checks it (format version, SHA-256), so
what ``show`` prints is what ``apply`` would apply. Exit code 0 (it shows; it does not compare
with the live state: ``apply FILE`` does that, and refuses a plan the live state outgrew)."""

from __future__ import annotations

import argparse
import sys

from reconciler.cli.common import EXIT_OK, Command, add_verbose_arg
from reconciler.errors import UserError


def configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", metavar="FILE", help="a plan saved with `osc-gitops plan -out FILE`"
    )
    parser.add_argument(
        "-o", "--output", choices=("text", "json", "markdown"), default="text",
        help="text (default), json (the JSON plan contract) or markdown, as plan prints them",
    )  # fmt: skip
    add_verbose_arg(parser)


def describe(saved: object) -> str:
    """``Saved plan plan.json: made …, from …, commit …, instance …, node ….``"""
    from reconciler.cli.saved import SavedPlan

    assert isinstance(saved, SavedPlan)
    body, options = saved.body, saved.options
    parts = [f"made {body.get('created_at')}", f"from {body.get('source')}"]
    if body.get("revision"):
        parts.append(f"commit {body['revision']}")
    parts.append(f"instance {options.get('instance')}")
    if options.get("node"):
        parts.append(f"node {options['node']}")
    if options.get("kubernetes_only"):
        parts.append("--kubernetes-only")
    endpoint = body.get("endpoint") or {}
    if endpoint.get("ovn_nb"):
        parts.append(f"against {endpoint['ovn_nb']}")
    elif body.get("endpoint") is None:
        parts.append("against a snapshot")
    return f"Saved plan {saved.path}: {', '.join(parts)}."


def run_show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from reconciler.cli import saved as saved_plans
    from reconciler.render import render
    from reconciler.render.json_render import plan_from_dict, render_json

    file = Path(args.file)
    if not file.is_file():
        what = "is a folder" if file.is_dir() else "does not exist"
        raise UserError(f"{args.file} {what}: give a file saved with osc-gitops plan -out FILE")
    saved = saved_plans.load(args.file)
    if saved is None:
        raise UserError(
            f"{args.file} is not a saved plan (osc-gitops plan PATH -out FILE writes one); to "
            f"plan manifests: osc-gitops plan {args.file}"
        )
    print(describe(saved), file=sys.stderr)
    data = saved.body["plan"]
    plan = plan_from_dict(data)
    # The JSON as plan -o json prints it (the file keeps it with sorted keys, for its digest).
    text = render(plan, args.output, args.verbose)
    sys.stdout.write(render_json(plan) if args.output == "json" else text)
    if data.get("changes"):
        print(
            f"To apply exactly this plan: osc-gitops apply {saved.path} (refused, nothing "
            "written, if the live state changed since)",
            file=sys.stderr,
        )
    return EXIT_OK


COMMAND = Command(
    name="show",
    help="print a plan saved with plan -out FILE (nothing is read from the cluster)",
    configure=configure_show,
    run=run_show,
    description=(
        "Print a saved plan (osc-gitops plan -out FILE) as plan printed it: its protection "
        "changes, rows and warnings, and when, from what and for which instance it was made."
    ),
    epilog=(
        "exit codes: 0 shown, 1 error (not a saved plan, changed after it was saved, another "
        "format version)\n\n"
        "examples:\n"
        "  osc-gitops plan policies/ -out plan.json\n"
        "  osc-gitops show plan.json\n"
        "  osc-gitops show plan.json -o json | jq '.protection_changes'\n"
        "  osc-gitops apply plan.json"
    ),
)
