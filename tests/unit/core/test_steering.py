"""The steering-backend interface and registry: compile and the incremental planner know a backend
only through ``SteeringBackend``, so a new backend is one module plus its line in ``BACKENDS``.

``AddressList`` below is such a backend, written here and registered for the test only. Its
pod-dependent rows are not Port_Groups but router policies that list the member pods' addresses,
which neither shipped backend has: the incremental planner still plans exactly like a full
compile for it, because it asks the backend what depends on pods instead of knowing.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import (
    COMPILE_READS,
    CompileError,
    CompileOptions,
    backend_view,
    choose_steering,
    compile_full,
    compile_target,
)
from reconciler.core.model import naming
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import (
    REPORT_ONLY_FIELDS,
    Observed,
    OvnCapabilities,
    OvnRow,
    Switch,
)
from reconciler.core.model.target import Resource
from reconciler.core.planning.full import make_plan
from reconciler.core.planning.incremental import IncrementalPlanner, full_compile_fields
from reconciler.core.steering import (
    BACKENDS,
    DEFAULT_STEERING,
    STEERING_CHOICES,
    SteeringBackend,
    backend_for,
    default_backend,
    select_backend,
)
from reconciler.core.steering.base import (
    Instances,
    NodePods,
    OwnedRows,
    PortConfig,
    Side,
    Steered,
    TargetBuilder,
    VnfInstance,
    WithoutHealthChecks,
    binding_nodes,
    bindings_by_group,
    vnfs_of_row,
)
from reconciler.errors import InternalError
from tests.support.builders import desired
from tests.support.simulate import (
    DESIRED,
    apply_to,
    check_incremental_equals_full,
    event_st,
    live_of,
    scenario_observed,
    step,
    with_live,
)

NO_NF = OvnCapabilities("7.0.0", network_function=False)
NF = OvnCapabilities("7.18.0", network_function=True)


class AddressList(WithoutHealthChecks):
    """A third backend, for these tests: per binding and node, one reroute policy whose match
    lists the addresses of the group's member pods on that node (no address sets)."""

    name = "address-list"
    observed_fields = frozenset({"routers"})
    live_tables: frozenset[str] = frozenset()
    active_standby = False
    routed_only = True
    steering_tables = ("Logical_Router_Policy",)

    def steered_by(self, table: str, fields: Mapping[str, Any], rows: OwnedRows) -> None:
        return None  # its policies belong to SecurityGroups, not to Bindings: a sketch

    def available(self, capabilities: OvnCapabilities) -> bool:
        return True

    def unavailable_reason(self, capabilities: OvnCapabilities) -> str:
        return "always available"

    def vnf_address(
        self, vnf: str, node: str, subnet: str | None, live: str | None, taken: frozenset[str]
    ) -> str | None:
        if not subnet:
            return None
        return str(ipaddress.ip_network(subnet).broadcast_address - 1)

    def vnf_port(self, inst: VnfInstance, side: Side) -> PortConfig:
        return PortConfig([f"{inst.mac_in} {inst.ip}"] if side == "in" and inst.ip else [], {})

    def emit_bindings(
        self, desired: Desired, observed: Observed, instances: Instances,
        options: CompileOptions, out: TargetBuilder,
    ) -> None:  # fmt: skip
        if options.cluster_router not in observed.routers:
            out.warn("backend", "address-list: no cluster router")
            return
        for group, bindings in bindings_by_group(desired).items():
            for b in bindings:
                for inst in binding_nodes(b, instances):
                    key = naming.ovn_ident(options.instance, b.metadata.name, inst.node, "list")
                    fields = {
                        "router": options.cluster_router,
                        "priority": 3000 - b.spec.order,
                        "match": "",  # filled by pod_fields
                        "action": "reroute",
                        "nexthops": [inst.ip] if inst.ip else [],
                    }
                    out.ovn(
                        "Logical_Router_Policy", key, f"SecurityGroup/{group}", inst.node, fields
                    )

    def depends_on_pods(self, resource: Resource) -> bool:
        return resource.kind == "Logical_Router_Policy"

    def pod_fields(self, resource: Resource, pods: NodePods) -> dict[str, Any]:
        group = resource.origin.partition("/")[2]
        ips = sorted(ip.split("/")[0] for p in pods.members.get(group, ()) for ip in p.ips)
        return {"match": f"ip4.dst == {{{', '.join(ips)}}}" if ips else "0"}

    def check_pods(self, inst: VnfInstance, pods: NodePods) -> None:
        if inst.ip in pods.addresses:
            raise CompileError(f"address-list: a pod on {inst.node} holds {inst.ip}")


