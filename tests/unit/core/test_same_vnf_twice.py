"""Network-function steering: the ACL that keeps a packet from crossing one VNF instance twice on
one switch (``osc.<binding>.<node>.to.crossed``), and the traffic arithmetic behind its match.

A packet steered from-lport into a function leaves it by the function's out port; a to-lport ACL
of the destination through the same function would send it in again (OVN drops it there). So
each to-lport steering ACL through a VNF that some binding enters from-lport has a twin one
priority above it, same tier, on the same Port_Group: its match ``&& inport == "<out port>"``,
``allow-related``, no function group. The packets are in
``tests/datapath/test_same_vnf_same_switch.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.desired import Traffic
from reconciler.core.model.naming import NameError_
from reconciler.core.model.target import Target
from reconciler.core.steering import common
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import NODES, Event, check_incremental_equals_full

PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "api-1", "node-1", {"app": "api"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
]
NODE_LABELS = {"node-1": {"zone": "a"}}
NF = CompileOptions(steering="network-function")


def _target(*manifests: Any) -> Target:
    """Compiled on node-1 (labelled ``zone=a``) and node-2."""
    return compile_target(desired(*manifests), cluster(PODS, node_labels=NODE_LABELS), NF)


def _crossed(target: Target) -> dict[str, dict[str, Any]]:
    return {r.key: r.fields for r in target if r.kind == "ACL" and r.key.endswith(".crossed")}


def _filters(*specs: dict[str, Any]) -> list[Traffic]:
    return [Traffic.model_validate(s) for s in specs]


def test_both_gives_each_node_a_twin_one_priority_above_the_to_lport_acl() -> None:
    target = _target(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10,
                                                             redirection="both"))  # fmt: skip
    acls = {r.key: r for r in target if r.kind == "ACL"}
    steering = acls["osc.web_fw.node_1.to"].fields
    twin = acls["osc.web_fw.node_1.to.crossed"]
    assert twin.fields == {
        "port_group": "osc.web.node_1",
        "name": "web-fw",
        "direction": "to-lport",
        "priority": steering["priority"] + 1,
        "tier": steering["tier"],
        "match": 'outport == @osc.web.node_1 && inport == "nf_fw_node-1_out" && ip',
        "action": "allow-related",
        "network_function_group": None,
        "external_ids": {
            "osc.io/owner": "osc-gitops",
            "osc.io/resource": "Binding/web-fw",
            "osc.io/key": "osc.web_fw.node_1.to.crossed",
            "osc.io/node": "node-1",
        },
    }
    assert (twin.origin, twin.node) == ("Binding/web-fw", "node-1")
    assert sorted(_crossed(target)) == [
        "osc.web_fw.node_1.to.crossed",
        "osc.web_fw.node_2.to.crossed",
    ]
    assert _crossed(target)["osc.web_fw.node_2.to.crossed"]["match"] == (
        'outport == @osc.web.node_2 && inport == "nf_fw_node-2_out" && ip'
    )
    assert not target.warnings


def test_a_twin_names_only_its_own_port_group() -> None:
    """OVN installs a port group's ACLs only where it has ports, and ovn-controller refuses a
    match naming a port group without ports on the switch: so a twin lives on the Port_Group
    its match names, and never names another (one shared row ``outport == {@a, @b}`` would
    fail whole where either group has no pod)."""
    target = _target(
        sg("web", "app=web"),
        sg("api", "app=api"),
        vnf("fw"),
        binding("web-fw", "web", "fw", 10, redirection="both"),
        binding("api-fw", "api", "fw", 10),
    )
    for fields in _crossed(target).values():
        assert re.findall(r"@([A-Za-z0-9_.]+)", fields["match"]) == [fields["port_group"]]
    # web on both nodes, api on node-1: no member of api on node-2, no rows of it there
    assert sorted(_crossed(target)) == [
        "osc.api_fw.node_1.to.crossed",
        "osc.web_fw.node_1.to.crossed",
        "osc.web_fw.node_2.to.crossed",
    ]


def test_the_twin_keeps_the_bindings_tier_and_traffic() -> None:
    target = _target(
        sg("web", "app=web"),
        vnf("fw"),
        binding("web-fw", "web", "fw", 0, redirection="both", precedence="before-network-policy",
                traffic=[{"protocol": "tcp", "ports": [443]}, {"protocol": "icmp"}]),
    )  # fmt: skip
    twin = _crossed(target)["osc.web_fw.node_1.to.crossed"]
    assert (twin["tier"], twin["priority"]) == (1, 1100)  # order 0: 1099 + 1
    assert twin["match"] == (
        'outport == @osc.web.node_1 && inport == "nf_fw_node-1_out" && '
        "((tcp && tcp.dst == 443) || (icmp4 || icmp6))"
    )


@pytest.mark.parametrize(
    ("web", "api", "twins"),
    [
        ("exit-lport", None, []),  # nothing enters fw from-lport: no packet leaves by its out port
        ("entry-lport", None, []),  # no to-lport ACL to twin
        ("entry-lport", "exit-lport", ["api_fw"]),  # web's packets leave fw towards api's pods
        ("both", "exit-lport", ["api_fw", "web_fw"]),
        ("exit-lport", "entry-lport", ["web_fw"]),
        ("exit-lport", "exit-lport", []),
        ("entry-lport", "entry-lport", []),
    ],
)
def test_twins_exist_only_where_some_binding_enters_the_same_vnf_from_lport(
    web: str, api: str | None, twins: list[str]
) -> None:
    manifests: list[Any] = [sg("web", "app=web"), sg("api", "app=api"), vnf("fw")]
    manifests.append(binding("web-fw", "web", "fw", 10, redirection=web))
    if api is not None:
        manifests.append(binding("api-fw", "api", "fw", 20, redirection=api))
    found = sorted({k.split(".")[1] for k in _crossed(_target(*manifests))})
    assert found == twins


def test_another_vnf_entered_from_lport_needs_no_twin() -> None:
    """Chaining two different VNFs on one switch already works: a packet from ``ips`` is sent
    into ``fw`` once."""
    target = _target(
        sg("web", "app=web"),
        sg("api", "app=api"),
        vnf("fw"),
        vnf("ips"),
        binding("web-ips", "web", "ips", 10, redirection="entry-lport"),
        binding("api-fw", "api", "fw", 20, redirection="exit-lport"),
    )
    assert _crossed(target) == {}


def test_an_earlier_chained_binding_of_the_group_keeps_its_share() -> None:
    """``web-ids`` (order 9, tcp/80 through ``ids``) shares the twin's priority: the twin leaves
    tcp/80 out, so a packet that crossed ``fw`` still goes on through ``ids``. Where ``ids`` has
    no instance (node-2) it has no row, and the twin takes everything."""
    target = _target(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ids", nodeSelector={"zone": "a"}),
        binding("web-ids", "web", "ids", 9, traffic={"protocol": "tcp", "ports": [80]}),
        binding("web-fw", "web", "fw", 10, redirection="both"),
    )
    crossed = _crossed(target)
    assert crossed["osc.web_fw.node_1.to.crossed"]["match"] == (
        'outport == @osc.web.node_1 && inport == "nf_fw_node-1_out" && ((icmp4 || icmp6) || '
        "(tcp && ((tcp.dst >= 1 && tcp.dst <= 79) || (tcp.dst >= 81 && tcp.dst <= 65535))) "
        "|| udp)"
    )
    assert crossed["osc.web_fw.node_2.to.crossed"]["match"].endswith('"nf_fw_node-2_out" && ip')
    assert not [w for w in target.warnings if "one order apart" in w]


def test_an_earlier_binding_two_orders_away_needs_nothing_left_out() -> None:
    target = _target(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ids"),
        binding("web-ids", "web", "ids", 8, traffic={"protocol": "tcp", "ports": [80]}),
        binding("web-fw", "web", "fw", 10, redirection="both"),
    )
    assert _crossed(target)["osc.web_fw.node_1.to.crossed"]["match"].endswith(" && ip")


def test_no_twin_when_the_earlier_chained_binding_takes_everything() -> None:
    target = _target(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ids"),
        binding("web-ids", "web", "ids", 9),
        binding("web-fw", "web", "fw", 10, redirection="both"),
    )
    assert _crossed(target) == {}


def test_an_adjacent_binding_of_another_group_is_warned_about() -> None:
    """Rows cannot tell which pods are in both groups: the plan says so, and how to avoid it."""
    target = _target(
        sg("web", "app=web"),
        sg("api", "app=api"),
        vnf("fw"),
        vnf("ids"),
        binding("api-ids", "api", "ids", 9),
        binding("web-fw", "web", "fw", 10, redirection="both"),
    )
    assert _crossed(target)["osc.web_fw.node_1.to.crossed"]["match"].endswith(" && ip")
    [warning] = [w for w in target.warnings if "one order apart" in w]
    assert warning == (
        "Binding api-ids (order 9, VNF ids) and Binding web-fw (order 10, VNF fw) are one order "
        "apart: the ACL that lets traffic which already crossed fw on a node reach group web "
        "without crossing it again has the priority of api-ids's, so for a pod in groups api and "
        "web OVN may or may not send such traffic through ids; leave a gap of at least 2 between "
        "their orders"
    )


def test_the_incremental_planner_plans_the_twins_like_a_full_compile() -> None:
    """The twins depend on manifests and VNF instances, never on pods: pod events re-plan only
    Port_Groups, and a twin edited or deleted by hand is repaired as a full compile would."""
    want = desired(
        sg("web", "app=web"),
        sg("db", "app=db"),
        vnf("fw"),
        binding("web-fw", "web", "fw", 10, redirection="both"),
        binding("db-fw", "db", "fw", 20),
    )
    pods = [("shop", "a", "node-1", {"app": "web"}), ("shop", "b", "node-1", {"app": "db"})]
    events: list[Event] = [
        ("apply",),
        ("label", 0, "app", "db"),
        ("add", 2, "node-2", True),
        ("apply",),
        *[("drift", i, "delete") for i in range(0, 40, 3)],
        ("apply",),
        ("label", 1, "app", None),
    ]
    planner = check_incremental_equals_full(want, cluster(pods, nodes=NODES), NF, events)
    assert planner.last_mode == "incremental"


@pytest.mark.parametrize(
    ("filters", "taken", "left"),
    [
        ([{}], [{"protocol": "tcp", "ports": [80]}],
         "((icmp4 || icmp6) || (tcp && ((tcp.dst >= 1 && tcp.dst <= 79) || "
         "(tcp.dst >= 81 && tcp.dst <= 65535))) || udp)"),
        ([{"protocol": "tcp", "ports": [{"start": 70, "end": 90}, 443]}],
         [{"protocol": "tcp", "ports": [80, 443]}],
         "tcp && ((tcp.dst >= 70 && tcp.dst <= 79) || (tcp.dst >= 81 && tcp.dst <= 90))"),
        ([{"protocol": "udp"}], [{"protocol": "tcp"}], "udp"),
        ([{"protocol": "icmp"}, {"protocol": "udp", "ports": [53]}], [{"protocol": "icmp"}],
         "udp && udp.dst == 53"),
        ([{"protocol": "tcp", "ports": [1, 65535]}],
         [{"protocol": "tcp", "ports": [{"start": 2, "end": 65534}]}],
         "tcp && (tcp.dst == 1 || tcp.dst == 65535)"),
        ([{"protocol": "tcp", "ports": [80]}], [{}], None),
        ([{"protocol": "icmp"}], [{"protocol": "icmp"}, {"protocol": "tcp"}], None),
    ],
)  # fmt: skip
def test_subtract_writes_what_is_left_positively(
    filters: list[dict[str, Any]], taken: list[dict[str, Any]], left: str | None
) -> None:
    """No ``!tcp``: ovn-controller refuses a negated protocol (nominal) predicate."""
    result = common.subtract(_filters(*filters), _filters(*taken))
    assert (common.traffic_match(result) if result else None) == left
    if result:
        assert "!" not in common.traffic_match(result)
        assert not common.overlaps(result, _filters(*taken))
        assert common.covers(_filters(*filters), result)


@pytest.mark.parametrize("name", ['nf_x"_out', "nf x", "nf_x\n", "", "nf_x\\"])
def test_only_plain_port_names_become_match_strings(name: str) -> None:
    with pytest.raises(NameError_):
        common.port_literal(name)
    assert common.port_literal("nf_fw_node-1.example_out") == '"nf_fw_node-1.example_out"'
