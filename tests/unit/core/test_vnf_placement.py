"""Where VNF instances go and the address each keeps: a node that cannot be used is skipped
alone, and under router-policy steering a VNF keeps the address its VM has (the next hop of the
reroute policies must not move while the VM keeps its IP: rerouted traffic would be dropped)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reconciler.core.compiling.compile import (
    CompileError,
    CompileOptions,
    compile_full,
    compile_target,
)
from reconciler.core.model.facts import Finding
from reconciler.core.model.observed import Node, Observed, OvnRow, Switch
from reconciler.core.model.target import NameCollision, Resource, Target
from reconciler.core.planning.full import make_plan
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to, live_of, with_live

RP = CompileOptions(steering="router-policy")
PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]
MAC = "0a:58:0a:f4:01:4d"
KUBEVIRT = ("NetworkAttachmentDefinition", "VirtualMachine")
FW = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))


def placed(want: Any, obs: Observed, options: CompileOptions | None = None) -> list[str]:
    return sorted(f"{v}@{n}" for v, n in compile_full(want, obs, options).instances)


def test_a_node_with_an_invalid_name_is_skipped_and_the_later_nodes_still_get_the_vnf() -> None:
    """Nodes are looked at in name order; ``Bad_Node`` sorts first and is not a DNS subdomain."""
    obs = cluster(PODS, nodes=("node-1", "node-2"))
    obs = replace(
        obs,
        nodes=(Node("Bad_Node", {}), *obs.nodes),
        switches=(Switch("Bad_Node", "10.244.9.0/24"), *obs.switches),
    )
    target = compile_target(FW, obs)
    assert placed(FW, obs) == ["fw@node-1", "fw@node-2"]
    assert sorted(r.key for r in target if r.kind == "VirtualMachine") == [
        "security/fw-node-1",
        "security/fw-node-2",
    ]
    assert [f for f in target.findings if f.code == "placement"] == [
        Finding(
            "placement",
            "Node/Bad_Node",
            None,
            "node name 'Bad_Node' is not a DNS subdomain: it is never used in OVN names or matches",
        )
    ]


def test_a_node_name_is_used_up_to_253_characters() -> None:
    """A DNS subdomain is at most 253 characters long (RFC 1123, as Kubernetes checks it)."""
    longest, too_long = "n" * 253, "n" * 254
    obs = cluster([], nodes=(longest, too_long))
    want = desired(vnf("fw"))
    assert placed(want, obs) == [f"fw@{longest}"]
    (finding,) = compile_target(want, obs).findings
    assert finding.subject == f"Node/{too_long}"


def test_a_node_without_its_switch_is_skipped_and_the_later_nodes_still_get_the_vnf() -> None:
    obs = cluster(PODS, nodes=("node-1", "node-2"))
    obs = replace(obs, nodes=(Node("node-0", {}), *obs.nodes))
    target = compile_target(FW, obs)
    assert placed(FW, obs) == ["fw@node-1", "fw@node-2"]
    assert [f for f in target.findings if f.code == "placement"] == [
        Finding(
            "placement",
            "VnfDeployment/fw",
            "node-0",
            "node node-0 has no OVN logical switch named after it: VnfDeployment fw is not "
            "deployed there",
        )
    ]


def test_the_node_selector_places_a_vnf_on_the_matching_nodes_only() -> None:
    want = desired(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ips", nodeSelector={"zone": "a", "ips": "yes"}),
        binding("web-fw", "web", "fw", 10),
        binding("web-ips", "web", "ips", 5),
    )
    labels = {"node-1": {"zone": "a", "ips": "yes"}, "node-2": {"zone": "a"}}
    obs = cluster(PODS, nodes=("node-1", "node-2", "node-3"), node_labels=labels)
    assert placed(want, obs) == ["fw@node-1", "fw@node-2", "fw@node-3", "ips@node-1"]


# --- router-policy: addresses -------------------------------------------------------------------


def applied(want: Any, obs: Observed) -> Observed:
    """``obs`` once a plan of ``want`` is applied."""
    return with_live(obs, apply_to(live_of(obs), make_plan(want, obs, RP)))


def with_vnf_address(obs: Observed, port: str, address: str) -> Observed:
    """``obs`` with the live data-in LSP ``port`` holding ``address`` (``mac ip``)."""
    rows = tuple(
        replace(r, fields={**r.fields, "addresses": [address]})
        if r.table == "Logical_Switch_Port" and r.key == port
        else r
        for r in obs.ovn_rows
    )
    return replace(obs, ovn_rows=rows)


def addresses(want: Any, obs: Observed) -> dict[str, str | None]:
    return {f"{v}@{n}": i.ip for (v, n), i in compile_full(want, obs, RP).instances.items()}


def next_hops(want: Any, obs: Observed) -> dict[str, list[str]]:
    target = compile_target(want, obs, RP)
    return {r.key: r.fields["nexthops"] for r in target if r.kind == "Logical_Router_Policy"}


def test_a_vnf_keeps_the_address_its_vm_has_and_the_policies_keep_it_as_next_hop() -> None:
    """fw's port holds 10.244.1.200 (an address given before the top-down rule, or by hand):
    the next compile keeps it and moves the reroute policy to it, the port and the VM stay as
    they are; the other node's instance keeps its own."""
    obs = cluster(PODS, nf=False)
    live = applied(FW, obs)
    port = next(r for r in live.ovn_rows if r.key == "nf_fw_node-1_in")
    mac = port.fields["addresses"][0].split()[0]
    moved = with_vnf_address(live, "nf_fw_node-1_in", f"{mac} 10.244.1.200")
    assert addresses(FW, moved) == {"fw@node-1": "10.244.1.200", "fw@node-2": "10.244.2.254"}
    assert next_hops(FW, moved)["osc.web_fw.node_1.to"] == ["10.244.1.200"]
    plan = make_plan(FW, moved, RP)
    assert [(c.action, c.key, c.changed) for c in plan.changes] == [
        ("update", "osc.web_fw.node_1.to", ("['nexthops']",))
    ]
    assert make_plan(FW, with_live(moved, apply_to(live_of(moved), plan)), RP).empty


