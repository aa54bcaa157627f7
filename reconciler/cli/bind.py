"""``osc-gitops bind``: the node binder alone (a DaemonSet beside a central reconciler).

It gives each VNF NIC of this node's VMs its OVN port as the OVS interface's ``iface-id``,
which released ovs-cni (v0.39.0 and before) never sets, and counts the traffic through the
VNF NICs. In interconnect clusters the node agent does the same with ``run --node N
--ovs-db URL``. See ``reconciler.engine.binder`` and docs/operations.md ("The node binder").
"""

from __future__ import annotations

import argparse
import os

from reconciler.cli.common import (
    EXIT_OK,
    Command,
    add_cache_dir_arg,
    add_instance_arg,
    add_kube_args,
    add_ovs_args,
    add_service_args,
    add_status_namespace_arg,
    binder_status_file,
    make_binder,
    scope_of,
    serve_metrics,
    start_service,
)
from reconciler.errors import UserError


def configure_bind(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--node", default=env("OSC_NODE_NAME") or None, metavar="NAME",
        help="the node this binder runs on (env OSC_NODE_NAME; the DaemonSet sets it from "
        "spec.nodeName)",
    )  # fmt: skip
    add_ovs_args(parser, required=True)
    add_kube_args(parser)
    add_instance_arg(
        parser, "bind the VMs of this osc-gitops instance (env OSC_INSTANCE; default osc-gitops)"
    )
    parser.add_argument(
        "--once", action="store_true",
        help="one pass and exit: 0 done (skipped NICs are reported, not errors), 1 the OVS "
        "database or the Kubernetes API could not be used",
    )  # fmt: skip
    add_status_namespace_arg(
        parser,
        "where the binder publishes its state, Lease osc-gitops-binder-<node> (read by "
        "explain and status --all-nodes; default osc-gitops-agents)",
    )
    add_cache_dir_arg(
        parser,
        "where its status file goes (<DIR>/status/<instance>.node.<node>.json, read by "
        "`osc-gitops status --node NODE`; default ~/.cache/osc-gitops)",
    )
    parser.add_argument(
        "--no-publish", action="store_true",
        help="do not publish the state into a Lease (no Kubernetes write at all)",
    )  # fmt: skip
    add_service_args(parser)


def run_bind(args: argparse.Namespace) -> int:
    from reconciler.engine.reporting.metrics import Metrics

    stopping = start_service(args)
    if not args.node:
        raise UserError("bind needs --node (or OSC_NODE_NAME): the node whose VNF NICs it binds")
    scope_of(args)  # checks the node name
    node = str(args.node)
    metrics = Metrics({"node": node})
    binder = make_binder(args, node, metrics)
    binder.sinks.append(binder_status_file(args, node))
    if args.once:
        return binder.run_once()

    def health() -> tuple[bool, dict[str, object]]:
        return True, {"node": node}

    def ready() -> tuple[bool, dict[str, object]]:
        return binder.state.ok, {"node": node, "error": binder.state.error}

    server = serve_metrics(args, metrics, health, ready)
    try:
        binder.run(stopping)
    finally:
        if server is not None:
            server.stop()
    return EXIT_OK


COMMAND = Command(
    name="bind",
    help="node binder: set each VNF NIC's OVN port as its OVS interface's iface-id",
    configure=configure_bind,
    run=run_bind,
    description=(
        "Released ovs-cni (v0.39.0 and before) does not set external_ids:iface-id from the "
        "NAD, so OVN never binds a VNF's ports. The binder finds each VNF NIC of this node's "
        "VMs on its OVS interface (the Port's contPodUid = the VM's virt-launcher pod, "
        "contIface = the interface Multus' network-status reports for the NIC's NAD, with the "
        "VM's MAC) and sets iface-id to the NIC's OVN port, nothing else; a right iface-id "
        "(newer ovs-cni) is left alone, a VM that is gone loses its binding. It reacts to OVS "
        "and pod/VM changes, re-checks everything every --bind-resync, and counts the traffic "
        "through the VNF NICs (/metrics, and its status Lease)."
    ),
    epilog=(
        "exit codes: 0 after SIGTERM; --once: 0 done, 1 the OVS database or the API could not "
        "be used\n\n"
        "examples:\n"
        '  osc-gitops bind --in-cluster --node "$OSC_NODE_NAME" \\\n'
        "      --ovs-db unix:/var/run/openvswitch/db.sock        # the DaemonSet\n"
        "  osc-gitops bind --node node-1 --ovs-db unix:/var/run/openvswitch/db.sock --once\n"
        '  osc-gitops run --in-cluster --node "$OSC_NODE_NAME" --ovn-nb unix:/var/run/ovn/'
        "ovnnb_db.sock \\\n      --ovs-db unix:/var/run/openvswitch/db.sock   # an agent that "
        "binds too"
    ),
)
