"""Scopes: which part of the target one osc-gitops process reconciles.

OVN-Kubernetes' interconnect mode gives every node its own Northbound DB, so the reconciler
splits the same way. Three scopes, each a pair of pure steps around the one planner
(``reconciler.engine.pipeline``): a *view* of the observed state before planning, and a
*restriction* of the plan after it.

- :class:`CentralScope` (no flag; today's behaviour): everything, Kubernetes and OVN, in one
  central NB. Its view is the observed state itself. Its restriction leaves alone the OVN slices
  node agents hold in the same NB (below); with no agent rows in the NB it returns the very plan
  it was given.
- :class:`NodeScope` (``--node N``): only node N's OVN slice (Port_Groups, NF ports,
  Network_Functions, their groups and health checks, ACLs or router policies of N) and the
  service-monitor options of ``NB_Global``, read from and written to the NB it is given;
  Kubernetes is read, never written.
- :class:`KubernetesScope` (``--kubernetes-only``): the VNF VirtualMachines and NADs of every
  node and the security-manager notifications; no OVN at all. Where a central-NB run learns the
  nodes that carry an OVN network from their logical switches, this scope learns them from the
  Node objects (``k8s.ovn.org/node-subnets``): see :func:`node_switches`.

**Ownership (who may change which row).** Every row still carries ``osc.io/owner=<instance>``
and, per node, ``osc.io/node=<node>``. A node agent compiles with :class:`AgentOptions`, and
``core.planning.compile_plan`` adds ``osc.io/agent=<node>`` (``ownership.AGENT``) to every OVN
row of its slice. So:

- an agent considers its own only the instance's rows of its node (with or without the marker:
  rows a central run left for that node are *adopted*, one update that adds the marker); other
  nodes' rows are somebody else's (their Network_Function ids count as taken, since ids are
  per NB);
- a central run leaves a node's OVN slice to its agent as soon as a marked row of that node is
  in the NB: it neither updates nor deletes that node's rows, nor creates them (it still owns the
  node's VirtualMachine and NADs);
- ``NB_Global``'s service-monitor options belong to the whole instance (one marker,
  ``osc.io/svc-monitor.<instance>``): a run removes them only when no health-checked function of
  the instance is left outside its scope, so an agent whose node lost its last VNF does not pull
  them from under the other nodes of a shared NB.

A central-NB run and agents on one NB therefore never fight over a row: at any time each node's
OVN slice has one owner. In a zone NB an agent is the only writer and these rules change nothing.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from reconciler.core.compiling.compile import Compiled, CompileOptions
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Desired
from reconciler.core.model.facts import Finding
from reconciler.core.model.observed import (
    KubeObject,
    NetworkPolicy,
    Node,
    Observed,
    OvnCapabilities,
    OvnRow,
    Switch,
)
from reconciler.core.model.plan import Change, Plan
from reconciler.core.model.target import NB_GLOBAL, Resource, Target
from reconciler.core.steering import HEALTH_CHECK_TABLE, NF_ID_TABLES
from reconciler.errors import InternalError

__all__ = [
    "KUBERNETES_CAPABILITIES",
    "AgentOptions",
    "CentralScope",
    "KubernetesScope",
    "NodeScope",
    "Scope",
    "ScopedView",
    "agent_marked",
    "kubernetes_observed",
    "mark_agent_rows",
    "node_switches",
    "object_node",
    "row_node",
    "scope_for",
]


@dataclass(frozen=True)
class AgentOptions(CompileOptions):
    """The compile options of a node agent: ``node`` is the node whose OVN slice it owns, and
    ``core.planning.compile_plan`` marks that slice's rows (``ownership.AGENT``)."""

    node: str = ""


# ------------------------------------------------------------------------------ row helpers


def row_node(row: OvnRow) -> str | None:
    """``osc.io/node`` of an owned row (``None``: a cluster-wide row, i.e. ``NB_Global``)."""
    node = (row.fields.get("external_ids") or {}).get(own.NODE)
    return node if isinstance(node, str) else None


def agent_marked(row: OvnRow) -> str | None:
    """The node whose agent holds this row (``osc.io/agent``), or ``None``."""
    agent = (row.fields.get("external_ids") or {}).get(own.AGENT)
    return agent if isinstance(agent, str) else None


