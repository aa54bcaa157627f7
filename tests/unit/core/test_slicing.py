"""Scopes (``reconciler.core.planning.slicing``): a node agent plans exactly its node's OVN slice, a
central run leaves agent-held nodes alone, ``--kubernetes-only`` plans VMs and NADs only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model import ownership as own
from reconciler.core.model.desired import Desired
from reconciler.core.model.facts import Finding
from reconciler.core.model.observed import Node, Observed, OvnRow
from reconciler.core.model.plan import Change, Plan
from reconciler.core.model.target import NB_GLOBAL
from reconciler.core.planning.full import compile_plan, make_plan
from reconciler.core.planning.slicing import (
    AgentOptions,
    CentralScope,
    KubernetesScope,
    NodeScope,
    Scope,
    ScopedView,
    kubernetes_observed,
    scope_for,
)
from reconciler.errors import InternalError
from tests.support.builders import binding, cluster, desired, sg, vnf

OPTIONS = CompileOptions()
NODES = ("node-1", "node-2", "node-3")
WANT = desired(sg("web", "app=web"), vnf("firewall"), binding("web-fw", "web", "firewall", 10))


def world() -> Observed:
    return cluster(
        [
            ("shop", "web-1", "node-1", {"app": "web"}),
            ("shop", "web-2", "node-2", {"app": "web"}),
            ("shop", "web-3", "node-3", {"app": "web"}),
        ],
        nodes=NODES,
    )


def plan_in(scope: Scope, observed: Observed, want: Desired = WANT) -> Plan:
    view = scope.view(observed)
    planned = compile_plan(scope.desired(want), view.observed, scope.options(OPTIONS))
    return scope.restrict(planned.plan, view)


def applied(observed: Observed, plan: Plan) -> Observed:
    """``observed`` after ``plan``'s OVN changes (what the adapter would read back)."""
    rows = {(r.table, r.key): r for r in observed.ovn_rows}
    for change in plan.ovn_changes():
        if change.action == "delete":
            rows.pop((change.kind, change.key))
        else:
            rows[(change.kind, change.key)] = OvnRow(
                change.kind, change.key, dict(change.after or {})
            )
    return replace(observed, ovn_rows=tuple(rows[k] for k in sorted(rows)))


def ext(row: OvnRow) -> dict[str, str]:
    return dict(row.fields.get("external_ids") or {})


def test_an_agent_plans_only_its_nodes_ovn_rows_and_marks_them() -> None:
    plan = plan_in(NodeScope("node-2"), world())
    assert plan.changes and not plan.kube_changes()
    assert {c.node for c in plan.changes} <= {"node-2", None}
    for change in plan.changes:
        ids = (change.after or {}).get("external_ids") or {}
        if change.kind == NB_GLOBAL:
            assert own.AGENT not in ids  # the instance's, never one agent's
        else:
            assert ids[own.AGENT] == "node-2" and ids[own.OWNER] == "osc-gitops"
    assert plan.meta["node"] == "node-2"
    # its VM and NADs are the central owner's: shown, never planned
    assert any("central owner" in w and "VirtualMachine" in w for w in plan.warnings)


def test_an_agent_adopts_what_a_central_run_left_for_its_node_and_nothing_else() -> None:
    central = applied(world(), make_plan(WANT, world(), OPTIONS))
    plan = plan_in(NodeScope("node-1"), central)
    assert plan.changes, "the central run's rows of node-1 are adopted"
    assert all(c.action == "update" and c.node == "node-1" for c in plan.changes)
    assert all(c.changed == ("['external_ids']['osc.io/agent']",) for c in plan.changes)
    after = applied(central, plan)
    assert plan_in(NodeScope("node-1"), after).empty
    # the central run now leaves node-1 alone, and still plans nothing elsewhere
    view = CentralScope().view(after)
    assert view.held == {"node-1"}
    again = plan_in(CentralScope(), after)
    assert not again.ovn_changes()  # (its Kubernetes objects were never applied here)
    assert any(c.node == "node-1" and c.is_ovn for c in make_plan(WANT, after, OPTIONS).changes)


def test_a_central_run_never_touches_agent_rows_even_at_another_revision() -> None:
    held = world()
    for node in NODES:
        held = applied(held, plan_in(NodeScope(node), held))
    # the central run's manifests no longer have the binding: everything would go...
    gone = desired(sg("web", "app=web"), vnf("firewall"))
    unscoped = make_plan(gone, held, OPTIONS)
    assert any(c.action == "delete" and c.is_ovn for c in unscoped.changes)
    # ...but the agents hold every node: the central run deletes none of their rows
    scoped = plan_in(CentralScope(), held, gone)
    assert not scoped.ovn_changes()
    assert any("node agents" in w for w in scoped.warnings)


