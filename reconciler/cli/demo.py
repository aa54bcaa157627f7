"""``osc-gitops demo``: the story on a local sandbox. The demo itself lives in the sandbox
distribution; this module only finds it."""

from __future__ import annotations

import argparse

from reconciler.cli.common import Command, add_ovn_version_arg
from reconciler.errors import UserError


def configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policies", default=None, metavar="DIR", help="default: examples/policies"
    )
    parser.add_argument("--cluster", default=None, metavar="DIR", help="default: examples/cluster")
    add_ovn_version_arg(parser, "router-policy steering")
    parser.add_argument(
        "--steering", choices=("network-function", "router-policy"), default=None,
        help="default: network-function if the OVN NB has Network Function tables "
        "(26.03), else router-policy",
    )  # fmt: skip
    parser.add_argument(
        "--datapath", action="store_true",
        help="run a real OVS/ovn-controller data path instead and show packets through the "
        "VNF: steering, fail-close/fail-open when a VNF dies, recovery",
    )  # fmt: skip
    parser.add_argument(
        "--zones", action="store_true",
        help="with --datapath: OVN-Kubernetes interconnect, one zone (NB, SB, northd, chassis) "
        "per node, a --node agent per zone and the --kubernetes-only owner; packets across the "
        "zones, a firewall and a zone's NB dying, a pod moving zones",
    )  # fmt: skip


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
    if args.zones and not args.datapath:
        raise UserError("--zones is the packet story of interconnect clusters: add --datapath")
    run = next(iter(found)).load()
    if args.zones:
        return int(run(args.policies, args.cluster, args.steering, datapath=True,
                       ovn_version=args.ovn, zones=True))  # fmt: skip
    return int(
        run(
            args.policies, args.cluster, args.steering, datapath=args.datapath,
            ovn_version=args.ovn,
        )
    )  # fmt: skip


COMMAND = Command(
    name="demo",
    help="run the whole story against a local sandbox of real OVN processes (no cluster)",
    configure=configure_demo,
    run=run_demo,
    epilog=(
        "examples:\n  osc-gitops demo\n  osc-gitops demo --datapath\n"
        "  osc-gitops demo --datapath --ovn 23.03\n  osc-gitops demo --datapath --zones"
    ),
)
