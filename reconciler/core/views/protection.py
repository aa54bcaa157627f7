"""Protection changes: which pods start and stop being steered, per Binding.

A reviewer of a pull request sees Port_Group and ACL rows; what they need to know is "37
payments pods lose their firewall". This module says that, from plain data only, in two ways:

- :func:`live_changes` (the default whenever OVN rows are observed): *before* is what the owned
  OVN rows steer now, *after* what they steer once the plan is applied (the live rows with the
  plan's OVN changes), both read by the same function, :func:`steering_in_rows`. It needs no
  record of what was applied, so it holds in every flow (a plan on a laptop against a cluster
  someone else applied, a pull request's plan of a snapshot, the CronJob's apply), and it is
  exact: an empty plan never shows a protection change, and a pod labelled, created or deleted
  since the last apply is among the pods that start or stop being steered.
- :func:`protection_changes` (``--base DIR``): two sets of manifests on the same observed
  cluster, each side by :func:`steering_of`, which decides membership and placement as compile
  does:

  - P is a member of B's SecurityGroup: it carries one of the group's labels (the first one, in
    the group's order, is shown as *through which label*), in one of its namespaces if it lists
    any, and OVN knows P's port as the same pod (the LSP ``<namespace>_<pod>`` exists, with P's
    UID when the port records one), exactly as compile decides membership;
  - a VNF of B runs on P's node: the node exists, has its logical switch, and its labels match
    the VnfDeployment's ``nodeSelector``.

What the rows say, whatever the backend (the shapes in ``reconciler.core.model.target``): an owned
ACL of ``Binding/<name>`` (``osc.io/resource``) that sends traffic to a
``Network_Function_Group``, or an owned ``Logical_Router_Policy`` of it that reroutes, steers
the member LSPs of every Port_Group it names (the ACL's ``port_group``, ``@pg`` and the address
sets ``$pg_ip4``/``$pg_ip6`` in its match); the VNFs are the group's functions'
(``VnfDeployment/<name>``, or a chain's ``osc.io/chain`` hops) or the VNF whose port holds the
policy's next hop. An ACL without a function group (the twin that lets crossed traffic through)
steers nothing by itself.

``spec.vnf`` is read as a chain (a list of VNF names) as well as one name; with manifests, a pod
counts as steered where every VNF of the chain runs on its node (a chain missing a hop on a node
does not steer there, as compile wires it), and :attr:`SteeredPod.vnfs` says which.

**Per hop** (issue 33): a pod steered before and after can still change what its traffic
crosses. Each side also says, per pod, its :class:`Route`: per direction (``exit``, to the pod;
``entry``, from it) the VNFs crossed in order and the failure policy (the function group's
``fallback``; the Binding's ``failurePolicy`` for manifests). Pods whose route changes are
grouped by (before, after) into :class:`RouteChange` entries: hops lost or gained, the chain's
order, the direction, the failure policy. And a pod the plan would steer but whose steering is
held until its VNF instances are healthy (``reconciler.core.transitions.gating``) is *pending*
(:func:`with_pending`), never "not steered": "2 pods will be steered once their VNFs are
healthy".

Pure: no I/O. The planners call :func:`live_changes` or :func:`protection_changes`;
:func:`to_json` is the ``protection_changes`` array of the JSON plan.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Binding, Desired, SecurityGroup
from reconciler.core.model.observed import Observed, Pod, PodPort
from reconciler.core.model.selectors import LabelIndex
from reconciler.core.steering import BACKENDS
from reconciler.core.steering.base import OwnedRows, merge_vnfs

__all__ = [
    "BindingProtection",
    "Route",
    "RouteChange",
    "SteeredPod",
    "Steering",
    "arrow",
    "by_namespace",
    "live_changes",
    "planned_rows",
    "pod_names",
    "protection_changes",
    "steering_in_rows",
    "steering_of",
    "to_json",
    "unprotected",
    "vnfs_of",
    "with_pending",
]


@dataclass(frozen=True, slots=True, order=True)
class SteeredPod:
    """A pod one binding steers: where it runs and why it is a member."""

    namespace: str
    pod: str
    node: str
    label: str | None
    """The group's label (``key=value``) that selects the pod: the first one, in the group's
    order, that the pod carries. ``None`` when the manifests do not say: a pod steered now
    (:func:`live_changes`) that the planned group no longer selects by any label."""
    vnfs: tuple[str, ...] = ()
    """The binding's VNFs that run on the pod's node (in chain order)."""
    route: Route | None = field(default=None, compare=False)
    """How its traffic is steered: VNFs in order, direction, failure policy (``None``: not
    known, e.g. a pod of another binding)."""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.pod}"

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "pod": self.pod,
            "node": self.node,
            "label": self.label,
            "vnfs": list(self.vnfs),
        }


EXIT, ENTRY = "exit", "entry"
"""A route's directions: ``exit`` is traffic to the pod (exit-lport, to-lport ACLs), ``entry``
traffic from it (entry-lport, from-lport ACLs)."""
_REDIRECTION = {(EXIT,): "exit-lport", (ENTRY,): "entry-lport", (ENTRY, EXIT): "both"}
_DIRECTIONS = {words: directions for directions, words in _REDIRECTION.items()}

Leg = tuple[str, tuple[str, ...], str | None]
"""``(direction, the VNFs crossed in order, failure policy or None)``."""


@dataclass(frozen=True, slots=True, order=True)
class Route:
    """What one binding's traffic of one pod crosses: per direction, the VNFs in order and the
    failure policy (``None`` where nothing says: a router policy has none)."""

    legs: tuple[Leg, ...]
    """Sorted by direction (``entry`` before ``exit``), one per direction."""

    @classmethod
    def of(cls, directions: Iterable[str], vnfs: Sequence[str], policy: str | None) -> Route:
        return cls(tuple((d, tuple(vnfs), policy) for d in sorted(set(directions))))

    def merged(self, other: Route) -> Route:
        """Both routes' legs (a binding with one row per direction); a direction both have
        keeps the VNFs of both, in order."""
        legs = {d: (v, p) for d, v, p in self.legs}
        for direction, vnfs, policy in other.legs:
            had = legs.get(direction)
            legs[direction] = (vnfs, policy) if had is None else (merge_vnfs(had[0], vnfs), had[1])
        return Route(tuple((d, v, p) for d, (v, p) in sorted(legs.items())))

    @property
    def redirection(self) -> str:
        """``exit-lport``, ``entry-lport`` or ``both`` (the Binding's words)."""
        return _REDIRECTION.get(tuple(d for d, _, _ in self.legs), "none")

    @property
    def vnfs(self) -> tuple[str, ...]:
        """The VNFs in the order a packet crosses them (the exit leg's first: a chain's order
        is the same both ways)."""
        legs = sorted(self.legs, key=lambda leg: leg[0] != EXIT)
        return merge_vnfs(*(vnfs for _, vnfs, _ in legs))

    @property
    def failure_policy(self) -> str | None:
        policies = {p for _, _, p in self.legs if p}
        return next(iter(policies)) if len(policies) == 1 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "vnfs": list(self.vnfs),
            "redirection": self.redirection,
            "failure_policy": self.failure_policy,
        }


