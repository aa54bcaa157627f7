"""``osc-gitops snapshot``: write the observed live state to a file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reconciler.cli.common import EXIT_OK, Command, add_connection_args, connections


def configure_snapshot(parser: argparse.ArgumentParser) -> None:
    from reconciler.cli.zones import add_all_nodes_args

    add_connection_args(parser)
    parser.add_argument(
        "-f", "--file", default="-", metavar="FILE", help="where to write (default: stdout)"
    )
    add_all_nodes_args(parser)


def run_snapshot(args: argparse.Namespace) -> int:
    from reconciler.engine.pipeline import observe

    if args.all_nodes:  # interconnect: no NB to read, the agents' published views instead
        from reconciler.cli.zones import write_snapshot_all_nodes

        write_snapshot_all_nodes(args)
        return EXIT_OK

    with connections(args, read_only=True) as (kube, ovn):
        observed = observe(kube, ovn, args.instance)
    data = observed.to_json()
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.file == "-":
        sys.stdout.write(text)
    else:
        Path(args.file).write_text(text, encoding="utf-8")
        print(
            f"wrote {args.file}: {len(observed.pods)} pods, {len(observed.nodes)} nodes, "
            f"{len(observed.ovn_rows)} owned OVN rows",
            file=sys.stderr,
        )
    return EXIT_OK


COMMAND = Command(
    name="snapshot",
    help="write the observed live state to a file (for offline plans and bug reports)",
    configure=configure_snapshot,
    run=run_snapshot,
    epilog=(
        "examples:\n  osc-gitops snapshot --ovn-nb tcp:10.0.0.5:6641 -f snapshot.json\n"
        "  osc-gitops snapshot --all-nodes --kubeconfig ~/.kube/config -f snapshot.json"
    ),
)
