"""``osc-gitops demo``: the story on a local sandbox. The demo itself lives in the sandbox
distribution; this module only finds it."""

from __future__ import annotations

import argparse

from reconciler.cli.common import Command
from reconciler.errors import UserError


def configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policies", default=None, metavar="DIR", help="default: examples/policies"
    )
    parser.add_argument("--cluster", default=None, metavar="DIR", help="default: examples/cluster")
    parser.add_argument(
        "--steering", choices=("network-function", "router-policy"), default=None,
        help="default: network-function if OVN 26.03's NB schema is available",
    )  # fmt: skip
    parser.add_argument(
        "--datapath",
        action="store_true",
        help="also run a real OVS/ovn-controller data path and show packets through the VNF",
    )


def run_demo(args: argparse.Namespace) -> int:
    """The demo lives in the sandbox distribution (``osc-gitops-sandbox``), which registers it
    under the entry-point group ``osc_gitops.demo``: the product never imports the sandbox, and
    the wheel and image hold no emulator."""
    from importlib.metadata import entry_points

    found = entry_points(group="osc_gitops.demo", name="run")
    if not found:
        raise UserError(
            "the demo needs the osc-gitops sandbox: `make setup` in a source checkout installs "
            "it (pip install -e ./sandbox)"
        )
    run = next(iter(found)).load()
    return int(run(args.policies, args.cluster, args.steering, datapath=args.datapath))


COMMAND = Command(
    name="demo",
    help="run the whole story against a local sandbox of real OVN processes (no cluster)",
    configure=configure_demo,
    run=run_demo,
    epilog="example:\n  osc-gitops demo",
)
