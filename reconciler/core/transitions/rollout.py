"""Rolling VNF upgrades: a spec change that needs a VM restart goes node by node.

KubeVirt does not restart a running VM when its template changes (image, cpu, memory, ...); it
only sets the ``RestartRequired`` condition and the old guest keeps running. Patching every VM
and restarting them all would drop (``fail-close``) or unprotect (``fail-open``) every node's
traffic for a whole boot. So a template change rolls like a DaemonSet with ``maxUnavailable``:

1. **Held.** A VM whose template changed keeps its live spec (its update is left out of the
   plan, and the plan says ``VnfDeployment/firewall: 1 of 3 nodes updated``) until the rollout
   selects it.
2. **Selected**, at most ``updateStrategy.maxUnavailable`` nodes at a time, in node name order,
   one VM per node at a time; on a node with two instances the standby first (the one northd
   did not make active), and its active one only once the standby is healthy again. A VM of a
   two-instance node is first **drained** (``draining``): the plan takes its function out of the
   node's steering groups, so northd moves the traffic to the other, healthy member before
   anything is restarted (no packet waits for a failover).
3. **Restarted** (``restarting``): the plan releases the VM's update, and once it is written
   the engine calls KubeVirt's ``restart`` subresource (``virtctl restart``).
4. **Booting**: it counts as upgraded once OVN reports it healthy (its probe group, or its
   steering group) and at least the health check's detection time
   (``failureCount * (interval + timeout) + interval``) has passed since the restart, so a
   "healthy" written before the old guest went down is never taken for the new one. Then its
   state is cleared (the plan puts it back into its groups) and the next VM is selected.
5. **Halted**: a VM not upgraded ``progressDeadlineSeconds`` after its restart (or drain)
   stops the rollout of its VnfDeployment: no further VM is selected, and plan, status and
   metrics say why. It resumes by itself if the VM becomes healthy; a new spec (the fix) rolls
   again from the halted VM.

The state lives in the cluster, in annotations on each VirtualMachine (``rollout.osc.io/phase``,
``/since``, ``/template``, ``/halted``, see :data:`PHASE` ...), so a reconciler that restarts
(or another replica taking over) continues where the last one stopped. They are outside the
``osc.io/`` prefix of managed fields: an update of the VM never removes them and the diff never
sees them.

Two pure halves: :func:`hold_updates` turns a plan into the plan of this moment (held updates
out, released ones in, drained functions out of their groups) and describes every rollout in
:attr:`Plan.rollouts`; :func:`next_steps` decides, from that description, the live state and the
time, which annotations to write and which VMs to restart (``reconciler.engine.rollout`` does
it). Neither does I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from reconciler.core.compiling.diff import diff, live_state
from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Desired, VnfDeployment
from reconciler.core.model.facts import HEALTHY, Finding, VmRollout, VnfRollout
from reconciler.core.model.observed import KubeObject, Observed
from reconciler.core.model.plan import Change, Plan
from reconciler.core.model.target import Target
from reconciler.core.steering import HealthIndex, MemberHealth, SteeringBackend

__all__ = [
    "BOOTING",
    "DRAINING",
    "PHASE",
    "RESTARTING",
    "Step",
    "Steps",
    "detection_window",
    "hold_updates",
    "next_steps",
    "template_hash",
    "why_unready",
]

PHASE = f"{own.ROLLOUT_PREFIX}phase"
"""``draining`` | ``restarting`` | ``booting``; absent: not being rolled."""
SINCE = f"{own.ROLLOUT_PREFIX}since"
"""When the phase began (RFC 3339, UTC): the deadline and the detection window count from it."""
TEMPLATE = f"{own.ROLLOUT_PREFIX}template"
"""The hash (:func:`template_hash`) of the template the VM is being rolled to."""
HALTED = f"{own.ROLLOUT_PREFIX}halted"
"""Why the rollout halted at this VM (set past the deadline, cleared when it is upgraded)."""
DRAINING, RESTARTING, BOOTING = "draining", "restarting", "booting"
Phase = Literal["draining", "restarting", "booting"]
_DRAINED = (DRAINING, RESTARTING, BOOTING)
_RELEASED = (RESTARTING, BOOTING)
_VM = "VirtualMachine"


def template_hash(template: Any) -> str:
    """A short, stable digest of a VM's ``spec.template`` (what a restart would change)."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _template(body: Mapping[str, Any] | None) -> Any:
    return ((body or {}).get("spec") or {}).get("template")


