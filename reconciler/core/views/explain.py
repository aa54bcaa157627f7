"""``osc-gitops explain``: is this pod protected, by which VNF, and is that VNF alive?

One pure function, :func:`explain_pod`, over what a plan is made of (the manifests, the observed
state and the full plan compiled from them): which SecurityGroups select the pod and through
which label, the Bindings that apply to it in the order OVN evaluates their rows (and which an
earlier one shadows), the VNF instance on the pod's node with its VirtualMachine and its health
as OVN reports it, the OVN rows that steer the pod and whether each exists live as compiled, and
the warnings that concern this pod.

What "steered as declared" means (:attr:`Explanation.as_declared`, the command's exit 0): every
OVN row that concerns the pod (the Port_Group holding its port and, from there, its ACLs or
router policies, functions, groups and probes, and the VNF data ports) exists live as compiled,
no stale row of ours still steers it, every VirtualMachine it needs exists as compiled, and every
Binding that applies can steer on the pod's node. A pod no group selects is steered as declared
when nothing of ours steers it: nothing is declared for it. VNF health is reported, not judged:
a failed instance is the failure policy acting as declared.

Evaluation order and shadowing are computed over the pod's own bindings, across its groups (the
ACLs of every Port_Group holding its port apply to it), and only over the bindings whose VNF runs
on the pod's node (elsewhere they have no rows there). With router-policy steering, traffic from
the pod is rerouted at the destination's node; shadowing there is judged on the pod's node too.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.core.compiling.compile import members_by_group_and_node
from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Binding, Desired, Redirection
from reconciler.core.model.facts import HEALTHY, UNKNOWN, Health, InstanceHealth, UnboundPort
from reconciler.core.model.observed import Observed, Pod, PodPort
from reconciler.core.model.plan import Change
from reconciler.core.model.selectors import matches_selector
from reconciler.core.model.target import Resource, Target
from reconciler.core.planning.full import CompiledPlan
from reconciler.core.steering import (
    BACKENDS,
    HealthIndex,
    SteeringBackend,
    common,
    instances_in,
    services,
)
from reconciler.core.steering.base import directions
from reconciler.core.steering.port_binding import NO_CHASSIS
from reconciler.core.transitions.hold import held_idents
from reconciler.core.views.traffic import (
    SILENT,
    BinderReport,
    instance_traffic_line,
    unbound_cause,
)
from reconciler.errors import UserError

__all__ = [
    "BindingView",
    "Explanation",
    "GroupMatch",
    "HopView",
    "PodNotFound",
    "RowView",
    "Status",
    "explain_pod",
]

Status = Literal["steered", "not-selected", "no-bindings", "pending", "not-steered", "held"]
"""``steered``: selected, every binding steers on its node and its rows are live as compiled;
``not-selected``: no SecurityGroup selects the pod (and nothing of ours steers it);
``no-bindings``: selected only by groups no Binding uses; ``pending``: it would be steered, but
the live rows (or VMs) differ from the compiled ones (apply has not run, or drift);
``not-steered``: a binding that applies cannot steer it (no VNF instance on its node, no OVN
port for the pod, ...); ``held``: a binding's steering on its node waits until OVN reports the
VNF instance healthy (``reconciler.core.steering.network_function.gating``; the binding's ``held``
says why)."""
AS_DECLARED: frozenset[str] = frozenset({"steered", "not-selected", "no-bindings"})
RowState = Literal["ok", "missing", "differs", "stale"]
"""A row as compiled and live: ``ok`` (equal; for a Port_Group: the pod's membership is),
``missing`` (compiled, not live), ``differs`` (live, other fields), ``stale`` (live, ours, no
longer compiled: apply deletes it)."""

_STATE_BY_ACTION: dict[str, RowState] = {
    "create": "missing",
    "update": "differs",
    "delete": "stale",
}
_STEERING_TABLES = tuple(dict.fromkeys(t for b in BACKENDS.values() for t in b.steering_tables))
ROW_ORDER: tuple[str, ...] = (
    "Port_Group",
    *_STEERING_TABLES,
    *dict.fromkeys(t for b in BACKENDS.values() for t in b.function_tables),
    "Logical_Switch_Port",
    "Logical_Switch",
)
"""Rows listed along a steered packet's path: the pod's Port_Group, the rows that match it, the
function group and function they send it to, the function's probe, the VNF's data ports (and a
chain's child ports and link switches)."""


class PodNotFound(UserError):
    """The pod named on the command line is not in the cluster (or the snapshot)."""


@dataclass(frozen=True, slots=True)
class GroupMatch:
    """A SecurityGroup that selects the pod, and the ``key=value`` label it does it through
    (the first of the group's labels the pod carries; ``labels`` lists every one)."""

    name: str
    label: str
    labels: tuple[str, ...]
    bound: bool
    """Some Binding uses the group."""


@dataclass(frozen=True, slots=True)
class HopView:
    """One VNF a Binding steers through (the only one, or a hop of its chain), on the pod's
    node."""

    vnf: str
    instance: str | None
    """The VirtualMachine ``namespace/name`` of the VNF's instance on the pod's node, if any."""
    vm_state: RowState | None
    health: Health
    health_detail: str
    unbound: tuple[str, ...] = ()
    """Its VM's data ports OVN has not bound, one line each with the cause (what the node's
    binder reports: ``reconciler.core.views.traffic.unbound_cause``)."""
    traffic: str = ""
    """Whether traffic crossed the instance in the last minute, for humans (empty: no VM)."""
    traffic_verdict: str = ""
    """``crossed``, ``quiet``, ``silent-while-pods-talked`` or ``unknown``
    (``reconciler.core.views.traffic.verdict``)."""


@dataclass(frozen=True, slots=True)
class BindingView:
    """A Binding that applies to the pod, on the pod's node."""

    name: str
    group: str
    vnf: str | list[str]
    """``spec.vnf`` as written: one name, or the chain's names in order."""
    order: int
    order_default: bool
    redirection: str
    failure_policy: str
    precedence: str
    traffic: list[dict[str, Any]]
    traffic_text: list[str]
    node: str | None
    instance: str | None
    """The VirtualMachine ``namespace/name`` of the VNF instance on the pod's node, if any."""
    vm_state: RowState | None
    health: Health
    health_detail: str
    shadowed: dict[str, list[str]]
    """Direction -> the earlier bindings that take every packet this one would there."""
    steers: bool
    reason: str
    """Why it does not steer the pod (empty when it does)."""
    held: str = ""
    """Why its steering on the pod's node is held (``waiting for fw-node-2 to become healthy``),
    empty when it is not."""
    hops: list[HopView] = field(default_factory=list)
    """The VNFs in the order a packet crosses them, each on the pod's node (one for a single
    VNF). For a chain, :attr:`instance` is ``None`` and :attr:`health` is the chain's (OVN
    cannot probe it); each hop's own health is here."""

    @property
    def vnf_text(self) -> str:
        """``firewall`` or ``ngfw -> ids``."""
        return self.vnf if isinstance(self.vnf, str) else " -> ".join(self.vnf)

    @property
    def healthy(self) -> bool | None:
        """True/False when OVN can tell, None when it cannot (as ``InstanceHealth.healthy``)."""
        return None if self.health == UNKNOWN else self.health == HEALTHY

    @property
    def shadowed_by(self) -> str | None:
        """The bindings that shadow it in every direction it steers (``a`` or ``a, b``), else
        ``None``."""
        if not self.shadowed or len(self.shadowed) < len(directions(Redirection(self.redirection))):
            return None
        names: list[str] = []
        for by in self.shadowed.values():
            names += [n for n in by if n not in names]
        return ", ".join(names)


@dataclass(frozen=True, slots=True)
class RowView:
    """An OVN row that steers the pod, as compiled and as live."""

    table: str
    name: str
    node: str | None
    origin: str
    state: RowState
    fields: dict[str, Any]
    """The compiled fields (the live ones for a stale row), without ``external_ids``."""
    changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Explanation:
    """Everything ``explain`` says about one pod."""

    namespace: str
    pod: str
    node: str | None
    port: str | None
    labels: dict[str, str]
    steering: str
    status: Status
    groups: list[GroupMatch] = field(default_factory=list)
    bindings: list[BindingView] = field(default_factory=list)
    ovn: list[RowView] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def as_declared(self) -> bool:
        """The pod is steered as declared (exit 0); otherwise not (yet) (exit 3)."""
        return self.status in AS_DECLARED


def explain_pod(
    desired: Desired,
    observed: Observed,
    planned: CompiledPlan,
    namespace: str,
    name: str,
    binders: Mapping[str, BinderReport] | None = None,
) -> Explanation:
    """Explain how ``namespace/name`` is steered; raises :class:`PodNotFound`.

    ``binders``: what each node's binder published, by node (``None``: not read; then an
    unbound port's cause cannot say whether a binder runs, and traffic is unknown)."""
    pod = _find_pod(observed.pods, namespace, name)
    port = _pod_port(observed.pod_ports, pod)
    node = port.switch if port is not None else pod.node
    backend = planned.compiled.backend
    tiered = common.uses_tiers(backend)
    warnings: list[str] = []

    groups = _selecting_groups(desired, pod, warnings)
    bound_groups = {g.name for g in groups if g.bound}
    members = members_by_group_and_node(desired, [pod], observed.pod_ports)
    member_of = {group for group, nodes in members.items() if nodes}
    bindings = common.evaluation_order(
        (b for b in desired.bindings.values() if b.spec.securityGroup in bound_groups),
        tiered=tiered,
    )
    warnings += _port_warnings(pod, port, bound_groups, member_of)
    instances = planned.compiled.instances
    on_node = [
        b
        for b in bindings
        if node is not None and all((vnf, node) in instances for vnf in b.spec.vnfs)
    ]
    health = planned.health or HealthIndex(observed)
    context = _Context(
        desired,
        observed,
        planned,
        node,
        member_of,
        common.shadowing(on_node, tiered=tiered),
        _health(planned, health, node, bindings),
        _vm_states(planned, node, bindings),
        _Traffic(
            health.unbound,
            binders,
            members_by_group_and_node(desired, observed.pods, observed.pod_ports, bound_groups),
        ),
    )
    views = [context.view(binding) for binding in bindings]
    rows = _rows(planned, observed, pod, node, bindings)
    warnings += _binding_warnings(views, on_node, tiered, backend)
    instance = planned.plan.instance or own.DEFAULT_INSTANCE
    warnings += _cluster_warnings(
        desired, observed, pod, node, views, backend, instance, planned.target
    )
    status = _status(groups, views, rows, held_idents(planned.plan))
    warnings += _hop_warnings(views)
    warnings += _held_warnings(views, status, rows)
    return Explanation(
        namespace=pod.namespace,
        pod=pod.name,
        node=node,
        port=port.name if port is not None else None,
        labels=dict(pod.labels),
        steering=backend.name,
        status=status,
        groups=groups,
        bindings=views,
        ovn=rows,
        warnings=list(dict.fromkeys(warnings)),
    )


def _port_warnings(
    pod: Pod, port: PodPort | None, bound_groups: Collection[str], member_of: Collection[str]
) -> list[str]:
    """Why a pod of a bound group cannot be steered yet: OVN has no port for it, or the port
    is an earlier pod's."""
    if bound_groups and port is None:
        return [
            f"OVN has no port {pod.lsp_name} for this pod yet (OVN-Kubernetes adds it once the "
            "pod is wired): nothing can steer it until then"
        ]
    if bound_groups and not member_of:
        return [
            f"OVN's port {pod.lsp_name} belongs to an earlier pod of the same name (its "
            "iface-id-ver is another UID): it is not steered until OVN-Kubernetes updates it"
        ]
    return []


_CHAIN_HEALTH = (
    "a chain's function has no health check (OVN cannot probe across the link between two "
    "VNFs); the hops' own health is listed per hop"
)


@dataclass(frozen=True)
class _Traffic:
    """What a hop is told of its VM's ports and traffic: the ports OVN has not bound (from the
    health index), what each node's binder published (``None``: not read), and the pods of
    each group by node (whose talking the binder counts)."""

    unbound: Sequence[UnboundPort]
    binders: Mapping[str, BinderReport] | None
    steered: Mapping[str, Mapping[str, Sequence[PodPort]]]

    def hop(self, hop: HopView, node: str | None, group: str) -> HopView:
        """The hop with its VM's unbound ports (and why) and the traffic through it."""
        if hop.instance is None or node is None:
            return hop
        binders = self.binders
        report = binders.get(node, BinderReport(node)) if binders is not None else None
        lines = tuple(
            f"port {u.port} ({u.side}) of VirtualMachine {u.vm} is not bound: "
            # what the Southbound showed (``--ovn-sb``), then why, from the node's binder
            + (f"{NO_CHASSIS}; " if u.cause.startswith(NO_CHASSIS) else "")
            + unbound_cause(u.port, node, u.vm, report)
            for u in self.unbound
            if u.vm == hop.instance
        )
        pods = [p.name for p in self.steered.get(group, {}).get(node, [])]
        verdict, text = instance_traffic_line(report, hop.instance.partition("/")[2], pods)
        return dataclasses.replace(hop, unbound=lines, traffic=text, traffic_verdict=verdict)


@dataclass(frozen=True)
class _Context:
    """What every :class:`BindingView` of the pod is made from."""

    desired: Desired
    observed: Observed
    planned: CompiledPlan
    node: str | None
    member_of: set[str]
    """The groups whose member the pod is (OVN knows its port as this pod)."""
    shadowed: Mapping[str, Mapping[str, list[str]]]
    health: Mapping[tuple[str, str], InstanceHealth]
    vm_states: Mapping[tuple[str, str], RowState]
    traffic: _Traffic

    def view(self, binding: Binding) -> BindingView:
        spec, node = binding.spec, self.node
        instances = self.planned.compiled.instances
        hops = [
            self.traffic.hop(
                _hop(self.desired, vnf, node, instances, self.health, self.vm_states),
                node,
                spec.securityGroup,
            )
            for vnf in spec.vnfs
        ]
        reason = ""
        if spec.securityGroup not in self.member_of:
            reason = "the pod has no OVN port of its own yet"
        else:
            missing = next((h.vnf for h in hops if h.instance is None), None)
            if missing is not None:
                reason = _why_no_instance(self.desired, self.observed, missing, node)
                if spec.is_chain:
                    reason = f"its chain {spec.vnf_text} is incomplete there: {reason}"
        first = hops[0]
        held = {(h.binding, h.node): h.reason for h in self.planned.plan.held}
        return BindingView(
            name=binding.metadata.name,
            group=spec.securityGroup,
            vnf=list(spec.vnfs) if spec.is_chain else spec.vnfs[0],
            order=spec.order,
            order_default=spec.order_is_default,
            redirection=spec.redirection.value,
            failure_policy=spec.failurePolicy.value,
            precedence=spec.precedence.value,
            traffic=common.filters_json(spec.traffic),
            traffic_text=common.describe_filters(spec.traffic),
            node=node,
            instance=None if spec.is_chain else first.instance,
            vm_state=_worst(h.vm_state for h in hops) if spec.is_chain else first.vm_state,
            health=UNKNOWN if spec.is_chain else first.health,
            health_detail=_CHAIN_HEALTH if spec.is_chain else first.health_detail,
            shadowed=dict(self.shadowed.get(binding.metadata.name, {})),
            steers=not reason,
            reason=reason,
            hops=hops,
            held=held.get((binding.metadata.name, node or ""), ""),
        )


def _hop_warnings(views: Sequence[BindingView]) -> list[str]:
    """Each VNF port OVN has not bound (and why), and a VNF that saw nothing while its pods
    talked: what an operator must see first."""
    out: list[str] = []
    for view in views:
        for hop in view.hops:
            out.extend(f"VNF {hop.vnf} on {view.node}: {line}" for line in hop.unbound)
            if hop.traffic_verdict == SILENT:
                out.append(f"VNF {hop.vnf} on {view.node}: {hop.traffic}")
    return out


def _held_warnings(
    views: Sequence[BindingView], status: Status, rows: Sequence[RowView]
) -> list[str]:
    out = [
        f"Binding {view.name} on {view.node} is held: {view.held} (steering is switched on by "
        "the next reconcile after OVN reports it healthy; until then the pod's traffic is not "
        "steered)"
        for view in views
        if view.held
    ]
    if status == "pending" and any(r.state == "stale" for r in rows) and not views:
        out.append(
            "rows of an earlier apply still steer this pod although no Binding applies to it "
            "any more: apply removes them"
        )
    return out


# --- the pod and its groups ---------------------------------------------------------------------


def _find_pod(pods: Iterable[Pod], namespace: str, name: str) -> Pod:
    pods = list(pods)
    for pod in pods:
        if pod.namespace == namespace and pod.name == name:
            return pod
    names = [p.name for p in pods if p.namespace == namespace]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f" (did you mean {namespace}/{close[0]}?)" if close else ""
    if not names:
        hint = f" (no pod at all in namespace {namespace})"
    raise PodNotFound(f"pod {namespace}/{name} not found{hint}")


def _pod_port(ports: Iterable[PodPort], pod: Pod) -> PodPort | None:
    return next((p for p in ports if p.name == pod.lsp_name), None)


def _selecting_groups(desired: Desired, pod: Pod, warnings: list[str]) -> list[GroupMatch]:
    bound = {b.spec.securityGroup for b in desired.bindings.values()}
    groups: list[GroupMatch] = []
    for name, group in sorted(desired.security_groups.items()):
        carried = tuple(
            f"{key}={value}"
            for key, value in group.spec.label_pairs()
            if pod.labels.get(key) == value
        )
        if not carried:
            continue
        namespaces = group.spec.namespaces
        if namespaces is not None and pod.namespace not in namespaces:
            warnings.append(
                f"SecurityGroup {name}: the pod carries {carried[0]}, but the group only looks "
                f"in namespace(s) {', '.join(namespaces)}: not a member"
            )
            continue
        groups.append(GroupMatch(name, carried[0], carried, name in bound))
    return groups


# --- the VNF instances ---------------------------------------------------------------------------


def _hop(
    desired: Desired,
    vnf: str,
    node: str | None,
    instances: Mapping[tuple[str, str], Any],
    health: Mapping[tuple[str, str], InstanceHealth],
    vm_states: Mapping[tuple[str, str], RowState],
) -> HopView:
    """One VNF of a binding on the pod's node: its VM, its state, its health."""
    inst = instances.get((vnf, node)) if node is not None else None
    vm = naming.vm_name(vnf, node) if inst is not None and node is not None else None
    namespace = desired.vnfs[vnf].spec.namespace
    inst_health = health.get((vnf, node or ""))
    return HopView(
        vnf=vnf,
        instance=f"{namespace}/{vm}" if vm else None,
        vm_state=vm_states.get((vnf, node or "")),
        health=inst_health.health if inst_health else UNKNOWN,
        health_detail=inst_health.detail if inst_health else "no VNF instance on the pod's node",
    )


def _worst(states: Iterable[RowState | None]) -> RowState | None:
    """The first state of a hop's VM that is not ``ok`` (else ``ok``, or ``None``)."""
    seen = [s for s in states if s is not None]
    return next((s for s in seen if s != "ok"), "ok" if seen else None)


def _why_no_instance(desired: Desired, observed: Observed, vnf: str, node: str | None) -> str:
    if node is None:
        return "the pod is not scheduled on a node yet"
    labels = next((n.labels for n in observed.nodes if n.name == node), None)
    if labels is None:
        return f"node {node} is not a Kubernetes node osc-gitops knows"
    selector = desired.vnfs[vnf].spec.nodeSelector
    missing = [f"{k}={v}" for k, v in sorted(selector.items()) if labels.get(k) != v]
    if missing:
        return (
            f"VnfDeployment {vnf} does not run on node {node}: its nodeSelector wants "
            f"{', '.join(missing)}"
        )
    if node not in {s.name for s in observed.switches}:
        return f"node {node} has no OVN logical switch named after it: VNF {vnf} is not deployed"
    return f"VnfDeployment {vnf} has no instance on node {node}"


def _health(
    planned: CompiledPlan, health: HealthIndex, node: str | None, bindings: Sequence[Binding]
) -> dict[tuple[str, str], InstanceHealth]:
    """Health of the instances on the pod's node that a function stands for (compiled or
    live); an instance without one (router-policy steering) has no health check."""
    if node is None:
        return {}
    wanted = {
        (vnf, node)
        for b in bindings
        for vnf in b.spec.vnfs
        if (vnf, node) in planned.compiled.instances
    }
    report = health.instances(wanted & instances_in(planned.target))
    backend = planned.compiled.backend
    out: dict[tuple[str, str], InstanceHealth] = {}
    for vnf, n in sorted(wanted):
        detail = f"no health check with {backend.name} steering"
        if backend.health_checked:
            detail = "no function of its own here (it is only a hop of a chain)"
        out[(vnf, n)] = report.get((vnf, n)) or InstanceHealth(vnf, n, UNKNOWN, detail)
    return out


def _vm_states(
    planned: CompiledPlan, node: str | None, bindings: Sequence[Binding]
) -> dict[tuple[str, str], RowState]:
    # what is held back is not live either: compare with the plan before health gating
    changes = _changes_by_ident((planned.untransitioned or planned.plan).changes)
    states: dict[tuple[str, str], RowState] = {}
    wanted = {vnf for b in bindings for vnf in b.spec.vnfs}
    if node is None:
        return states
    for res in planned.target:
        vnf = res.origin.partition("/")[2]
        if res.kind == "VirtualMachine" and res.node == node and vnf in wanted:
            change = changes.get(res.ident)
            states[(vnf, node)] = _STATE_BY_ACTION[change.action] if change else "ok"
    return states


# --- the OVN rows --------------------------------------------------------------------------------


def _changes_by_ident(changes: Iterable[Change]) -> dict[tuple[str, str], Change]:
    return {(c.kind, c.key): c for c in changes}


def _references(match: str, port_groups: Iterable[str]) -> bool:
    """Whether an ACL or router-policy match names one of ``port_groups`` (``@pg`` or
    ``$pg_ip4``), as a whole name: ``@osc.web.node_1`` is not ``@osc.web.node_10``."""
    for pg in port_groups:
        if re.search(rf"[@$]{re.escape(pg)}(?:_ip4|_ip6)?(?![A-Za-z0-9_.])", match):
            return True
    return False


def _rows(
    planned: CompiledPlan,
    observed: Observed,
    pod: Pod,
    node: str | None,
    bindings: Sequence[Binding],
) -> list[RowView]:
    """The rows that steer the pod, compiled or live: the Port_Groups holding its port, the
    ACLs or router policies naming them, the groups, functions and probes those reach, the
    data ports of the VNF instances on the pod's node its bindings use, and the Port_Group
    that makes those ports stateless beside load balancers (with its two ACLs)."""
    compiled: dict[tuple[str, str], Resource] = {
        ident: res for ident, res in planned.target.resources.items() if res.is_ovn
    }
    live = {(r.table, r.key): r.fields for r in observed.ovn_rows}
    compiled_fields = {ident: res.fields for ident, res in compiled.items()}
    every: dict[tuple[str, str], Mapping[str, Any]] = {**live, **compiled_fields}
    lsp = pod.lsp_name

    def select(table: str, keep: Callable[[Mapping[str, Any]], bool]) -> set[tuple[str, str]]:
        """Rows of ``table``, compiled or live, whose fields (either) ``keep`` accepts."""
        found: set[tuple[str, str]] = set()
        for source in (compiled_fields, live):
            found |= {ident for ident, f in source.items() if ident[0] == table and keep(f)}
        return found

    pgs = select("Port_Group", lambda f: lsp in (f.get("ports") or ()))
    pg_names = {key for _, key in pgs}
    steering: set[tuple[str, str]] = set()
    for table in _STEERING_TABLES:
        steering |= select(
            table,
            lambda f: (
                f.get("port_group") in pg_names or _references(str(f.get("match", "")), pg_names)
            ),
        )
    path = set().union(*(b.path_rows(every, steering) for b in BACKENDS.values()))
    vnfs = {f"VnfDeployment/{vnf}" for b in bindings for vnf in b.spec.vnfs}
    chains = {",".join(b.spec.vnfs) for b in bindings if b.spec.is_chain}
    ports = {
        ident
        for ident, res in compiled.items()
        if res.kind in ("Logical_Switch_Port", "Logical_Switch")
        and res.node == node
        and (res.origin in vnfs or (res.fields.get("external_ids") or {}).get(own.CHAIN) in chains)
    }
    stateless: set[tuple[str, str]] = set()
    if node is not None and bindings:  # the VNF ports made stateless beside load balancers
        instance = planned.plan.instance or own.DEFAULT_INSTANCE
        pg = services.stateless_port_group(instance, node)
        stateless = {("Port_Group", pg), *select("ACL", lambda f: f.get("port_group") == pg)}
    changes = _changes_by_ident((planned.untransitioned or planned.plan).changes)
    views: list[RowView] = []
    for ident in sorted(
        {*pgs, *steering, *path, *ports, *stateless},
        key=lambda i: (ROW_ORDER.index(i[0]) if i[0] in ROW_ORDER else 99, i[1]),
    ):
        if ident not in every:
            continue  # a reference to a row of nobody's (would be a plan error)
        views.append(_row_view(ident, compiled.get(ident), live.get(ident), changes, lsp))
    return views


def _row_view(
    ident: tuple[str, str],
    res: Resource | None,
    live: Mapping[str, Any] | None,
    changes: Mapping[tuple[str, str], Change],
    lsp: str,
) -> RowView:
    table, key = ident
    change = changes.get(ident)
    state: RowState = _STATE_BY_ACTION[change.action] if change else "ok"
    if res is None and live is not None:
        state = "stale"
    source: Mapping[str, Any] = res.fields if res is not None else (live or {})
    ids = (live or {}).get("external_ids") or {}
    origin = res.origin if res is not None else str(ids.get(own.RESOURCE, ""))
    row_node = res.node if res is not None else ids.get(own.NODE)
    changed = change.changed if change is not None else ()
    if (
        table == "Port_Group"
        and state == "differs"
        and live is not None
        and res is not None
        and (lsp in (live.get("ports") or ())) == (lsp in (res.fields.get("ports") or ()))
    ):
        state, changed = "ok", ()  # other pods joining or leaving is not this pod's business
    fields = {k: v for k, v in source.items() if k != "external_ids"}
    return RowView(table, key, row_node, origin, state, fields, tuple(changed))


# --- status and warnings -------------------------------------------------------------------------


def _status(
    groups: Sequence[GroupMatch],
    views: Sequence[BindingView],
    rows: Sequence[RowView],
    held: Collection[tuple[str, str]] = (),
) -> Status:
    """``held`` rows (waiting for health) are not drift: apply would not write them now."""
    drift = any(r.state != "ok" and (r.table, r.name) not in held for r in rows) or any(
        b.vm_state not in (None, "ok") for b in views
    )
    if not groups:
        return "pending" if drift else "not-selected"
    if not views:
        return "pending" if drift else "no-bindings"
    if any(not b.steers for b in views):
        return "not-steered"
    if drift:
        return "pending"
    return "held" if any(b.held for b in views) else "steered"


def _binding_warnings(
    views: Sequence[BindingView],
    on_node: Sequence[Binding],
    tiered: bool,
    backend: SteeringBackend,
) -> list[str]:
    out: list[str] = []
    for view in views:
        if view.reason:
            out.append(f"Binding {view.name} does not steer this pod: {view.reason}")
        for direction, by in view.shadowed.items():
            out.append(common.shadowed_finding(view.name, direction, by).text)
        if view.steers and view.health == "not healthy":
            effect = "drops" if view.failure_policy == "fail-close" else "bypasses the VNF for"
            out.append(
                f"VNF {view.vnf_text} on node {view.node} is not healthy as OVN reports it: "
                f"Binding {view.name} ({view.failure_policy}) {effect} the traffic it steers"
            )
        if view.steers and len(view.hops) > 1:
            for hop in view.hops:
                if hop.health == "not healthy":
                    out.append(
                        f"VNF {hop.vnf} of the chain of Binding {view.name} is not healthy as "
                        f"OVN reports it on node {view.node}: the chain's traffic is dropped "
                        "there (OVN cannot probe the chain itself, so its failure policy "
                        "cannot act)"
                    )
    for names in common.tied(on_node, tiered=tiered):
        out.append(
            f"Bindings {', '.join(names)} (different groups of this pod) have the same order"
            + (" and precedence" if tiered else "")
            + ": their rows have the same priority, and OVN picks either for a packet both match"
        )
    if backend.routed_only and views:
        out.append(
            f"{backend.name} steering reroutes routed traffic only: traffic between this pod "
            "and pods on its own node is not steered"
            + ("" if backend.health_checked else ", and failurePolicy cannot act (no health check)")
        )
    return out


def _cluster_warnings(
    desired: Desired,
    observed: Observed,
    pod: Pod,
    node: str | None,
    views: Sequence[BindingView],
    backend: SteeringBackend,
    instance: str,
    planned_target: Target,
) -> list[str]:
    """What the plan found about the cluster that concerns this pod (the NetworkPolicies that
    select it, as compile words them), and what steering beside load balancers or without a
    health check means for it."""
    findings = planned_target.findings
    out: list[str] = []
    steering_views = [v for v in views if v.steers]
    if not steering_views:
        return out
    selecting = {
        f"NetworkPolicy/{policy.namespace}/{policy.name}"
        for policy in observed.network_policies
        if policy.namespace == pod.namespace and matches_selector(pod.labels, policy.pod_selector)
    }
    out += [f.text for f in findings if f.code == "network-policy" and f.subject in selecting]
    switch = next((s for s in observed.switches if s.name == node), None)
    if backend.stateless_beside_load_balancers and switch is not None and switch.load_balancers:
        twice = any(
            r.kind == "ACL" and r.node == node and r.key.endswith(".crossed")
            for r in planned_target
        )
        names = (v.name for v in steering_views)
        out.append(services.pod_note(instance, switch.name, names, twice=twice))
    for vnf in sorted({v.vnf for v in steering_views if isinstance(v.vnf, str)}):
        if not desired.vnfs[vnf].spec.healthCheck.enabled and backend.health_checked:
            out.append(
                f"VnfDeployment {vnf} has healthCheck.enabled: false: OVN counts it healthy "
                "whenever its ports are bound, so the failure policy cannot act for this pod"
            )
    return out
