"""The reconcile pipeline: observe -> compile -> diff -> (apply -> observe -> diff).

This module holds the effects, but only through injected providers (the adapters, or anything
with the same methods, e.g. a snapshot file), in the style of resolvelib: the algorithm does not
know about ``kubernetes`` or ``ovsdbapp``. The order of writes is chosen for safety:

1. Kubernetes creates/updates (NetworkAttachmentDefinitions, then VirtualMachines): the VNF
   exists before any traffic is steered to it.
2. ONE OVN transaction with every OVN change (all or nothing).
3. Kubernetes deletes (VMs, then NADs): steering is gone before the VNF it pointed at.
4. Security-manager notifications for VNF instances deployed or removed.
5. Re-read and re-plan: the second plan must be empty, else :class:`NotConverged`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from reconciler.core import ownership as own
from reconciler.core.compile import CompileOptions, choose_steering, compile_target
from reconciler.core.diff import diff, live_state
from reconciler.core.model import Desired
from reconciler.core.observed import KubeObject, NetworkPolicy, Node, Observed, Pod
from reconciler.core.plan import Change, Plan
from reconciler.errors import InternalError, UserError


class NotConverged(InternalError):
    """Apply finished but a fresh plan is not empty (someone else wrote meanwhile, or a bug of
    ours: the traceback is kept)."""

    cause = "not-converged"

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        items = ", ".join(f"{c.action} {c.kind} {c.key}" for c in plan.changes[:10])
        more = f" and {len(plan.changes) - 10} more" if len(plan.changes) > 10 else ""
        super().__init__(f"apply did not converge: a fresh plan still has {items}{more}")


class KubeProvider(Protocol):
    def list_pods(self) -> Sequence[Pod]: ...
    def list_nodes(self) -> Sequence[Node]: ...
    def list_owned(self, kind: str, instance: str) -> Sequence[KubeObject]: ...
    def network_policies(self) -> Sequence[NetworkPolicy]: ...
    def create(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> None: ...
    def replace_managed(
        self, kind: str, namespace: str, name: str, body: dict[str, Any]
    ) -> None: ...
    def delete(self, kind: str, namespace: str, name: str) -> None: ...


class OvnProvider(Protocol):
    def read(self) -> Any: ...  # reconciler.adapters.ovn.northbound.OvnState
    def apply(self, changes: Sequence[Change], revision: str | None = None) -> None: ...


Notifier = Callable[[str, dict[str, Any]], None]
"""``notify(url, payload)``: POST a JSON event to a security manager; raises on failure."""


@dataclass
class ApplyReport:
    """What one apply did, for the CLI, logs and metrics."""

    plan: Plan
    applied: int = 0
    notifications: list[dict[str, Any]] = field(default_factory=list)
    notification_errors: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def observe(kube: KubeProvider, ovn: OvnProvider, instance: str) -> Observed:
    """Read both live systems into one plain snapshot (the OVN read waits for initial sync)."""
    state = ovn.read()
    objects = [
        *kube.list_owned("NetworkAttachmentDefinition", instance),
        *kube.list_owned("VirtualMachine", instance),
    ]
    return Observed(
        pods=tuple(kube.list_pods()),
        nodes=tuple(kube.list_nodes()),
        kube_objects=tuple(objects),
        pod_ports=state.pod_ports,
        switches=state.switches,
        routers=state.routers,
        ovn_rows=state.owned,
        used_ids=dict(getattr(state, "used_ids", {}) or {}),
        network_policies=tuple(kube.network_policies()),
        capabilities=state.capabilities,
    )


def make_plan(desired: Desired, observed: Observed, options: CompileOptions) -> Plan:
    """Pure: the changes that would make the live state equal the manifests."""
    target = compile_target(desired, observed, options)
    meta = {
        "instance": options.instance,
        "steering": choose_steering(desired, observed, options),
        "nb_schema": observed.capabilities.schema_version,
    }
    return diff(target, live_state(observed.ovn_rows, observed.kube_objects), meta)


def _with_revision(body: dict[str, Any], revision: str | None) -> dict[str, Any]:
    if not revision:
        return body
    meta = dict(body.get("metadata", {}))
    meta["annotations"] = {**meta.get("annotations", {}), own.REVISION: revision}
    return {**body, "metadata": meta}


def _split_key(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


def apply_plan(
    the_plan: Plan,
    kube: KubeProvider,
    ovn: OvnProvider,
    *,
    desired: Desired,
    revision: str | None = None,
    notify: Notifier | None = None,
) -> ApplyReport:
    """Carry out a plan in the safe order described in the module docstring."""
    report = ApplyReport(the_plan)
    kube_changes = the_plan.kube_changes()
    started = time.perf_counter()
    for change in kube_changes:  # NADs before VMs (plan order)
        if change.action == "delete":
            continue
        namespace, name = _split_key(change.key)
        body = _with_revision(change.after or {}, revision)
        if change.action == "create":
            kube.create(change.kind, namespace, name, body)
        else:
            kube.replace_managed(change.kind, namespace, name, body)
        report.applied += 1
    report.seconds["kube_writes"] = time.perf_counter() - started

    started = time.perf_counter()
    ovn_changes = the_plan.ovn_changes()
    if ovn_changes:
        ovn.apply(ovn_changes, revision=revision)
        report.applied += len(ovn_changes)
    report.seconds["ovn_transaction"] = time.perf_counter() - started

    started = time.perf_counter()
    for change in reversed(kube_changes):  # VMs before NADs
        if change.action != "delete":
            continue
        namespace, name = _split_key(change.key)
        kube.delete(change.kind, namespace, name)
        report.applied += 1
    report.seconds["kube_deletes"] = time.perf_counter() - started

    _notify_security_managers(the_plan, desired, notify, report)
    return report


def _notify_security_managers(
    the_plan: Plan, desired: Desired, notify: Notifier | None, report: ApplyReport
) -> None:
    """Tell each VNF's security manager about instances deployed (VM created) or removed.

    Best effort: a failure is reported (and logged by the caller) but does not undo the apply;
    the VM and its steering are correct either way.
    """
    if notify is None:
        return
    for change in the_plan.changes:
        if change.kind != "VirtualMachine" or change.action == "update":
            continue
        body = change.after if change.action == "create" else change.before
        labels = (body or {}).get("metadata", {}).get("labels", {})
        annotations = (body or {}).get("metadata", {}).get("annotations", {})
        vnf_name = labels.get(own.VNF_LABEL) or change.origin.partition("/")[2]
        vnf = desired.vnfs.get(vnf_name)
        manager = vnf.spec.securityManager if vnf else None
        if manager is None and change.action == "delete":
            continue  # the VNF left git with its manager; nobody to tell
        if manager is None:
            continue
        ports = dict(
            p.split("=", 1) for p in annotations.get("osc.io/ports", "").split(",") if "=" in p
        )
        event = {
            "event": "deployed" if change.action == "create" else "removed",
            "vnf": vnf_name,
            "node": change.node,
            "virtualMachine": change.key,
            "ovnPorts": ports,
        }
        try:
            notify(manager.url, event)
            report.notifications.append({**event, "url": manager.url})
        except Exception as exc:  # any transport failure is reported, not fatal
            report.notification_errors.append(f"{manager.url}: {exc}")


def reconcile(
    desired: Desired,
    kube: KubeProvider,
    ovn: OvnProvider,
    options: CompileOptions,
    *,
    revision: str | None = None,
    notify: Notifier | None = None,
    allow_empty: bool = False,
) -> ApplyReport:
    """Observe, plan, apply, then verify convergence with a second plan."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    observed = observe(kube, ovn, options.instance)
    timings["observe"] = time.perf_counter() - started
    started = time.perf_counter()
    first = make_plan(desired, observed, options)
    timings["plan"] = time.perf_counter() - started
    guard_empty(desired, first, allow_empty)
    if first.empty:
        return ApplyReport(first, seconds=timings)
    report = apply_plan(first, kube, ovn, desired=desired, revision=revision, notify=notify)
    started = time.perf_counter()
    second = make_plan(desired, observe(kube, ovn, options.instance), options)
    timings["verify"] = time.perf_counter() - started
    report.seconds = {**timings, **report.seconds}
    if not second.empty:
        raise NotConverged(second)
    return report


class EmptyDesiredRefused(UserError):
    """An empty manifest set would prune everything we own (pass --allow-empty to mean it)."""

    cause = "empty-refused"


def guard_empty(desired: Desired, the_plan: Plan, allow_empty: bool) -> None:
    """Argo CD's ``allowEmpty`` lesson: an empty manifest set (a bad checkout, a wrong --path)
    must never prune everything we own unless the user said so."""
    deletes = the_plan.summary()["delete"]
    if desired.is_empty and deletes and not allow_empty:
        raise EmptyDesiredRefused(
            f"no manifests were found, and applying that would delete all {deletes} objects "
            "osc-gitops owns; pass --allow-empty if that is really what you want"
        )


def with_meta(the_plan: Plan, **meta: Any) -> Plan:
    return replace(the_plan, meta={**the_plan.meta, **meta})
