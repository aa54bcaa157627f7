"""Incremental planning for the warm loop: redo only the part of the plan that can have changed.

``make_plan`` compiles and diffs every row we own, which at a few hundred thousand rows is the
most expensive thing a pass does. In the long-running loop nearly every pass follows a pod event,
or nothing at all (a periodic pass), and the caches that feed ``observe`` (the OVN IDL mirror, the
Kubernetes informer) hand back the very same objects for everything that did not change. This
planner remembers the last full compile and, for a new ``Observed``:

- returns the remembered plan when nothing it depends on changed (a no-op pass costs a few
  identity checks);
- when only pods, pod LSPs, owned rows or the clock changed, re-plans only what they can
  affect. It knows no backend: the steering backend declares which of its rows depend on pods,
  and that they depend only on the pods *of their own node* (``reconciler.core.steering.base``):
  the fields of some rows, and whether a row exists at all (rows gated by a (group, node) pair,
  present while the group has members there or is held, ``reconciler.core.steering.presence``).
  So for the dirty nodes the pods are gathered again, the backend's pod checks run for the VNF
  instances there, its pod-dependent rows are refilled (``compile.fill_pods``) and the states
  of the pairs there decided again (``presence.pair_states``), the calls compile makes; then
  only resources whose target or live row changed are diffed again. Dirty nodes are those whose
  pods or pod LSPs changed, those with an owned ``Port_Group`` that changed (a held pair is
  decided from its live Port_Group), and those whose pairs depend on the clock
  (``Observed.observed_at``): a pair just emptied (held from *now* until its marker is live) on
  every new clock value, a held pair once its grace has run out;
- compiles everything again (the same ``make_plan`` as the CLI) when anything else changed: the
  manifests (a different ``Desired`` object), options, any ``Observed`` field that compile
  (``compile.COMPILE_READS``), the backend (``SteeringBackend.observed_fields``) or the diff of
  Kubernetes objects reads, an owned row of a table the backend reads back
  (``SteeringBackend.live_tables``, e.g. ids allocated across nodes), an owned row without a node,
  pod LSP names or pods that are not unique (see :func:`_delta`), the health northd reports
  of a group compile read (a chain leaving out a dead fail-open hop), or when the caller asks for it
  (the loop does every ``--full-resync`` seconds, like controller-runtime's ``SyncPeriod``, as a
  safety net).

The result is equal to ``make_plan(desired, observed, options)`` in its changes (a hypothesis test
in ``tests/unit/core/test_incremental.py`` checks that over random event sequences, for every
registered backend). Warnings are the exception: they come from the last full compile, so a
warning about a node's pods is refreshed by the next full pass, not by every pod event.

Pure: no I/O, no clock; the loop decides when a full pass is due.
"""

from __future__ import annotations

import dataclasses
from collections import ChainMap
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import compress, count
from operator import is_not
from typing import Any, Literal, TypeVar

from reconciler.core.compiling.compile import (
    COMPILE_READS,
    CompileOptions,
    check_pods,
    fill_pods,
    members_by_group_and_node,
    pods_by_node,
)
from reconciler.core.compiling.diff import diff
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed, OvnRow, Pod, PodPort
from reconciler.core.model.plan import Plan
from reconciler.core.model.target import Resource, Target
from reconciler.core.planning.full import (
    compile_plan,
    lookalike_findings,
    owned_namespaces,
    owned_only,
)
from reconciler.core.steering import SteeringBackend
from reconciler.core.steering.base import Pair, VnfInstance
from reconciler.core.steering.presence import PairState, gate_rows, pair_state
from reconciler.core.transitions.hold import apply_transitions

Mode = Literal["full", "incremental", "cached"]
Ident = tuple[str, str]
T = TypeVar("T")
Rows = list[tuple[OvnRow | None, OvnRow | None]]

_FOLLOWED = frozenset({"pods", "pod_ports", "ovn_rows", "observed_at", "nf_active"})
"""``Observed`` fields this planner follows change by change."""
_LIVE_FIELDS = frozenset({"ovn_rows", "kube_objects"})
"""``Observed`` fields the diff reads (``live_state``)."""