def parse_time(value: str | None) -> float | None:
    """Epoch seconds of an RFC 3339 ``SINCE`` value (``None`` when absent or unreadable)."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def format_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def detection_window(vnf: VnfDeployment) -> float:
    """Seconds after a restart before OVN's "healthy" can be trusted to be about the new guest:
    the time OVN needs to declare the old one offline, plus one probe."""
    check = vnf.spec.healthCheck
    if not check.enabled:
        return 0.0
    return float(check.failureCount * (check.interval + check.timeout) + check.interval)


# ------------------------------------------------------------------------------- the plan side


def _vm_identity(
    obj_labels: Mapping[str, Any], key: str, annotations: Mapping[str, Any] | None = None
) -> tuple[str, str, str] | None:
    """``(vnf, node, slot)`` of one of our VMs (its labels, annotations and name)."""
    vnf, node = obj_labels.get(own.VNF_LABEL), own.node_of(obj_labels, annotations or {})
    if not isinstance(vnf, str) or not isinstance(node, str):
        return None
    name = key.partition("/")[2]
    slot = next((s for s in naming.SLOTS if s and naming.vm_name(vnf, node, s) == name), "")
    return vnf, node, slot


def _labels(body: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((body or {}).get("metadata") or {}).get("labels") or {}


def _annotations(body: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((body or {}).get("metadata") or {}).get("annotations") or {}


def _vm_node(body: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The labels of a VM body with ``osc.io/node`` the full node name (module
    ``ownership``: the label shortens a name longer than 63 characters)."""
    labels = dict(_labels(body))
    node = own.node_of(labels, _annotations(body))
    if node is not None:
        labels[own.NODE_LABEL] = node
    return labels


def hold_updates(
    plan: Plan, desired: Desired, observed: Observed, backend: SteeringBackend
) -> Plan:
    """The plan of this moment of every rollout (see the module docstring): template updates of
    VMs not yet ``restarting`` are left out, the functions of VMs being rolled on a
    two-instance node are taken out of the node's steering groups, and :attr:`Plan.rollouts`
    describes each VnfDeployment whose VMs are outdated or being rolled."""
    owner = plan.instance or own.DEFAULT_INSTANCE
    live_vms = {f"{o.namespace}/{o.name}": o for o in observed.kube_objects if o.kind == _VM}
    outdated: dict[str, Change] = {}
    for change in plan.changes:
        if (
            change.kind == _VM
            and change.action == "update"
            and _template(change.before) != _template(change.after)
        ):
            outdated[change.key] = change
    rolling = {k: o for k, o in live_vms.items() if o.state.get(PHASE)}
    if not outdated and not rolling:
        return plan
    if not observed.capabilities.network_function:
        return _unrolled(plan, outdated)

    vms: dict[str, list[VmRollout]] = defaultdict(list)
    dropped: set[tuple[str, str]] = set()
    drained: dict[tuple[str, str], set[str]] = defaultdict(set)
    for key in sorted(outdated.keys() | rolling.keys()):
        obj = live_vms.get(key)
        pending = outdated.get(key)
        body = pending.after if pending else obj.body if obj else None
        who = _vm_identity(_labels(body), key, _annotations(body))
        if who is None or who[0] not in desired.vnfs:
            continue
        vnf, node, slot = who
        state = obj.state if obj is not None else {}
        target = template_hash(_template(pending.after)) if pending else state.get(TEMPLATE, "")
        phase = state.get(PHASE)
        released = pending is not None and phase in _RELEASED and state.get(TEMPLATE) == target
        if pending is not None and not released:
            dropped.add((_VM, key))
        vm = VmRollout(
            key=key,
            node=node,
            slot=slot,
            function=naming.network_function(owner, vnf, node, slot),
            outdated=pending is not None,
            released=released,
            template=target,
            phase=phase,
            since=state.get(SINCE),
            rolling_to=state.get(TEMPLATE),
            halted=state.get(HALTED),
            peer=(
                naming.network_function(owner, vnf, node, "" if slot else naming.SECOND)
                if desired.vnfs[vnf].spec.instancesPerNode > 1
                else None
            ),
        )
        vms[vnf].append(vm)
        if phase in _DRAINED and desired.vnfs[vnf].spec.instancesPerNode > 1:
            drained[(vnf, node)].add(vm.function)

    changes = [c for c in plan.changes if (c.kind, c.key) not in dropped]
    # the VMs there will be: live ones not deleted, and new ones (for "n of m nodes")
    gone = {c.key for c in plan.changes if c.kind == _VM and c.action == "delete"}
    vm_labels = [_vm_node(o.body) for k, o in live_vms.items() if k not in gone]
    vm_labels += [_vm_node(c.after) for c in plan.changes if c.kind == _VM and c.action == "create"]
    if drained:
        changes = _drain(changes, drained, observed, backend)
    rollouts = [
        _vnf_rollout(desired.vnfs[vnf], sorted(vm_list, key=lambda v: (v.node, v.slot)), vm_labels)
        for vnf, vm_list in sorted(vms.items())
    ]
    changes.sort(key=lambda c: c.sort_key)
    findings = (*plan.findings, *_chain_warnings(desired, vms))
    return replace(plan, changes=tuple(changes), rollouts=tuple(rollouts), findings=findings)