@contextmanager
def registered(backend: SteeringBackend) -> Iterator[SteeringBackend]:
    """``backend`` in the registry for the duration (its one registration line, in a test)."""
    BACKENDS[backend.name] = backend
    try:
        yield backend
    finally:
        del BACKENDS[backend.name]


# --- registry ----------------------------------------------------------------------------------


def test_the_registry_names_each_backend_once_and_the_choices_come_from_it() -> None:
    assert STEERING_CHOICES == tuple(BACKENDS) == ("network-function", "router-policy")
    assert DEFAULT_STEERING == "network-function"
    for name, backend in BACKENDS.items():
        assert backend.name == name
        assert backend_for(name) is backend
    with pytest.raises(CompileError) as refused:
        backend_for("nope")
    assert str(refused.value) == (
        "unknown steering backend 'nope': choose one of network-function, router-policy"
    )


@pytest.mark.parametrize(
    ("requested", "capabilities", "has_bindings", "expected"),
    [
        (None, NF, True, "network-function"),
        (None, NO_NF, False, "router-policy"),  # nothing to steer: nothing to refuse
        ("network-function", NO_NF, False, "router-policy"),
        ("router-policy", NF, True, "router-policy"),
        ("router-policy", NO_NF, True, "router-policy"),
    ],
)
def test_select_backend(
    requested: str | None, capabilities: OvnCapabilities, has_bindings: bool, expected: str
) -> None:
    assert select_backend(requested, capabilities, has_bindings=has_bindings).name == expected


@pytest.mark.parametrize("requested", [None, "network-function"])
def test_bindings_without_network_function_tables_are_refused(requested: str | None) -> None:
    with pytest.raises(CompileError, match="pass --steering router-policy"):
        select_backend(requested, NO_NF, has_bindings=True)
    with pytest.raises(
        CompileError, match=re.escape("schema 7.0.0 has no Network_Function tables")
    ):
        compile_target(DESIRED, scenario_observed(nf=False), CompileOptions(steering=requested))


def test_default_backend_is_what_an_unset_steering_gives_without_bindings() -> None:
    assert default_backend(NF).name == "network-function"
    assert default_backend(NO_NF).name == "router-policy"
    assert (
        choose_steering(desired(), scenario_observed(nf=False), CompileOptions()) == "router-policy"
    )


# --- what a backend may see, and what the planner derives from it ------------------------------


def test_every_observed_field_is_read_by_compile_a_backend_or_the_diff() -> None:
    """So that a new ``Observed`` field needs a decision: whoever reads it declares it, and the
    incremental planner then compiles everything when it changes."""
    declared = set(COMPILE_READS).union(*(b.observed_fields for b in BACKENDS.values()))
    declared |= {"ovn_rows", "kube_objects"}  # the diff's live state
    assert not declared & REPORT_ONLY_FIELDS  # read for reports only: never re-plans
    assert {f.name for f in dataclasses.fields(Observed)} == declared | REPORT_ONLY_FIELDS


def test_full_compile_fields_follow_the_backend() -> None:
    network_function, router_policy = BACKENDS["network-function"], BACKENDS["router-policy"]
    assert "used_ids" in full_compile_fields(network_function)
    assert "routers" not in full_compile_fields(network_function)
    assert "routers" in full_compile_fields(router_policy)
    assert "used_ids" not in full_compile_fields(router_policy)
    for backend in BACKENDS.values():
        fields = full_compile_fields(backend)
        assert {"nodes", "switches", "capabilities", "kube_objects"} <= set(fields)
        assert not {"pods", "pod_ports", "ovn_rows"} & set(fields)  # followed one by one