def arrow(vnfs: Sequence[str]) -> str:
    """``firewall → ids`` (``nothing`` for none)."""
    return " → ".join(vnfs) or "nothing"


@dataclass(frozen=True, slots=True)
class RouteChange:
    """Pods a binding steers before and after whose route changes the same way."""

    pods: tuple[SteeredPod, ...]
    """As they are after (``vnfs``: what they cross then)."""
    before: Route
    after: Route

    @property
    def lost(self) -> tuple[str, ...]:
        return tuple(v for v in self.before.vnfs if v not in self.after.vnfs)

    @property
    def gained(self) -> tuple[str, ...]:
        return tuple(v for v in self.after.vnfs if v not in self.before.vnfs)

    @property
    def order_changed(self) -> bool:
        kept = [v for v in self.before.vnfs if v in self.after.vnfs]
        return kept != [v for v in self.after.vnfs if v in self.before.vnfs]

    def effects(self) -> list[str]:
        """What changes, in a reviewer's words: ``lose ids (firewall → ids becomes
        firewall)``, ``chain order changes: firewall → ids becomes ids → firewall``,
        ``failure policy fail-close becomes fail-open``, ``direction exit-lport becomes
        both``."""
        old, new = self.before, self.after
        out: list[str] = []
        becomes = f"{arrow(old.vnfs)} becomes {arrow(new.vnfs)}"
        if self.lost or self.gained:
            verbs = []
            if self.lost:
                verbs.append(f"lose {' and '.join(self.lost)}")
            if self.gained:
                verbs.append(f"newly cross {' and '.join(self.gained)}")
            out.append(f"{', '.join(verbs)} ({becomes})")
        elif self.order_changed:
            out.append(f"chain order changes: {becomes}")
        if old.redirection != new.redirection:
            out.append(f"direction {old.redirection} becomes {new.redirection}")
        if old.failure_policy != new.failure_policy and old.failure_policy and new.failure_policy:
            out.append(f"failure policy {old.failure_policy} becomes {new.failure_policy}")
        elif old.legs != new.legs and not out:
            out.append(f"steered differently per direction ({becomes})")
        return out

    @property
    def summary(self) -> str:
        """``2 pods of shop-frontend lose ids (firewall → ids becomes firewall)``, ``2 pods of
        shop-frontend: chain order changes: firewall → ids becomes ids → firewall``."""
        effects = self.effects()
        verb = bool(effects) and effects[0].startswith(("lose ", "newly "))
        return f"{_pods_of(self.pods)}{' ' if verb else ': '}{'; '.join(effects)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "pods": [p.to_json() for p in self.pods],
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "lost": list(self.lost),
            "gained": list(self.gained),
            "order_changed": self.order_changed,
            "summary": self.summary,
        }