def _chain_warnings(desired: Desired, vms: Mapping[str, list[VmRollout]]) -> list[Finding]:
    """A chain is wired through the first instance of each hop only: a standby
    serves the VNF's own bindings, not the chain, so restarting the first instance interrupts
    the chain on that node whatever ``instancesPerNode`` is; the plan says so."""
    out = []
    for vnf in sorted(vms):
        if desired.vnfs[vnf].spec.instancesPerNode < 2:
            continue  # one instance: every binding through it is interrupted, as documented
        for name, binding in sorted(desired.bindings.items()):
            if binding.spec.is_chain and vnf in binding.spec.vnfs:
                text = (
                    f"VnfDeployment {vnf}: its rolling update interrupts Binding {name}'s chain "
                    f"{binding.spec.vnf_text} on each node while the first instance there "
                    f"restarts (a chain crosses the first instance of each hop only; the "
                    "standby takes over the VNF's own bindings): its failure policy acts meanwhile"
                )
                out.append(Finding("transition", f"VnfDeployment/{vnf}", None, text))
    return out


def _unrolled(plan: Plan, outdated: Mapping[str, Change]) -> Plan:
    """Where OVN cannot report each instance's health (no Network Function tables: OVN before
    26.03, or a ``--kubernetes-only`` process, which reads no NB), nothing can tell when a
    restarted VM is back, so there is no rolling update: the new template is written at once
    and KubeVirt applies it at each VM's next start, as without osc-gitops; the plan says so."""
    vnfs = sorted({c.origin.partition("/")[2] for c in outdated.values()})
    warning = (
        f"VnfDeployment {', '.join(vnfs)}: the new VM template is written now and takes effect "
        "at each VM's next restart (KubeVirt does not restart a running VM for it); osc-gitops "
        "rolls restarts node by node only where it reads OVN's health of each instance "
        "(Network Function steering, not --kubernetes-only): restart them one node at a time "
        "(virtctl restart)"
    )
    finding = Finding("transition", f"VnfDeployment/{vnfs[0]}", None, warning)
    return replace(plan, findings=(*plan.findings, finding))


def _vnf_rollout(
    vnf: VnfDeployment, vms: list[VmRollout], labels: Iterable[Mapping[str, Any]]
) -> VnfRollout:
    name = vnf.metadata.name
    nodes = {vm.get(own.NODE_LABEL) for vm in labels if vm.get(own.VNF_LABEL) == name}
    nodes |= {vm.node for vm in vms}
    strategy = vnf.spec.updateStrategy
    return VnfRollout(
        vnf=name,
        max_unavailable=strategy.maxUnavailable,
        deadline=float(strategy.progressDeadlineSeconds),
        window=detection_window(vnf),
        instances_per_node=vnf.spec.instancesPerNode,
        nodes_total=len(nodes - {None}),
        vms=tuple(vms),
    )


