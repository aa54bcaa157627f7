"""Health-gated steering (``reconciler.core.steering.network_function.gating``): transitions
onto a function group northd has not reported active are held per (binding, node); paths in
service are never touched."""

from __future__ import annotations

import dataclasses

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.facts import HEALTHY, NOT_HEALTHY, UNKNOWN, Finding, Pending
from reconciler.core.model.observed import NbGlobal, Observed
from reconciler.core.model.plan import Plan
from reconciler.core.planning.full import make_plan
from reconciler.core.steering import BACKENDS, HealthIndex
from reconciler.core.transitions.hold import held_idents, only_progress
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to, live_of, with_live

NF = CompileOptions(steering="network-function")
PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
    ("shop", "db-1", "node-1", {"app": "db"}),
]
FW = desired(
    sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10, redirection="both")
)


def observed() -> Observed:
    return cluster(PODS)


def plan(want: Desired, obs: Observed) -> Plan:
    return make_plan(want, obs, NF)


def applied(obs: Observed, the_plan: Plan) -> Observed:
    return with_live(obs, apply_to(live_of(obs), the_plan))


def northd(obs: Observed, healthy: set[str]) -> Observed:
    """Play northd: every group of ours gets its first healthy function as the active one (and
    the NB_Global row we wrote is read back as the adapter reads it)."""
    active: dict[str, str | None] = {}
    nb_global = obs.nb_global
    for row in obs.ovn_rows:
        if row.table == "Network_Function_Group":
            members = [nf for nf in row.fields["network_function"] if nf in healthy]
            active[row.key] = members[0] if members else None
        elif row.table == "NB_Global":
            nb_global = NbGlobal(dict(row.fields["options"]), dict(row.fields["external_ids"]))
    return dataclasses.replace(obs, nf_active=active, nb_global=nb_global)


def kinds(the_plan: Plan, kind: str) -> set[str]:
    return {c.key for c in the_plan.changes if c.kind == kind}


def test_a_first_apply_writes_the_vnf_but_holds_the_steering_per_binding_and_node() -> None:
    first = plan(FW, observed())
    assert kinds(first, "ACL") == set()  # nothing steered before OVN saw an instance healthy
    assert kinds(first, "Network_Function") == {"osc.fw.node_1", "osc.fw.node_2"}
    assert kinds(first, "Network_Function_Group") == {
        "osc.fw.node_1.fail_close",
        "osc.fw.node_2.fail_close",
    }
    assert kinds(first, "VirtualMachine") == {"security/fw-node-1", "security/fw-node-2"}
    assert kinds(first, "Port_Group") == {"osc.web.node_1", "osc.web.node_2"}
    held = {(h["binding"], h["node"]): h for h in first.meta["held"]}
    assert set(held) == {("web-fw", "node-1"), ("web-fw", "node-2")}
    one = held[("web-fw", "node-1")]
    assert (
        one["reason"] == "waiting for fw-node-1 to become healthy (new: OVN has not probed it yet)"
    )
    # the unit is whole: both directions and the twin of the same-switch crossing
    assert {key for _, key in map(tuple, one["changes"])} == {
        "osc.web_fw.node_1.from",
        "osc.web_fw.node_1.to",
        "osc.web_fw.node_1.to.crossed",
    }
    # what stays pending meanwhile: the plan is not converged (exit 2) and says why
    assert first.pending == tuple(
        Pending(
            "Binding", "web-fw", node,
            f"steering held, waiting for fw-{node} to become healthy (new: OVN has not probed "
            "it yet)",
            "until then no ACL steers its pods there: their traffic flows unsteered",
        )
        for node in ("node-1", "node-2")
    )  # fmt: skip