def _with_taken_ids(observed: Observed, rows: Iterable[OvnRow]) -> dict[str, tuple[int, ...]]:
    """``observed.used_ids`` plus the ids of ``rows`` (owned rows outside the scope: their ids
    are taken in this NB as surely as a stranger's)."""
    taken = {table: set(ids) for table, ids in observed.used_ids.items()}
    for row in rows:
        if row.table in NF_ID_TABLES and isinstance(row.fields.get("id"), int):
            taken.setdefault(row.table, set()).add(row.fields["id"])
    return {table: tuple(sorted(ids)) for table, ids in sorted(taken.items())}


def _drop_svc_monitor_delete(changes: list[Change]) -> list[Change]:
    return [c for c in changes if not (c.kind == NB_GLOBAL and c.action == "delete")]


def mark_agent_rows(compiled: Compiled, node: str) -> Compiled:
    """``compiled`` with ``osc.io/agent=<node>`` in the ``external_ids`` of every OVN row of
    ``node`` (``NB_Global`` is the instance's, never one agent's: it stays unmarked), in the
    target and among the potential rows (a pair that appears later brings them marked)."""

    def marked(res: Resource) -> Resource:
        if res.is_ovn and res.node == node and "external_ids" in res.fields:
            ids = {**res.fields["external_ids"], own.AGENT: node}
            return Resource(
                res.kind, res.key, res.origin, res.node, {**res.fields, "external_ids": ids}
            )
        return res

    target = Target(
        resources={i: marked(r) for i, r in compiled.target.resources.items()},
        findings=compiled.target.findings,
    )
    potential = {i: marked(r) for i, r in compiled.potential.items()}
    return replace(compiled, target=target, potential=potential)


# ------------------------------------------------------------------------------ scopes


@dataclass(frozen=True)
class ScopedView:
    """The observed state as a scope's planner sees it, and what its restriction needs."""

    observed: Observed
    held: frozenset[str] = frozenset()
    """Nodes whose OVN slice another party holds (for a central run: the nodes with agents)."""
    foreign_checks: bool = False
    """Health-checked functions of this instance exist outside the scope, so the service-monitor
    options of ``NB_Global`` are still needed (never deleted by this scope)."""


class _Memo:
    """The last result of a derivation, kept while its sources are the very same objects.

    The loop's caches hand back the same tuples while nothing changed, and the incremental
    planner relies on getting the same objects back then
    (``reconciler.core.planning.incremental``), so a scope derives an unchanged field once and
    hands back the same object after."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[Any, ...], Any]] = {}

    def get(self, key: str, sources: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        last = self._last.get(key)
        if last is not None and all(a is b for a, b in zip(last[0], sources, strict=True)):
            return last[1]
        result = make()
        self._last[key] = (sources, result)
        return result


class Scope:
    """A scope (see the module docstring); the base is the central one's behaviour."""

    name: str = "central"
    reads_ovn: bool = True
    """It connects to an NB (``--kubernetes-only`` does not)."""
    reads_pods: bool = True
    """It reads pods (``--kubernetes-only`` does not: a VM depends on nodes only)."""
    writes_kubernetes: bool = True
    """It may create, change and delete VirtualMachines and NADs (an agent may not)."""

    def desired(self, desired: Desired) -> Desired:
        """The manifests this scope compiles (all of them unless said otherwise)."""
        return desired

    def options(self, options: CompileOptions) -> CompileOptions:
        """The compile options of this scope."""
        return options

    def view(self, observed: Observed) -> ScopedView:
        """The observed state this scope plans from."""
        return ScopedView(observed)

    def restrict(self, plan: Plan, view: ScopedView) -> Plan:
        """The part of ``plan`` this scope carries out (``plan`` itself when all of it)."""
        return plan


