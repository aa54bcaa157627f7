"""Incremental planning for the warm loop: redo only the part of the plan that can have changed.

``make_plan`` compiles and diffs every row we own: 41,600 rows at 100 nodes x 200 groups, about
1.5 s of pure Python. In the long-running loop nearly every pass follows a pod event, or nothing
at all (a periodic pass), and the caches that feed ``observe`` (the OVN IDL mirror, the
Kubernetes informer) hand back the very same objects for everything that did not change. This
planner remembers the last full compile and, for a new ``Observed``:

- returns the remembered plan when nothing it depends on changed (a no-op pass costs a few
  identity checks);
- when only pods, pod LSPs or owned rows changed, recomputes the plan for the nodes they sit on:
  a pod's membership decides only the ``Port_Group`` of its groups *on its own node* (the group's
  per-node port group, see ``reconciler.compile``), and every other row is a function of the
  manifests, the nodes, the switches and the routers, which did not change;
- compiles everything again (the same ``make_plan`` as the CLI) when anything else changed: the
  manifests (a different ``Desired`` object), options, nodes, switches, routers, Kubernetes objects
  we own, foreign Network Function ids, NetworkPolicies, the NB schema, an owned
  ``Network_Function``/``Network_Function_Group`` row (their ids are allocated across nodes), an
  owned row without a node, or when the caller asks for it (the loop does every
  ``--full-resync`` seconds, like controller-runtime's ``SyncPeriod``, as a safety net).

The result is equal to ``make_plan(desired, observed, options)`` in its changes (a hypothesis test
in ``tests/core/test_incremental.py`` checks that over random event sequences). Warnings are the
exception: they come from the last full compile, so a warning about a node's pods is refreshed
by the next full pass, not by every pod event.

Pure: no I/O, no clock; the loop decides when a full pass is due.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from reconciler import ownership as own
from reconciler.compile import (
    CompileOptions,
    check_vnf_address,
    choose_steering,
    compile_target,
    members_by_group_and_node,
    pod_ips_by_switch,
    port_group_ports,
)
from reconciler.diff import LiveState, diff, live_state
from reconciler.model import Desired
from reconciler.observed import Observed, OvnRow, Pod, PodPort
from reconciler.plan import Plan
from reconciler.target import Resource, Target

Mode = Literal["full", "incremental", "cached"]
Ident = tuple[str, str]
T = TypeVar("T")

_GLOBAL_FIELDS = (
    "nodes",
    "switches",
    "routers",
    "kube_objects",
    "used_ids",
    "network_policies",
    "capabilities",
)
"""``Observed`` fields any resource may depend on: a change in one of them means a full compile."""
_ID_TABLES = frozenset({"Network_Function", "Network_Function_Group"})


@dataclass
class _Memo:
    desired: Desired
    options: CompileOptions
    observed: Observed
    plan: Plan
    target: dict[str | None, dict[Ident, Resource]]
    """The last target, by node."""
    live: dict[str | None, dict[Ident, dict[str, Any]]]
    """Owned live state (OVN rows and Kubernetes objects) of ``observed``, by node."""
    ports: dict[str, PodPort]
    """``observed.pod_ports`` by LSP name."""


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
        memo = self._memo
        reason = "requested" if full else _why_full(memo, desired, observed, options)
        dirty: set[str] | None = None
        rows: list[tuple[OvnRow | None, OvnRow | None]] = []
        if reason is None:
            assert memo is not None
            dirty, rows, reason = _dirty_nodes(memo, observed)
        if reason is not None or dirty is None:
            return self._full(desired, observed, options, reason or "requested")
        assert memo is not None
        self.last_dirty_nodes = frozenset(dirty)
        if not dirty:
            memo.observed = observed
            self.last_mode = "cached"
            return memo.plan
        self.last_mode = "incremental"
        return self._incremental(memo, desired, observed, dirty, rows)

    # ------------------------------------------------------------------ full

    def _full(
        self, desired: Desired, observed: Observed, options: CompileOptions, reason: str
    ) -> Plan:
        self._memo = None  # a failing compile must not leave a stale memo behind
        target = compile_target(desired, observed, options)
        meta = {
            "instance": options.instance,
            "steering": choose_steering(desired, observed, options),
            "nb_schema": observed.capabilities.schema_version,
        }
        live = live_state(observed.ovn_rows, observed.kube_objects)
        the_plan = diff(target, live, meta)
        by_node: dict[str | None, dict[Ident, Resource]] = {}
        for ident, res in target.resources.items():
            by_node.setdefault(res.node, {})[ident] = res
        self._memo = _Memo(
            desired=desired,
            options=options,
            observed=observed,
            plan=the_plan,
            target=by_node,
            live=_live_by_node(live),
            ports={p.name: p for p in observed.pod_ports},
        )
        self.last_mode = "full"
        self.last_full_reason = reason
        self.last_dirty_nodes = frozenset()
        return the_plan

    # ------------------------------------------------------------------ incremental

    def _incremental(
        self,
        memo: _Memo,
        desired: Desired,
        observed: Observed,
        dirty: set[str],
        rows: list[tuple[OvnRow | None, OvnRow | None]],
    ) -> Plan:
        ports = (
            memo.ports
            if observed.pod_ports is memo.observed.pod_ports
            else {p.name: p for p in observed.pod_ports}
        )
        steering = memo.plan.meta.get("steering")
        if steering == "router-policy":
            _check_vnf_addresses(memo, observed, dirty)
        members = members_by_group_and_node(desired, observed, dirty)
        target: dict[Ident, Resource] = {}
        new_target = dict(memo.target)
        for node in dirty:
            resources: dict[Ident, Resource] = {}
            for ident, res in memo.target.get(node, {}).items():
                if res.kind == "Port_Group":
                    group = res.origin.partition("/")[2]
                    wanted = port_group_ports(members, group, node)
                    if wanted != res.fields.get("ports"):
                        res = Resource(
                            res.kind, res.key, res.origin, res.node, {**res.fields, "ports": wanted}
                        )
                resources[ident] = res
            new_target[node] = resources
            target.update(resources)

        live = _update_live(memo.live, rows)
        sub_live: dict[Ident, dict[str, Any]] = {}
        for node in dirty:
            sub_live.update(live.get(node, {}))
        sub = diff(Target(resources=target), sub_live, memo.plan.meta)
        changes = [c for c in memo.plan.changes if c.node not in dirty]
        changes.extend(sub.changes)
        changes.sort(key=lambda c: c.sort_key)
        the_plan = Plan(tuple(changes), memo.plan.warnings, dict(memo.plan.meta))
        self._memo = _Memo(
            desired=desired,
            options=memo.options,
            observed=observed,
            plan=the_plan,
            target=new_target,
            live=live,
            ports=ports,
        )
        return the_plan


# ---------------------------------------------------------------------- change detection


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
    for name in _GLOBAL_FIELDS:
        if not _same(getattr(observed, name), getattr(memo.observed, name)):
            return f"{name.replace('_', ' ')} changed"
    return None


def _changed(
    old: Iterable[T], new: Iterable[T], key: Callable[[T], Hashable]
) -> list[tuple[T | None, T | None]]:
    """Pairs (before, after) of items that differ; ``None`` for added/removed ones."""
    before = {key(x): x for x in old}
    out: list[tuple[T | None, T | None]] = []
    for item in new:
        prev = before.pop(key(item), None)
        if prev is None or not _same(prev, item):
            out.append((prev, item))
    out.extend((prev, None) for prev in before.values())
    return out


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


Rows = list[tuple[OvnRow | None, OvnRow | None]]


def _dirty_nodes(memo: _Memo, observed: Observed) -> tuple[set[str] | None, Rows, str | None]:
    """Nodes whose slice of the plan may have changed and the owned rows that changed, or
    ``(None, [], reason)`` when only a full pass will do."""
    old = memo.observed
    rows: Rows = []
    dirty: set[str] = set()
    new_ports: Mapping[str, PodPort] | None = None
    if observed.pod_ports is not old.pod_ports:
        for old_port, new_port in _changed(old.pod_ports, observed.pod_ports, _port_key):
            dirty.update(p.switch for p in (old_port, new_port) if p is not None)
        new_ports = {p.name: p for p in observed.pod_ports}
    if observed.pods is not old.pods:
        ports = new_ports if new_ports is not None else memo.ports
        for old_pod, new_pod in _changed(old.pods, observed.pods, _pod_key):
            pod = new_pod or old_pod
            assert pod is not None
            for index in (memo.ports, ports):
                port = index.get(pod.lsp_name)
                if port is not None:
                    dirty.add(port.switch)
    if observed.ovn_rows is not old.ovn_rows:
        rows = _changed(old.ovn_rows, observed.ovn_rows, _row_key)
        for pair in rows:
            for row in pair:
                if row is None:
                    continue
                node = _row_node(row)
                if node is None:
                    return None, [], f"owned {row.table} {row.key} without a node changed"
                if row.table in _ID_TABLES:
                    why = f"owned {row.table} {row.key} changed (ids are allocated globally)"
                    return None, [], why
                dirty.add(node)
    return dirty, rows, None


# ---------------------------------------------------------------------- helpers


def _live_by_node(live: LiveState) -> dict[str | None, dict[Ident, dict[str, Any]]]:
    by_node: dict[str | None, dict[Ident, dict[str, Any]]] = {}
    for ident, fields in live.items():
        ids = fields.get("external_ids")
        if ids is None:  # a Kubernetes body
            node = (fields.get("metadata") or {}).get("labels", {}).get(own.NODE_LABEL)
        else:
            node = ids.get(own.NODE)
        by_node.setdefault(node, {})[ident] = fields
    return by_node


def _update_live(
    live: dict[str | None, dict[Ident, dict[str, Any]]], rows: Rows
) -> dict[str | None, dict[Ident, dict[str, Any]]]:
    """The owned live state by node with the changed OVN rows applied (copy on write: the
    memo of the previous pass stays intact). Kubernetes objects did not change, or this would
    be a full pass."""
    if not rows:
        return live
    out = dict(live)
    copied: set[str | None] = set()
    for before, after in rows:
        for row in (before, after):
            if row is None:
                continue
            node = _row_node(row)
            if node not in copied:
                out[node] = dict(out.get(node, {}))
                copied.add(node)
        if before is not None and after is None:
            out[_row_node(before)].pop(_row_key(before), None)
        elif after is not None:
            if before is not None and _row_node(before) != _row_node(after):
                out[_row_node(before)].pop(_row_key(before), None)
            out[_row_node(after)][_row_key(after)] = after.fields
    return out


def _check_vnf_addresses(memo: _Memo, observed: Observed, dirty: set[str]) -> None:
    """The router-policy backend's only pod-dependent check: no pod holds a VNF's address."""
    taken = pod_ips_by_switch(
        replace(observed, pod_ports=tuple(p for p in observed.pod_ports if p.switch in dirty))
    )
    subnets = {s.name: s.subnet for s in observed.switches}
    for node in sorted(dirty):
        for res in memo.target.get(node, {}).values():
            if res.kind != "Logical_Switch_Port":
                continue
            for address in res.fields.get("addresses") or ():
                parts = address.split()
                if len(parts) > 1:
                    vnf = res.origin.partition("/")[2]
                    check_vnf_address(
                        vnf, node, parts[1], subnets.get(node), taken.get(node, set())
                    )
