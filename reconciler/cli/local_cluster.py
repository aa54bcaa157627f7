"""``osc-gitops sandbox up|down``: a local OVN + Kubernetes API emulator that stays up, to try
one's own manifests with ``plan``/``apply``/``run``/``explain`` and ``kubectl``.

The sandbox lives in the sandbox distribution (``osc-gitops-sandbox``), which registers
``up`` and ``down`` under the entry-point group ``osc_gitops.sandbox`` (as ``osc-gitops demo``
finds the demo): the product never imports it, and its wheel holds none of it.
"""

from __future__ import annotations

import argparse
import os

from reconciler.cli.common import Command, add_ovn_version_arg
from reconciler.errors import UserError


def configure_sandbox(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", title="actions")
    actions.required = True
    folder_help = (
        "where the sandbox keeps its state, sockets and log (env OSC_SANDBOX_DIR; default "
        "~/.cache/osc-gitops/sandbox)"
    )
    start = actions.add_parser(
        "up",
        help="start the sandbox and print the environment that points osc-gitops and kubectl at it",
        description=(
            "Start OVN (NB, SB and northd) and a Kubernetes API emulator in the background, "
            "seeded from a cluster description as OVN-Kubernetes would, and print "
            "`export OSC_OVN_NB=… OSC_OVN_SB=… KUBECONFIG=… OSC_OVN_TRACE=…` on stdout. Pods "
            "created or deleted with kubectl get (or lose) their OVN port while it runs. "
            "Without --datapath no packet crosses a VNF: the session plays each VNF VM answering "
            "OVN's health probe (sandbox.osc.io/forwarding=false on a VM plays it dead)."
        ),
        epilog=(
            "examples:\n"
            '  eval "$(osc-gitops sandbox up)"\n'
            "  kubectl get pods -A\n"
            "  osc-gitops plan examples/policies\n"
            '  eval "$(osc-gitops sandbox up --cluster my-cluster/ --ovn 23.03)"\n'
            '  eval "$(sudo -E osc-gitops sandbox up --datapath)"   # packets through the VNFs\n\n'
            "exit codes: 0 up (or already up with the same options), 1 error"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    start.add_argument(
        "--cluster", default=None, metavar="DIR",
        help="cluster description: namespaces.yaml, nodes.yaml, pods.yaml in kubectl's List "
        "format (default: examples/cluster)",
    )  # fmt: skip
    add_ovn_version_arg(start, "use --steering router-policy")
    start.add_argument(
        "--datapath", action="store_true",
        help="also run the data path (root only): OVS and ovn-controller, every pod and a VNF "
        "guest per VirtualMachine instance in network namespaces, so VNFs pass OVN's health "
        "checks and traffic is steered through them",
    )  # fmt: skip
    start.add_argument("--dir", default=None, metavar="DIR", help=folder_help)
    stop = actions.add_parser(
        "down",
        help="stop the sandbox and remove its folder",
        epilog="exit codes: 0 stopped (or none was up), 1 error",
    )
    stop.add_argument("--dir", default=None, metavar="DIR", help=folder_help)
    run = actions.add_parser(
        "exec",
        help="run a command in a pod's or a VNF guest's network namespace (--datapath, root)",
        description=(
            "Run CMD in the network namespace of pod NAMESPACE/NAME, or of the VNF guest of the "
            "VirtualMachine NAMESPACE/NAME, of a sandbox started with --datapath (the sandbox "
            "runs no containers: kubectl exec has nothing to enter)."
        ),
        epilog=(
            "examples:\n"
            "  osc-gitops sandbox exec shop-frontend/web-1 -- ping -c 3 10.244.1.9\n"
            "  osc-gitops sandbox exec shop-frontend/web-1 -- ip addr\n"
            "  osc-gitops sandbox exec osc-vnfs/firewall-node-1 -- ip -s link   # a VNF guest\n\n"
            "exit codes: CMD's own; 1 error (no data path, no such pod or guest, not root)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("target", metavar="NAMESPACE/NAME", help="a pod, or a VNF VirtualMachine")
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command")
    run.add_argument("--dir", default=None, metavar="DIR", help=folder_help)


def run_sandbox(args: argparse.Namespace) -> int:
    from importlib.metadata import entry_points

    found = entry_points(group="osc_gitops.sandbox", name=args.action)
    if not found:
        raise UserError(
            "the sandbox needs the osc-gitops sandbox distribution: `make setup` in a source "
            "checkout installs it (pip install -e ./sandbox)"
        )
    action = next(iter(found)).load()
    folder = args.dir or os.environ.get("OSC_SANDBOX_DIR") or None
    if args.action == "up":
        if args.datapath:
            return int(action(folder, args.cluster, args.ovn, datapath=True))
        return int(action(folder, args.cluster, args.ovn))
    if args.action == "exec":
        cmd = list(args.cmd)
        if cmd[:1] == ["--"]:
            cmd = cmd[1:]
        return int(action(folder, args.target, cmd))
    return int(action(folder))


COMMAND = Command(
    name="sandbox",
    help="start (up) or stop (down) a local OVN + Kubernetes API sandbox to try manifests on, "
    "or run a command in one of its pods or VNF guests (exec)",
    configure=configure_sandbox,
    run=run_sandbox,
    description=(
        "A local cluster that stays up: real OVN daemons and the Kubernetes API emulator, "
        "seeded from a cluster description, for your own plan/apply/run/explain and kubectl."
    ),
    epilog=(
        "examples:\n"
        '  eval "$(osc-gitops sandbox up)"      # OSC_OVN_NB, OSC_OVN_SB, KUBECONFIG, '
        "OSC_OVN_TRACE\n"
        "  osc-gitops apply examples/policies --auto-approve\n"
        "  osc-gitops explain shop-frontend/web-1 examples/policies --trace\n"
        "  osc-gitops sandbox down"
    ),
)