def _drain(
    changes: list[Change],
    drained: Mapping[tuple[str, str], set[str]],
    observed: Observed,
    backend: SteeringBackend,
) -> list[Change]:
    """``changes`` with the drained functions out of their nodes' steering groups (which rows
    those are is the backend's business: ``SteeringBackend.drain``)."""
    found = backend.drain(changes, drained, observed)
    out = [c for c in changes if (c.kind, c.key) not in found.touched]
    out.extend(found.kept)
    for resource, live in found.rows:
        current = live_state([live], ()) if live is not None else {}
        out.extend(diff(Target.of([resource]), current).changes)
    return out


# ------------------------------------------------------------------------------ the engine side


@dataclass(frozen=True, slots=True)
class Step:
    """One write the engine makes for a rollout."""

    vm: str
    """``namespace/name``."""
    action: Literal["annotate", "restart"]
    annotations: dict[str, str | None] = field(default_factory=dict)
    """For ``annotate``: the ``rollout.osc.io/*`` values to set (``None`` removes one)."""
    why: str = ""


@dataclass(frozen=True, slots=True)
class Steps:
    steps: tuple[Step, ...] = ()
    recheck_at: float | None = None
    """When a time limit (detection window, deadline) next flips a decision; ``None``: only a
    change in the cluster or the NB can."""
    waiting: tuple[str, ...] = ()
    """What each rollout waits for now, for humans (``--wait`` progress, status)."""


def next_steps(
    rollouts: Iterable[VnfRollout],
    observed: Observed,
    now: float,
    health: HealthIndex | None = None,
) -> Steps:
    """What to write now for each rollout (module docstring, steps 2-5), from the plan's
    description of it, the live state after that plan was applied (``observed``: VM
    annotations, northd's ``network_function_active``) and the wall-clock time ``now`` (the
    ``SINCE`` annotations are wall-clock times: the state outlives the process; ``health``: its
    health index, when the caller has one)."""
    index = health if health is not None else HealthIndex(observed)
    members = index.members
    live = {f"{o.namespace}/{o.name}": o for o in observed.kube_objects if o.kind == _VM}
    active = set(index.active_functions)
    steps: list[Step] = []
    waiting: list[str] = []
    rechecks: list[float] = []
    for rollout in rollouts:
        busy: set[str] = set()
        halted = False
        for vm in rollout.vms:
            obj = live.get(vm.key)
            state = obj.state if obj is not None else {}
            phase = state.get(PHASE)
            if obj is None or not phase:
                continue
            busy.add(vm.node)
            since = parse_time(state.get(SINCE)) or now
            elapsed = now - since
            member = members.get(vm.function)
            step, wait = _advance(rollout, vm, phase, state, member, obj, index, now)
            if step is not None:
                steps.extend(step)
                continue
            waiting.append(f"{vm.name}: {wait}")
            if phase == BOOTING and _up(member):
                rechecks.append(since + rollout.window)
            if elapsed > rollout.deadline:
                halted = True
                if not state.get(HALTED):
                    message = (
                        f"{vm.name} not healthy {rollout.deadline:.0f} s after its {phase} "
                        f"began ({why_unready(member, obj)})"
                    )
                    steps.append(Step(vm.key, "annotate", {HALTED: message}, "deadline passed"))
            else:
                rechecks.append(since + rollout.deadline + 0.001)
            halted = halted or bool(state.get(HALTED))
        if halted:
            waiting.append(f"VnfDeployment/{rollout.vnf}: halted")
            continue
        steps.extend(_select(rollout, busy, live, members, active, now, waiting))
    return Steps(tuple(steps), min(rechecks) if rechecks else None, tuple(waiting))