def test_held_steering_is_switched_on_node_by_node_as_northd_reports_each_active() -> None:
    obs = northd(applied(observed(), plan(FW, observed())), set())  # probing, nobody answers
    again = plan(FW, obs)
    assert again.empty and len(again.meta["held"]) == 2  # converged for now: nothing may change
    # the reason names the VM once its function is in the NB
    assert again.meta["held"][0]["waiting_for"] == ["fw-node-1"]
    assert "probe failing" in again.meta["held"][0]["reason"]
    obs = northd(obs, {"osc.fw.node_1"})
    released = plan(FW, obs)
    assert kinds(released, "ACL") == {
        "osc.web_fw.node_1.from",
        "osc.web_fw.node_1.to",
        "osc.web_fw.node_1.to.crossed",
    }
    assert [(h["binding"], h["node"]) for h in released.meta["held"]] == [("web-fw", "node-2")]
    obs = northd(applied(obs, released), {"osc.fw.node_1", "osc.fw.node_2"})
    last = plan(FW, obs)
    assert kinds(last, "ACL") == {
        "osc.web_fw.node_2.from",
        "osc.web_fw.node_2.to",
        "osc.web_fw.node_2.to.crossed",
    }
    assert "held" not in last.meta
    assert plan(FW, applied(obs, last)).empty


def steady(want: Desired = FW) -> Observed:
    """Everything applied, every function healthy."""
    obs = observed()
    for _ in range(3):
        obs = applied(obs, plan(want, obs))
        obs = northd(obs, {r.key for r in obs.ovn_rows if r.table == "Network_Function"})
    assert plan(want, obs).empty and "held" not in plan(want, obs).meta
    return obs


def test_a_path_in_service_keeps_its_failure_policy_when_its_vnf_fails() -> None:
    obs = northd(steady(), set())  # both firewalls stop answering the probe
    again = plan(FW, obs)
    assert again.empty and "held" not in again.meta  # fail-close acts; nothing is taken away
    health = HealthIndex(obs).members
    assert health["osc.fw.node_1"].health == NOT_HEALTHY
    assert "probe failing" in health["osc.fw.node_1"].detail


def test_moving_a_binding_to_another_vnf_waits_for_it_and_keeps_the_old_path() -> None:
    both = desired(sg("web", "app=web"), vnf("fw"), vnf("ips"), binding("web-fw", "web", "fw", 10))
    obs = steady(both)
    moved = desired(
        sg("web", "app=web"), vnf("fw"), vnf("ips"), binding("web-fw", "web", "ips", 10)
    )
    first = plan(moved, obs)
    # the ips groups are new: the ACL updates wait, the fw groups they still use are kept
    assert kinds(first, "ACL") == set()
    assert kinds(first, "Network_Function_Group") == {
        "osc.ips.node_1.fail_close",
        "osc.ips.node_2.fail_close",
    }
    assert all(c.action == "create" for c in first.changes if c.kind == "Network_Function_Group")
    held = {tuple(i) for h in first.meta["held"] for i in h["changes"]}
    assert {  # kept while the ACLs still use them
        ("Network_Function_Group", "osc.fw.node_1.fail_close"),
        ("Network_Function", "osc.fw.node_1"),
        ("Network_Function_Health_Check", "osc.fw.node_1"),
    } <= held
    assert not any(c.action == "delete" for c in first.changes if c.is_ovn)
    obs = northd(applied(obs, first), {"osc.fw.node_1", "osc.fw.node_2", "osc.ips.node_1"})
    second = plan(moved, obs)
    assert {(c.action, c.kind, c.key) for c in second.changes} == {
        ("update", "ACL", "osc.web_fw.node_1.to"),  # node-1 switches; its old path goes after
        ("delete", "Network_Function_Group", "osc.fw.node_1.fail_close"),
        ("delete", "Network_Function", "osc.fw.node_1"),
        ("delete", "Network_Function_Health_Check", "osc.fw.node_1"),
    }