def full_compile_fields(backend: SteeringBackend) -> tuple[str, ...]:
    """The ``Observed`` fields whose change needs a full compile with this backend: whatever
    compile, the backend or the diff reads, except what this planner follows itself."""
    read = COMPILE_READS | backend.observed_fields | _LIVE_FIELDS
    return tuple(
        f.name for f in dataclasses.fields(Observed) if f.name in read and f.name not in _FOLLOWED
    )


@dataclass
class _Memo:
    desired: Desired
    options: CompileOptions
    observed: Observed
    plan: Plan
    backend: SteeringBackend
    full_fields: tuple[str, ...]
    """``full_compile_fields(backend)``."""
    target: dict[Ident, Resource]
    """The last target."""
    pod_dependent: dict[str, list[Ident]]
    """The backend's pod-dependent resources (of :attr:`potential`), by node."""
    potential: dict[Ident, Resource]
    """Every row compile emitted, present or not, pod fields filled (``Compiled.potential``);
    this dict and :attr:`states` are the memo's own, updated in place by each pass."""
    gates: dict[Ident, Pair]
    gated: dict[Pair, list[Ident]]
    """Pair -> its gated rows (of :attr:`potential`): the rows a change of its state flips
    (looked up for the few pairs that changed, not by going through every gated row of the
    dirty nodes: hundreds a node, on the path of every pod event)."""
    pairs: dict[str, list[Pair]]
    """Node -> its pairs."""
    anchors: dict[Pair, Ident]
    states: dict[Pair, PairState]
    clock_nodes: frozenset[str]
    """Nodes with a pair held from *now* (its marker not live yet): redone on a new clock."""
    expiries: dict[str, float]
    """Node -> the earliest moment one of its held pairs becomes absent."""
    health_read: frozenset[str]
    """The groups whose health (``nf_active``) the target depends on (``Compiled.health_read``):
    a change of one of them, and of no other, makes the next pass compile everything."""
    groups_by_label: dict[tuple[str, str], set[str]]
    """The security groups by each ``(key, value)`` of their labels (of :attr:`desired`): the
    groups that can have members among some pods are those of the pods' labels."""
    instances: dict[str, list[VnfInstance]]
    """The VNF instances by node, each list in compile order (for the backend's pod checks)."""
    live: dict[Ident, dict[str, Any]]
    """Owned live state (OVN rows and Kubernetes objects) of ``observed``."""
    ports: dict[str, PodPort]
    """``observed.pod_ports`` by LSP name."""
    pods: dict[str, Pod]
    """``observed.pods`` by the LSP name OVN-Kubernetes gives them."""
    unique: bool
    """``ports`` and ``pods`` hold every pod LSP and pod of ``observed`` (no name twice): the
    condition for following changes from here (see :func:`_delta`)."""


