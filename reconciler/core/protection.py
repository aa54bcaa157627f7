"""Protection changes: which pods start and stop being steered, per Binding.

A reviewer of a pull request sees Port_Group and ACL rows; what they need to know is "37
payments pods lose their firewall". This module says that, from plain data only: the manifests
and the observed pods, pod ports and nodes, *before* and *after* (for a plan: the manifests
applied now and the ones planned, on the same observed cluster; for the loop: two passes).
It never reads OVN rows: which rows carry steering is a backend's business (and changes with
it), while "pod P is steered by binding B" follows from the manifests and the cluster alone:

- P is a member of B's SecurityGroup: it carries one of the group's labels (the first one, in
  the group's order, is shown as *through which label*), in one of its namespaces if it lists
  any, and OVN knows P's port as the same pod (the LSP ``<namespace>_<pod>`` exists, with P's
  UID when the port records one), exactly as compile decides membership;
- a VNF of B runs on P's node: the node exists, has its logical switch, and its labels match
  the VnfDeployment's ``nodeSelector``.

``spec.vnf`` is read as a chain (a list of VNF names) as well as one name; a pod counts as
steered where at least one VNF of the chain runs on its node, and :attr:`SteeredPod.vnfs` says
which.

Pure: no I/O. The planners call :func:`protection_changes` (or :func:`steering_of` once per
side); :func:`to_json` is the ``protection_changes`` array of the JSON plan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.core.model import Binding, Desired, SecurityGroup
from reconciler.core.observed import Observed, PodPort
from reconciler.core.selectors import LabelIndex

__all__ = [
    "BindingProtection",
    "SteeredPod",
    "Steering",
    "by_namespace",
    "protection_changes",
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
    label: str
    """The group's label (``key=value``) that selects the pod: the first one, in the group's
    order, that the pod carries."""
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


def by_namespace(pods: Iterable[SteeredPod]) -> dict[str, list[SteeredPod]]:
    """Pods grouped by namespace (sorted), for summaries of long lists."""
    grouped: dict[str, list[SteeredPod]] = defaultdict(list)
    for pod in sorted(pods):
        grouped[pod.namespace].append(pod)
    return dict(sorted(grouped.items()))


def to_json(changes: Sequence[BindingProtection]) -> list[dict[str, Any]]:
    """The ``protection_changes`` array of the JSON plan (``reconciler.render.json_render``)."""
    return [change.to_json() for change in changes]
