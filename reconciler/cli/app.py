"""``osc-gitops`` command line: a thin argument layer over the library.

Conventions borrowed from kubectl and terraform: subcommands, ``-o json`` for machines, human
messages on stderr (so stdout stays parseable), ``--version``, examples in ``--help``, and exit
codes that CI can branch on (0 ok, 1 error; ``plan`` adds 2 = changes).

Adding a subcommand: write ``_configure_x(parser)`` and ``_run_x(args) -> int`` and add one
:class:`Command` to :data:`COMMANDS` (import heavy modules inside ``_run_x`` so ``--help`` stays
fast). Raise a :class:`~reconciler.errors.UserError` subclass (or a class listed in
:data:`USER_ERRORS`) for anything the user must fix: :func:`main` prints ``error: <message>``
and returns 1, no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reconciler import __version__
from reconciler.cli import live as cli_live
from reconciler.engine import gc_tuning
from reconciler.errors import ManifestIssue, OscError, UserError, ValidationFailed

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130

USER_ERRORS: tuple[type[BaseException], ...] = (OscError,)
"""Exceptions printed as ``error: <message>`` (exit 1). Extend it for library errors that are
the user's to fix, e.g. ``cli.USER_ERRORS += (SomeClientError,)``."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, argument setup and handler."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = ""
    epilog: str = ""


# --- validate -----------------------------------------------------------------------------------


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        default=".",
        metavar="PATH",
        help="folder (searched recursively for .yaml/.yml) or file; default: current folder",
    )
    _add_output(parser)


def _plural(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


def _run_validate(args: argparse.Namespace) -> int:
    from reconciler.manifests.load import load_path

    path: str = args.path
    try:
        desired = load_path(path)
    except ValidationFailed as failed:
        if args.output == "json":
            _print_json({"valid": False, "errors": [_issue_json(i) for i in failed.issues]})
        else:
            for issue in failed.issues:
                print(issue, file=sys.stderr)
            print(f"{path}: {_plural(len(failed.issues), 'problem')} — invalid", file=sys.stderr)
        return EXIT_ERROR
    counts = {
        "securityGroups": len(desired.security_groups),
        "vnfs": len(desired.vnfs),
        "bindings": len(desired.bindings),
    }
    if args.output == "json":
        _print_json({"valid": True, "errors": [], "counts": counts})
    if desired.is_empty:
        print(f"{path}: no manifests found (nothing to validate)", file=sys.stderr)
    else:
        print(
            f"{path}: {_plural(counts['securityGroups'], 'security group')}, "
            f"{_plural(counts['vnfs'], 'VNF')}, {_plural(counts['bindings'], 'binding')} — valid",
            file=sys.stderr,
        )
    return EXIT_OK


def _issue_json(issue: ManifestIssue) -> dict[str, object]:
    return issue.to_json()


# --- schema -------------------------------------------------------------------------------------


def _configure_schema(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="(re)write the schema files into --dir")
    mode.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the files in --dir differ from the models (for CI)",
    )
    parser.add_argument(
        "--dir", default="schemas", metavar="DIR", help="schema folder (default: ./schemas)"
    )


def _run_schema(args: argparse.Namespace) -> int:
    from reconciler.manifests import schema

    if args.check:
        stale = schema.drifted(args.dir)
        if stale:
            for path in stale:
                print(f"{path}: out of date with reconciler/model.py", file=sys.stderr)
            print("error: run `osc-gitops schema --write` and commit the result", file=sys.stderr)
            return EXIT_ERROR
        print(f"{args.dir}: schemas are up to date", file=sys.stderr)
        return EXIT_OK
    if args.write:
        try:
            written = schema.write(args.dir)
        except OSError as exc:
            raise UserError(f"cannot write schemas to {args.dir}: {exc.strerror or exc}") from exc
        print(f"wrote {_plural(len(written), 'file')} to {args.dir}", file=sys.stderr)
        return EXIT_OK
    sys.stdout.write(schema.render(schema.manifest_schema()))
    return EXIT_OK


# --- the table ----------------------------------------------------------------------------------