class IncrementalPlanner:
    """``make_plan`` with memory; one per long-running reconciler (not thread-safe)."""

    def __init__(self) -> None:
        self._memo: _Memo | None = None
        self.last_mode: Mode = "full"
        self.last_dirty_nodes: frozenset[str] = frozenset()
        self.last_full_reason: str = "first pass"

    def reset(self) -> None:
        """Forget everything: the next plan is a full compile."""
        self._memo = None

    def plan(
        self, desired: Desired, observed: Observed, options: CompileOptions, *, full: bool = False
    ) -> Plan:
        # Only our objects count (``planning.full.owned_only``, identity-stable): a stranger's
        # labelled VM changing is no reason to compile everything again.
        namespaces = owned_namespaces(desired, options)
        strangers = lookalike_findings(observed, namespaces)
        plan = self._plan(desired, owned_only(observed, namespaces), options, full=full)
        return replace(plan, findings=(*plan.findings, *strangers)) if strangers else plan

    def _plan(
        self, desired: Desired, observed: Observed, options: CompileOptions, *, full: bool = False
    ) -> Plan:
        memo = self._memo
        reason = "requested" if full else _why_full(memo, desired, observed, options)
        if reason is not None or memo is None:
            return self._full(desired, observed, options, reason or "first pass")
        delta = _delta(memo, observed)
        if isinstance(delta, str):
            return self._full(desired, observed, options, delta)
        delta.nodes |= _clock_dirty(memo, observed.observed_at)
        self.last_dirty_nodes = frozenset(delta.nodes)
        if not delta.nodes and not delta.rows:
            memo.observed, memo.ports, memo.pods = observed, delta.ports, delta.pods
            self.last_mode = "cached"
            return apply_transitions(memo.plan, desired, observed, memo.backend)
        self.last_mode = "incremental"
        planned = self._incremental(memo, desired, observed, delta)
        return apply_transitions(planned, desired, observed, memo.backend)

    # ------------------------------------------------------------------ full

    def _full(
        self, desired: Desired, observed: Observed, options: CompileOptions, reason: str
    ) -> Plan:
        self._memo = None  # a failing compile must not leave a stale memo behind
        full_plan = compile_plan(desired, observed, options)
        compiled, live = full_plan.compiled, dict(full_plan.live)
        # remember the plan before the transitions pass, which is redone on every pass
        the_plan = full_plan.untransitioned or full_plan.plan
        instances: dict[str, list[VnfInstance]] = {}
        for inst in compiled.instances.values():
            instances.setdefault(inst.node, []).append(inst)
        ports = {p.name: p for p in observed.pod_ports}
        pods = {p.lsp_name: p for p in observed.pods}
        gated: dict[Pair, list[Ident]] = {}
        for ident, pair in compiled.gates.items():
            gated.setdefault(pair, []).append(ident)
        pairs: dict[str, list[Pair]] = {}
        for pair in compiled.anchors:
            pairs.setdefault(pair[1], []).append(pair)
        clock_nodes, expiries = _clock_of(compiled.states)
        groups_by_label: dict[tuple[str, str], set[str]] = {}
        for name, group in desired.security_groups.items():
            for label in group.spec.label_pairs():
                groups_by_label.setdefault(label, set()).add(name)
        self._memo = _Memo(
            desired=desired,
            options=options,
            observed=observed,
            plan=the_plan,
            backend=compiled.backend,
            full_fields=full_compile_fields(compiled.backend),
            target=dict(compiled.target.resources),
            pod_dependent=compiled.pod_dependent,
            potential=compiled.potential,
            gates=compiled.gates,
            gated=gated,
            pairs=pairs,
            anchors=compiled.anchors,
            states=compiled.states,
            clock_nodes=clock_nodes,
            expiries=expiries,
            health_read=compiled.health_read,
            groups_by_label=groups_by_label,
            instances=instances,
            live=live,
            ports=ports,
            pods=pods,
            unique=len(ports) == len(observed.pod_ports) and len(pods) == len(observed.pods),
        )
        self.last_mode = "full"
        self.last_full_reason = reason
        self.last_dirty_nodes = frozenset()
        return full_plan.plan

    # ------------------------------------------------------------------ incremental

    def _incremental(
        self, memo: _Memo, desired: Desired, observed: Observed, delta: _Delta
    ) -> Plan:
        """Re-plan only the resources whose inputs changed.

        A resource's diff depends only on its target and its live row: if neither changed
        (the same objects as last time), last time's outcome stands. Targets change only for
        the backend's pod-dependent resources on the dirty nodes, live rows only where
        ``delta.rows`` says; those are the candidates, diffed again; every other change of the
        last plan is kept as it was."""
        candidates: set[Ident] = set()
        live = _changed_live(memo, delta, candidates)
        target = memo.target
        refilled: dict[Ident, Resource] = {}  # pod-dependent rows whose fields changed
        new_states: dict[Pair, PairState] = {}  # pairs whose state changed
        if delta.nodes:
            refilled, new_states = _refill(memo, desired, observed, delta, live)
            target = _retarget(memo, refilled, new_states, candidates)
        sub_target = {i: target[i] for i in candidates if i in target}
        sub_live = {i: live[i] for i in candidates if i in live}
        sub = diff(Target(resources=sub_target), sub_live)
        changes = [c for c in memo.plan.changes if (c.kind, c.key) not in candidates]
        changes.extend(sub.changes)
        changes.sort(key=lambda c: c.sort_key)
        the_plan = dataclasses.replace(memo.plan, changes=tuple(changes))
        # The memo's potential rows and pair states are updated in place, not copied (tens of
        # thousands of rows and pairs at scale, on the path of every pod event), and only here,
        # once nothing can fail any more: a pass that raised has left the memo as it was.
        memo.potential.update(refilled)
        memo.states.update(new_states)
        clock_nodes, expiries = memo.clock_nodes, memo.expiries
        if new_states:
            nodes = {pair[1] for pair in new_states}
            clock_nodes, expiries = _clock_update(memo, memo.states, nodes)
        self._memo = dataclasses.replace(
            memo,
            desired=desired,
            observed=observed,
            plan=the_plan,
            target=target,
            clock_nodes=clock_nodes,
            expiries=expiries,
            live=live,
            ports=delta.ports,
            pods=delta.pods,
        )
        return the_plan


