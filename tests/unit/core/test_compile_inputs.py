"""What compile reads of the cluster: members per group and node (only the groups asked for),
the pod addresses of each node, our live Port_Groups and their pairs, a second instance per node
only where the backend can fail over, and what a backend may see."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.core.compiling.compile import (
    CompileOptions,
    backend_view,
    choose_steering,
    compile_full,
    compile_target,
    fill_pods,
    live_pairs,
    live_port_groups,
    members_by_group_and_node,
    pods_by_node,
)
from reconciler.core.model.facts import Finding
from reconciler.core.model.observed import OvnRow, PodPort
from reconciler.core.model.target import Resource
from reconciler.core.steering import select_backend
from reconciler.errors import InternalError
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
    ("shop", "db-1", "node-1", {"app": "db"}),
]
WANT = desired(
    sg("web", "app=web"),
    sg("db", "app=db"),
    sg("idle", "app=none"),
    vnf("fw"),
    binding("web-fw", "web", "fw", 10),
    binding("db-fw", "db", "fw", 20),
    binding("idle-fw", "idle", "fw", 30),
)


def names(members: dict[str, dict[str, list[PodPort]]]) -> dict[str, dict[str, list[str]]]:
    return {g: {n: [p.name for p in ps] for n, ps in nodes.items()} for g, nodes in members.items()}


def test_members_per_bound_group_and_node() -> None:
    obs = cluster(PODS)
    assert names(members_by_group_and_node(WANT, obs.pods, obs.pod_ports)) == {
        "db": {"node-1": ["shop_db-1"]},
        "idle": {},
        "web": {"node-1": ["shop_web-1"], "node-2": ["shop_web-2"]},
    }
    assert names(members_by_group_and_node(WANT, obs.pods, obs.pod_ports, groups={"db"})) == {
        "db": {"node-1": ["shop_db-1"]}
    }
    unbound = desired(sg("web", "app=web"), vnf("fw"))
    assert members_by_group_and_node(unbound, obs.pods, obs.pod_ports) == {}
    # a binding naming a group that is not declared has no members (and no error here)
    dangling = desired(vnf("fw"), binding("x", "nope", "fw", 1))
    assert members_by_group_and_node(dangling, obs.pods, obs.pod_ports) == {}


def test_the_node_of_a_member_is_the_switch_of_its_port() -> None:
    obs = cluster(PODS)
    moved = tuple(replace(p, switch="node-2") if p.pod == "web-1" else p for p in obs.pod_ports)
    got = names(members_by_group_and_node(WANT, obs.pods, moved))
    assert got["web"] == {"node-2": ["shop_web-1", "shop_web-2"]}


def test_pod_addresses_per_node_without_prefix_length() -> None:
    obs = cluster(PODS)
    ports = (
        *obs.pod_ports,
        PodPort("ops_x", "node-3", "ops", "x", None, None, ("10.244.3.9/24", "fd00::9/64")),
    )
    members = members_by_group_and_node(WANT, obs.pods, ports)
    by_node = pods_by_node(members, ports)
    assert sorted(by_node) == ["node-1", "node-2", "node-3"]
    assert by_node["node-1"].addresses == frozenset({"10.244.1.5", "10.244.1.7"})
    assert by_node["node-3"].addresses == frozenset({"10.244.3.9", "fd00::9"})
    assert by_node["node-3"].members == {}
    assert [p.name for p in by_node["node-1"].members["web"]] == ["shop_web-1"]


def pg(name: str, ids: dict[str, str]) -> OvnRow:
    return OvnRow("Port_Group", name, {"name": name, "ports": [], "external_ids": ids})


def test_our_live_port_groups_and_their_pairs() -> None:
    rows = (
        pg("osc.web.node_1", {"osc.io/resource": "SecurityGroup/web", "osc.io/node": "node-1"}),
        pg("osc._vnf_ports.node_1", {"osc.io/resource": "VnfDeployment/fw", "osc.io/node": "n"}),
        pg("osc.x", {"osc.io/resource": "SecurityGroup/x"}),  # no node: no pair
        OvnRow(
            "ACL",
            "a",
            {"external_ids": {"osc.io/resource": "SecurityGroup/web", "osc.io/node": "node-1"}},
        ),
        OvnRow("Port_Group", "bare", {"name": "bare"}),
    )
    obs = replace(cluster(PODS), ovn_rows=rows)
    assert list(live_pairs(obs)) == [("web", "node-1")]
    assert sorted(live_port_groups(obs)) == [
        "bare",
        "osc._vnf_ports.node_1",
        "osc.web.node_1",
        "osc.x",
    ]


def test_two_instances_per_node_only_where_the_backend_fails_over() -> None:
    two = desired(sg("web", "app=web"), vnf("fw", instancesPerNode=2),
                  binding("web-fw", "web", "fw", 10))  # fmt: skip
    nf = compile_full(two, cluster(PODS), CompileOptions(steering="network-function"))
    assert [i.second is not None for i in nf.instances.values()] == [True, True]
    vms = sorted(r.key for r in nf.target if r.kind == "VirtualMachine")
    assert vms == [
        "security/fw-node-1",
        "security/fw-node-1-b",
        "security/fw-node-2",
        "security/fw-node-2-b",
    ]
    rp = compile_target(two, cluster(PODS, nf=False), CompileOptions(steering="router-policy"))
    assert sorted(r.key for r in rp if r.kind == "VirtualMachine") == [
        "security/fw-node-1",
        "security/fw-node-2",
    ]
    assert [f for f in rp.findings if f.code == "backend"] == [
        Finding(
            "backend",
            "VnfDeployment/fw",
            None,
            "VnfDeployment fw has instancesPerNode: 2, but --steering router-policy cannot fail "
            "over between two instances of a node: one instance per node is deployed",
        )
    ]


def test_the_steering_of_a_compile() -> None:
    assert choose_steering(WANT, cluster(PODS), CompileOptions()) == "network-function"
    rp = CompileOptions(steering="router-policy")
    assert choose_steering(WANT, cluster(PODS), rp) == "router-policy"
    unbound = desired(sg("web", "app=web"), vnf("fw"))
    assert choose_steering(unbound, cluster(PODS, nf=False), CompileOptions()) == "router-policy"


def test_a_backend_sees_only_what_it_declares() -> None:
    obs = cluster(PODS)
    backend = select_backend("router-policy", obs.capabilities, has_bindings=True)
    view = backend_view(obs, backend)
    assert view.pods == () and view.pod_ports == ()
    assert {r.table for r in view.ovn_rows} <= set(backend.live_tables)

    class Greedy:
        name = "greedy"
        observed_fields = frozenset({"pods", "switches"})
        live_tables = frozenset()

    with pytest.raises(InternalError) as caught:
        backend_view(obs, Greedy())  # type: ignore[arg-type]
    assert str(caught.value) == (
        "steering backend greedy declares ['pods'] in observed_fields: pods reach a backend as "
        "NodePods, owned rows through live_tables"
    )


def test_a_backend_row_that_depends_on_pods_but_has_no_node_is_an_internal_error() -> None:
    """Which pods fill a row is its node's: a backend emitting a pod-dependent row without one
    is a bug of ours, said as such (not a wrong row)."""
    backend = compile_full(WANT, cluster(PODS)).backend
    row = Resource("Port_Group", "pg_web", "SecurityGroup/web", None, {"name": "pg_web"})
    with pytest.raises(InternalError) as raised:
        fill_pods(backend, [row], {})
    assert str(raised.value) == (
        f"steering backend {backend.name}: Port_Group pg_web depends on pods but belongs to no node"
    )


def test_one_instance_per_node_is_no_news_for_a_backend_without_failover() -> None:
    rp = compile_target(WANT, cluster(PODS, nf=False), CompileOptions(steering="router-policy"))
    assert not [f for f in rp.findings if f.code == "backend"]


def test_a_member_whose_port_has_no_address_yet_is_a_member_all_the_same() -> None:
    """OVN-Kubernetes may not have written the LSP's addresses yet: the pod is in its group's
    Port_Group (its LSP exists), and nothing of it reaches the node's pod addresses."""
    obs = cluster(PODS)
    web_1, web_2, db_1 = obs.pod_ports  # web-2 is node-2's only pod
    obs = replace(obs, pod_ports=(web_1, replace(web_2, mac=None, ips=()), db_1))
    target = compile_target(WANT, obs)
    ports = {r.key: r.fields["ports"] for r in target if r.kind == "Port_Group"}
    assert ports["osc.web.node_2"] == ["shop_web-2"]
