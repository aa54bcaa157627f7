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

**One rollout at a time** (issue 33). A VM being rolled also names the process that rolls it
(``/owner``: ``<instance> on <host> (pid N)``, ``/owner-since``), which renews ``/renewed``
every :data:`RENEW` seconds while it runs and clears its name when it exits. Another process
(a second ``apply --wait`` with a newer image, the ``run`` loop beside a human's apply) takes
no step for a rollout whose owner is alive: it waits, naming the owner, instead of restarting
the same VMs again and again with its own template. An owner silent for :data:`STALE` seconds
(as the other process's own clock sees the ``/renewed`` value not change), or gone, is taken
over from where its rollout is. A template changed while a rollout runs (the owner's new
commit, the fix of a halted rollout) re-targets the VM being rolled, from its phase, and the
rollout goes on from there: the nodes already updated are rolled again after it, and the plan
says so.

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
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from reconciler.core.compiling.diff import diff, live_state
from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Desired, VnfDeployment
from reconciler.core.model.facts import HEALTHY, Finding, Pending, VmRollout, VnfRollout
from reconciler.core.model.observed import KubeObject, Observed
from reconciler.core.model.plan import Change, Plan
from reconciler.core.model.target import Target
from reconciler.core.steering import HealthIndex, MemberHealth, SteeringBackend

__all__ = [
    "BOOTING",
    "DRAINING",
    "IMAGE",
    "OWNER",
    "PHASE",
    "RENEW",
    "RESTARTING",
    "STALE",
    "LiveRollout",
    "Step",
    "Steps",
    "boot_allowance",
    "detection_window",
    "hold_updates",
    "live_rollouts",
    "next_steps",
    "owner_name",
    "pending_of",
    "restarts_pending",
    "template_change",
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
OWNER = f"{own.ROLLOUT_PREFIX}owner"
"""The process rolling this VM: ``<instance> on <host> (pid N)`` (:func:`owner_name`)."""
OWNER_SINCE = f"{own.ROLLOUT_PREFIX}owner-since"
"""Since when that process owns the rollout (RFC 3339, UTC)."""
IMAGE = f"{own.ROLLOUT_PREFIX}image"
"""The image of the template the VM is being rolled to (for people: ``status`` reads the
rollout from the cluster)."""
RENEWED = f"{own.ROLLOUT_PREFIX}renewed"
"""The owner's last sign of life (RFC 3339, UTC): renewed every :data:`RENEW` seconds."""
RENEW = 10.0
"""How often the owner of a rollout renews :data:`RENEWED`."""
STALE = 30.0
"""An owner whose :data:`RENEWED` has not changed for this long (on the observer's clock) is
gone: its rollout is taken over."""
_OWNERSHIP = (OWNER, OWNER_SINCE, RENEWED)
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


def owner_name(instance: str, host: str, pid: int) -> str:
    """``osc-gitops on box-1 (pid 4242)``: who rolls (instance, host, process)."""
    return f"{instance} on {host} (pid {pid})"


def boot_allowance(vnf: VnfDeployment) -> float:
    """Seconds a new or restarted instance may take until OVN reports it healthy without
    alarm: its boot (``bootSeconds``) plus the health check's detection time."""
    return float(vnf.spec.bootSeconds) + detection_window(vnf)


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
        vnf, node, _ = who
        vm = _vm_rollout(key, who, obj, pending, owner, desired.vnfs[vnf])
        phase = vm.phase
        if pending is not None and not vm.released:
            dropped.add((_VM, key))
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


def _vm_rollout(
    key: str,
    who: tuple[str, str, str],
    obj: KubeObject | None,
    pending: Change | None,
    owner: str,
    vnf: VnfDeployment,
) -> VmRollout:
    """One VM of a rollout: its template change (``pending``, ``None`` when its live template
    is the manifests') and its rollout state (``obj``'s annotations)."""
    name, node, slot = who
    state = obj.state if obj is not None else {}
    target = template_hash(_template(pending.after)) if pending else state.get(TEMPLATE, "")
    phase = state.get(PHASE)
    return VmRollout(
        key=key,
        node=node,
        slot=slot,
        function=naming.network_function(owner, name, node, slot),
        outdated=pending is not None,
        released=pending is not None and phase in _RELEASED and state.get(TEMPLATE) == target,
        template=target,
        image=vm_image(pending.after) if pending else state.get(IMAGE, ""),
        change=template_change(pending.before, pending.after) if pending else "",
        phase=phase,
        since=state.get(SINCE),
        rolling_to=state.get(TEMPLATE),
        halted=state.get(HALTED),
        peer=(
            naming.network_function(owner, name, node, "" if slot else naming.SECOND)
            if vnf.spec.instancesPerNode > 1
            else None
        ),
        owner=state.get(OWNER) if phase else None,
        owner_since=state.get(OWNER_SINCE) if phase else None,
    )


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
    owned_by: tuple[tuple[str, str, str | None], ...] = ()
    """``(vnf, owner, since)`` of each rollout another live process owns: no step was taken
    for it."""


def owners_of(observed: Observed) -> dict[str, str]:
    """The owner (``OWNER``) named on any VM -> its newest ``RENEWED`` value (what a process
    watches to tell whether another owner is alive)."""
    out: dict[str, str] = {}
    for obj in observed.kube_objects:
        if obj.kind == _VM and obj.state.get(OWNER):
            renewed = obj.state.get(RENEWED) or ""
            out[obj.state[OWNER]] = max(out.get(obj.state[OWNER], ""), renewed)
    return out


@dataclass
class _Pass:
    """What :func:`next_steps` reads once and writes as it goes, for every rollout."""

    now: float
    owner: str | None
    index: HealthIndex
    members: Mapping[str, MemberHealth]
    live: Mapping[str, KubeObject]
    active: set[str]
    steps: list[Step] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    rechecks: list[float] = field(default_factory=list)


def next_steps(
    rollouts: Iterable[VnfRollout],
    observed: Observed,
    now: float,
    health: HealthIndex | None = None,
    owner: str | None = None,
    alive: Iterable[str] = (),
) -> Steps:
    """What to write now for each rollout (module docstring, steps 2-5), from the plan's
    description of it, the live state after that plan was applied (``observed``: VM
    annotations, northd's ``network_function_active``) and the wall-clock time ``now`` (the
    ``SINCE`` annotations are wall-clock times: the state outlives the process; ``health``: its
    health index, when the caller has one).

    ``owner``: who takes the steps (:func:`owner_name`; ``None``: nobody is named and nobody
    is waited for). A rollout whose VMs name another owner in ``alive`` (the engine tells who
    is alive, :data:`STALE`) gets no step: it is that process's. The owner's steps name it,
    and renew ``RENEWED`` every :data:`RENEW` seconds; a rollout whose owner is gone is taken
    over."""
    index = health if health is not None else HealthIndex(observed)
    run = _Pass(
        now, owner, index, index.members,
        {f"{o.namespace}/{o.name}": o for o in observed.kube_objects if o.kind == _VM},
        set(index.active_functions),
    )  # fmt: skip
    living = set(alive) - {owner}
    owned_by: list[tuple[str, str, str | None]] = []
    for rollout in rollouts:
        foreign = _foreign_owner(rollout, run.live, living) if owner is not None else None
        if foreign is None:
            _roll(run, rollout)
            continue
        who, who_since = foreign
        owned_by.append((rollout.vnf, who, who_since))
        run.waiting.append(
            f"VnfDeployment/{rollout.vnf}: its rolling update is owned by {who}"
            + (f" since {who_since}" if who_since else "")
            + ": this process restarts none of its VMs; it waits until that one finishes "
            f"(or is silent for {STALE:.0f} s, then takes it over from where it is)"
        )
    recheck = min(run.rechecks) if run.rechecks else None
    return Steps(tuple(run.steps), recheck, tuple(run.waiting), tuple(owned_by))


def _roll(run: _Pass, rollout: VnfRollout) -> None:
    """One rollout's steps: each VM being rolled moved on (or why it waits, or the halt past
    its deadline), then the next VMs selected, and the owner's name cleared once it is over."""
    busy: set[str] = set()
    finished: set[str] = set()
    halted = False
    for vm in rollout.vms:
        obj = run.live.get(vm.key)
        if obj is None or not obj.state.get(PHASE):
            continue
        busy.add(vm.node)
        done, vm_halted = _roll_vm(run, rollout, vm, obj)
        if done:
            finished.add(vm.key)
        halted = halted or vm_halted
    if halted:
        run.waiting.append(f"VnfDeployment/{rollout.vnf}: halted")
        return
    selected = _select(rollout, busy, run.live, run.members, run.active, run.now, run.waiting)
    run.steps.extend(_owned(selected, run.owner, {}, run.now))
    left = [vm for vm in rollout.vms if vm.key not in finished and (vm.outdated or vm.phase)]
    if run.owner is not None and not selected and not left:
        # the rollout is over: no VM names its owner any more
        run.steps.extend(
            Step(key, "annotate", dict.fromkeys(_OWNERSHIP), "rollout done")
            for key, obj in sorted(run.live.items())
            if _labels(obj.body).get(own.VNF_LABEL) == rollout.vnf and obj.state.get(OWNER)
        )


def _roll_vm(run: _Pass, rollout: VnfRollout, vm: VmRollout, obj: KubeObject) -> tuple[bool, bool]:
    """One VM being rolled: its next phase (or why it waits), the owner's claim on it, the
    halt past its deadline. Returns (it is upgraded now, its rollout is halted)."""
    state, now = obj.state, run.now
    phase = state[PHASE]
    since = parse_time(state.get(SINCE)) or now
    member = run.members.get(vm.function)
    step, wait = _advance(rollout, vm, phase, state, member, obj, run.index, now)
    if run.owner is not None:
        claim, renew_at = _claim(vm, state, run.owner, now)
        run.steps.extend(claim)
        run.rechecks.append(renew_at)
    if step is not None:
        run.steps.extend(_owned(step, run.owner, state, now))
        return any(s.annotations.get(PHASE, "") is None for s in step), False
    run.waiting.append(f"{vm.name}: {wait}")
    if phase == BOOTING and _up(member):
        run.rechecks.append(since + rollout.window)
    if now - since <= rollout.deadline:
        run.rechecks.append(since + rollout.deadline + 0.001)
        return False, bool(state.get(HALTED))
    if not state.get(HALTED):
        message = (
            f"{vm.name} not healthy {rollout.deadline:.0f} s after its {phase} began "
            f"({why_unready(member, obj)})"
        )
        run.steps.append(Step(vm.key, "annotate", {HALTED: message}, "deadline passed"))
    return False, True


def _foreign_owner(
    rollout: VnfRollout, live: Mapping[str, KubeObject], alive: set[str]
) -> tuple[str, str | None] | None:
    """``(owner, since)`` when a VM of the VnfDeployment names another live process as the
    owner of its rollout (a VM already upgraded keeps the name until the rollout is over)."""
    for _, obj in sorted(live.items()):
        who = obj.state.get(OWNER)
        if who and who in alive and _labels(obj.body).get(own.VNF_LABEL) == rollout.vnf:
            return who, obj.state.get(OWNER_SINCE)
    return None


def _claim(
    vm: VmRollout, state: Mapping[str, str], owner: str, now: float
) -> tuple[list[Step], float]:
    """The owner's sign of life on a VM it rolls (renewed every :data:`RENEW` seconds), or
    the take-over of a VM whose owner is gone or unnamed; and when to renew next."""
    who = state.get(OWNER)
    if who != owner:
        why = f"took over from {who} (silent)" if who else "rolled by this process"
        claim: dict[str, str | None] = {
            OWNER: owner,
            OWNER_SINCE: format_time(now),
            RENEWED: format_time(now),
        }
        return [Step(vm.key, "annotate", claim, why)], now + RENEW
    renewed = parse_time(state.get(RENEWED)) or 0.0
    if now - renewed >= RENEW:
        return [Step(vm.key, "annotate", {RENEWED: format_time(now)}, "renewed")], now + RENEW
    return [], renewed + RENEW


def _owned(
    steps: Iterable[Step], owner: str | None, state: Mapping[str, str], now: float
) -> list[Step]:
    """``steps`` with the owner's name on every phase it enters (``SINCE`` of ownership kept
    where it already owned the VM); a VM leaving the rollout loses every name."""
    out: list[Step] = []
    for step in steps:
        if owner is None or step.action != "annotate" or PHASE not in step.annotations:
            out.append(step)
            continue
        # a VM upgraded keeps the name too, until the rollout is over (next_steps clears it):
        # the rollout always names its owner, also between one VM and the next
        mine = state.get(OWNER) == owner
        since = state.get(OWNER_SINCE) if mine and state.get(OWNER_SINCE) else format_time(now)
        names: dict[str, str | None] = {OWNER: owner, OWNER_SINCE: since, RENEWED: format_time(now)}
        out.append(replace(step, annotations={**step.annotations, **names}))
    return out


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
    image = vm.image or state.get(IMAGE) or ""
    if vm.outdated and state.get(TEMPLATE) != target and phase != DRAINING:
        # The manifests changed again while it rolled (e.g. the fix of a halted rollout).
        restart = _phase(RESTARTING, now, target, image)
        return [Step(vm.key, "annotate", restart, "new template: goes on from here")], ""
    if phase == DRAINING:
        if health.drained(vm.function, rollout.vnf, vm.node):
            drained = _phase(RESTARTING, now, target, image)
            return [Step(vm.key, "annotate", drained, "drained")], ""
        return None, "draining (northd has not moved its traffic to the other instance yet)"
    if phase == RESTARTING:
        if vm.outdated and not vm.released:
            return None, "restarting (its new template is not written yet)"
        need = restart_needed(obj)
        if need is None:
            return None, "restarting (KubeVirt has not seen its new template yet)"
        booting = Step(vm.key, "annotate", _phase(BOOTING, now, target, image))
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


def _phase(phase: str | None, now: float, template: str, image: str = "") -> dict[str, str | None]:
    """The annotations of entering ``phase`` (``None``: done, every annotation removed)."""
    if phase is None:
        return {PHASE: None, SINCE: None, TEMPLATE: None, HALTED: None, IMAGE: None}
    return {PHASE: phase, SINCE: format_time(now), TEMPLATE: template, HALTED: None,
            IMAGE: image or None}  # fmt: skip


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
        enter = _phase(phase, now, vm.template, vm.image)
        steps.append(Step(vm.key, "annotate", enter, f"node {node}"))
        busy.add(node)
    return steps


# ------------------------------------------------------------------------------ the live view


def template_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    """What a VM's new template changes, for people: ``image fw:1.0 → fw:1.1``, ``cpu 1 →
    2``, ``memory 1Gi → 2Gi``; ``template`` when it is something else."""

    def domain(body: Mapping[str, Any] | None) -> Mapping[str, Any]:
        return (((_template(body) or {}).get("spec") or {}).get("domain")) or {}

    def cpu(body: Mapping[str, Any] | None) -> Any:
        return (domain(body).get("cpu") or {}).get("cores")

    def memory(body: Mapping[str, Any] | None) -> Any:
        return ((domain(body).get("resources") or {}).get("requests") or {}).get("memory")

    parts = [
        f"{what} {old} → {new}"
        for what, read in (("image", vm_image), ("cpu", cpu), ("memory", memory))
        if (old := read(before)) != (new := read(after))
    ]
    return ", ".join(parts) or "template"


def pending_of(rollouts: Iterable[VnfRollout]) -> list[Pending]:
    """What every rollout still has to do, one entry per VM: a template change waiting for
    its turn (``image fw:1.0 → fw:1.1, rolled node by node``), a VM being rolled now."""
    out: list[Pending] = []
    for rollout in rollouts:
        for vm in rollout.vms:
            if vm.phase:
                what = f"{vm.change}, " if vm.outdated and vm.change else ""
                why = f"halted: {vm.halted}" if vm.halted else ""
                change = f"{what}{vm.phase} (rolled node by node)"
                out.append(Pending(_VM, vm.key, vm.node, change, why))
            elif vm.outdated:
                why = "waits for its turn: KubeVirt applies a new template at a restart"
                out.append(Pending(_VM, vm.key, vm.node, f"{vm.change}, rolled node by node", why))
    return out


def restarts_pending(observed: Observed) -> list[Pending]:
    """Where osc-gitops does not roll (no health of each instance to wait for: router-policy
    steering, ``--kubernetes-only``), a new template is written at once and KubeVirt applies it
    at the VM's next start: until someone restarts it, the VM runs an older template than the
    manifests', as its status says (``observedGeneration`` below ``desiredGeneration``)."""
    out: list[Pending] = []
    for obj in observed.kube_objects:
        status = obj.status
        if obj.kind != _VM or status.get("stateChangeRequests"):
            continue
        try:
            lagging = int(status["observedGeneration"]) < int(status["desiredGeneration"])
        except (KeyError, TypeError, ValueError):
            continue
        if lagging:
            node = _labels(obj.body).get(own.NODE_LABEL)
            out.append(Pending(
                _VM, f"{obj.namespace}/{obj.name}", node if isinstance(node, str) else None,
                "runs an older template than its spec: restart it (virtctl restart), one node "
                "at a time", "osc-gitops rolls restarts only where it reads each instance's "
                "health from OVN",
            ))  # fmt: skip
    return out


def vm_image(body: Mapping[str, Any] | None) -> str:
    """The (first) containerDisk image of a VM's template: what it runs after its next start."""
    spec = ((_template(body) or {}).get("spec")) or {}
    for volume in spec.get("volumes") or ():
        image = (volume.get("containerDisk") or {}).get("image")
        if image:
            return str(image)
    return "?"


@dataclass(frozen=True, slots=True)
class LiveVm:
    name: str
    node: str
    image: str
    """Its template's image (what it runs once started from it)."""
    runs_template: bool
    """KubeVirt runs it from its current template (no restart pending)."""
    phase: str | None = None
    since: str | None = None
    halted: str | None = None
    rolling_to: str | None = None
    """The image it is being rolled to (``IMAGE``)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LiveRollout:
    """A VnfDeployment's rollout as its VirtualMachines say it (``osc-gitops status``): read
    from the cluster, not from what a reconciler last wrote to a file."""

    vnf: str
    vms: tuple[LiveVm, ...]
    owner: str | None = None
    owner_since: str | None = None

    @property
    def target(self) -> str | None:
        """The image being rolled to (a VM's ``IMAGE``), if a VM is being rolled."""
        return next((vm.rolling_to for vm in self.vms if vm.phase and vm.rolling_to), None)

    @property
    def images(self) -> dict[str, list[str]]:
        """Image -> nodes whose VM template has it."""
        out: dict[str, list[str]] = defaultdict(list)
        for vm in self.vms:
            out[vm.image].append(vm.node)
        return {image: sorted(set(nodes)) for image, nodes in sorted(out.items())}

    @property
    def in_progress(self) -> bool:
        """A VM is being rolled, the rollout still names an owner, the VMs differ in image,
        or one waits for the restart that applies its template."""
        return bool(
            self.owner
            or any(vm.phase for vm in self.vms)
            or len({vm.image for vm in self.vms}) > 1
            or any(not vm.runs_template for vm in self.vms)
        )

    @property
    def halted(self) -> str | None:
        return next((vm.halted for vm in self.vms if vm.halted), None)

    @property
    def summary(self) -> str:
        """``VnfDeployment/firewall (live): 1 of 2 nodes on the new template; firewall-node-2
        booting since …; images: fw:1.1 on node-1, fw:1.0 on node-2; rolled by …``."""
        nodes = sorted({vm.node for vm in self.vms})
        parts = []
        target = self.target
        if target:
            done = {vm.node for vm in self.vms if vm.image == target and vm.runs_template}
            done -= {vm.node for vm in self.vms if vm.phase}
            parts.append(f"{len(done)} of {len(nodes)} nodes done, rolling to {target}")
        for vm in self.vms:
            if vm.phase:
                parts.append(f"{vm.name} {vm.phase}" + (f" since {vm.since}" if vm.since else ""))
        waiting = [vm.name for vm in self.vms if not vm.runs_template and not vm.phase]
        if waiting:
            parts.append(f"restart pending: {', '.join(waiting)}")
        images = "; ".join(f"{image} on {', '.join(n)}" for image, n in self.images.items())
        parts.append(f"images: {images}")
        if self.owner:
            since = f" since {self.owner_since}" if self.owner_since else ""
            parts.append(f"rolled by {self.owner}{since}")
        if self.halted:
            parts.append(f"halted: {self.halted}")
        return f"VnfDeployment/{self.vnf} (live): {'; '.join(parts)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "vnf": self.vnf,
            "in_progress": self.in_progress,
            "halted": self.halted,
            "owner": self.owner,
            "owner_since": self.owner_since,
            "images": self.images,
            "vms": [vm.to_json() for vm in self.vms],
            "summary": self.summary,
        }


def live_rollouts(objects: Iterable[KubeObject]) -> list[LiveRollout]:
    """Per VnfDeployment with VirtualMachines, its rollout as they say it (from the cluster
    alone: their templates, KubeVirt's status and the ``rollout.osc.io/*`` annotations)."""
    by_vnf: dict[str, list[LiveVm]] = defaultdict(list)
    owners: dict[str, tuple[str, str | None]] = {}
    for obj in objects:
        if obj.kind != _VM:
            continue
        labels = _labels(obj.body)
        vnf, node = labels.get(own.VNF_LABEL), labels.get(own.NODE_LABEL)
        if not isinstance(vnf, str) or not isinstance(node, str):
            continue
        state = obj.state
        by_vnf[vnf].append(
            LiveVm(
                name=obj.name,
                node=node,
                image=vm_image(obj.body),
                runs_template=restart_needed(obj) is not True or not obj.status,
                phase=state.get(PHASE),
                since=state.get(SINCE),
                halted=state.get(HALTED),
                rolling_to=state.get(IMAGE),
            )
        )
        if state.get(OWNER) and vnf not in owners:
            owners[vnf] = (state[OWNER], state.get(OWNER_SINCE))
    return [
        LiveRollout(
            vnf, tuple(sorted(vms, key=lambda v: (v.node, v.name))), *owners.get(vnf, (None, None))
        )
        for vnf, vms in sorted(by_vnf.items())
    ]
