"""``osc-gitops apply``: make the cluster and OVN match the manifests, then verify."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from reconciler.cli import common
from reconciler.cli.approve import add_approve_arg
from reconciler.cli.review import add_base_arg
from reconciler.core.model.observed import Observed

if TYPE_CHECKING:
    from reconciler.core.model.plan import Plan
    from reconciler.engine.apply import ApplyReport


def configure_apply(parser: argparse.ArgumentParser) -> None:
    common.add_reconcile_args(parser)
    common.add_notify_args(parser)
    parser.add_argument(
        "-o", "--output", choices=("text", "json", "markdown"), default="text",
        help="how to print the plan that is applied",
    )  # fmt: skip
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="allow an empty manifest set to delete everything this instance owns",
    )
    add_approve_arg(parser)
    add_base_arg(parser)
    common.add_verbose_arg(parser)
    parser.add_argument("--revision", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--wait", action="store_true",
        help="after the writes, keep reconciling until every VNF instance is healthy, no "
        "steering is held and no rolling update is under way (Helm's --wait)",
    )  # fmt: skip
    parser.add_argument(
        "--wait-timeout", type=parse_duration, default=300.0, metavar="DURATION",
        help="how long --wait waits: 90, 90s, 5m, 1h30m (default 5m); exit 1 after it",
    )  # fmt: skip


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h30m``, ``1.5m`` -> seconds (argparse type)."""
    import re

    parts = re.fullmatch(
        r"\s*(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?\s*", text
    )
    if not text.strip() or parts is None or not any(parts.groups()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (examples: 90, 90s, 5m, 1h30m)"
        )
    hours, minutes, seconds = (float(g) if g else 0.0 for g in parts.groups())
    return hours * 3600 + minutes * 60 + seconds


class _Settled:
    """A pipeline listener that keeps the live state the apply ended with (for the status
    file's VNF health)."""

    def __init__(self) -> None:
        self.last: Observed | None = None

    def observed(self, observed: Observed) -> None:
        pass

    def applying(self, plan: object) -> None:
        pass

    def applied(self, report: object, observed: Observed) -> None:
        pass

    def settled(self, observed: Observed) -> None:
        self.last = observed


def run_apply(args: argparse.Namespace) -> int:
    from reconciler.engine.notifications import load_told

    outbox = common.outbox_for(args)
    outbox.remember(load_told(common.told_path(args, common.status_name(args))))
    try:
        return _apply(args, outbox)
    finally:
        outbox.close()