def _advance(
    rollout: VnfRollout,
    vm: VmRollout,
    phase: str,
    state: Mapping[str, str],
    member: MemberHealth | None,
    obj: KubeObject,
    health: HealthIndex,
    now: float,
) -> tuple[list[Step] | None, str]:
    """The steps that move one VM being rolled to its next phase, or why it waits."""
    target = vm.template or state.get(TEMPLATE) or ""
    if vm.outdated and state.get(TEMPLATE) != target and phase != DRAINING:
        # The manifests changed again while it rolled (e.g. the fix of a halted rollout).
        return [Step(vm.key, "annotate", _phase(RESTARTING, now, target), "new template")], ""
    if phase == DRAINING:
        if health.drained(vm.function, rollout.vnf, vm.node):
            return [Step(vm.key, "annotate", _phase(RESTARTING, now, target), "drained")], ""
        return None, "draining (northd has not moved its traffic to the other instance yet)"
    if phase == RESTARTING:
        if vm.outdated and not vm.released:
            return None, "restarting (its new template is not written yet)"
        need = restart_needed(obj)
        if need is None:
            return None, "restarting (KubeVirt has not seen its new template yet)"
        booting = Step(vm.key, "annotate", _phase(BOOTING, now, target))
        if need:
            return [Step(vm.key, "restart", why="its new template is written"), booting], ""
        return [booting], ""  # restarted already (before a crash of ours, or by someone)
    since = parse_time(state.get(SINCE)) or now
    if _up(member) and now - since >= rollout.window:
        return [Step(vm.key, "annotate", _phase(None, now, ""), "upgraded and healthy")], ""
    return None, f"booting for {now - since:.0f} s ({why_unready(member, obj)})"


def restart_needed(vm: KubeObject) -> bool | None:
    """Whether the VM's running instance is older than its template, as KubeVirt's status says
    (``observedGeneration`` below ``desiredGeneration``); ``None`` while KubeVirt has not seen
    the VM's latest generation yet (ask again later). No status at all (an API without
    KubeVirt's controller): True. A restart already requested and pending: False."""
    status = vm.status
    if "desiredGeneration" not in status or "observedGeneration" not in status:
        return True
    generation = status.get("generation")
    if isinstance(generation, int) and int(status["desiredGeneration"]) < generation:
        return None
    if status.get("stateChangeRequests"):
        return False
    return int(status["observedGeneration"]) < int(status["desiredGeneration"])


def _phase(phase: str | None, now: float, template: str) -> dict[str, str | None]:
    """The annotations of entering ``phase`` (``None``: done, every annotation removed)."""
    if phase is None:
        return {PHASE: None, SINCE: None, TEMPLATE: None, HALTED: None}
    return {PHASE: phase, SINCE: format_time(now), TEMPLATE: template, HALTED: None}


def _up(member: MemberHealth | None) -> bool:
    """Healthy as OVN reports it, or OVN will never say (no health check, no group)."""
    if member is None:
        return False
    return member.health == HEALTHY or not member.checkable


def why_unready(member: MemberHealth | None, obj: KubeObject | None) -> str:
    """Why a VM is not (yet) counted healthy, for humans."""
    if obj is None:
        return "VM not found"
    printable = obj.status.get("printableStatus")
    if printable and printable != "Running":
        return f"VM {printable}"
    if obj.status.get("ready") is False:
        return "VM not ready"
    if member is None:
        return "no Network_Function in the NB yet"
    if member.health == HEALTHY or not member.checkable:
        return "waiting out the health check's detection time"
    return member.detail or "probe failing"


def _select(
    rollout: VnfRollout,
    busy: set[str],
    live: Mapping[str, KubeObject],
    health: Mapping[str, MemberHealth],
    active: set[str],
    now: float,
    waiting: list[str],
) -> list[Step]:
    """Select the next VMs: free nodes in name order up to ``maxUnavailable`` busy nodes, one VM
    per node; on a node with two instances the standby first, and the active one only while
    the other is healthy."""
    steps: list[Step] = []
    by_node: dict[str, list[VmRollout]] = defaultdict(list)
    for vm in rollout.vms:
        obj = live.get(vm.key)
        if vm.outdated and obj is not None and not obj.state.get(PHASE):
            by_node[vm.node].append(vm)
    two = rollout.instances_per_node > 1
    for node in sorted(by_node):
        if len(busy) >= rollout.max_unavailable:
            break
        if node in busy:
            continue
        # the standby (not active in any steering group) first; then the second instance
        vm = min(by_node[node], key=lambda v: (v.function in active, v.slot != naming.SECOND))
        if two and vm.function in active:
            other_health = health.get(vm.peer) if vm.peer else None
            if other_health is None or other_health.health != HEALTHY:
                waiting.append(f"{vm.name}: waits until the other instance on {node} is healthy")
                continue
        phase = DRAINING if two else RESTARTING
        steps.append(Step(vm.key, "annotate", _phase(phase, now, vm.template), f"node {node}"))
        busy.add(node)
    return steps