COMMANDS: list[Command] = [
    Command(
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
    ),
    Command(
        name="schema",
        help="print, write or check the JSON Schemas generated from the models",
        configure=_configure_schema,
        run=_run_schema,
        description=(
            "Without options, print schemas/manifest.json. Editors use these files through "
            "yaml-language-server: '# yaml-language-server: $schema=<path>/manifest.json'."
        ),
        epilog=(
            "examples:\n"
            "  osc-gitops schema --write          # after changing reconciler/model.py\n"
            "  osc-gitops schema --check          # in CI: exit 1 when schemas/ drifted"
        ),
    ),
    Command(
        name="plan",
        help="show what apply would change (exit 0 none, 2 changes, 1 error)",
        configure=cli_live.configure_plan,
        run=cli_live.run_plan,
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
    ),
    Command(
        name="apply",
        help="make the cluster and OVN match the manifests, then verify convergence",
        configure=cli_live.configure_apply,
        run=cli_live.run_apply,
        description=(
            "Kubernetes writes first (VNF VMs), then all OVN changes in ONE transaction, then "
            "Kubernetes deletes; finally a fresh plan must be empty."
        ),
        epilog=(
            "exit codes: 0 applied and converged (or nothing to do), 1 error or not converged\n\n"
            "examples:\n"
            "  osc-gitops apply examples/policies --ovn-nb tcp:10.0.0.5:6641\n"
            "  osc-gitops apply policies/ --steering router-policy   # OVN < 26.03"
        ),
    ),
    Command(
        name="run",
        help="reconcile continuously: interval, pod/VM events, git changes (or --once)",
        configure=cli_live.configure_run,
        run=cli_live.run_run,
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
    ),
    Command(
        name="status",
        help="show the last applied commit, when, and the result",
        configure=cli_live.configure_status,
        run=cli_live.run_status,
        description="Read the status file written by run/apply in --cache-dir.",
        epilog=(
            "exit codes: 0 last reconcile ok, 1 error/refused/unreachable or no status\n\n"
            "example:\n  kubectl -n osc-gitops exec deploy/osc-gitops -- osc-gitops status"
        ),
    ),
    Command(
        name="snapshot",
        help="write the observed live state to a file (for offline plans and bug reports)",
        configure=cli_live.configure_snapshot,
        run=cli_live.run_snapshot,
        epilog="example:\n  osc-gitops snapshot --ovn-nb tcp:10.0.0.5:6641 -f snapshot.json",
    ),
    Command(
        name="demo",
        help="run the whole story against a local sandbox of real OVN processes (no cluster)",
        configure=cli_live.configure_demo,
        run=cli_live.run_demo,
        epilog="example:\n  osc-gitops demo",
    ),
]
"""Every subcommand, in ``--help`` order."""


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="text (stderr, for humans) or json (stdout, for tools); default: text",
    )


def _print_json(data: object) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="osc-gitops",
        description=(
            "GitOps reconciler: steer Kubernetes pod traffic through security VNFs over OVN, "
            "as declared in YAML manifests (SecurityGroup, VnfDeployment, Binding)."
        ),
        epilog=(
            "examples:\n"
            "  osc-gitops validate examples/policies\n"
            "  osc-gitops validate -o json manifests/\n"
            "  osc-gitops schema --check\n\n"
            "Run 'osc-gitops COMMAND --help' for the options of a command."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"osc-gitops {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for cmd in COMMANDS:
        child = sub.add_parser(
            cmd.name,
            help=cmd.help,
            description=cmd.description or cmd.help,
            epilog=cmd.epilog or None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cmd.configure(child)
        child.set_defaults(_run=cmd.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``osc-gitops`` console script; returns the exit code."""
    gc_tuning.tune()
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    run: Callable[[argparse.Namespace], int] | None = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `osc-gitops ... | head`: the reader left; exit quietly like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR
    except USER_ERRORS as exc:
        if isinstance(exc, OscError) and exc.show_traceback:  # possibly our bug: keep the trace
            traceback.print_exception(exc, file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