def _apply(args: argparse.Namespace, outbox: Any) -> int:
    from reconciler.cli import saved as saved_plans
    from reconciler.cli.approve import ReviewListener, asks
    from reconciler.cli.review import review as reviewed_plan
    from reconciler.engine.pipeline import Pipeline
    from reconciler.render import render

    saved = None if args.repo else saved_plans.load(args.path)  # apply FILE: a saved plan
    if saved is not None:
        saved_plans.adopt(args, saved)
        desired, revision = saved.desired(), saved.body.get("revision")
    else:
        desired, revision = common.load_source(args)
    options = common.compile_options(args)
    scope = common.scope_of(args)
    settled = _Settled()

    def reviewed(plan: Plan, observed: Observed) -> Plan:
        return reviewed_plan(args, plan, desired, observed)  # protection changes, typo guards

    def show(plan: Plan) -> None:
        sys.stdout.write(render(plan, args.output, args.verbose))
        sys.stdout.flush()

    def unchanged(plan: Plan, observed: Observed) -> None:
        assert saved is not None
        saved_plans.check(saved, plan)

    review = ReviewListener(
        settled, reviewed, ask=asks(args) and saved is None, show=show,
        check=unchanged if saved is not None else None,
    )  # fmt: skip
    waited = None
    # --wait reconciles again and again: the IDL mirror reads the NB cheaply each time and tells
    # when northd changes a group's active function; the warm loop's planner
    with common.connections(args, one_shot=not args.wait, scope=scope) as (kube, ovn):
        wake = planner = None
        if args.wait:
            from reconciler.core.planning.incremental import IncrementalPlanner
            from reconciler.engine.wait import health_wake

            wake, planner = health_wake(ovn), IncrementalPlanner()
        pipeline = Pipeline(kube, ovn, options, allow_empty=args.allow_empty, scope=scope,
                            planner=planner, notices=outbox)  # fmt: skip
        outcome = pipeline.run(desired, revision, review)
        report = outcome.report
        if saved is not None and report.plan.empty:
            saved_plans.check(saved, report.plan)  # an empty fresh plan must be what was saved
        if not review.shown:
            shown = review.plan if review.plan is not None else reviewed(report.plan, review.first)
            sys.stdout.write(render(shown, args.output, args.verbose))
            sys.stdout.flush()
        if report.plan.changes:
            print(
                f"Apply complete: {report.applied} change(s) applied, converged "
                f"(OVN transaction {report.seconds.get('ovn_transaction', 0) * 1000:.0f} ms).",
                file=sys.stderr,
            )
        left = outcome.after.pending if outcome.after is not None else report.plan.pending
        if left and not args.wait:
            print(
                f"Not converged yet: {len(left)} pending (a rolling update, steering held "
                "until a VNF instance is healthy, a VM to restart): `osc-gitops plan` lists "
                "them; later passes write what they can (apply --wait, or the run loop).",
                file=sys.stderr,
            )
        if args.wait:  # the passes after it never ask: the plan was approved
            waited = _wait(args, pipeline, desired, revision, kube, wake, scope, outcome, settled)
    managers = _deliver(args, outbox)
    transitions = (
        waited.transitions
        if waited is not None
        else _transitions(report.plan, desired, settled.last or outcome.observed)
    )
    _record_apply(args, revision, report, settled.last, transitions, managers)
    if waited is not None and not waited.done:
        return common.EXIT_ERROR
    return common.EXIT_OK


def _deliver(args: argparse.Namespace, outbox: Any) -> list[dict[str, Any]]:
    """Try each security manager once (at most twice ``--notify-timeout``) with what this apply
    told them; warn about what they did not take (the apply stands: the next one tells them
    again) and remember what they hold. Returns their state for the status file."""
    from reconciler.engine.notifications import save_told

    delivered = outbox.flush(2 * outbox.settings.timeout, retry=False)
    path = common.told_path(args, common.status_name(args))
    try:
        save_told(path, outbox.told())
    except OSError as exc:
        print(f"warning: cannot write {path}: {exc}", file=sys.stderr)
    managers: list[dict[str, Any]] = outbox.status()
    if not delivered:
        for m in managers:
            if m["pending"]:
                why = f": {m['last_error']}" if m.get("last_error") else " (no answer in time)"
                print(
                    f"warning: security manager {m['manager']}: {m['pending']} notification(s) "
                    f"not delivered{why}; the next apply (or run) tells it again",
                    file=sys.stderr,
                )
    for m in managers:
        if m.get("rejected"):
            print(f"warning: security manager {m['manager']} refused {m['rejected']} "
                  f"notification(s): {m.get('last_error', '')}", file=sys.stderr)  # fmt: skip
    return managers


def _transitions(plan: Plan, desired: Any, observed: Observed) -> dict[str, object]:
    """The held steering (and the pods it leaves NOT protected) and the rollouts a plan
    reports (for the status file)."""
    from reconciler.engine.transitions import Transitions

    return Transitions(None).after_pass(plan, observed, desired).status_json()


class _Waited:
    def __init__(self, done: bool, transitions: dict[str, object]) -> None:
        self.done = done
        self.transitions = transitions


