"""Guards against typos: plan warnings for manifests that are valid but select nothing.

``namespaces: [paymnets]``, ``tier=egde`` and ``nodeSelector: {zone: dzm}`` all pass validation
(they are well-formed), and the plan then quietly empties port groups or deletes a VNF
everywhere. These checks compare what the manifests name with what the cluster has:

- a SecurityGroup that selects no pod;
- a namespace in which no pod runs (the cluster's namespaces themselves are not read: a
  namespace without pods protects nothing either way);
- a VnfDeployment whose ``nodeSelector`` matches no node;
- a label key or value no pod (or node) carries that is one edit (a letter added, removed,
  replaced, or two swapped) away from one that does: ``did you mean tier=edge?``;
- a Binding that stops steering pods it steered before (from
  :mod:`reconciler.core.views.protection`), naming the count and the likely typo.

Pure: plain data in, warning strings out (``Plan.warnings``). Works on a chain of VNFs too
(the chain comes from ``BindingProtection.vnfs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from reconciler.core.model.desired import Desired, SecurityGroup, VnfDeployment
from reconciler.core.model.observed import Observed, Pod
from reconciler.core.views.protection import BindingProtection, arrow, by_namespace

__all__ = ["one_edit", "route_warnings", "typo_warnings", "unused_vnfs"]


def one_edit(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by exactly one edit: a character inserted, deleted or replaced,
    or two neighbours swapped (the optimal-string-alignment distance is 1)."""
    # Not mutated (equivalent mutants): lengths two apart can never pass the last test either
    if a == b or abs(len(a) - len(b)) > 1:  # pragma: no mutate
        return False
    if len(a) == len(b):
        # Not mutated (equivalent mutants): a and b have one length here: ``strict`` is moot
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]  # pragma: no mutate
        if len(diff) == 1:
            return True
        i = diff[0]
        return len(diff) == 2 and diff[1] == i + 1 and a[i] == b[i + 1] and a[i + 1] == b[i]
    # Not mutated (equivalent mutants): the lengths differ here, so < and <= choose alike
    short, long = (a, b) if len(a) < len(b) else (b, a)  # pragma: no mutate
    i = 0
    while i < len(short) and short[i] == long[i]:
        i += 1
    return short[i:] == long[i + 1 :]


def _close(word: str, candidates: Iterable[str]) -> str | None:
    """The one-edit neighbour of ``word`` among ``candidates`` (the first, sorted)."""
    return next((c for c in sorted(set(candidates)) if one_edit(word, c)), None)


def _terms(labelled: Iterable[Mapping[str, str]]) -> set[str]:
    return {f"{k}={v}" for labels in labelled for k, v in labels.items()}


class _PodLabels:
    """The ``key=value`` terms pods carry, per namespace and in all (computed once per plan:
    a group's checks are then set look-ups, not a scan of every pod)."""

    def __init__(self, pods: Sequence[Pod]) -> None:
        self.by_namespace: dict[str, set[str]] = {}
        for pod in pods:
            terms = self.by_namespace.setdefault(pod.namespace, set())
            terms.update(f"{k}={v}" for k, v in pod.labels.items())
        self.everywhere: set[str] = set().union(*self.by_namespace.values())

    def carried(self, namespaces: Sequence[str] | None) -> set[str]:
        if namespaces is None:
            return self.everywhere
        return set().union(*(self.by_namespace.get(ns, set()) for ns in namespaces))


def group_causes(group: SecurityGroup, labels: _PodLabels) -> tuple[bool, list[str]]:
    """Whether the group selects any pod, and the likely causes when something it names is
    not in the cluster: namespaces without pods, labels no pod carries (with the neighbour one
    edit away, when there is one)."""
    namespaces = group.spec.namespaces
    present = labels.by_namespace.keys()
    causes: list[str] = []
    for ns in namespaces or ():
        if ns not in present:
            near = _close(ns, present)
            hint = f" (did you mean {near!r}?)" if near else ""
            causes.append(f"no pod runs in namespace {ns!r}{hint}")
    carried = labels.carried(namespaces)
    in_scope = bool(present) and (namespaces is None or any(ns in present for ns in namespaces))
    selects = False  # pragma: no mutate (equivalent: None, its mutant, reads as False too)
    unused: list[tuple[str, str | None]] = []
    for key, value in group.spec.label_pairs():
        term = f"{key}={value}"
        if term in carried:
            selects = True
            continue
        unused.append((term, _close(term, carried) or _close(term, labels.everywhere)))
    for term, near in unused:
        if near:
            causes.append(f"no pod carries {term} (did you mean {near}?)")
        elif not selects and in_scope:
            causes.append(f"no pod carries {term}")
    return selects, causes


def vnf_causes(vnf: VnfDeployment, observed: Observed) -> list[str]:
    """Why a VnfDeployment runs on no node: its ``nodeSelector`` terms no node carries."""
    selector = vnf.spec.nodeSelector
    if not selector or not observed.nodes:
        return []
    if any(all(n.labels.get(k) == v for k, v in selector.items()) for n in observed.nodes):
        return []
    carried = _terms(n.labels for n in observed.nodes)
    causes: list[str] = []
    for key, value in sorted(selector.items()):
        term = f"{key}={value}"
        if term not in carried:
            near = _close(term, carried)
            causes.append(f"no node carries {term}" + (f" (did you mean {near}?)" if near else ""))
    return causes or ["no node carries all of its labels together"]


