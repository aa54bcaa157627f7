"""``osc-gitops schema``: print, write or check the JSON Schemas generated from the models."""

from __future__ import annotations

import argparse
import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, Command, plural
from reconciler.errors import UserError


def _configure_schema(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--write", action="store_true",
        help="(re)write the schema files into --dir (for editors: see docs/manifests.md)",
    )  # fmt: skip
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
                print(
                    f"{path}: out of date with the manifest models of this osc-gitops",
                    file=sys.stderr,
                )
            print("error: run `osc-gitops schema --write` and commit the result", file=sys.stderr)
            return EXIT_ERROR
        print(f"{args.dir}: schemas are up to date", file=sys.stderr)
        return EXIT_OK
    if args.write:
        try:
            written = schema.write(args.dir)
        except OSError as exc:
            raise UserError(f"cannot write schemas to {args.dir}: {exc.strerror or exc}") from exc
        print(f"wrote {plural(len(written), 'file')} to {args.dir}", file=sys.stderr)
        return EXIT_OK
    sys.stdout.write(schema.render(schema.manifest_schema()))
    return EXIT_OK


COMMAND = Command(
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
        "  osc-gitops schema --write          # after upgrading osc-gitops\n"
        "  osc-gitops schema --check          # in CI: exit 1 when schemas/ drifted"
    ),
)