def test_a_backend_sees_only_what_it_declares() -> None:
    rows = (
        OvnRow("Network_Function", "nf", {"id": 1}),
        OvnRow("Port_Group", "pg", {"ports": []}),
    )
    observed = dataclasses.replace(
        scenario_observed(nf=True), ovn_rows=rows, used_ids={"ACL": (1,)}
    )
    view = backend_view(observed, BACKENDS["network-function"])
    assert view.pods == () and view.pod_ports == ()
    # the nodes: their k8s.ovn.org/node-subnets give the management-port address it leaves out
    assert view.nodes == observed.nodes and view.nodes
    assert view.switches == observed.switches and view.used_ids == observed.used_ids
    assert view.ovn_rows == rows[:1]  # its live_tables only
    view = backend_view(observed, BACKENDS["router-policy"])
    assert view.routers == observed.routers and view.switches == observed.switches
    assert view.nodes == ()
    assert view.ovn_rows == () and view.used_ids == {}


def test_a_backend_cannot_declare_pods_as_an_observed_field() -> None:
    class Peeking(AddressList):
        name = "peeking"
        observed_fields = frozenset({"routers", "pods"})

    with pytest.raises(InternalError, match="pods reach a backend as NodePods"):
        backend_view(scenario_observed(), Peeking())


def test_a_pod_dependent_row_must_belong_to_a_node() -> None:
    class Nodeless(AddressList):
        name = "nodeless"

        def emit_bindings(self, *args: Any) -> None:
            out: TargetBuilder = args[-1]
            out.ovn("Logical_Router_Policy", "k", "SecurityGroup/web", None, {"match": ""})

    with registered(Nodeless()), pytest.raises(InternalError, match="belongs to no node"):
        compile_target(DESIRED, scenario_observed(), CompileOptions(steering="nodeless"))


# --- a third backend ---------------------------------------------------------------------------


def test_a_registered_backend_compiles_through_the_interface() -> None:
    with registered(AddressList()):
        compiled = compile_full(
            DESIRED, scenario_observed(), CompileOptions(steering="address-list")
        )
    assert compiled.backend.name == "address-list"
    policies = {
        r.key: r.fields["match"] for r in compiled.target if r.kind == "Logical_Router_Policy"
    }
    assert policies == {
        "osc.web_fw.node_1.list": "ip4.dst == {10.244.1.5}",  # shop/a
        "osc.web_fw.node_2.list": "0",
        "osc.web_fw.node_3.list": "0",
        "osc.web_ips.node_1.list": "ip4.dst == {10.244.1.5}",
        "osc.db_fw.node_1.list": "0",
        "osc.db_fw.node_2.list": "ip4.dst == {10.244.2.6}",  # shop/b
        "osc.db_fw.node_3.list": "ip4.dst == {10.244.3.7}",  # ops/c
    }
    assert sorted(compiled.pod_dependent) == ["node-1", "node-2", "node-3"]
    lsp = compiled.target.resources[("Logical_Switch_Port", naming.vnf_port("fw", "node-1", "in"))]
    assert lsp.fields["addresses"] == [f"{naming.mac_for('fw', 'node-1', 'in')} 10.244.1.254"]
    assert not [r for r in compiled.target if r.kind in ("Port_Group", "ACL")]


def test_a_pod_event_re_plans_only_the_third_backends_row_on_that_node() -> None:
    options = CompileOptions(steering="address-list")
    with registered(AddressList()):
        planner = IncrementalPlanner()
        observed = scenario_observed()
        observed = with_live(
            observed, apply_to(live_of(observed), planner.plan(DESIRED, observed, options))
        )
        assert planner.plan(DESIRED, observed, options).empty
        labelled = step(observed, ("label", 3, "app", "web"), None)  # ops/d on node-1 joins web
        the_plan = planner.plan(DESIRED, labelled, options)
        assert planner.last_mode == "incremental" and planner.last_dirty_nodes == {"node-1"}
        assert [(c.action, c.kind, c.key) for c in the_plan.changes] == [
            ("update", "Logical_Router_Policy", "osc.web_fw.node_1.list"),
            ("update", "Logical_Router_Policy", "osc.web_ips.node_1.list"),
        ]
        assert the_plan.changes == make_plan(DESIRED, labelled, options).changes
        stolen = step(labelled, ("steal-vnf-ip", 0), None)  # ops/c on node-3
        with pytest.raises(CompileError, match=re.escape("a pod on node-3 holds 10.244.3.254")):
            planner.plan(DESIRED, stolen, options)