def test_a_vnf_keeps_its_address_when_a_vnf_sorting_before_it_is_added() -> None:
    """``av`` sorts before ``fw`` and is placed on the same node later: ``fw`` keeps .254 (the
    VNFs with an address choose first), ``av`` takes the next free one."""
    live = applied(FW, cluster(PODS, nf=False))
    two = desired(*FW.all(), vnf("av"), binding("web-av", "web", "av", 5))
    got = addresses(two, live)
    assert got["fw@node-1"] == "10.244.1.254" and got["av@node-1"] == "10.244.1.253"
    assert not [c for c in make_plan(two, live, RP).changes if c.action != "create"]


def test_only_our_vnfs_data_in_port_says_which_address_a_vnf_has() -> None:
    """What a VNF's address is read from: the ``mac ip`` entry of its own data-in LSP. Rows
    that merely look alike (its out port, a port of another owner, a port whose name is not
    the VNF's, an entry without an IP) say nothing: the VNF gets the top address."""
    obs = cluster(PODS, nf=False)
    live = applied(FW, obs)
    rows = {r.key: r for r in live.ovn_rows if r.table == "Logical_Switch_Port"}
    port_in, port_out = rows["nf_fw_node-1_in"], rows["nf_fw_node-1_out"]
    mac = port_in.fields["addresses"][0].split()[0]

    def lsp(key: str, ids: dict[str, str], entries: list[str]) -> OvnRow:
        return OvnRow(
            "Logical_Switch_Port", key, {"name": key, "addresses": entries, "external_ids": ids}
        )

    ids = dict(port_in.fields["external_ids"])
    others = [
        # the out port of fw on node-1 with an address entry
        replace(port_out, fields={**port_out.fields, "addresses": [f"{mac} 10.244.1.10"]}),
        # a port named like fw's in port but of another manifest kind
        lsp(
            "nf_fw_node-1_in",
            {**ids, "osc.io/resource": "SecurityGroup/fw"},
            [f"{mac} 10.244.1.11"],
        ),
    ]
    for row in others:  # in place of fw's in port (which is gone from the rows)
        rest = tuple(r for r in live.ovn_rows if r.key not in {"nf_fw_node-1_in", row.key})
        assert addresses(FW, replace(live, ovn_rows=(*rest, row)))["fw@node-1"] == (
            "10.244.1.254"
        ), row
    # fw's in port of node-1 naming node-2 in its external_ids: not fw's port on node-2
    wrong_node = lsp("nf_fw_node-1_in", {**ids, "osc.io/node": "node-2"}, [f"{mac} 10.244.2.9"])
    view = replace(
        live, ovn_rows=(*(r for r in live.ovn_rows if r.key != "nf_fw_node-1_in"), wrong_node)
    )
    assert addresses(FW, view) == {"fw@node-1": "10.244.1.254", "fw@node-2": "10.244.2.254"}
    # an entry that is a MAC alone, and one with two IPs, give no address
    for entry in (mac, f"{mac} 10.244.1.7 10.244.1.8"):
        assert (
            addresses(FW, with_vnf_address(live, "nf_fw_node-1_in", entry))["fw@node-1"]
            == "10.244.1.254"
        ), entry
    # the last "mac ip" entry of the port counts (OVN keeps one for a VNF port)
    two = replace(
        live,
        ovn_rows=tuple(
            replace(r, fields={**r.fields, "addresses": [mac, f"{mac} 10.244.1.77"]})
            if r.key == "nf_fw_node-1_in"
            else r
            for r in live.ovn_rows
        ),
    )
    assert addresses(FW, two)["fw@node-1"] == "10.244.1.77"


