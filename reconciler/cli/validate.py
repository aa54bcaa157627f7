"""``osc-gitops validate``: load every manifest and report every problem as file:line."""

from __future__ import annotations

import argparse
import sys

from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    Command,
    add_output,
    plural,
    print_json,
    print_notes,
)
from reconciler.errors import ManifestIssue, ValidationFailed


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", nargs="?", default=".", metavar="PATH",
        help="folder (searched recursively for .yaml/.yml, less what its .oscignore lists) "
        "or file; default: current folder",
    )  # fmt: skip
    add_output(parser)


def _run_validate(args: argparse.Namespace) -> int:
    from reconciler.cli.saved import refuse_as_manifests
    from reconciler.manifests.load import load_path

    path: str = args.path
    refuse_as_manifests(path)
    notes: list[str] = []
    try:
        desired = load_path(path, notes)
    except ValidationFailed as failed:
        print_notes(notes)
        if args.output == "json":
            errors = [_issue_json(i) for i in failed.issues]
            message = f"{path}: {plural(len(failed.issues), 'problem')} in the manifests"
            print_json(
                {
                    "valid": False,
                    "errors": errors,
                    "error": {"message": message, "cause": "manifests"},
                    "issues": errors,
                }
            )
        else:
            for issue in failed.issues:
                print(issue, file=sys.stderr)
            print(f"{path}: {plural(len(failed.issues), 'problem')} — invalid", file=sys.stderr)
        return EXIT_ERROR
    print_notes(notes)
    counts = {
        "securityGroups": len(desired.security_groups),
        "vnfs": len(desired.vnfs),
        "bindings": len(desired.bindings),
    }
    if args.output == "json":
        print_json({"valid": True, "errors": [], "counts": counts})
    if desired.is_empty:
        print(f"{path}: no manifests found (nothing to validate)", file=sys.stderr)
    else:
        print(
            f"{path}: {plural(counts['securityGroups'], 'security group')}, "
            f"{plural(counts['vnfs'], 'VNF')}, {plural(counts['bindings'], 'binding')} — valid",
            file=sys.stderr,
        )
    return EXIT_OK


def _issue_json(issue: ManifestIssue) -> dict[str, object]:
    return issue.to_json()


COMMAND = Command(
    name="validate",
    help="check manifests (syntax, schema, cross-references) without touching the cluster",
    configure=_configure_validate,
    run=_run_validate,
    description="Load every manifest under PATH and report every problem as file:line.",
    epilog=(
        "exit codes: 0 valid (also when no manifests are found), 1 invalid\n\n"
        "examples:\n"
        "  osc-gitops validate examples/policies\n"
        "  osc-gitops validate -o json . | jq '.errors[].message'"
    ),
)