def _pods_of(pods: Sequence[SteeredPod]) -> str:
    """``2 pods of shop-frontend`` (``3 pods`` across namespaces, ``1 pod of shop``)."""
    namespaces = {p.namespace for p in pods}
    noun = f"{len(pods)} pod{'' if len(pods) == 1 else 's'}"
    return f"{noun} of {next(iter(namespaces))}" if len(namespaces) == 1 else noun


Steering = Mapping[str, Mapping[tuple[str, str], SteeredPod]]
"""Binding name -> ``(namespace, pod)`` -> how that binding steers the pod."""


def vnfs_of(binding: Binding) -> tuple[str, ...]:
    """The VNFs of a binding in chain order: ``spec.vnf`` as one name or as a list."""
    return binding.spec.vnfs


def _vnf_nodes(desired: Desired, observed: Observed) -> dict[str, set[str]]:
    """VNF name -> the nodes it runs on (a node with its switch, matching the nodeSelector),
    as compile places instances."""
    switches = {s.name for s in observed.switches}
    placed: dict[str, set[str]] = {}
    for name, vnf in desired.vnfs.items():
        selector = vnf.spec.nodeSelector
        placed[name] = {
            node.name
            for node in observed.nodes
            if node.name in switches and all(node.labels.get(k) == v for k, v in selector.items())
        }
    return placed


def _members(
    group: SecurityGroup, index: LabelIndex, ports: Mapping[str, PodPort]
) -> dict[tuple[str, str], tuple[str, str]]:
    """``(namespace, pod)`` -> ``(node, label)`` of the group's members that OVN knows as the
    same pod (the rule of ``compile.members_by_group_and_node``)."""
    terms = group.spec.label_pairs()
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for pod in index.members(terms, group.spec.namespaces):
        port = ports.get(pod.lsp_name)
        if port is None or (port.pod_uid is not None and port.pod_uid != pod.uid):
            continue
        label = next(f"{k}={v}" for k, v in terms if pod.labels.get(k) == v)
        found[(pod.namespace, pod.name)] = (port.switch, label)
    return found