def test_without_agent_rows_the_central_scope_changes_nothing() -> None:
    observed = world()
    scope = CentralScope()
    view = scope.view(observed)
    assert view.observed is observed and not view.held
    full = make_plan(WANT, observed, OPTIONS)
    assert scope.restrict(full, view) is full


def test_agents_in_one_nb_allocate_network_function_ids_around_each_other() -> None:
    shared = world()
    for node in NODES:
        shared = applied(shared, plan_in(NodeScope(node), shared))
    for table in ("Network_Function", "Network_Function_Group"):
        ids = [r.fields["id"] for r in shared.ovn_rows if r.table == table]
        assert len(ids) == len(set(ids)), f"{table} ids collide: {ids}"
    for node in NODES:
        assert plan_in(NodeScope(node), shared).empty


def test_an_agent_keeps_the_service_monitor_options_while_another_node_needs_them() -> None:
    shared = world()
    for node in NODES:
        shared = applied(shared, plan_in(NodeScope(node), shared))
    assert any(r.table == NB_GLOBAL for r in shared.ovn_rows)
    # node-3 stops running the firewall: its agent removes its rows, not NB_Global's options
    labelled = replace(
        shared,
        nodes=tuple(Node(n, {"fw": "yes"} if n != "node-3" else {}) for n in NODES),
    )
    only_labelled = desired(
        sg("web", "app=web"),
        vnf("firewall", nodeSelector={"fw": "yes"}),
        binding("web-fw", "web", "firewall", 10),
    )
    plan = plan_in(NodeScope("node-3"), labelled, only_labelled)
    assert plan.changes and all(c.action == "delete" for c in plan.changes)
    assert not any(c.kind == NB_GLOBAL for c in plan.changes)
    # alone in its NB (a zone), the same agent removes them with its last health check
    alone = replace(labelled, ovn_rows=tuple(
        r for r in labelled.ovn_rows if r.fields["external_ids"].get(own.NODE) in ("node-3", None)
    ))  # fmt: skip
    assert any(c.kind == NB_GLOBAL and c.action == "delete"
               for c in plan_in(NodeScope("node-3"), alone, only_labelled).changes)  # fmt: skip


def test_an_agent_refuses_a_plan_that_reaches_another_node() -> None:
    scope = NodeScope("node-1")
    view = scope.view(world())
    foreign = make_plan(WANT, world(), OPTIONS)  # the central plan: every node
    with pytest.raises(InternalError, match="another node's rows"):
        scope.restrict(foreign, view)


def test_an_agents_view_hands_back_the_same_objects_while_nothing_changed() -> None:
    scope = NodeScope("node-2")
    observed = world()
    first, second = scope.view(observed).observed, scope.view(observed).observed
    for field in ("nodes", "pods", "pod_ports", "ovn_rows", "kube_objects", "used_ids"):
        assert getattr(first, field) is getattr(second, field), field
    assert [p.name for p in first.pods] == ["web-2"]
    assert [p.switch for p in first.pod_ports] == ["node-2"]


def test_agent_options_carry_the_node() -> None:
    options = NodeScope("node-1").options(CompileOptions(instance="prod", steering="router-policy"))
    assert isinstance(options, AgentOptions)
    assert (options.node, options.instance, options.steering) == ("node-1", "prod", "router-policy")


def test_kubernetes_only_plans_vms_and_nads_for_every_node_with_a_subnet() -> None:
    nodes = [(Node(f"node-{i}"), f"10.{i // 250}.{i % 250}.0/24") for i in range(300)]
    nodes.append((Node("joining"), None))  # OVN-Kubernetes has not given it a subnet yet
    observed = kubernetes_observed(nodes, ())
    plan = plan_in(KubernetesScope(), observed)
    assert not plan.ovn_changes()
    vms = [c for c in plan.changes if c.kind == "VirtualMachine"]
    assert len(vms) == 300, "300 nodes: no 255-id limit when no NF is compiled"
    assert not any(c.node == "joining" for c in plan.changes)
    assert plan.meta["scope"] == "kubernetes-only" and "steering" not in plan.meta


def test_kubernetes_only_compiles_the_same_object_while_the_manifests_are() -> None:
    scope = KubernetesScope()
    assert scope.desired(WANT) is scope.desired(WANT)
    assert not scope.desired(WANT).bindings and scope.desired(WANT).vnfs == WANT.vnfs


def test_a_scope_is_one_node_or_the_kubernetes_side() -> None:
    assert isinstance(scope_for(None, False), CentralScope)
    assert isinstance(scope_for("n", False), NodeScope)
    assert isinstance(scope_for(None, True), KubernetesScope)
    with pytest.raises(InternalError):
        scope_for("n", True)


def _change(kind: str, key: str, node: str | None, action: str = "create") -> Change:
    return Change(action, kind, key, "VnfDeployment/fw", node, None, {"x": 1})  # type: ignore[arg-type]