class CentralScope(Scope):
    """Everything, in one NB, except the OVN slices node agents hold there."""

    def __init__(self) -> None:
        self._memo = _Memo()

    def view(self, observed: Observed) -> ScopedView:
        held, checks = self._memo.get("held", (observed.ovn_rows,),
                                      lambda: _agent_held(observed.ovn_rows))  # fmt: skip
        if not held:
            return ScopedView(observed)
        return ScopedView(observed, held, checks)

    def restrict(self, plan: Plan, view: ScopedView) -> Plan:
        if not view.held:
            return plan
        kept = [c for c in plan.changes if not (c.is_ovn and c.node in view.held)]
        if view.foreign_checks:
            kept = _drop_svc_monitor_delete(kept)
        if len(kept) == len(plan.changes):
            return plan
        held = sorted(view.held)
        note = (
            f"node agents (run --node) hold the OVN rows of {len(held)} node(s) in this NB "
            f"({', '.join(held[:5])}{', …' if len(held) > 5 else ''}): this run leaves them "
            "alone and plans only their Kubernetes objects"
        )
        finding = Finding("scope", "", None, note)
        return replace(plan, changes=tuple(kept), findings=(*plan.findings, finding))


def _agent_held(rows: Iterable[OvnRow]) -> tuple[frozenset[str], bool]:
    held: set[str] = set()
    checks = False
    for row in rows:
        agent = agent_marked(row)
        if agent is not None:
            held.add(agent)
            checks = checks or row.table == HEALTH_CHECK_TABLE
    return frozenset(held), checks


class NodeScope(Scope):
    """Node ``node``'s OVN slice of the NB given; Kubernetes is read, never written."""

    name = "node"
    writes_kubernetes = False

    def __init__(self, node: str, *, report_kubernetes: bool = True) -> None:
        self.node = node
        self.report_kubernetes = report_kubernetes
        """Warn when the node's Kubernetes objects differ from the manifests (off where the
        central owner's own plan is shown beside, e.g. a zoned snapshot's plan)."""
        self._memo = _Memo()

    def options(self, options: CompileOptions) -> CompileOptions:
        if isinstance(options, AgentOptions) and options.node == self.node:
            return options
        values = {f.name: getattr(options, f.name) for f in fields(CompileOptions)}
        return AgentOptions(**values, node=self.node)

    def _rows(
        self, observed: Observed
    ) -> tuple[tuple[OvnRow, ...], dict[str, tuple[int, ...]], bool]:
        """This node's owned rows and ``NB_Global``'s; the ids taken in the NB counting the
        instance's other rows; whether a health check is among those."""
        mine: list[OvnRow] = []
        others: list[OvnRow] = []
        for row in observed.ovn_rows:
            node = row_node(row)
            if node == self.node or (node is None and row.table == NB_GLOBAL):
                mine.append(row)
            else:
                others.append(row)
        if not others:
            return observed.ovn_rows, observed.used_ids, False
        checks = any(r.table == HEALTH_CHECK_TABLE for r in others)
        return tuple(mine), _with_taken_ids(observed, others), checks

    def view(self, observed: Observed) -> ScopedView:
        node, memo = self.node, self._memo
        rows, used, checks = memo.get(
            "rows", (observed.ovn_rows, observed.used_ids), lambda: self._rows(observed)
        )
        scoped = replace(
            observed,
            nodes=memo.get("nodes", (observed.nodes,),
                           lambda: tuple(n for n in observed.nodes if n.name == node)),
            pods=memo.get("pods", (observed.pods,),
                          lambda: tuple(p for p in observed.pods if p.node == node)),
            pod_ports=memo.get("ports", (observed.pod_ports,),
                               lambda: tuple(p for p in observed.pod_ports if p.switch == node)),
            kube_objects=memo.get(
                "objects", (observed.kube_objects,),
                lambda: tuple(o for o in observed.kube_objects if object_node(o) == node),
            ),
            ovn_rows=rows,
            used_ids=used,
        )  # fmt: skip
        return ScopedView(scoped, foreign_checks=checks)

    def restrict(self, plan: Plan, view: ScopedView) -> Plan:
        node = self.node
        stray = next((c for c in plan.changes if c.is_ovn and c.node not in (node, None)), None)
        if stray is not None:
            raise InternalError(
                f"the agent of node {node} planned to {stray.action} {stray.kind} {stray.key} of "
                f"node {stray.node}: refusing to touch another node's rows"
            )
        kube = [c for c in plan.changes if not c.is_ovn]
        ovn = [c for c in plan.changes if c.is_ovn]
        if view.foreign_checks:
            ovn = _drop_svc_monitor_delete(ovn)
        findings = list(plan.findings)
        if not view.observed.nodes:
            text = f"node {node} is not in the cluster's node list: its agent keeps no rows there"
            findings.append(Finding("scope", f"Node/{node}", node, text))
        if kube and self.report_kubernetes:
            shown = ", ".join(f"{c.action} {c.kind} {c.key}" for c in kube[:3])
            more = f" and {len(kube) - 3} more" if len(kube) > 3 else ""
            text = (
                f"node {node}'s Kubernetes objects are not yet as the manifests say ({shown}"
                f"{more}): the central owner (run --kubernetes-only) makes them so; an agent "
                "never writes Kubernetes"
            )
            findings.append(Finding("scope", f"Node/{node}", node, text))
        return replace(plan, changes=tuple(ovn), findings=tuple(findings), node=node)