def test_when_the_old_vnf_goes_in_the_same_plan_the_switch_is_not_held_and_the_plan_says_so() -> (
    None
):
    obs = steady()
    swapped = desired(sg("web", "app=web"), vnf("ips"), binding("web-fw", "web", "ips", 10))
    first = plan(swapped, obs)
    assert "held" not in first.meta
    assert any(c.kind == "ACL" and c.action == "update" for c in first.changes)
    assert [f for f in first.findings if f.code == "transition"] == [
        Finding(
            "transition", "Binding/web-fw", node,
            f"Binding web-fw on node {node} is switched onto osc.ips.{n}.fail_close before OVN "
            f"reported it healthy: the VNF it steered through until now (osc.fw.{n}) is removed "
            "in the same plan, so its steering cannot be kept until then (the failure policy "
            "acts meanwhile)",
        )
        for node, n in (("node-1", "node_1"), ("node-2", "node_2"))
    ]  # fmt: skip


def test_a_new_failure_policy_on_the_same_vnf_is_switched_on_at_once() -> None:
    # northd judges the function by its own probe: a new group holding a function it already
    # counts healthy is active from its first computation, so nothing waits
    obs = steady()
    open_ = desired(
        sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10, redirection="both",
                                                 failurePolicy="fail-open")
    )  # fmt: skip
    first = plan(open_, obs)
    assert "held" not in first.meta
    assert {c.key for c in first.changes if c.kind == "ACL"} == {
        "osc.web_fw.node_1.from",
        "osc.web_fw.node_1.to",
        "osc.web_fw.node_2.from",
        "osc.web_fw.node_2.to",
    }
    assert {(c.action, c.key) for c in first.changes if c.kind == "Network_Function_Group"} == {
        ("create", "osc.fw.node_1.fail_open"),
        ("create", "osc.fw.node_2.fail_open"),
        ("delete", "osc.fw.node_1.fail_close"),
        ("delete", "osc.fw.node_2.fail_close"),
    }
    # it is not a transition onto another instance at all: even with the firewall down, the
    # new failure policy applies at once (holding would keep the old policy in force)
    down = plan(open_, northd(obs, set()))
    assert "held" not in down.meta and len(kinds(down, "ACL")) == 4


def test_a_verify_plan_that_only_switches_on_what_was_held_is_progress_not_drift() -> None:
    obs = observed()
    first = plan(FW, obs)
    obs = northd(applied(obs, first), {"osc.fw.node_1"})
    second = plan(FW, obs)
    assert only_progress(first, second)
    drifted = dataclasses.replace(
        second, changes=(*second.changes, *plan(FW, observed()).changes[:1])
    )
    assert not only_progress(first, drifted)
    assert not only_progress(second, second)  # nothing held before: any change is drift
    assert held_idents(first) >= {(c.kind, c.key) for c in second.changes}


def test_the_health_index_sees_each_of_two_instances_through_its_probe_group() -> None:
    two = desired(sg("web", "app=web"), vnf("fw", instancesPerNode=2),
                  binding("web-fw", "web", "fw", 10))  # fmt: skip
    obs = observed()
    obs = northd(applied(obs, plan(two, obs)), {"osc.fw.node_1._b"})
    health = HealthIndex(obs).members
    assert (health["osc.fw.node_1"].health, health["osc.fw.node_1._b"].health) == (
        NOT_HEALTHY,
        HEALTHY,
    )
    assert health["osc.fw.node_1._b"].vm == "fw-node-1-b"
    # the node's steering group has a healthy member: its steering is switched on
    released = plan(two, obs)
    assert "osc.web_fw.node_1.to" in kinds(released, "ACL")
    assert ("web-fw", "node-1") not in {(h["binding"], h["node"]) for h in released.meta["held"]}


def test_without_a_health_check_a_function_is_unknown_but_northd_still_switches_it_on() -> None:
    unchecked = desired(sg("web", "app=web"), vnf("fw", healthCheck={"enabled": False}),
                        binding("web-fw", "web", "fw", 10))  # fmt: skip
    obs = observed()
    obs = applied(obs, plan(unchecked, obs))
    assert HealthIndex(obs).members["osc.fw.node_1"].health == UNKNOWN
    assert not HealthIndex(obs).members["osc.fw.node_1"].checkable
    # northd counts an unchecked function healthy at once
    obs = northd(obs, {"osc.fw.node_1", "osc.fw.node_2"})
    assert len(kinds(plan(unchecked, obs), "ACL")) == 2