def test_a_central_run_says_which_nodes_agents_hold_five_at_most() -> None:
    held = frozenset(f"node-{i}" for i in range(1, 7))
    plan = Plan((_change("ACL", "a", "node-1"), _change("VirtualMachine", "v", "node-1")))
    kept = CentralScope().restrict(plan, ScopedView(Observed(), held))
    assert [c.key for c in kept.changes] == ["v"]
    assert kept.findings == (Finding(
        "scope", "", None,
        "node agents (run --node) hold the OVN rows of 6 node(s) in this NB (node-1, node-2, "
        "node-3, node-4, node-5, …): this run leaves them alone and plans only their "
        "Kubernetes objects",
    ),)  # fmt: skip
    two = CentralScope().restrict(plan, ScopedView(Observed(), frozenset({"node-2", "node-1"})))
    assert two.findings[0].text.startswith(
        "node agents (run --node) hold the OVN rows of 2 node(s) in this NB (node-1, node-2): "
    )
    # nothing of theirs in the plan: the very plan
    elsewhere = Plan((_change("ACL", "a", "node-9"),))
    assert CentralScope().restrict(elsewhere, ScopedView(Observed(), held)) is elsewhere


def test_a_central_run_keeps_the_probe_addresses_while_agents_check_health() -> None:
    gone = Change("delete", NB_GLOBAL, "options", "", None, {"options": {}}, None)
    plan = Plan((gone, _change("ACL", "a", "node-1")))
    checks = CentralScope().restrict(plan, ScopedView(Observed(), frozenset({"node-1"}), True))
    assert checks.changes == ()
    alone = CentralScope().restrict(plan, ScopedView(Observed(), frozenset({"node-1"}), False))
    assert alone.changes == (gone,)


def test_an_agent_says_what_of_its_node_s_kubernetes_objects_differs_three_at_most() -> None:
    scope = NodeScope("node-1")
    kube = [_change("VirtualMachine", f"vnfs/fw-{i}", "node-1") for i in range(4)]
    view = ScopedView(Observed(nodes=(Node("node-1"),)))
    plan = scope.restrict(Plan((*kube, _change("ACL", "a", "node-1"))), view)
    assert [c.key for c in plan.changes] == ["a"] and plan.node == "node-1"
    assert plan.findings == (Finding(
        "scope", "Node/node-1", "node-1",
        "node node-1's Kubernetes objects are not yet as the manifests say (create "
        "VirtualMachine vnfs/fw-0, create VirtualMachine vnfs/fw-1, create VirtualMachine "
        "vnfs/fw-2 and 1 more): the central owner (run --kubernetes-only) makes them so; an "
        "agent never writes Kubernetes",
    ),)  # fmt: skip
    three = scope.restrict(Plan(tuple(kube[:3])), view).findings[0].text
    assert "vnfs/fw-2): the central owner" in three
    quiet = NodeScope("node-1", report_kubernetes=False)
    assert quiet.restrict(Plan(tuple(kube)), view).findings == ()


def test_an_agent_of_a_node_the_cluster_does_not_list_says_so() -> None:
    plan = NodeScope("node-1").restrict(Plan(), ScopedView(Observed()))
    assert plan.findings == (Finding(
        "scope", "Node/node-1", "node-1",
        "node node-1 is not in the cluster's node list: its agent keeps no rows there",
    ),)  # fmt: skip


def test_an_agent_names_the_row_of_another_node_it_refuses() -> None:
    stray = _change("ACL", "osc.web_fw.node_2.to", "node-2", "delete")
    with pytest.raises(InternalError) as refused:
        NodeScope("node-1").restrict(
            Plan((_change("ACL", "a", None), stray)), ScopedView(Observed())
        )
    assert str(refused.value) == (
        "the agent of node node-1 planned to delete ACL osc.web_fw.node_2.to of node node-2: "
        "refusing to touch another node's rows"
    )


def test_a_kubernetes_only_plan_says_nothing_of_ovn() -> None:
    plan = Plan((_change("VirtualMachine", "v", "node-1"), _change("ACL", "a", "node-1")),
                steering="network-function", nb_schema="7.18.0", instance="i")  # fmt: skip
    out = KubernetesScope().restrict(plan, ScopedView(Observed()))
    assert [c.key for c in out.changes] == ["v"]
    assert (out.steering, out.nb_schema, out.scope, out.instance) == (
        None, None, "kubernetes-only", "i"
    )  # fmt: skip


