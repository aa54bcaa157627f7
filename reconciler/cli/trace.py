"""``explain --trace``: the flags, and running the traces ``reconciler.core.views.tracing`` plans.

The pod's traffic to and from a peer (``--peer NAMESPACE/POD``, default: a pod on the same node
that no group steers) is traced with ``ovn-trace`` against the live Southbound DB (``--ovn-sb``,
``OSC_OVN_SB``), one packet per direction of each binding that steers the pod; each trace must
reach a data port of the binding's VNF instance. The SB must be the one northd writes for the NB
``--ovn-nb`` names (in interconnect clusters: the pod's zone).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from reconciler.cli.common import parse_pod
from reconciler.errors import UserError


def add_trace_args(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    group = parser.add_argument_group(
        "tracing (--trace)",
        "Run ovn-trace for the pod's traffic to and from a peer against the live Southbound DB "
        "(--ovn-sb) and show whether each packet reaches the VNF's port (or why not).",
    )
    group.add_argument("--trace", action="store_true", help="trace packets with ovn-trace")
    group.add_argument(
        "--peer", default=None, metavar="NAMESPACE/POD",
        help="the other end of the traced traffic (default: a pod no group steers, on the same "
        "node; with router-policy steering, which sees routed traffic only, on another node)",
    )  # fmt: skip
    group.add_argument(
        "--ovn-trace", default=env("OSC_OVN_TRACE", "ovn-trace"), metavar="COMMAND",
        help="the ovn-trace of the OVN the cluster runs (env OSC_OVN_TRACE; default ovn-trace)",
    )  # fmt: skip


def run_traces(
    args: argparse.Namespace, desired: Any, observed: Any, explanation: Any, pod: tuple[str, str]
) -> list[Any]:
    """The verdicts of every probe for the pod (an empty list when no binding steers it)."""
    from reconciler.adapters.ovn.trace import OvnTrace
    from reconciler.core.steering import backend_for
    from reconciler.core.views.tracing import TraceError, choose_peer, probes, verdict

    if args.observed:
        raise UserError("--trace needs the live cluster: it cannot trace against --observed")
    if not args.ovn_sb:
        raise UserError("--trace needs the Southbound DB: pass --ovn-sb REMOTE or set OSC_OVN_SB")
    routed = backend_for(explanation.steering).routed_only
    port = _port(observed, *pod)
    if port is None:
        raise TraceError(f"pod {pod[0]}/{pod[1]} has no OVN port: nothing to trace")
    if args.peer:
        peer = _port(observed, *parse_pod(args.peer))
        if peer is None:
            raise TraceError(f"--peer {args.peer}: no such pod with an OVN port")
    else:
        peer = choose_peer(desired, observed, port, routed=routed)
    planned = probes(explanation, observed, port, peer, routed)
    if not planned:
        return []
    tracer = OvnTrace(
        args.ovn_sb,
        args.ovn_trace,
        private_key=args.ovn_private_key,
        certificate=args.ovn_certificate,
        ca_cert=args.ovn_ca_cert,
    )
    tracer.check_version(observed.capabilities.network_function)
    results = []
    for probe in planned:
        out = tracer.trace(probe.datapath, probe.microflow)
        results.append(verdict(probe, out.outputs, out.last_stage, explanation.bindings))
    return results


def _port(observed: Any, namespace: str, name: str) -> Any:
    lsp = f"{namespace}_{name}"
    return next((p for p in observed.pod_ports if p.name == lsp), None)


def trace_lines(verdicts: list[Any], sb: str) -> list[str]:
    """The text section after the explanation."""
    if not verdicts:
        return ["", "Trace: no binding steers this pod, nothing to trace."]
    lines = ["", f"Trace (ovn-trace against {sb}, first packet of a new connection):"]
    for v in verdicts:
        mark = "ok" if v.reached else "NOT STEERED"
        arrow = "to the pod" if v.probe.direction == "to-pod" else "from the pod"
        lines.append(
            f"  [{mark}] Binding {v.probe.binding}, {arrow}: {v.probe.packet} "
            f"({v.probe.source} -> {v.probe.destination}): {v.detail}"
        )
    return lines