def _count(n: int, noun: str = "pod") -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _namespaces(change: BindingProtection) -> str:
    parts = [f"{ns}: {len(pods)}" for ns, pods in by_namespace(change.stop).items()]
    shown = ", ".join(parts[:5]) + (
        f", … {len(parts) - 5} more namespaces" if len(parts) > 5 else ""
    )
    return shown


def typo_warnings(
    desired: Desired,
    observed: Observed,
    changes: Sequence[BindingProtection] = (),
    *,
    all_pods: bool = True,
    all_nodes: bool = True,
) -> list[str]:
    """The plan warnings for ``desired`` on ``observed``: each Binding that stops steering pods
    first (with the likely typo), then each SecurityGroup and VnfDeployment that selects nothing
    or names a label one edit away from a real one. A cause quoted in a Binding's warning is not
    repeated.

    ``all_pods``/``all_nodes`` False: ``observed`` holds only part of the cluster's pods or
    nodes (a node agent's plan sees its node's; ``--kubernetes-only`` reads no pod), so nothing
    is judged from them: a namespace whose pods all run elsewhere is no typo."""
    labels = _PodLabels(observed.pods)
    groups: dict[str, tuple[bool, list[str]]] = {
        name: group_causes(group, labels) for name, group in sorted(desired.security_groups.items())
    } if all_pods else {}  # fmt: skip
    vnfs = (
        {name: vnf_causes(vnf, observed) for name, vnf in sorted(desired.vnfs.items())}
        if all_nodes
        else {}
    )
    quoted: set[str] = set()
    warnings: list[str] = []
    for change in changes:
        if not change.stop:
            continue
        head = (
            f"Binding {change.binding} stops steering {_count(len(change.stop))} it steered "
            f"before ({_namespaces(change)})"
        )
        if change.change == "removed":
            warnings.append(f"{head}: the binding is removed")
            continue
        likely = [f"SecurityGroup {change.security_group}: {c}"
                  for c in groups.get(change.security_group, (True, []))[1]]  # fmt: skip
        for vnf in change.vnfs:
            likely += [f"VnfDeployment {vnf} nodeSelector: {c}" for c in vnfs.get(vnf, [])]
        quoted.update(likely)
        warnings.append(f"{head}; likely typo: {'; '.join(likely)}" if likely else head)
    for name, (selects, all_causes) in groups.items():
        causes = [c for c in all_causes if f"SecurityGroup {name}: {c}" not in quoted]
        if all_causes and not causes:
            continue  # said in a Binding's warning already
        if not selects and observed.pods:
            detail = f": {'; '.join(causes)}" if causes else ""
            warnings.append(f"SecurityGroup {name} selects no pod{detail}")
        elif causes:
            warnings.append(f"SecurityGroup {name}: {'; '.join(causes)}")
    for name, causes in vnfs.items():
        causes = [c for c in causes if f"VnfDeployment {name} nodeSelector: {c}" not in quoted]
        if causes:
            warnings.append(
                f"VnfDeployment {name}: nodeSelector matches none of the "
                f"{_count(len(observed.nodes), 'node')} ({'; '.join(causes)}): it runs nowhere "
                "and its bindings steer nothing"
            )
    return warnings


def route_warnings(changes: Sequence[BindingProtection]) -> list[tuple[str, str]]:
    """``(binding, warning)``: a binding whose pods stay steered but stop crossing a VNF, or
    that fails open where it failed closed, weakens their protection as surely as one that
    stops steering them: a reviewer must not approve it without seeing it."""
    warnings: list[tuple[str, str]] = []
    for change in changes:
        for route in change.routes:
            if route.lost:
                warnings.append((change.binding,
                    f"Binding {change.binding}: {_count(len(route.pods))} stop crossing "
                    f"{' and '.join(route.lost)} ({arrow(route.before.vnfs)} becomes "
                    f"{arrow(route.after.vnfs)})"
                ))  # fmt: skip
            old, new = route.before.failure_policy, route.after.failure_policy
            if old == "fail-close" and new == "fail-open":
                warnings.append((change.binding,
                    f"Binding {change.binding}: {_count(len(route.pods))} fail open where they "
                    f"failed closed: while {arrow(route.after.vnfs)} is unhealthy their traffic "
                    "bypasses it instead of being dropped"
                ))  # fmt: skip
    return warnings


def unused_vnfs(desired: Desired) -> list[tuple[str, str]]:
    """``(vnf, warning)``: a VnfDeployment no Binding refers to runs a VM on every selected
    node and protects nothing: most likely a binding was forgotten or names another VNF."""
    used = {vnf for binding in desired.bindings.values() for vnf in binding.spec.vnfs}
    return [
        (name, f"VnfDeployment {name}: no Binding refers to it, so its VMs run on every "
               f"selected node and steer no traffic (add a Binding with vnf: {name}, or "
               "remove it)")
        for name in sorted(desired.vnfs)
        if name not in used
    ]  # fmt: skip
