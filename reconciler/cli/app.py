"""``osc-gitops`` command line: a thin argument layer over the library.

Conventions borrowed from kubectl and terraform: subcommands, ``-o json`` for machines, human
messages on stderr (so stdout stays parseable), ``--version``, examples in ``--help``, and exit
codes that CI can branch on (0 ok, 1 error; ``plan`` adds 2 = changes).

One module per command (``reconciler/cli/<command>.py``), each exporting ``COMMAND``. Adding a
subcommand: write the module (import heavy modules inside its ``run`` so ``--help`` stays fast)
and add it to :data:`COMMANDS`. Raise a :class:`~reconciler.errors.OscError` subclass for
anything the user must fix: :func:`main` prints ``error: <message>`` and returns 1, with no
traceback unless the error may be our own bug (:attr:`~reconciler.errors.OscError.show_traceback`).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from reconciler import __version__
from reconciler.cli import apply, demo, explain, plan, run, schema, snapshot, status, validate
from reconciler.cli.common import EXIT_ERROR, Command
from reconciler.engine import gc_tuning
from reconciler.errors import OscError

__all__ = ["COMMANDS", "USER_ERRORS", "Command", "build_parser", "main"]

EXIT_INTERRUPTED = 130

USER_ERRORS: tuple[type[BaseException], ...] = (OscError,)
"""Exceptions printed as ``error: <message>`` (exit 1). Extend it for library errors that are
the user's to fix, e.g. ``cli.USER_ERRORS += (SomeClientError,)``."""

COMMANDS: list[Command] = [
    validate.COMMAND,
    schema.COMMAND,
    plan.COMMAND,
    apply.COMMAND,
    run.COMMAND,
    status.COMMAND,
    snapshot.COMMAND,
    explain.COMMAND,
    demo.COMMAND,
]
"""Every subcommand, in ``--help`` order."""


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
