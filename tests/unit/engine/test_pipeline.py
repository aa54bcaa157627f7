"""The one reconcile pipeline against in-memory fakes: safe write order, convergence check,
empty guard, write guard, all-or-nothing OVN, security-manager notifications."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Plan
from reconciler.engine.apply import ApplyReport
from reconciler.engine.pipeline import (
    EmptyDesiredRefused,
    NotConverged,
    Pipeline,
    preview,
    reconcile,
)
from reconciler.errors import Aborted, error_cause
from tests.support.builders import binding, desired, sg, vnf
from tests.support.fakes import FakeKube, FakeOvn, FakeOvnError
from tests.unit.engine.scenario import fake_world

OPTIONS = CompileOptions()
FIREWALL = desired(sg("web", "app=web"), vnf("firewall"), binding("web-fw", "web", "firewall", 10))
IPS = desired(sg("web", "app=web"), vnf("ips"), binding("web-ips", "web", "ips", 10))


def applied_world(want: Desired = FIREWALL) -> tuple[FakeKube, FakeOvn]:
    kube, ovn = fake_world()
    reconcile(want, kube, ovn, OPTIONS, revision="rev-1")
    kube.journal.entries.clear()
    return kube, ovn


def test_writes_go_in_the_safe_order() -> None:
    """Kubernetes creates (NADs, then VMs) -> ONE OVN transaction -> Kubernetes deletes (VMs,
    then NADs): the new VNF exists before traffic is steered to it, and the old one is removed
    only after steering left it."""
    kube, ovn = applied_world(FIREWALL)

    report = reconcile(IPS, kube, ovn, OPTIONS, revision="rev-2")

    journal = kube.journal.entries
    systems = kube.journal.systems()
    assert systems.count("ovn") == 1, "one OVN transaction"
    split = systems.index("ovn")
    before, after = journal[:split], journal[split + 1 :]
    assert before and all(e[1] == "create" for e in before)
    assert after and all(e[1] == "delete" for e in after)
    assert [e[2] for e in before] == sorted(
        (e[2] for e in before), key=("NetworkAttachmentDefinition", "VirtualMachine").index
    )
    assert [e[2] for e in after] == sorted(
        (e[2] for e in after), key=("VirtualMachine", "NetworkAttachmentDefinition").index
    )
    assert all("ips" in e[3] for e in before) and all("firewall" in e[3] for e in after)
    assert report.applied == len(report.plan.changes)
    assert list(report.seconds) == [
        "observe", "plan", "verify", "kube_writes", "ovn_transaction", "kube_deletes",
    ]  # fmt: skip
    assert reconcile(IPS, kube, ovn, OPTIONS).plan.empty, "converged"


def test_a_preview_is_the_plan_a_run_carries_out_and_writes_nothing() -> None:
    """``osc-gitops plan`` (:meth:`Pipeline.preview`) reads and plans as a pass does; of a
    snapshot file (:func:`preview`) too. Beside the changes: the revision and the health
    report."""
    kube, ovn = applied_world(FIREWALL)
    pipeline = Pipeline(kube, ovn, OPTIONS)

    shown = pipeline.preview(IPS, revision="rev-2")
    offline = preview(IPS, pipeline.observe(), OPTIONS, revision="rev-2")

    assert kube.journal.entries == [], "a preview writes nothing"
    assert shown.plan == offline.plan and shown.plan.meta["revision"] == "rev-2"
    again = pipeline.observe()  # what it was planned from (read at another moment)
    assert dataclasses.replace(shown.observed, observed_at=again.observed_at) == again
    assert "vnf_instances" in shown.plan.meta  # the health of the VNF instances it plans
    done = pipeline.run(IPS, "rev-2").report.plan
    assert done.changes == shown.plan.changes and done.warnings == shown.plan.warnings
    assert pipeline.preview(IPS).plan.empty


def test_rows_and_objects_record_the_revision() -> None:
    kube, ovn = applied_world(FIREWALL)
    assert {f["external_ids"]["osc.io/revision"] for f in ovn.rows.values()} == {"rev-1"}
    vms = kube.objects("VirtualMachine")
    assert {vm["metadata"]["annotations"]["osc.io/revision"] for vm in vms.values()} == {"rev-1"}


def test_an_empty_plan_writes_nothing() -> None:
    kube, ovn = applied_world(FIREWALL)
    transactions = ovn.transactions

    report = reconcile(FIREWALL, kube, ovn, OPTIONS, revision="rev-2")

    assert report.plan.empty and report.applied == 0
    assert kube.journal.entries == [] and ovn.transactions == transactions
    assert list(report.seconds) == ["observe", "plan"]


def test_not_converged_when_the_verify_plan_is_not_empty() -> None:
    """Someone else edits one of our rows between our commit and the verify read: the pass
    fails as NotConverged (an internal error, traceback kept), naming what is still off."""
    kube, ovn = fake_world()

    def meddle(entry: tuple[Any, ...]) -> None:
        if entry[0] == "ovn":
            table, key = next(k for k in ovn.rows if k[0] == "Port_Group")
            ovn.drift(table, key, ports=["intruder"])

    kube.journal.after_write.append(meddle)
    with pytest.raises(NotConverged) as caught:
        reconcile(FIREWALL, kube, ovn, OPTIONS)
    assert [(c.action, c.kind) for c in caught.value.plan.changes] == [("update", "Port_Group")]
    assert error_cause(caught.value) == "not-converged" and caught.value.show_traceback


def test_the_verify_reads_our_objects_again_and_reuses_the_pods() -> None:
    """The verify re-reads what we write (NB rows, our Kubernetes objects) but plans from the
    first read's pods (reconciler.engine.scoped.observe_verify): a pod relabelled between our
    commit and the verify is new input the next pass applies, not a failure to converge; one of
    our VMs deleted meanwhile still fails the pass."""
    kube, ovn = fake_world()

    def relabel(entry: tuple[Any, ...]) -> None:
        if entry[0] == "ovn":
            kube.label_pod("shop", "db-1", {"app": "web"})

    kube.journal.after_write.append(relabel)
    report = reconcile(FIREWALL, kube, ovn, OPTIONS)
    assert report.plan.changes
    kube.journal.after_write.clear()
    follow_up = reconcile(FIREWALL, kube, ovn, OPTIONS)
    # db-1 (node-2) joined web: the next pass adds it, in the group's Port_Group of its node
    changes = follow_up.plan.changes
    assert [(c.action, c.kind, c.key) for c in changes] == [
        ("create", "Port_Group", "osc.web.node_2")
    ]
    assert changes[0].after is not None and changes[0].after["ports"] == ["shop_db-1"]
    assert reconcile(FIREWALL, kube, ovn, OPTIONS).plan.empty

    kube, ovn = fake_world()

    def delete_a_vm(entry: tuple[Any, ...]) -> None:
        if entry[0] == "ovn":
            name = next(iter(kube.objects("VirtualMachine")))
            namespace, _, short = name.rpartition("/")
            kube.delete("VirtualMachine", namespace, short)

    kube.journal.after_write.append(delete_a_vm)
    with pytest.raises(NotConverged) as caught:
        reconcile(FIREWALL, kube, ovn, OPTIONS)
    assert ("create", "VirtualMachine") in {(c.action, c.kind) for c in caught.value.plan.changes}


def test_empty_manifests_never_prune_everything() -> None:
    kube, ovn = applied_world(FIREWALL)
    rows = dict(ovn.rows)

    with pytest.raises(EmptyDesiredRefused):
        reconcile(Desired(), kube, ovn, OPTIONS)
    assert kube.journal.entries == [] and ovn.rows == rows

    # Our VMs are ours in the namespaces the manifests name (issue 31): with none named, only
    # --vnf-namespaces keeps their namespace ours, so that they are pruned too.
    vms = dict(kube.objects("VirtualMachine"))
    (namespace,) = {name.partition("/")[0] for name in vms}
    report = reconcile(Desired(), kube, ovn, OPTIONS, allow_empty=True)
    assert ovn.rows == {} and kube.objects("VirtualMachine") == vms
    assert any(namespace in warning for warning in report.plan.warnings)
    options = dataclasses.replace(OPTIONS, vnf_namespaces=(namespace,))
    report = reconcile(Desired(), kube, ovn, options, allow_empty=True)
    assert report.plan.summary()["delete"] == len(report.plan.changes) > 0
    assert ovn.rows == {} and kube.objects("VirtualMachine") == {}


def test_a_failed_ovn_transaction_changes_no_row_and_stops_before_the_deletes() -> None:
    """The OVN transaction is all or nothing; a failure stops the sequence where it happened,
    and the next reconcile finishes the job from what is live."""
    kube, ovn = applied_world(FIREWALL)
    rows = dict(ovn.rows)
    ovn.failures.fail("apply", FakeOvnError("fake NB: connection lost"))

    with pytest.raises(FakeOvnError):
        reconcile(IPS, kube, ovn, OPTIONS)
    assert ovn.rows == rows
    assert {e[1] for e in kube.journal.entries} == {"create"}, "no delete after the failure"

    reconcile(IPS, kube, ovn, OPTIONS)
    assert reconcile(IPS, kube, ovn, OPTIONS).plan.empty


class RefusingGuard:
    """Allows the apply to start, then refuses every write after ``allowed`` of them."""

    def __init__(self, allowed: int, refuse_apply: bool = False) -> None:
        self.allowed = allowed
        self.refuse_apply = refuse_apply
        self.asked: list[str] = []

    def before_apply(self) -> None:
        if self.refuse_apply:
            raise Aborted("not the leader: apply not started")

    def before_write(self, what: str) -> None:
        self.asked.append(what)
        if len(self.asked) > self.allowed:
            raise Aborted(f"lost the lease: {what} not started")


def test_the_write_guard_is_asked_before_the_apply_and_before_every_write() -> None:
    kube, ovn = fake_world()
    with pytest.raises(Aborted):
        Pipeline(kube, ovn, OPTIONS, guard=RefusingGuard(99, refuse_apply=True)).run(FIREWALL)
    assert kube.journal.entries == []

    guard = RefusingGuard(allowed=2)
    with pytest.raises(Aborted):
        Pipeline(kube, ovn, OPTIONS, guard=guard).run(FIREWALL)
    assert kube.journal.systems() == ["kube", "kube"], "no write after the refusal"
    assert ovn.rows == {}, "the OVN transaction was never started"
    assert guard.asked == ["create", "create", "create"]


class Recorder:
    def __init__(self) -> None:
        self.steps: list[str] = []

    def observed(self, observed: Observed) -> None:
        self.steps.append("observed")

    def applying(self, plan: Plan) -> None:
        self.steps.append("applying")

    def applied(self, report: ApplyReport, observed: Observed) -> None:
        self.steps.append("applied")

    def settled(self, observed: Observed) -> None:
        self.steps.append(f"settled:{len(observed.ovn_rows)}")


def test_the_listener_hears_each_step_in_order() -> None:
    kube, ovn = fake_world()
    pipeline = Pipeline(kube, ovn, OPTIONS)
    first, second = Recorder(), Recorder()

    outcome = pipeline.run(FIREWALL, listener=first)
    assert outcome.changed
    assert first.steps == ["observed", "applying", "applied", f"settled:{len(ovn.rows)}"]
    assert outcome.observed.ovn_rows == (), "the read the plan was made from"

    assert not pipeline.run(FIREWALL, listener=second).changed
    assert second.steps == ["observed", f"settled:{len(ovn.rows)}"]


def test_security_managers_hear_about_vnf_instances_best_effort() -> None:
    manager = {"url": "https://secmgr.example/events"}
    web = sg("web", "app=web")
    everywhere = desired(web, vnf("ips", securityManager=manager))
    nowhere = desired(web, vnf("ips", securityManager=manager, nodeSelector={"gpu": "yes"}))
    kube, ovn = fake_world()
    told: list[tuple[str, dict[str, Any]]] = []

    report = reconcile(everywhere, kube, ovn, OPTIONS, notify=lambda u, e: told.append((u, e)))
    assert sorted((url, e["event"], e["node"]) for url, e in told) == [
        (manager["url"], "deployed", "node-1"), (manager["url"], "deployed", "node-2"),
    ]  # fmt: skip
    assert len(report.notifications) == 2 and not report.notification_errors

    def down(url: str, event: dict[str, Any]) -> None:
        raise OSError("connection refused")

    report = reconcile(nowhere, kube, ovn, OPTIONS, notify=down)  # both VMs are removed
    assert report.notification_errors == [f"{manager['url']}: connection refused"] * 2
    assert kube.objects("VirtualMachine") == {}, "the apply stood"
    assert reconcile(nowhere, kube, ovn, OPTIONS).plan.empty


def test_a_vm_on_a_node_whose_name_a_label_cannot_hold_is_told_with_its_ports() -> None:
    """The events' ports come from the VM's name as compile names it on the change's node: a
    node name too long for the ``osc.io/node`` label (shortened there, whole in the
    ``osc.io/node-name`` annotation) still gets its ``deployed`` and ``removed``."""
    from reconciler.core.model import naming
    from reconciler.core.model import ownership as own
    from tests.support.builders import cluster
    from tests.support.fakes import world

    node = "worker-" + "a" * 70 + ".example.com"
    assert own.node_label_value(node) != node
    manager = {"url": "https://secmgr.example/events"}
    web = sg("web", "app=web")
    kube, ovn = world(cluster([("shop", "web-1", node, {"app": "web"})], nodes=(node,)))
    told: list[dict[str, Any]] = []
    ports = {side: naming.vnf_port("ips", node, side) for side in ("in", "out")}

    reconcile(desired(web, vnf("ips", securityManager=manager)), kube, ovn, OPTIONS,
              notify=lambda url, event: told.append(event))  # fmt: skip
    gone = desired(web, vnf("ips", securityManager=manager, nodeSelector={"gpu": "yes"}))
    reconcile(gone, kube, ovn, OPTIONS, notify=lambda url, event: told.append(event))
    vm = f"security/{naming.vm_name('ips', node)}"  # the builders' VNF namespace
    assert [(e["event"], e["node"], e["virtualMachine"], e["ovnPorts"]) for e in told] == [
        ("deployed", node, vm, ports), ("removed", node, vm, ports),
    ]  # fmt: skip
