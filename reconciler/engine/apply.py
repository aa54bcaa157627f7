"""Carry out a plan in the safe order, then tell the security managers.

The order of writes is chosen for safety:

1. Kubernetes creates/updates (NetworkAttachmentDefinitions, then VirtualMachines): the VNF
   exists before any traffic is steered to it.
2. ONE OVN transaction with every OVN change (all or nothing).
3. Kubernetes deletes (VMs, then NADs): steering is gone before the VNF it pointed at.
4. Security-manager notifications for VNF instances deployed or removed, handed to the notifier
   (``osc-gitops apply`` and ``run``: the outbox of ``reconciler.engine.notifications``, which
   queues them and returns; its threads deliver them beside the reconcile).

A failure stops the sequence where it happened; the next reconcile plans again from what is live,
so a half-done apply is finished, never replayed blindly.

Within step 1 (and step 3) the writes of one kind are independent of each other, so a writer
that declares ``concurrent_writes = N`` (the Kubernetes adapter does; the loop's guarded and
caching writers do not) gets up to ``N`` of them in flight at once, one kind after another in
plan order: a first ``apply --kubernetes-only`` of 1,000 nodes creates 2,000 NADs and 1,000 VMs,
and one request at a time the API server's round trip (plus its admission webhooks in a real
cluster) is paid 3,000 times in a row. After a failure no further write starts; the first
failure in plan order is raised.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Desired
from reconciler.core.model.plan import Change, Plan
from reconciler.engine.providers import KubeWriter, Notifier, OvnWriter


@dataclass
class ApplyReport:
    """What one reconcile did, for the CLI, logs and metrics (``applied`` is 0 and ``seconds``
    has only observe/plan timings when the plan was empty)."""

    plan: Plan
    applied: int = 0
    notifications: list[dict[str, Any]] = field(default_factory=list)
    notification_errors: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def with_revision(body: dict[str, Any], revision: str | None) -> dict[str, Any]:
    """``body`` with the ``osc.io/revision`` annotation (the commit it was written from)."""
    if not revision:
        return body
    meta = dict(body.get("metadata", {}))
    meta["annotations"] = {**meta.get("annotations", {}), own.REVISION: revision}
    return {**body, "metadata": meta}


def split_key(key: str) -> tuple[str, str]:
    """A Kubernetes change's ``namespace/name`` key as ``(namespace, name)``."""
    namespace, _, name = key.partition("/")
    return namespace, name


def apply_plan(
    the_plan: Plan,
    kube: KubeWriter,
    ovn: OvnWriter,
    *,
    desired: Desired,
    revision: str | None = None,
    notify: Notifier | None = None,
) -> ApplyReport:
    """Carry out ``the_plan`` in the safe order described in the module docstring."""
    report = ApplyReport(the_plan)
    kube_changes = the_plan.kube_changes()
    workers = max(1, int(getattr(kube, "concurrent_writes", 1)))

    def write(change: Change) -> None:
        namespace, name = split_key(change.key)
        body = with_revision(change.after or {}, revision)
        if change.action == "create":
            kube.create(change.kind, namespace, name, body)
        else:
            kube.replace_managed(change.kind, namespace, name, body)

    def delete(change: Change) -> None:
        kube.delete(change.kind, *split_key(change.key))

    started = time.perf_counter()
    writes = [c for c in kube_changes if c.action != "delete"]  # NADs before VMs (plan order)
    report.applied += run_by_kind(writes, write, workers)
    report.seconds["kube_writes"] = time.perf_counter() - started

    started = time.perf_counter()
    ovn_changes = the_plan.ovn_changes()
    if ovn_changes:
        ovn.apply(ovn_changes, revision=revision)
        report.applied += len(ovn_changes)
    report.seconds["ovn_transaction"] = time.perf_counter() - started

    started = time.perf_counter()
    deletes = [c for c in reversed(kube_changes) if c.action == "delete"]  # VMs before NADs
    report.applied += run_by_kind(deletes, delete, workers)
    report.seconds["kube_deletes"] = time.perf_counter() - started

    notify_security_managers(the_plan, desired, notify, report)
    return report


def run_by_kind(changes: Sequence[Change], do: Callable[[Change], None], workers: int) -> int:
    """``do`` every change, kind after kind in the given order; within a kind up to ``workers``
    at once. Returns how many were done; after a failure none starts, and the first failure in
    order is raised once the writes in flight have ended."""
    done = 0
    for _kind, group in groupby(changes, key=lambda c: c.kind):
        stage = list(group)
        if workers == 1 or len(stage) == 1:
            for change in stage:
                do(change)
                done += 1
            continue
        with ThreadPoolExecutor(max_workers=min(workers, len(stage))) as pool:
            futures = [pool.submit(do, change) for change in stage]
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                future.cancel()  # those not started yet
            wait(futures)
        for future in futures:
            if future.cancelled():
                continue
            error = future.exception()
            if error is not None:
                raise error
            done += 1
    return done


def _ports_of(change: Change, vnf: str) -> dict[str, str] | None:
    """The OVN ports of the VM ``change`` creates or removes, worked out from its name as
    compile names them (``naming.vm_name``/``vnf_port``), never read from a live object's
    ``osc.io/ports`` annotation: an annotation is anyone's to write (a forged one would make a
    "removed" event name other pods' ports). The node is the change's (compile's for a create;
    for a delete the VM's ``osc.io/node-name`` or ``osc.io/node``, as the diff reads them), and
    only counts when the VM's name is the one compile gives that VNF on that node. ``None``
    when the name is not ours."""
    name = change.key.partition("/")[2]
    node = change.node
    if not node or not name:
        return None
    for slot in naming.SLOTS:
        if naming.vm_name(vnf, node, slot) == name:
            return {side: naming.vnf_port(vnf, node, side, slot) for side in ("in", "out")}
    return None


def notify_security_managers(
    the_plan: Plan, desired: Desired, notify: Notifier | None, report: ApplyReport
) -> None:
    """Tell each VNF's security manager about instances deployed (VM created) or removed.

    Best effort: a notifier that raises (a plain POST) is reported (and logged by the caller) but
    does not undo the apply; the VM and its steering are correct either way. The outbox never
    raises here: it retries and reports on its own.
    """
    if notify is None:
        return
    for change in the_plan.changes:
        if change.kind != "VirtualMachine" or change.action == "update":
            continue
        body = change.after if change.action == "create" else change.before
        labels = (body or {}).get("metadata", {}).get("labels", {})
        vnf_name = labels.get(own.VNF_LABEL) or change.origin.partition("/")[2]
        vnf = desired.vnfs.get(vnf_name)
        manager = vnf.spec.securityManager if vnf else None
        if manager is None:
            continue  # no manager configured, or the VNF left git with it: nobody to tell
        ports = _ports_of(change, vnf_name)
        if ports is None:
            continue  # not named as we name a VM of this VNF on that node: not ours to report
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