class KubernetesScope(Scope):
    """The VNF VirtualMachines and NADs of every node, and the notifications; no OVN."""

    name = "kubernetes-only"
    reads_ovn = False
    reads_pods = False

    def __init__(self) -> None:
        self._memo = _Memo()

    def desired(self, desired: Desired) -> Desired:
        """``desired`` without its Bindings: a VM and its NADs depend on the VnfDeployment and
        the node only, while the bindings' OVN rows would allocate Network_Function ids for all
        nodes as if they shared one NB (255 at most), for rows this scope never writes. The same
        object while ``desired`` is (the incremental planner compares it by identity)."""
        result: Desired = self._memo.get(
            "desired",
            (desired,),
            lambda: desired.model_copy(update={"bindings": {}}) if desired.bindings else desired,
        )
        return result

    def restrict(self, plan: Plan, view: ScopedView) -> Plan:
        kube = tuple(c for c in plan.changes if not c.is_ovn)
        return replace(plan, changes=kube, steering=None, nb_schema=None, scope=self.name)


def object_node(obj: KubeObject) -> str | None:
    """The node a VirtualMachine or NAD of ours is for (``ownership.node_of``: its
    ``osc.io/node`` label, or the full name where the label had to shorten it)."""
    meta = obj.body.get("metadata") or {}
    return own.node_of(meta.get("labels") or {}, meta.get("annotations") or {})


def scope_for(node: str | None, kubernetes_only: bool) -> Scope:
    """The scope the flags ask for (``--node``, ``--kubernetes-only``, or neither)."""
    if node is not None and kubernetes_only:
        raise InternalError("a scope is one node's or the Kubernetes side, never both")
    if node is not None:
        return NodeScope(node)
    if kubernetes_only:
        return KubernetesScope()
    return CentralScope()


# ------------------------------------------------------------------------------ kubernetes side

KUBERNETES_CAPABILITIES = OvnCapabilities(schema_version="", network_function=False)
"""What a scope without OVN access knows of OVN: nothing."""


def node_switches(nodes: Iterable[tuple[Node, str | None]]) -> tuple[Switch, ...]:
    """The node switches OVN-Kubernetes has, as the Node objects say: one per node with a pod
    subnet (``k8s.ovn.org/node-subnets``), named after the node. A node without one is not part
    of the OVN network yet, like a node without a switch in a central NB."""
    return tuple(Switch(name=node.name, subnet=subnet) for node, subnet in nodes if subnet)


def kubernetes_observed(
    nodes: Iterable[tuple[Node, str | None]],
    kube_objects: Iterable[KubeObject],
    network_policies: Iterable[NetworkPolicy] = (),
) -> Observed:
    """What :class:`KubernetesScope` observes: nodes (their switches from their subnets) and the
    objects we own; no pods, no OVN (``network_policies``: only for a zoned snapshot, whose
    zones' plans warn about them)."""
    pairs = tuple(nodes)
    return Observed(
        nodes=tuple(node for node, _ in pairs),
        switches=node_switches(pairs),
        kube_objects=tuple(kube_objects),
        network_policies=tuple(network_policies),
        capabilities=KUBERNETES_CAPABILITIES,
    )