def test_a_live_address_outside_the_subnet_or_taken_is_not_kept() -> None:
    live = applied(FW, cluster(PODS, nf=False))
    mac = next(r for r in live.ovn_rows if r.key == "nf_fw_node-1_in").fields["addresses"][0]
    mac = mac.split()[0]
    for wrong in ("10.9.9.9", "10.244.1.0", "not-an-ip"):
        got = addresses(FW, with_vnf_address(live, "nf_fw_node-1_in", f"{mac} {wrong}"))
        assert got["fw@node-1"] == "10.244.1.254", wrong


def test_every_object_of_a_vnf_instance_belongs_to_its_node() -> None:
    """Its two data ports, its two NADs and its VM carry the instance's node (what holds, node
    slices and the plan's per-node listing go by)."""
    target = compile_target(FW, cluster(PODS))
    mine = sorted(
        (r.kind, r.node)
        for r in target
        if r.origin == "VnfDeployment/fw" and r.kind in ("Logical_Switch_Port", *KUBEVIRT)
    )
    per_node = ["Logical_Switch_Port"] * 2 + ["NetworkAttachmentDefinition"] * 2
    assert mine == sorted(
        (kind, node) for node in ("node-1", "node-2") for kind in (*per_node, "VirtualMachine")
    )


def test_rows_that_merely_look_like_a_vnfs_port_do_not_hide_its_real_port() -> None:
    """The live rows are read whole: ports of another kind or node that read first do not
    stop the reading before the VNF's own data-in port (which keeps its ``.77``)."""
    live = with_vnf_address(
        applied(FW, cluster(PODS, nf=False)), "nf_fw_node-1_in", f"{MAC} 10.244.1.77"
    )
    real = next(r for r in live.ovn_rows if r.key == "nf_fw_node-1_in")
    ids = dict(real.fields["external_ids"])
    lookalikes = tuple(
        OvnRow("Logical_Switch_Port", key, {"name": key, "addresses": [f"{MAC} 10.244.1.9"],
                                            "external_ids": {**ids, **changed}})
        for key, changed in (
            ("nf_a_node-1_in", {"osc.io/resource": "SecurityGroup/a"}),  # not a VnfDeployment's
            ("nf_b_node-1_in", {"osc.io/resource": "VnfDeployment/c"}),  # not c's name for it
        )
    )  # fmt: skip
    view = replace(live, ovn_rows=(*lookalikes, *live.ovn_rows))
    assert addresses(FW, view)["fw@node-1"] == "10.244.1.77"


def test_two_vnfs_whose_generated_names_meet_on_two_nodes_are_refused_naming_both() -> None:
    """``fw`` on ``edge-node-1`` and ``fw-edge`` on ``node-1`` both make ``fw-edge-node-1``:
    compile refuses (one line, nothing planned) rather than let one overwrite the other."""
    want = desired(vnf("fw"), vnf("fw-edge"))
    with pytest.raises(CompileError) as refused:
        compile_target(want, cluster([], nodes=("edge-node-1", "node-1")))
    assert str(refused.value) == (
        "VnfDeployment/fw on node edge-node-1 and VnfDeployment/fw-edge on node node-1 would "
        "both be NetworkAttachmentDefinition security/fw-edge-node-1-in: generated names are "
        "<vnf>-<node> (NetworkAttachmentDefinitions <dataNetwork>-<node>-in/-out, a second "
        "instance adds -b), so rename a VnfDeployment or its spec.dataNetwork, or give it "
        "another spec.namespace"
    )


def test_two_rows_of_no_node_under_one_name_are_refused_naming_their_manifests() -> None:
    first = Resource("Port_Group", "osc.web", "SecurityGroup/web", None, {})
    second = Resource("Port_Group", "osc.web", "SecurityGroup/web2", None, {})
    with pytest.raises(NameCollision) as refused:
        Target.of([first, second])
    assert str(refused.value).startswith(
        "SecurityGroup/web and SecurityGroup/web2 would both be Port_Group osc.web: generated "
    )