@settings(
    max_examples=int(os.environ.get("OSC_HYPOTHESIS_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(events=st.lists(event_st, min_size=1, max_size=14))
def test_incremental_plan_equals_full_plan_for_a_third_backend(
    events: list[tuple[Any, ...]],
) -> None:
    with registered(AddressList()):
        options = CompileOptions(steering="address-list")
        check_incremental_equals_full(DESIRED, scenario_observed(), options, events)


def test_switch_subnets_reach_the_backend_through_the_vnf_instance() -> None:
    observed = dataclasses.replace(scenario_observed(), switches=(Switch("node-1", None),))
    with registered(AddressList()):
        compiled = compile_full(DESIRED, observed, CompileOptions(steering="address-list"))
    assert [(i.node, i.ip, i.subnet) for i in compiled.instances.values()] == [
        ("node-1", None, None),
        ("node-1", None, None),
    ]


def test_the_network_function_backend_reads_what_its_acls_steer_and_where_to() -> None:
    """What ``protection`` and ``explain`` ask of the backend's rows: a steering ACL's VNFs,
    Port_Groups, direction and failure policy, and the function groups, functions and probes
    it leads to; a twin ACL (no function group) or another table steers nothing, and a row
    that names a group no longer there leads to no VNF and no function."""
    target = compile_target(DESIRED, scenario_observed(nf=True),
                            CompileOptions(steering="network-function"))  # fmt: skip
    rows: dict[str, dict[str, Mapping[str, Any]]] = {}
    for resource in target.resources.values():
        rows.setdefault(resource.kind, {})[resource.key] = resource.fields
    nf, owned = backend_for("network-function"), OwnedRows(rows)
    acls = rows["ACL"]
    to_web = acls["osc.web_fw.node_1.to"]
    assert nf.steered_by("ACL", to_web, owned) == Steered(
        ("fw",), ["osc.web.node_1", "osc.web.node_1"], "exit", "fail-close"
    )
    assert nf.steered_by("ACL", acls["osc.db_fw.node_2.from"], owned) == Steered(
        ("fw",), ["osc.db.node_2", "osc.db.node_2"], "entry", "fail-close"
    )
    assert nf.steered_by("ACL", acls["osc.web_fw.node_1.to.crossed"], owned) is None
    assert nf.steered_by("Logical_Router_Policy", to_web, owned) is None
    stale = {"network_function_group": "gone", "direction": "to-lport", "match": "ip4"}
    assert nf.steered_by("ACL", stale, owned) == Steered((), [""], "exit", None)
    everything = {(table, key): f for table, of in rows.items() for key, f in of.items()}
    path = {("Network_Function_Group", "osc.fw.node_1.fail_close"),
            ("Network_Function", "osc.fw.node_1"),
            ("Network_Function_Health_Check", "osc.fw.node_1")}  # fmt: skip
    assert nf.path_rows(everything, [("ACL", "osc.web_fw.node_1.to"), ("ACL", "gone")]) == path
    # a group named but gone: nothing behind it
    assert nf.path_rows({**everything, ("ACL", "stale"): stale}, [("ACL", "stale")]) == {
        ("Network_Function_Group", "gone")
    }


def test_an_ovn_without_network_function_tables_is_named_with_what_to_do() -> None:
    nf = backend_for("network-function")
    assert nf.unavailable_reason(NO_NF) == (
        "the OVN Northbound schema 7.0.0 has no Network_Function tables (Network Function "
        "insertion needs OVN >= 26.03, NB schema >= 7.18); upgrade OVN, or pass --steering "
        "router-policy to steer routed (inter-node) traffic only"
    )
    unread = OvnCapabilities("", network_function=False)
    assert "the OVN Northbound schema unknown has no" in nf.unavailable_reason(unread)


def test_owned_rows_of_a_table_without_rows_and_rows_of_no_vnf() -> None:
    """A backend follows references through ``OwnedRows``: a table with no owned row answers
    an empty row; only a VnfDeployment's rows (or a chain's) are of VNFs."""
    assert OwnedRows({}).get("Network_Function", "osc.fw.node_1") == {}
    binding_row = {"external_ids": {"osc.io/resource": "Binding/web-fw"}}
    assert vnfs_of_row(binding_row) == ()
    assert vnfs_of_row({"external_ids": {"osc.io/resource": "VnfDeployment/fw"}}) == ("fw",)
    assert vnfs_of_row({"external_ids": {"osc.io/chain": "fw,ids"}}) == ("fw", "ids")