def _wait(
    args: argparse.Namespace, pipeline: Any, desired: Any, revision: str | None, kube: Any,
    wake: Any, scope: Any, outcome: Any, settled: _Settled,
) -> _Waited:  # fmt: skip
    """``--wait``: reconcile until ready (``reconciler.engine.wait``), with a progress line on a
    terminal; prints what is not ready when the timeout passes."""
    from reconciler.cli.progress import WaitProgress
    from reconciler.engine.transitions import Transitions, VmActions
    from reconciler.engine.wait import wait_until_ready

    writes = scope.writes_kubernetes and scope.reads_ovn and isinstance(kube, VmActions)
    transitions = Transitions(kube if writes else None, instance=args.instance)
    # a terminal: one block redrawn in place; else a line per change of state
    shown = WaitProgress(sys.stderr, sys.stderr.isatty())
    try:
        result = wait_until_ready(
            pipeline, desired, revision, transitions, outcome, settled.last or outcome.observed,
            settled, timeout=args.wait_timeout, wake=wake, progress=shown.update,
        )  # fmt: skip
    finally:
        shown.finish()
        transitions.release()  # a rollout it leaves unfinished: another process goes on at once
    last = result.report
    if result.done:
        print(f"Ready after {result.seconds:.1f} s: every VNF instance healthy, nothing held "
              f"({result.passes} pass(es)).", file=sys.stderr)  # fmt: skip
        return _Waited(True, last.status_json())
    print(f"error: not ready after {args.wait_timeout:.0f} s (--wait-timeout):", file=sys.stderr)
    for line in result.unready:
        print(f"  {line}", file=sys.stderr)
    return _Waited(False, last.status_json())


def _record_apply(
    args: argparse.Namespace,
    revision: str | None,
    report: ApplyReport,
    observed: Observed | None,
    transitions: dict[str, Any] | None = None,
    managers: list[dict[str, Any]] | None = None,
) -> None:
    """Write the status file read by ``osc-gitops status`` (in ``--cache-dir``, default
    ``~/.cache/osc-gitops``), with each VNF instance's health as OVN reported it when the apply
    ended and the VNF data ports OVN had not bound then. A status that cannot be written is a
    warning: the apply stands."""
    from reconciler.core.steering import HealthIndex
    from reconciler.engine.reporting import status

    path = status.status_path(common.cache_dir(args), common.status_name(args))
    health = HealthIndex(observed) if observed is not None else None
    instances = [h.to_json() for h in health.instances().values()] if health is not None else []
    unbound = [u.to_json() for u in health.unbound] if health is not None else []
    try:
        status.record_apply(
            path,
            args.instance,
            revision=revision,
            plan=report.plan,
            source=args.repo or args.path,
            ref=args.ref if args.repo else None,
            vnf_instances=instances,
            transitions=transitions,
            unbound=unbound,
            security_managers=managers,
        )
    except OSError as exc:
        print(f"warning: cannot write status file {path}: {exc}", file=sys.stderr)


COMMAND = common.Command(
    name="apply",
    help="make the cluster and OVN match the manifests, then verify convergence",
    configure=configure_apply,
    run=run_apply,
    description=(
        "Kubernetes writes first (VNF VMs), then all OVN changes in ONE transaction, then "
        "Kubernetes deletes; finally a fresh plan must be empty."
    ),
    epilog=(
        "On a terminal, apply shows the plan and asks before writing (--auto-approve: do not "
        "ask); without a terminal it never asks. apply FILE applies exactly the plan `plan -out "
        "FILE` saved, without asking, and refuses it when the live state changed since.\n\n"
        "exit codes: 0 applied and converged (or nothing to do; with --wait: and ready), 1 "
        "error, not converged or cancelled (--wait: not ready within --wait-timeout)\n\n"
        "examples:\n"
        "  osc-gitops apply examples/policies --ovn-nb tcp:10.0.0.5:6641\n"
        "  osc-gitops plan policies/ -out plan.json && osc-gitops apply plan.json\n"
        "  osc-gitops apply policies/ --wait --wait-timeout 10m  # until every VNF is healthy\n"
        "  osc-gitops apply policies/ --steering router-policy   # OVN < 26.03\n"
        "  osc-gitops apply policies/ --kubernetes-only          # interconnect: VMs, NADs\n"
        "  osc-gitops apply policies/ --node node-1 --ovn-nb unix:/var/run/ovn/ovnnb_db.sock"
    ),
)