# ---------------------------------------------------------------------- change detection


@dataclass
class _Delta:
    nodes: set[str]
    """Nodes whose pods (membership or addresses) may have changed."""
    rows: Rows
    """Owned rows that changed: (before, after), ``None`` when added or removed."""
    ports: dict[str, PodPort]
    pods: dict[str, Pod]
    """The new observed's pod LSPs and pods by LSP name (updated, not rebuilt)."""


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b


def _why_full(
    memo: _Memo | None, desired: Desired, observed: Observed, options: CompileOptions
) -> str | None:
    if memo is None:
        return "first pass"
    if desired is not memo.desired:
        return "manifests changed"
    if options != memo.options:
        return "options changed"
    for name in memo.full_fields:
        if not _same(getattr(observed, name), getattr(memo.observed, name)):
            return f"{name.replace('_', ' ')} changed"
    if not memo.unique:
        return "pod LSP names or pods are not unique"
    if memo.health_read and observed.nf_active is not memo.observed.nf_active:
        now, then = observed.nf_active, memo.observed.nf_active
        if any((g in now, now.get(g)) != (g in then, then.get(g)) for g in memo.health_read):
            return "the health of a chain's VNF changed"
    return None


def _changed(
    old: Sequence[T], new: Sequence[T], key: Callable[[T], Hashable]
) -> list[tuple[T | None, T | None]]:
    """Pairs (before, after) of items that differ; ``None`` for added/removed ones.

    The caches hand back the same objects for what did not change, in the same order, so the
    common case is a C-speed identity scan of two equally long tuples; anything else falls back
    to matching by key. Keys must be unique in ``old``: two items with one key are one entry
    here, so a change to either may go unreported (:func:`_delta` never trusts that case)."""
    if len(old) == len(new):
        pairs: list[tuple[T | None, T | None]] = []
        for i in compress(count(), map(is_not, old, new)):
            a, b = old[i], new[i]
            if key(a) != key(b):
                break
            if a != b:
                pairs.append((a, b))
        else:
            return pairs
    before = {key(x): x for x in old}
    out: list[tuple[T | None, T | None]] = []
    for item in new:
        prev = before.pop(key(item), None)
        if prev is None or not _same(prev, item):
            out.append((prev, item))
    out.extend((prev, None) for prev in before.values())
    return out


def _clock_of(states: dict[Pair, PairState]) -> tuple[frozenset[str], dict[str, float]]:
    """The nodes whose pairs depend on every new clock value, and each node's earliest
    deadline (a held pair becoming absent)."""
    clock: set[str] = set()
    expiries: dict[str, float] = {}
    for (_, node), state in states.items():
        if state.clock:
            clock.add(node)
        if state.expires is not None:
            expiries[node] = min(state.expires, expiries.get(node, state.expires))
    return frozenset(clock), expiries


