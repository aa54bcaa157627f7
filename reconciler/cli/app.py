"""``osc-gitops`` command line: a thin argument layer over the library.

Conventions borrowed from kubectl and terraform: subcommands, ``-o json`` for machines, human
messages on stderr (so stdout stays parseable), ``--version``, examples in ``--help``, and exit
codes that CI can branch on (0 ok, 1 error, a usage error included; ``plan`` adds 2 =
changes, ``explain`` 3 = selected but not steered).

One module per command (``reconciler/cli/<command>.py``), each exporting ``COMMAND``. Adding a
subcommand: write the module (import heavy modules inside its ``run`` so ``--help`` stays fast)
and add it to :data:`COMMANDS`. Raise a :class:`~reconciler.errors.OscError` subclass for
anything the user must fix: :func:`main` prints ``error: <message>`` and returns 1, with no
traceback unless the error may be our own bug (:attr:`~reconciler.errors.OscError.show_traceback`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from reconciler import __version__
from reconciler.cli import (
    apply,
    bind,
    demo,
    explain,
    local_cluster,
    plan,
    run,
    schema,
    show,
    snapshot,
    status,
    validate,
)
from reconciler.cli.common import EXIT_ERROR, EXIT_OK, Command
from reconciler.engine import gc_tuning
from reconciler.errors import OscError, error_cause, printable

__all__ = [
    "COMMANDS",
    "JSON_ERRORS",
    "USER_ERRORS",
    "Command",
    "UsageError",
    "build_parser",
    "main",
]

EXIT_INTERRUPTED = 130

USER_ERRORS: tuple[type[BaseException], ...] = (OscError,)
"""Exceptions printed as ``error: <message>`` (exit 1). Extend it for library errors that are
the user's to fix, e.g. ``cli.USER_ERRORS += (SomeClientError,)``."""

COMMANDS: list[Command] = [
    validate.COMMAND,
    schema.COMMAND,
    plan.COMMAND,
    apply.COMMAND,
    show.COMMAND,
    run.COMMAND,
    bind.COMMAND,
    status.COMMAND,
    snapshot.COMMAND,
    explain.COMMAND,
    demo.COMMAND,
    local_cluster.COMMAND,
]
"""Every subcommand, in ``--help`` order."""


JSON_ERRORS: frozenset[str] = frozenset({"validate", "plan", "apply", "show", "status", "explain"})
"""Commands whose ``-o json`` also reports failures as JSON on stdout:
``{"error": {"message", "cause"}, "issues": [...]}`` (``issues``: the manifest problems, each as
``validate -o json`` prints them; empty for other errors). Exit code 1 as in text mode."""


class UsageError(Exception):
    """A command line that argparse cannot parse; ``parser`` is the (sub)command it concerns."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is exit code 1 (argparse's own 2 means "changes" to the CI
    of a Terraform-style tool: ``plan --colour`` must not look like a plan with changes) and
    shows the usage of the subcommand concerned, not the top level's. Long options are never
    abbreviated (as in kubectl): ``status --all`` must not quietly mean ``--all-nodes``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
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
            "exit codes: 0 ok, 1 error (also a usage error), 2 plan has changes, 3 explain: "
            "selected but not steered\n\n"
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
        child.set_defaults(_run=cmd.run, _parser=child)
    return parser


def _subcommand(parser: ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The innermost subparser the command names in ``argv`` select (``sandbox up``: the
    ``up`` parser; the top level without one)."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        choices = getattr(action, "choices", None) or {}
        for i, token in enumerate(argv):
            if token in choices:
                return _subcommand(choices[token], argv[i + 1 :])
    return parser


def _wants_json(argv: Sequence[str]) -> bool:
    """``-o json`` / ``--output json`` / ``-ojson`` / ``--output=json`` somewhere in ``argv``."""
    for i, token in enumerate(argv):
        if token in ("-ojson", "--output=json"):
            return True
        if token in ("-o", "--output") and i + 1 < len(argv) and argv[i + 1] == "json":
            return True
    return False


def _usage_error(
    parser: ArgumentParser, argv: Sequence[str], error: UsageError, message: str | None = None
) -> int:
    """Print ``usage: …`` of the subcommand concerned and the error; exit code 1."""
    target = _subcommand(parser, argv)
    if error.parser is not parser and target is parser:
        target = error.parser
    message = printable(message or str(error))
    target.print_usage(sys.stderr)
    print(f"{target.prog}: error: {message}", file=sys.stderr)
    if target is not parser:
        print(f"Run '{target.prog} --help' for all options.", file=sys.stderr)
    command = target.prog.split()[-1]
    if command in JSON_ERRORS and _wants_json(argv):
        print_error_json(f"{target.prog}: {message}", "usage", [])
    return EXIT_ERROR


def print_error_json(message: str, cause: str, issues: Sequence[Any]) -> None:
    """The ``-o json`` shape of a failure (:data:`JSON_ERRORS`). A reader that left
    (``| head``) is not an error of its own: the exit code is 1 already."""
    try:
        json.dump(
            {
                "error": {"message": message, "cause": cause},
                "issues": [issue.to_json() for issue in issues],
            },
            sys.stdout,
            indent=2,
            ensure_ascii=False,
        )
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_gone()


def _stdout_gone() -> None:
    """stdout's reader left: point stdout at /dev/null so the interpreter's final flush does
    not fail again (Python's documented recipe for SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def in_our_voice(message: str) -> str:
    """One mention of each endpoint: a client library's reason often repeats the address the
    message already names (``cannot connect to OVN NB at tcp:h:1: tcp:h:1: refused``)."""
    return re.sub(r"(?<= at )(\S+): \1: ", r"\1: ", message)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``osc-gitops`` console script; returns the exit code.

    Exit codes: 0 ok, 1 error (a user error, an unreachable endpoint, a usage error), 2 ``plan``
    found changes, 3 ``explain``: selected but not steered, 130 interrupted."""
    # No pydantic plugin serves this command line, and looking for them scans the entry points
    # of every installed distribution when the first model is built: a tenth of a cold start.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    gc_tuning.tune()
    parser = build_parser()
    arguments = list(argv) if argv is not None else sys.argv[1:]
    try:
        args, extra = parser.parse_known_args(arguments)
        if extra:
            raise UsageError(
                getattr(args, "_parser", parser), f"unrecognized arguments: {' '.join(extra)}"
            )
    except UsageError as error:
        return _usage_error(parser, arguments, error)
    except SystemExit as done:  # --help, --version
        return done.code if isinstance(done.code, int) else EXIT_OK
    run: Callable[[argparse.Namespace], int] | None = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    json_errors = args.command in JSON_ERRORS and getattr(args, "output", None) == "json"
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `osc-gitops ... | head`: the reader left; exit quietly like other Unix tools.
        _stdout_gone()
        return EXIT_ERROR
    except UsageError as error:  # a command checking its own arguments
        return _usage_error(parser, arguments, error)
    except USER_ERRORS as exc:
        if isinstance(exc, OscError) and exc.show_traceback:  # possibly our bug: keep the trace
            traceback.print_exception(exc, file=sys.stderr)
        issues = list(getattr(exc, "issues", None) or ())
        for issue in issues:
            print(issue, file=sys.stderr)
        message = printable(in_our_voice(_summary(exc) if issues else str(exc)))
        print(f"error: {message}", file=sys.stderr)
        if json_errors:
            print_error_json(message, error_cause(exc), issues)
        return EXIT_ERROR


def _summary(exc: BaseException) -> str:
    """The first line of an error whose issues are printed one by one already."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
