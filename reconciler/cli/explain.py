"""``osc-gitops explain NAMESPACE/POD``: is this pod protected, by which VNF, is it alive?

The command only reads and prints: it loads the manifests and the observed state (live, or a
snapshot with ``--observed``), makes the same full plan as ``osc-gitops plan`` and hands both to
``reconciler.core.views.explain``, which does the explaining.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    Command,
    add_compile_args,
    add_connection_args,
    add_source_args,
    add_status_namespace_arg,
    compile_options,
    connections,
    load_source,
    parse_pod,
    print_json,
    read_snapshot,
)
from reconciler.cli.trace import add_trace_args

EXIT_NOT_STEERED = 3
"""Selected but not (yet) steered as declared: rows missing or different, or no VNF instance on
the pod's node (2 is ``plan``'s "changes"; 3 keeps the two apart in scripts)."""


def configure_explain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod", metavar="NAMESPACE/POD", help="the pod to explain")
    add_source_args(parser)
    add_connection_args(parser)
    add_compile_args(parser, health=False)
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text",
        help="text (for humans) or json (the contract in reconciler/render/explain.py)",
    )  # fmt: skip
    parser.add_argument(
        "--observed",
        metavar="FILE",
        help="explain offline, against a snapshot written by `osc-gitops snapshot`",
    )
    add_status_namespace_arg(
        parser,
        "where the node binders publish their state, Leases osc-gitops-binder-<node>: "
        "read to tell why a VNF port is unbound and whether traffic crossed the VNF "
        "(default osc-gitops-agents)",
    )
    add_trace_args(parser)


def binder_reports(args: argparse.Namespace, nodes: list[str]) -> dict[str, Any]:
    """What each node's binder published (``reconciler.core.views.traffic.BinderReport``);
    a Lease that cannot be read makes every node's report say why."""
    import datetime as dt

    from reconciler.adapters.kube.status_lease import StatusReader
    from reconciler.cli.common import kube_settings
    from reconciler.core.model.naming import BINDER_LEASE_PREFIX
    from reconciler.core.views.traffic import BinderReport
    from reconciler.errors import OscError

    try:
        published = StatusReader.for_settings(kube_settings(args)).agents(
            args.status_namespace, prefix=BINDER_LEASE_PREFIX
        )
    except OscError as exc:
        return {node: BinderReport(node, problem=str(exc)) for node in nodes}
    now = dt.datetime.now(dt.UTC)
    reports: dict[str, Any] = {}
    for node, lease in published.items():
        age = lease.age(now)
        fresh = age is not None and age <= (lease.duration or 30.0)
        reports[node] = BinderReport(node, lease.status, fresh, lease.problem)
    return reports


def run_explain(args: argparse.Namespace) -> int:
    from reconciler.core.planning.full import compile_plan
    from reconciler.core.views.explain import explain_pod
    from reconciler.engine.pipeline import observe
    from reconciler.render.explain import render_explain_json, render_explain_text

    namespace, name = parse_pod(args.pod)
    desired, _ = load_source(args)
    options = compile_options(args)
    binders = None
    if args.observed:
        observed = read_snapshot(args.observed)
    else:
        with connections(args, read_only=True) as (kube, ovn):
            observed = observe(kube, ovn, options.instance)
        binders = binder_reports(args, [n.name for n in observed.nodes])
    explanation = explain_pod(
        desired, observed, compile_plan(desired, observed, options), namespace, name, binders
    )
    if args.trace:  # packets through the SB's logical flows (reconciler.cli.trace)
        from reconciler.cli.trace import run_traces, trace_lines
        from reconciler.render.explain import explain_json

        verdicts = run_traces(args, desired, observed, explanation, (namespace, name))
        traced = all(v.reached for v in verdicts)
        if args.output == "json":
            data = {**explain_json(explanation), "trace": [v.to_json() for v in verdicts]}
            print_json(data)
        else:
            sys.stdout.write(render_explain_text(explanation))
            sys.stdout.write("\n".join(trace_lines(verdicts, args.ovn_sb)) + "\n")
        return EXIT_OK if explanation.as_declared and traced else EXIT_NOT_STEERED
    if args.output == "json":
        sys.stdout.write(render_explain_json(explanation))
    else:
        sys.stdout.write(render_explain_text(explanation))
    return EXIT_OK if explanation.as_declared else EXIT_NOT_STEERED


COMMAND = Command(
    name="explain",
    help="show how one pod is steered: groups, bindings, VNF instance and health, OVN rows",
    configure=configure_explain,
    run=run_explain,
    description=(
        "Explain one pod: the SecurityGroups that select it and through which label, the "
        "Bindings that apply in the order OVN evaluates them (and which an earlier one "
        "shadows), the VNF instance on its node with its VirtualMachine and its health as OVN "
        "reports it, the OVN rows that steer it and whether each exists live as compiled, and "
        "the warnings that concern it."
    ),
    epilog=(
        f"exit codes: {EXIT_OK} steered as declared (a pod no group selects counts: nothing is "
        f"declared for it), {EXIT_NOT_STEERED} selected but not (yet) steered (rows missing or "
        f"different, or no VNF instance on its node; with --trace also: a traced packet does not "
        f"reach the VNF), {EXIT_ERROR} error (e.g. pod not found)\n\n"
        "examples:\n"
        "  osc-gitops explain shop-frontend/web-1 examples/policies \\\n"
        "      --ovn-nb tcp:10.0.0.5:6641 --kubeconfig ~/.kube/config\n"
        "  osc-gitops explain shop/web-7 policies/ -o json --observed snapshot.json   # offline\n"
        "  osc-gitops explain shop/web-7 policies/ --trace --ovn-sb tcp:10.0.0.5:6642"
    ),
)