def test_a_chain_is_held_on_a_node_until_every_hop_is_healthy() -> None:
    """A chain (issue 21) steers through ONE function without a probe of its own; its group
    carries ``osc.io/chain``: the unit waits for each hop's own function on that node."""
    from reconciler.core.model.observed import OvnRow
    from reconciler.core.model.plan import Change

    def ids(key: str, **extra: str) -> dict[str, str]:
        return {"osc.io/owner": "osc-gitops", "osc.io/key": key, "osc.io/node": "node-1", **extra}

    chain_group = "osc.chain2_exit.fw.ids.node_1.fail_close"
    acl_after = {"network_function_group": chain_group, "external_ids": {}}
    acl = Change(
        "create", "ACL", "osc.web_chain.node_1.to", "Binding/web-chain", "node-1", None, acl_after
    )
    group_after = {
        "network_function": ["osc.chain2_exit.fw.ids.node_1"],
        "external_ids": ids(chain_group, **{"osc.io/chain": "fw,ids"}),
    }
    group = Change(
        "create", "Network_Function_Group", chain_group, "Binding/web-chain", "node-1", None,
        group_after,
    )  # fmt: skip
    hop_rows = []
    for hop in ("fw", "ids"):
        nf = f"osc.{hop}.node_1"
        nf_ids = ids(nf, **{"osc.io/resource": f"VnfDeployment/{hop}"})
        probe = {"name": f"{nf}.probe", "network_function": [nf], "external_ids": ids(nf)}
        hop_rows += [
            OvnRow("Network_Function", nf, {"name": nf, "external_ids": nf_ids}),
            OvnRow("Network_Function_Health_Check", nf, {"network_function": nf}),
            OvnRow("Network_Function_Group", f"{nf}.probe", probe),
        ]
    plan = Plan((acl, group), instance="osc-gitops")
    one_up = Observed(ovn_rows=tuple(hop_rows), nf_active={"osc.fw.node_1.probe": "osc.fw.node_1"})
    gate = BACKENDS["network-function"].hold_unready
    held = gate(plan, one_up, HealthIndex(one_up))
    assert [c.kind for c in held.changes] == ["Network_Function_Group"]
    (hold,) = held.meta["held"]
    assert hold["waiting_for"] == ["ids-node-1"]  # the hop that is not healthy yet
    both_up = dataclasses.replace(
        one_up, nf_active={**one_up.nf_active, "osc.ids.node_1.probe": "osc.ids.node_1"}
    )
    released = gate(plan, both_up, HealthIndex(both_up))
    assert [c.kind for c in released.changes] == ["ACL", "Network_Function_Group"]


def test_with_the_ids_nearly_exhausted_the_old_path_cannot_be_kept_and_the_plan_says_so() -> None:
    """Another writer holds every Network_Function_Group id but ours: the new ips groups can
    only take the ids of the fw groups the move deletes, so the old path cannot be kept while
    the new one waits: the switch is not held, and the plan says why, per node."""
    both = desired(sg("web", "app=web"), vnf("fw"), vnf("ips"), binding("web-fw", "web", "fw", 10))
    obs = steady(both)
    ours = {r.fields["id"] for r in obs.ovn_rows if r.table == "Network_Function_Group"}
    others = tuple(i for i in range(1, 256) if i not in ours)
    obs = dataclasses.replace(obs, used_ids={"Network_Function_Group": others})
    moved = desired(
        sg("web", "app=web"), vnf("fw"), vnf("ips"), binding("web-fw", "web", "ips", 10)
    )
    first = plan(moved, obs)
    assert "held" not in first.meta
    assert kinds(first, "ACL") == {"osc.web_fw.node_1.to", "osc.web_fw.node_2.to"}
    assert [f for f in first.findings if f.code == "transition"] == [
        Finding(
            "transition", "Binding/web-fw", node,
            f"Binding web-fw on node {node} is switched onto osc.ips.{n}.fail_close before OVN "
            f"reported it healthy: osc.fw.{n}.fail_close cannot be kept until then (its id is "
            "given to a new row; the ids are nearly exhausted)",
        )
        for node, n in (("node-1", "node_1"), ("node-2", "node_2"))
    ]  # fmt: skip