def steering_of(
    desired: Desired, observed: Observed
) -> dict[str, dict[tuple[str, str], SteeredPod]]:
    """Which pods each binding of ``desired`` steers on the cluster ``observed`` describes."""
    placed = _vnf_nodes(desired, observed)
    index = LabelIndex(observed.pods)
    ports = {p.name: p for p in observed.pod_ports}
    members: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}
    out: dict[str, dict[tuple[str, str], SteeredPod]] = {}
    for name, binding in sorted(desired.bindings.items()):
        group = desired.security_groups.get(binding.spec.securityGroup)
        if group is None:
            out[name] = {}
            continue
        if group.metadata.name not in members:
            members[group.metadata.name] = _members(group, index, ports)
        chain = vnfs_of(binding)
        route = manifest_route(binding)
        steered: dict[tuple[str, str], SteeredPod] = {}
        for ident, (node, label) in members[group.metadata.name].items():
            # a chain steers only where every hop runs (as compile wires it)
            if all(node in placed.get(v, ()) for v in chain):
                steered[ident] = SteeredPod(ident[0], ident[1], node, label, chain, route)
        out[name] = steered
    return out


def manifest_route(binding: Binding) -> Route:
    """The route a Binding declares: its direction, its chain, its failure policy."""
    spec = binding.spec
    return Route.of(_directions_of(spec.redirection.value), spec.vnfs, spec.failurePolicy.value)


def _directions_of(redirection: str) -> tuple[str, ...]:
    return _DIRECTIONS[redirection]


@dataclass(frozen=True, slots=True)
class BindingProtection:
    """One binding's protection change: the pods it starts and stops steering."""

    binding: str
    security_group: str
    vnfs: tuple[str, ...]
    start: tuple[SteeredPod, ...]
    stop: tuple[SteeredPod, ...]
    before: int
    """How many pods it steered before."""
    after: int
    """How many pods it steers after."""
    change: str
    """``added`` (the binding is new), ``removed`` (it is gone) or ``changed``."""
    routes: tuple[RouteChange, ...] = ()
    """Pods steered before and after whose route changes (hops lost or gained, the chain's
    order, direction, failure policy), grouped by (before, after)."""
    pending: tuple[SteeredPod, ...] = ()
    """Pods it will steer once their VNF instances are healthy (the plan holds the steering
    until OVN reports them so): not steered now, and not by this plan either."""

    @property
    def lost(self) -> tuple[str, ...]:
        """VNFs some pod stops crossing (for the diagram's struck-through hops)."""
        return merge_vnfs(*(r.lost for r in self.routes))

    def to_json(self) -> dict[str, Any]:
        return {
            "binding": self.binding,
            "security_group": self.security_group,
            "vnfs": list(self.vnfs),
            "change": self.change,
            "start": [p.to_json() for p in self.start],
            "stop": [p.to_json() for p in self.stop],
            "steered_before": self.before,
            "steered_after": self.after,
            "route_changes": [r.to_json() for r in self.routes],
            "pending": [p.to_json() for p in self.pending],
        }


def route_changes(
    was: Mapping[tuple[str, str], SteeredPod], now: Mapping[tuple[str, str], SteeredPod]
) -> tuple[RouteChange, ...]:
    """The pods of both sides whose route differs, grouped by (before, after) route."""
    grouped: dict[tuple[Route, Route], list[SteeredPod]] = defaultdict(list)
    for ident in sorted(was.keys() & now.keys()):
        old, new = was[ident].route, now[ident].route
        if old is not None and new is not None and old != new:
            grouped[(old, new)].append(now[ident])
    return tuple(RouteChange(tuple(pods), old, new) for (old, new), pods in sorted(grouped.items()))


def protection_changes(
    before: Desired,
    before_observed: Observed,
    after: Desired,
    after_observed: Observed | None = None,
) -> tuple[BindingProtection, ...]:
    """Per binding of either side, the pods that start and stop being steered, sorted by
    binding; bindings whose pods do not change are left out. ``after_observed`` defaults to
    ``before_observed`` (a plan: the manifests change, the cluster is the one observed)."""
    old = steering_of(before, before_observed)
    new = steering_of(after, after_observed if after_observed is not None else before_observed)
    return changes_between(old, new, before, after)


