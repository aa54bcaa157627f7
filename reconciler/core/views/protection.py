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
counts as steered where at least one VNF of the chain runs on its node, and
:attr:`SteeredPod.vnfs` says which.

Pure: no I/O. The planners call :func:`live_changes` or :func:`protection_changes`;
:func:`to_json` is the ``protection_changes`` array of the JSON plan.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Binding, Desired, SecurityGroup
from reconciler.core.model.observed import Observed, Pod, PodPort
from reconciler.core.model.selectors import LabelIndex
from reconciler.core.steering import BACKENDS
from reconciler.core.steering.base import OwnedRows, merge_vnfs

__all__ = [
    "BindingProtection",
    "SteeredPod",
    "Steering",
    "by_namespace",
    "live_changes",
    "planned_rows",
    "protection_changes",
    "steering_in_rows",
    "steering_of",
    "to_json",
    "vnfs_of",
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
        steered: dict[tuple[str, str], SteeredPod] = {}
        for ident, (node, label) in members[group.metadata.name].items():
            running = tuple(v for v in chain if node in placed.get(v, ()))
            if running:
                steered[ident] = SteeredPod(ident[0], ident[1], node, label, running)
        out[name] = steered
    return out


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
        }


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
        if not start and not stop:
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

    pods: dict[str, dict[tuple[str, str], tuple[str, tuple[str, ...]]]] = field(
        default_factory=dict
    )
    """Binding -> ``(namespace, pod)`` -> ``(node, the VNFs its traffic goes to)``."""
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
        vnfs, groups = found
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
                seen = steered.get(ident)  # ``vnfs`` is already without repeats
                merged = (seen[0], merge_vnfs(seen[1], vnfs)) if seen else (where, vnfs)
                steered[ident] = merged
    return out


def _label(pod: Pod | None, group: SecurityGroup | None) -> str | None:
    if pod is None or group is None:
        return None
    return next((f"{k}={v}" for k, v in group.spec.label_pairs() if pod.labels.get(k) == v), None)


def live_changes(
    observed: Observed, changes: Iterable[RowChange], desired: Desired
) -> tuple[BindingProtection, ...]:
    """Per binding, the pods that start and stop being steered when ``changes`` (a plan of
    ``desired`` against ``observed``) are applied: the owned rows of ``observed`` before, the
    same rows with the plan's OVN changes after (:func:`planned_rows`). Labels and a binding's
    group and VNFs come from ``desired`` where it still has them, else from the rows."""
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
        was, now = old.pods.get(name, {}), new.pods.get(name, {})
        started, stopped = now.keys() - was.keys(), was.keys() - now.keys()
        if not started and not stopped:
            continue
        binding = desired.bindings.get(name)
        group_name = (
            binding.spec.securityGroup
            if binding is not None
            else old.groups.get(name) or new.groups.get(name, "")
        )
        group = desired.security_groups.get(group_name)
        chain = (
            vnfs_of(binding)
            if binding is not None
            else merge_vnfs(*(vnfs for _, vnfs in was.values()))
        )
        change = (
            "removed" if binding is None else "added" if name not in old.bindings else "changed"
        )
        result.append(
            BindingProtection(
                name,
                group_name,
                chain,
                _steered(sorted(started), now, pods, group),
                _steered(sorted(stopped), was, pods, group),
                len(was),
                len(now),
                change,
            )
        )
    return tuple(result)


def _steered(
    idents: Iterable[tuple[str, str]],
    side: Mapping[tuple[str, str], tuple[str, tuple[str, ...]]],
    pods: Mapping[tuple[str, str], Pod],
    group: SecurityGroup | None,
) -> tuple[SteeredPod, ...]:
    return tuple(
        SteeredPod(ns, pod, side[(ns, pod)][0], _label(pods.get((ns, pod)), group),
                   side[(ns, pod)][1])
        for ns, pod in idents
    )  # fmt: skip


def by_namespace(pods: Iterable[SteeredPod]) -> dict[str, list[SteeredPod]]:
    """Pods grouped by namespace (sorted), for summaries of long lists."""
    grouped: dict[str, list[SteeredPod]] = defaultdict(list)
    for pod in sorted(pods, key=lambda p: (p.namespace, p.pod, p.node)):
        grouped[pod.namespace].append(pod)
    return dict(sorted(grouped.items()))


def to_json(changes: Sequence[BindingProtection]) -> list[dict[str, Any]]:
    """The ``protection_changes`` array of the JSON plan (``reconciler.render.json_render``)."""
    return [change.to_json() for change in changes]