def _clock_update(
    memo: _Memo, states: dict[Pair, PairState], nodes: set[str]
) -> tuple[frozenset[str], dict[str, float]]:
    """:func:`_clock_of` ``states`` when only the pairs of ``nodes`` changed state since the
    memo: those nodes are decided again from their own pairs (``_Memo.pairs``, the keys of
    ``states`` by node), the others are kept, so a pod event never goes through every pair
    of the cluster."""
    clock = set(memo.clock_nodes) - nodes
    expiries = {node: t for node, t in memo.expiries.items() if node not in nodes}
    for node in nodes:
        for pair in memo.pairs.get(node, ()):
            state = states[pair]
            if state.clock:
                clock.add(node)
            if state.expires is not None:
                expiries[node] = min(state.expires, expiries.get(node, state.expires))
    return frozenset(clock), expiries


def _clock_dirty(memo: _Memo, now: float | None) -> set[str]:
    """Nodes whose pairs may have changed state because the clock moved to ``now``."""
    if now == memo.observed.observed_at:
        return set()
    due = {node for node, deadline in memo.expiries.items() if now is None or now >= deadline}
    return due | memo.clock_nodes


def _pod_key(pod: Pod) -> tuple[str, str]:
    return (pod.namespace, pod.name)


def _port_key(port: PodPort) -> str:
    return port.name


def _row_key(row: OvnRow) -> Ident:
    return (row.table, row.key)


def _row_node(row: OvnRow) -> str | None:
    ids = row.fields.get("external_ids") or {}
    node = ids.get(own.NODE)
    return node if isinstance(node, str) else None


def _delta(memo: _Memo, observed: Observed) -> _Delta | str:
    """What changed since the memo, or the reason only a full pass will do.

    Following pod changes node by node needs pod LSP names (and pods) to be unique: the
    members of a node are computed from the LSPs on its switch, and the LSP a pod has is looked
    up by name. The NB indexes LSP names, but a snapshot file need not: a stale LSP on a pod's
    old node beside the recreated pod's LSP on its new node makes compile pick the last one by
    name, on whichever switch, and a node-by-node pass pick the one on the dirty switch.
    ``ports`` and ``pods`` end up with one entry per name, so they are shorter than the lists
    exactly when a name repeats; such a pass, and every pass until one is unique again
    (``_Memo.unique``), compiles everything."""
    old = memo.observed
    dirty: set[str] = set()
    ports, pods = memo.ports, memo.pods
    if observed.pod_ports is not old.pod_ports:
        port_changes = _changed(old.pod_ports, observed.pod_ports, _port_key)
        ports = _reindexed(ports, port_changes, lambda p: p.name)
        dirty |= {p.switch for pair in port_changes for p in pair if p is not None}
    if observed.pods is not old.pods:
        pod_changes = _changed(old.pods, observed.pods, _pod_key)
        pods = _reindexed(pods, pod_changes, lambda p: p.lsp_name)
        for old_pod, new_pod in pod_changes:
            pod = new_pod or old_pod
            assert pod is not None
            for index in (memo.ports, ports):
                port = index.get(pod.lsp_name)
                if port is not None:
                    dirty.add(port.switch)
    rows: Rows = []
    if observed.ovn_rows is not old.ovn_rows:
        rows = _changed(old.ovn_rows, observed.ovn_rows, _row_key)
        for pair in rows:
            for row in pair:
                if row is None:
                    continue
                node = _row_node(row)
                if node is None:
                    return f"owned {row.table} {row.key} without a node changed"
                if row.table in memo.backend.live_tables:
                    return f"owned {row.table} {row.key} changed (the backend reads it back)"
                if row.table == "Port_Group":
                    dirty.add(node)  # an empty pair is held or not after its live Port_Group
    if len(ports) != len(observed.pod_ports) or len(pods) != len(observed.pods):
        return "pod LSP names or pods are not unique"
    return _Delta(nodes=dirty, rows=rows, ports=ports, pods=pods)


