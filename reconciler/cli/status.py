"""``osc-gitops status``: the last applied commit, when, and the result."""

from __future__ import annotations

import argparse
import json
import os
import sys

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, Command, cache_dir


def configure_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache-dir",
        default=os.environ.get("OSC_CACHE_DIR"),
        metavar="DIR",
        help="as given to run/apply (default: ~/.cache/osc-gitops)",
    )
    parser.add_argument(
        "--instance", default=os.environ.get("OSC_INSTANCE", "osc-gitops"), metavar="NAME"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run_status(args: argparse.Namespace) -> int:
    from reconciler.engine.reporting import status

    st = status.read(status.status_path(cache_dir(args), args.instance))
    if args.output == "json":
        json.dump(st.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(status.render_text(st))
    return EXIT_OK if st.result in ("applied", "unchanged") else EXIT_ERROR


COMMAND = Command(
    name="status",
    help="show the last applied commit, when, and the result",
    configure=configure_status,
    run=run_status,
    description="Read the status file written by run/apply in --cache-dir.",
    epilog=(
        "exit codes: 0 last reconcile ok, 1 error/refused/unreachable or no status\n\n"
        "example:\n  kubectl -n osc-gitops exec deploy/osc-gitops -- osc-gitops status"
    ),
)