def test_rows_say_their_node_and_agent_only_as_text() -> None:
    from reconciler.core.planning.slicing import agent_marked, row_node

    row = OvnRow("ACL", "a", {"external_ids": {own.NODE: "node-1", own.AGENT: "node-1"}})
    assert (row_node(row), agent_marked(row)) == ("node-1", "node-1")
    odd = OvnRow("ACL", "a", {"external_ids": {own.NODE: 1, own.AGENT: ["x"]}})
    assert (row_node(odd), agent_marked(odd)) == (None, None)
    bare = OvnRow("NB_Global", "options", {})
    assert (row_node(bare), agent_marked(bare)) == (None, None)


def test_an_agent_counts_the_ids_other_nodes_rows_hold_as_taken() -> None:
    def nf(node: str, ident: object) -> OvnRow:
        return OvnRow("Network_Function", f"osc.fw.{node}", {"id": ident,
                      "external_ids": {own.NODE: node}})  # fmt: skip

    acl = OvnRow("ACL", "x", {"id": 9, "external_ids": {own.NODE: "node-2"}})
    observed = Observed(
        ovn_rows=(nf("node-1", 3), nf("node-2", 5), nf("node-3", "7"), acl),
        used_ids={"Network_Function": (1,), "Network_Function_Group": (2,)},
    )
    view = NodeScope("node-1").view(observed)
    assert [r.key for r in view.observed.ovn_rows] == ["osc.fw.node-1"]
    assert view.observed.used_ids == {"Network_Function": (1, 5), "Network_Function_Group": (2,)}
    assert view.foreign_checks is False, "no other node checks health"
    check = OvnRow("Network_Function_Health_Check", "c", {"external_ids": {own.NODE: "node-2"}})
    nodeless = OvnRow("Port_Group", "pg", {"external_ids": {}})
    mine = NodeScope("node-1").view(replace(observed, ovn_rows=(*observed.ovn_rows, check,
                                                                nodeless)))  # fmt: skip
    assert mine.foreign_checks is True
    assert [r.key for r in mine.observed.ovn_rows] == ["osc.fw.node-1"], "no node: not its row"


def test_an_agent_sees_only_its_node_s_vms_and_nads() -> None:
    from reconciler.core.model.observed import KubeObject

    def vm(node: str) -> KubeObject:
        body = {"metadata": {"labels": {own.NODE_LABEL: node}}}
        return KubeObject("VirtualMachine", "vnfs", f"fw-{node}", body)

    view = NodeScope("node-1").view(replace(world(), kube_objects=(vm("node-1"), vm("node-2"))))
    assert [o.name for o in view.observed.kube_objects] == ["fw-node-1"]
    assert [n.name for n in view.observed.nodes] == ["node-1"]


def test_an_agent_compiles_as_its_own_node_s_agent() -> None:
    scope = NodeScope("node-1")
    own_options = AgentOptions(node="node-1")
    assert scope.options(own_options) is own_options
    other = scope.options(AgentOptions(node="node-2", instance="prod"))
    assert (other.node, other.instance) == ("node-1", "prod")  # type: ignore[attr-defined]


def test_an_agent_s_rows_are_marked_among_the_potential_ones_too() -> None:
    from reconciler.core.compiling.compile import compile_full
    from reconciler.core.planning.slicing import mark_agent_rows

    compiled = compile_full(WANT, world(), OPTIONS)
    marked = mark_agent_rows(compiled, "node-2")
    potential = [r for r in marked.potential.values() if r.is_ovn and r.node == "node-2"]
    assert potential and all(r.fields["external_ids"][own.AGENT] == "node-2" for r in potential)
    others = [r for r in marked.potential.values() if r.node != "node-2"]
    assert others and not any(own.AGENT in (r.fields.get("external_ids") or {}) for r in others)


def test_the_flags_name_the_scope() -> None:
    node = scope_for("node-7", False)
    assert isinstance(node, NodeScope) and node.node == "node-7"
    with pytest.raises(InternalError) as refused:
        scope_for("n", True)
    assert str(refused.value) == "a scope is one node's or the Kubernetes side, never both"


def test_a_central_run_knows_whether_agents_check_health_in_its_nb() -> None:
    def marked(table: str) -> OvnRow:
        return OvnRow(table, "k", {"external_ids": {own.NODE: "node-1", own.AGENT: "node-1"}})

    acl = CentralScope().view(Observed(ovn_rows=(marked("ACL"),)))
    assert (acl.held, acl.foreign_checks) == ({"node-1"}, False)
    both = (marked("Network_Function_Health_Check"), marked("ACL"))
    assert CentralScope().view(Observed(ovn_rows=both)).foreign_checks is True


def test_five_held_nodes_are_named_all() -> None:
    held = frozenset(f"node-{i}" for i in range(1, 6))
    plan = Plan((_change("ACL", "a", "node-1"),))
    (note,) = CentralScope().restrict(plan, ScopedView(Observed(), held)).findings
    assert "(node-1, node-2, node-3, node-4, node-5): this run" in note.text
