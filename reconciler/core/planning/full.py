"""A full plan: compile the target, index what we own live, diff, and say how it was made.

The one place a plan is made from scratch and its facts of how it was made (``instance``,
``steering``, ``nb_schema``) are set, so the CLI's plan, the engine's pipeline and the incremental
planner's full pass cannot drift apart. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from reconciler.core.compiling.compile import Compiled, CompileOptions, compile_full
from reconciler.core.compiling.diff import LiveState, diff, live_state
from reconciler.core.model.desired import Desired
from reconciler.core.model.facts import Finding
from reconciler.core.model.observed import KubeObject, Observed
from reconciler.core.model.plan import Plan
from reconciler.core.model.target import Target
from reconciler.core.planning.slicing import AgentOptions, mark_agent_rows
from reconciler.core.steering import HealthIndex
from reconciler.core.transitions.hold import apply_transitions


@dataclass(frozen=True, slots=True)
class CompiledPlan:
    """A full plan with the target and live state it was diffed from (the incremental planner
    keeps both to re-diff only what changes later)."""

    compiled: Compiled
    live: LiveState
    plan: Plan
    """What may be applied now: the diff after the transitions pass
    (``reconciler.core.transitions.hold``)."""
    untransitioned: Plan | None = None
    """The diff before that pass (what the incremental planner remembers: the pass depends on
    health that changes by the second); ``None``: the same as :attr:`plan`."""
    health: HealthIndex | None = None
    """The plan's health index (what the transitions, the report beside the plan and
    ``explain`` read), made once from the observed state the plan was made from."""

    @property
    def target(self) -> Target:
        return self.compiled.target


def plan_facts(compiled: Compiled, observed: Observed, options: CompileOptions) -> dict[str, Any]:
    """How a plan was made (:class:`Plan` facts by field name); never part of its changes."""
    return {
        "instance": options.instance,
        "steering": compiled.backend.name,
        "nb_schema": observed.capabilities.schema_version,
    }


def compile_plan(
    desired: Desired, observed: Observed, options: CompileOptions, *, potential: bool = True
) -> CompiledPlan:
    """Compile everything and diff it against everything we own. A node agent's options
    (:class:`~reconciler.core.planning.slicing.AgentOptions`) mark its node's rows as the agent's.
    ``potential=False``: nothing will plan from this compile again, so the rows of pairs that
    cannot be present are not built (:func:`~reconciler.core.compiling.compile.compile_full`)."""
    namespaces = owned_namespaces(desired, options)
    strangers = lookalike_findings(observed, namespaces)
    observed = owned_only(observed, namespaces)
    compiled = compile_full(desired, observed, options, potential=potential)
    if isinstance(options, AgentOptions):
        compiled = mark_agent_rows(compiled, options.node)
    live = live_state(observed.ovn_rows, observed.kube_objects)
    raw = diff(compiled.target, live, plan_facts(compiled, observed, options))
    if strangers:
        raw = replace(raw, findings=(*raw.findings, *strangers))
    health = HealthIndex(observed)
    the_plan = apply_transitions(raw, desired, observed, compiled.backend, health)
    return CompiledPlan(compiled, live, the_plan, raw, health)


# --- which Kubernetes objects are ours ---------------------------------------------------------
#
# Labels say "osc-gitops, instance X" but anyone who may create a VirtualMachine in their own
# namespace can write them (were labels enough, apply would delete a tenant's labelled VM, or
# fail on every run where RBAC refuses that; its ``osc.io/ports`` annotation would forge a
# "removed" event to the security manager, its ``rollout.osc.io/*`` annotations drain a node's
# functions). So an object is ours only if it also
# sits in a namespace our manifests name (Argo CD's project destinations): one a VnfDeployment
# names, or one the operator lists (``--vnf-namespaces``, where a removed VnfDeployment's
# objects are pruned). Objects with our labels anywhere else are never read, written or deleted;
# the plan says they exist.


def owned_namespaces(desired: Desired, options: CompileOptions) -> frozenset[str]:
    """The namespaces whose labelled VirtualMachines and NADs are ours."""
    named = {vnf.spec.namespace for vnf in desired.vnfs.values()}
    return frozenset(named | set(options.vnf_namespaces))


_OWNED_MEMO: list[tuple[tuple[KubeObject, ...], frozenset[str], tuple[KubeObject, ...]]] = []
"""The last filter's input, namespaces and output: the same input gives the same tuple back, so
the incremental planner (which compares ``Observed`` fields by identity) does not compile
everything again on every pass while a stranger's object exists."""


def owned_only(observed: Observed, namespaces: frozenset[str]) -> Observed:
    """``observed`` with only the Kubernetes objects of ``namespaces`` (itself when all are)."""
    objects = observed.kube_objects
    if all(o.namespace in namespaces for o in objects):
        return observed
    memo = _OWNED_MEMO[0] if _OWNED_MEMO else None
    if memo is not None and memo[0] is objects and memo[1] == namespaces:
        return replace(observed, kube_objects=memo[2])
    kept = tuple(o for o in objects if o.namespace in namespaces)
    if (
        memo is not None
        and memo[1] == namespaces
        and len(memo[2]) == len(kept)
        and all(a is b for a, b in zip(memo[2], kept, strict=True))
    ):
        kept = memo[2]  # only a stranger's object changed: ours are the same tuple
    _OWNED_MEMO[:] = [(objects, namespaces, kept)]
    return replace(observed, kube_objects=kept)


def lookalike_findings(observed: Observed, namespaces: frozenset[str]) -> tuple[Finding, ...]:
    """One finding (code ``ownership``, subject ``Namespace/<name>``) per namespace holding
    objects with our labels that are not ours."""
    strangers: dict[str, list[KubeObject]] = defaultdict(list)
    for obj in observed.kube_objects:
        if obj.namespace not in namespaces:
            strangers[obj.namespace].append(obj)
    findings = []
    for namespace, objects in sorted(strangers.items()):
        shown = ", ".join(f"{o.kind} {o.name}" for o in sorted(objects, key=_by_name)[:3])
        more = f" and {len(objects) - 3} more" if len(objects) > 3 else ""
        text = (
            f"{len(objects)} object(s) in namespace {namespace} carry this instance's ownership "
            f"labels ({shown}{more}), but no VnfDeployment names {namespace} (nor "
            "--vnf-namespaces): not ours, never changed or deleted; if a VnfDeployment removed "
            f"from git left them, add {namespace} to --vnf-namespaces to prune them"
        )
        findings.append(Finding("ownership", f"Namespace/{namespace}", None, text))
    return tuple(findings)


def _by_name(obj: KubeObject) -> tuple[str, str]:
    return (obj.kind, obj.name)


def make_plan(desired: Desired, observed: Observed, options: CompileOptions) -> Plan:
    """The changes that would make the live state equal the manifests."""
    return compile_plan(desired, observed, options, potential=False).plan


class FullPlanner:
    """:func:`make_plan` as a planner without memory (what one-shot commands use): every plan is
    a full compile, so ``full`` changes nothing."""

    last_mode = "full"

    def plan(
        self, desired: Desired, observed: Observed, options: CompileOptions, *, full: bool = False
    ) -> Plan:
        return make_plan(desired, observed, options)

    def reset(self) -> None:
        """Nothing to forget."""