def _reindexed(
    index: dict[str, T], changes: Sequence[tuple[T | None, T | None]], name: Callable[[T], str]
) -> dict[str, T]:
    """``index`` (by ``name``) with ``changes`` made: a copy when there are any, else itself."""
    if not changes:
        return index
    out = dict(index)
    for before, after in changes:
        if before is not None:
            out.pop(name(before), None)
        if after is not None:
            out[name(after)] = after
    return out


def _changed_live(memo: _Memo, delta: _Delta, candidates: set[Ident]) -> dict[Ident, Any]:
    """The live rows with ``delta.rows`` applied (the memo's own when none changed); each
    changed row's identity joins ``candidates``."""
    if not delta.rows:
        return memo.live
    live = dict(memo.live)
    for before_row, after_row in delta.rows:
        if before_row is not None:
            live.pop(_row_key(before_row), None)
            candidates.add(_row_key(before_row))
        if after_row is not None:
            live[_row_key(after_row)] = after_row.fields
            candidates.add(_row_key(after_row))
    return live


def _refill(
    memo: _Memo, desired: Desired, observed: Observed, delta: _Delta, live: Mapping[Ident, Any]
) -> tuple[dict[Ident, Resource], dict[Pair, PairState]]:
    """On the dirty nodes: the pod-dependent rows whose fields the pods there change (the
    backend's pod checks run first), and the (group, node) pairs whose presence changes."""
    dirty = delta.nodes
    on_dirty = [p for p in observed.pod_ports if p.switch in dirty]
    pods = [delta.pods[p.name] for p in on_dirty if p.name in delta.pods]
    # only the groups with a label of these pods are asked for members
    labelled = {g for pod in pods for label in pod.labels.items()
                for g in memo.groups_by_label.get(label, ())}  # fmt: skip
    by_group = members_by_group_and_node(desired, pods, on_dirty, labelled)
    node_pods = pods_by_node(by_group, on_dirty)
    checked = [inst for node in dirty for inst in memo.instances.get(node, ())]
    checked.sort(key=lambda inst: (inst.vnf.metadata.name, inst.node))  # compile's order
    check_pods(memo.backend, checked, node_pods)
    stale = [memo.potential[i] for node in dirty for i in memo.pod_dependent.get(node, ())]
    filled, _ = fill_pods(memo.backend, stale, node_pods)
    refilled = {
        after.ident: after
        for before, after in zip(stale, filled, strict=True)
        if after is not before
    }
    new_states: dict[Pair, PairState] = {}
    for node in dirty:
        members = node_pods[node].members if node in node_pods else {}
        for pair in memo.pairs.get(node, ()):
            anchor = live.get(("Port_Group", memo.anchors[pair][1]))
            count = len(members.get(pair[0], ()))
            state = pair_state(count, anchor, observed.observed_at, memo.options.empty_grace)
            was = memo.states[pair]
            if state is not was and state != was:  # mostly PRESENT or ABSENT: the same
                new_states[pair] = state
    return refilled, new_states


def _retarget(
    memo: _Memo,
    refilled: Mapping[Ident, Resource],
    new_states: Mapping[Pair, PairState],
    candidates: set[Ident],
) -> dict[Ident, Resource]:
    """The target with the refilled rows and the rows of the pairs that appeared or went (the
    memo's own when none differs); each row that differs joins ``candidates``."""
    target = memo.target
    now: Mapping[Pair, PairState] = (
        ChainMap(dict(new_states), memo.states) if new_states else memo.states
    )
    flipped = {i for pair in new_states for i in memo.gated.get(pair, ())}
    for ident in refilled.keys() | flipped:
        res = refilled[ident] if ident in refilled else memo.potential[ident]
        now_row = gate_rows([res], memo.gates, now) if ident in memo.gates else [res]
        new = now_row[0] if now_row else None
        old = target.get(ident)
        if new is old or (new is not None and old is not None and new == old):
            continue
        if target is memo.target:
            target = dict(memo.target)
        if new is None:
            del target[ident]
        else:
            target[ident] = new
        candidates.add(ident)
    return target