def test_a_chain_replaced_by_another_whose_vnfs_go_names_every_group_of_both() -> None:
    """A chain's unit waits for its entry and exit groups; when the old chain's VNFs go in the
    same plan, the warning names both new groups and both old functions."""
    old = desired(sg("web", "app=web"), vnf("fw"), vnf("ips"),
                  binding("web-fw", "web", ["fw", "ips"], 10, redirection="both"))  # fmt: skip
    obs = steady(old)
    new = desired(sg("web", "app=web"), vnf("av"), vnf("ids"),
                  binding("web-fw", "web", ["av", "ids"], 10, redirection="both"))  # fmt: skip
    found = [f for f in plan(new, obs).findings if f.code == "transition" and f.node == "node-1"]
    assert [f.text for f in found] == [
        "Binding web-fw on node node-1 is switched onto osc.chain2_entry.av.ids.node_1.fail_close, "
        "osc.chain2_exit.av.ids.node_1.fail_close before OVN reported it healthy: the VNF it "
        "steered through until now (osc.chain2_entry.fw.ips.node_1, "
        "osc.chain2_exit.fw.ips.node_1) is removed in the same plan, so its steering cannot be "
        "kept until then (the failure policy acts meanwhile)"
    ]


def test_a_held_unit_names_each_instance_it_waits_for_by_its_vm() -> None:
    """Two instances per node, under another instance name: the steering waits for either
    VM, each named for its own slot (``-b`` for the second)."""
    want = desired(sg("web", "app=web"), vnf("fw", instancesPerNode=2),
                   binding("web-fw", "web", "fw", 10))  # fmt: skip
    blue = dataclasses.replace(NF, instance="blue")
    first = make_plan(want, observed(), blue)
    assert [(h.node, h.waiting_for) for h in first.held] == [
        ("node-1", ("fw-node-1", "fw-node-1-b")),
        ("node-2", ("fw-node-2", "fw-node-2-b")),
    ]
    assert first.meta["held"][0]["reason"] == (
        "waiting for fw-node-1 or fw-node-1-b to become healthy (new: OVN has not probed it yet)"
    )


def test_a_chain_waits_for_each_hop_in_order_and_says_why_of_each() -> None:
    """fw is live but its probe fails, ips is new: the chain's unit waits for both, in the
    chain's order (ips first), and gives both reasons."""
    obs = northd(steady(), set())
    want = desired(sg("web", "app=web"), vnf("fw"), vnf("ips"),
                   binding("web-fw", "web", ["ips", "fw"], 10))  # fmt: skip
    (one, _) = plan(want, obs).held
    assert (one.node, one.waiting_for, one.vnfs, one.chain) == (
        "node-1", ("ips-node-1", "fw-node-1"), ("fw", "ips"), True,
    )  # fmt: skip
    assert one.why.startswith("new: OVN has not probed it yet; probe failing: ")


def test_a_path_in_service_takes_a_new_priority_at_once_while_its_group_gains_a_standby() -> None:
    """Only a move onto another group is a transition: the binding's ACLs keep their group
    (now with a second, new instance) and take their new priority at once, although nothing
    in the group is healthy: traffic already steered keeps its failure policy."""
    obs = northd(steady(), set())
    want = desired(sg("web", "app=web"), vnf("fw", instancesPerNode=2),
                   binding("web-fw", "web", "fw", 20, redirection="both"))  # fmt: skip
    the_plan = plan(want, obs)
    assert the_plan.held == ()
    assert {(c.key, c.changed) for c in the_plan.changes if c.kind == "ACL"} == {
        (f"osc.web_fw.{n}.{leg}", ("['priority']",))
        for n in ("node_1", "node_2")
        for leg in ("from", "to", "to.crossed")
    }
    assert ("update", "osc.fw.node_1.fail_close") in {
        (c.action, c.key) for c in the_plan.changes if c.kind == "Network_Function_Group"
    }