def changes_between(
    old: Steering, new: Steering, before: Desired, after: Desired
) -> tuple[BindingProtection, ...]:
    """:func:`protection_changes` from two :func:`steering_of` results (the loop keeps the last
    one instead of computing it again)."""
    result: list[BindingProtection] = []
    for name in sorted(set(old) | set(new)):
        was, now = old.get(name, {}), new.get(name, {})
        start = tuple(sorted(now[k] for k in now.keys() - was.keys()))
        stop = tuple(sorted(was[k] for k in was.keys() - now.keys()))
        routes = route_changes(was, now)
        if not start and not stop and not routes:
            continue
        binding = after.bindings.get(name) or before.bindings[name]
        change = (
            "added"
            if name not in before.bindings
            else "removed"
            if name not in after.bindings
            else "changed"
        )
        result.append(
            BindingProtection(
                name,
                binding.spec.securityGroup,
                vnfs_of(binding),
                start,
                stop,
                len(was),
                len(now),
                change,
                routes,
            )
        )
    return tuple(result)


_ADDRESS_SET = re.compile(r"_ip[46]$")


class RowChange(Protocol):
    """What :func:`planned_rows` reads of a plan's change
    (``reconciler.core.model.plan.Change``)."""

    @property
    def action(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def after(self) -> dict[str, Any] | None: ...
    @property
    def is_ovn(self) -> bool: ...


Row = tuple[str, Mapping[str, Any]]
"""``(table, fields)`` of an owned OVN row, in the symbolic form of
``reconciler.core.model.target``."""


def planned_rows(observed: Observed, changes: Iterable[RowChange]) -> list[Row]:
    """The owned OVN rows once ``changes`` are applied to the live ones of ``observed``."""
    rows: dict[tuple[str, str], Mapping[str, Any]] = {
        (r.table, r.key): r.fields for r in observed.ovn_rows
    }
    for change in changes:
        if not change.is_ovn:
            continue
        if change.action == "delete":
            rows.pop((change.kind, change.key), None)
        elif change.after is not None:
            rows[(change.kind, change.key)] = change.after
    return [(table, fields) for (table, _), fields in rows.items()]


def _origin(fields: Mapping[str, Any]) -> tuple[str, str]:
    kind, _, name = str((fields.get("external_ids") or {}).get(own.RESOURCE, "")).partition("/")
    return kind, name


@dataclass
class RowSteering:
    """What owned OVN rows steer (:func:`steering_in_rows`)."""

    pods: dict[str, dict[tuple[str, str], tuple[str, Route]]] = field(default_factory=dict)
    """Binding -> ``(namespace, pod)`` -> ``(node, the route its traffic takes)``."""
    groups: dict[str, str] = field(default_factory=dict)
    """Binding -> the SecurityGroup of the Port_Groups it steers."""
    bindings: set[str] = field(default_factory=set)
    """Every binding with an owned row (steering or not)."""


def steering_in_rows(rows: Iterable[Row], pod_ports: Iterable[PodPort]) -> RowSteering:
    """Which pods each binding's owned rows steer (the module docstring says how rows are
    read). The same function reads the live rows and the planned ones, so both sides of a
    protection change are judged alike."""
    by_table: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    steering: list[tuple[str, str, Mapping[str, Any]]] = []
    out = RowSteering()
    for table, fields in rows:
        if "name" in fields:
            by_table[table][str(fields["name"])] = fields
        kind, name = _origin(fields)
        if kind == "Binding":
            out.bindings.add(name)
            steering.append((name, table, fields))
    ports = {p.name: p for p in pod_ports}
    owned = OwnedRows(by_table)
    for binding, table, fields in steering:
        found = next(
            (s for b in BACKENDS.values() if (s := b.steered_by(table, fields, owned)) is not None),
            None,
        )
        if found is None:
            continue  # a twin ACL, a chain's ports and links: no steering of their own
        groups = found.groups
        route = Route.of((found.direction,), found.vnfs, found.policy)
        steered = out.pods.setdefault(binding, {})
        for name in {_ADDRESS_SET.sub("", g) for g in groups if g}:
            group = by_table["Port_Group"].get(name)
            if group is None:
                continue
            kind, sg_name = _origin(group)
            if kind == "SecurityGroup":
                out.groups.setdefault(binding, sg_name)
            node = str((group.get("external_ids") or {}).get(own.NODE) or "")
            for lsp in group.get("ports") or ():
                port = ports.get(str(lsp))
                if port is not None:
                    ident, where = (port.namespace, port.pod), port.switch
                else:
                    namespace, _, pod = str(lsp).partition("_")
                    ident, where = (namespace, pod), node
                seen = steered.get(ident)
                steered[ident] = (
                    (where, route) if seen is None else (seen[0], seen[1].merged(route))
                )
    return out


def _label(pod: Pod | None, group: SecurityGroup | None) -> str | None:
    if pod is None or group is None:
        return None
    return next((f"{k}={v}" for k, v in group.spec.label_pairs() if pod.labels.get(k) == v), None)


def live_changes(
    observed: Observed, changes: Iterable[RowChange], desired: Desired
) -> tuple[BindingProtection, ...]:
    """Per binding, the pods that start and stop being steered when ``changes`` (a plan of
    ``desired`` against ``observed``) are applied, and those steered before and after whose
    route changes: the owned rows of ``observed`` before, the same rows with the plan's OVN
    changes after (:func:`planned_rows`). Labels and a binding's group and VNFs come from
    ``desired`` where it still has them, else from the rows."""
    changes = list(changes)
    if not any(c.is_ovn for c in changes):
        # The rows stay as they are, so nothing starts or stops being steered: the common case
        # of a converged plan, which skips reading every steered pod twice.
        return ()
    live = [(r.table, r.fields) for r in observed.ovn_rows]
    old = steering_in_rows(live, observed.pod_ports)
    new = steering_in_rows(planned_rows(observed, changes), observed.pod_ports)
    pods = {(p.namespace, p.name): p for p in observed.pods}
    result: list[BindingProtection] = []
    for name in sorted(set(old.pods) | set(new.pods)):
        binding = desired.bindings.get(name)
        group_name = (
            binding.spec.securityGroup
            if binding is not None
            else old.groups.get(name) or new.groups.get(name, "")
        )
        group = desired.security_groups.get(group_name)
        was = _steered(old.pods.get(name, {}), pods, group)
        now = _steered(new.pods.get(name, {}), pods, group)
        start = tuple(sorted(now[k] for k in now.keys() - was.keys()))
        stop = tuple(sorted(was[k] for k in was.keys() - now.keys()))
        routes = route_changes(was, now)
        if not start and not stop and not routes:
            continue
        chain = (
            vnfs_of(binding) if binding is not None else merge_vnfs(*(p.vnfs for p in was.values()))
        )
        change = (
            "removed" if binding is None else "added" if name not in old.bindings else "changed"
        )
        result.append(
            BindingProtection(
                name, group_name, chain, start, stop, len(was), len(now), change, routes
            )
        )
    return tuple(result)


def _steered(
    side: Mapping[tuple[str, str], tuple[str, Route]],
    pods: Mapping[tuple[str, str], Pod],
    group: SecurityGroup | None,
) -> dict[tuple[str, str], SteeredPod]:
    return {
        (ns, pod): SteeredPod(ns, pod, node, _label(pods.get((ns, pod)), group), route.vnfs, route)
        for (ns, pod), (node, route) in side.items()
    }


def with_pending(
    changes: Sequence[BindingProtection],
    desired: Desired,
    observed: Observed,
    held: Iterable[tuple[str, str]],
    before: Desired | None = None,
) -> tuple[BindingProtection, ...]:
    """``changes`` with the pods whose steering the plan holds (``held``: ``(binding, node)``
    pairs waiting for their VNF instances to become healthy) as *pending*: the binding's
    members on a held node that it does not steer now. They leave ``start`` (a ``--base``
    comparison counts them as started: they are not, yet), and a binding with nothing else to
    show gets an entry of its own ("2 pods will be steered once their VNFs are healthy"),
    ``added`` when neither the live rows nor ``before`` (``--base``) know the binding."""
    held_nodes: dict[str, set[str]] = defaultdict(set)
    for name, node in held:
        if name in desired.bindings:
            held_nodes[name].add(node)
    if not held_nodes:
        return tuple(changes)
    # only the held bindings: a hold must not cost a reading of every steered pod
    only = desired.model_copy(
        update={"bindings": {n: b for n, b in desired.bindings.items() if n in held_nodes}}
    )
    wanted = steering_of(only, observed)
    rows = [
        (r.table, r.fields)
        for r in observed.ovn_rows
        if _origin(r.fields)[0] != "Binding" or _origin(r.fields)[1] in held_nodes
    ]
    live = steering_in_rows(rows, observed.pod_ports)
    pending: dict[str, tuple[SteeredPod, ...]] = {}
    for name, nodes in held_nodes.items():
        now = live.pods.get(name, {})
        pending[name] = tuple(
            sorted(
                pod
                for ident, pod in wanted.get(name, {}).items()
                if pod.node in nodes and ident not in now
            )
        )
    out: list[BindingProtection] = []
    for change in changes:
        waiting = pending.pop(change.binding, ())
        if not waiting:
            out.append(change)
            continue
        refs = {(p.namespace, p.pod) for p in waiting}
        start = tuple(p for p in change.start if (p.namespace, p.pod) not in refs)
        after = change.after - (len(change.start) - len(start))
        out.append(replace(change, start=start, after=after, pending=waiting))
    for name, waiting in sorted(pending.items()):
        if not waiting:
            continue
        binding = desired.bindings[name]
        steered = len(live.pods.get(name, {}))
        out.append(
            BindingProtection(
                name,
                binding.spec.securityGroup,
                vnfs_of(binding),
                (),
                (),
                steered,
                steered,
                "changed"
                if name in live.bindings or (before is not None and name in before.bindings)
                else "added",
                pending=waiting,
            )
        )
    return tuple(sorted(out, key=lambda c: c.binding))


def pod_names(pods: Iterable[SteeredPod], shown: int = 4) -> str:
    """``shop-backend/db-0 and db-1``; ``payments/api-0, api-1, api-2, … (37 pods)``; several
    namespaces joined with ``;``."""
    parts: list[str] = []
    for namespace, members in by_namespace(pods).items():
        names = [p.pod for p in members]
        if len(names) <= shown:
            listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        else:
            listed = f"{', '.join(names[: shown - 1])}, … ({len(names)} pods)"
        parts.append(f"{namespace}/{listed}")
    return "; ".join(parts)


def unprotected(
    desired: Desired, observed: Observed, held: Iterable[tuple[str, str]]
) -> dict[str, tuple[SteeredPod, ...]]:
    """Per binding with held steering (``(binding, node)`` pairs), the pods that are not
    protected because of it: members on a held node the binding does not steer now (their
    traffic flows unsteered until the VNF instances are healthy)."""
    return {c.binding: c.pending for c in with_pending((), desired, observed, held) if c.pending}


def by_namespace(pods: Iterable[SteeredPod]) -> dict[str, list[SteeredPod]]:
    """Pods grouped by namespace (sorted), for summaries of long lists."""
    grouped: dict[str, list[SteeredPod]] = defaultdict(list)
    for pod in sorted(pods, key=lambda p: (p.namespace, p.pod, p.node)):
        grouped[pod.namespace].append(pod)
    return dict(sorted(grouped.items()))


def to_json(changes: Sequence[BindingProtection]) -> list[dict[str, Any]]:
    """The ``protection_changes`` array of the JSON plan (``reconciler.render.json_render``)."""
    return [change.to_json() for change in changes]
