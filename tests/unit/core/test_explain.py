"""``reconciler.core.views.explain`` (issue #16 item 3), pure and in memory: a steered pod, a
selected but not (yet) steered one, an unselected one, shadowed bindings, and the warnings of one
pod; plus its two renderings and ``osc-gitops explain --observed`` on a snapshot file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import NbGlobal, NetworkPolicy, Observed, PodPort, Switch
from reconciler.core.planning.full import compile_plan
from reconciler.core.views.explain import Explanation, PodNotFound, explain_pod
from reconciler.render.explain import explain_json, render_explain_text
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.cli import cli
from tests.support.simulate import converge, live_of, with_live

PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-2", {"app": "web", "tier": "front"}),
    ("shop", "static-1", "node-2", {"app": "static"}),
    ("ops", "web-x", "node-1", {"app": "web"}),
]
NODE_LABELS = {"node-1": {"ips": "yes"}}
DESIRED = desired(
    sg("web", "app=web", "tier=front", namespaces=["shop"]),
    vnf("fw"),
    vnf("ips", nodeSelector={"ips": "yes"}),
    binding("web-ips", "web", "ips", 5, traffic=[{"protocol": "tcp", "ports": [80, 443]}]),
    binding("web-fw", "web", "fw", 10, redirection="both"),
)
NF = CompileOptions(steering="network-function")


def observed(**extra: Any) -> Observed:
    return cluster(PODS, node_labels=NODE_LABELS, **extra)


def applied(want: Desired, obs: Observed, options: CompileOptions = NF) -> Observed:
    """``obs`` after ``apply`` with healthy VNFs: the owned live state equals the compiled
    target (steering held until northd reports its group active is switched on by then)."""
    return converge(want, obs, options)


def explain(
    name: str,
    obs: Observed,
    want: Desired = DESIRED,
    options: CompileOptions = NF,
    namespace: str = "shop",
) -> Explanation:
    return explain_pod(want, obs, compile_plan(want, obs, options), namespace, name)


def test_a_steered_pod_names_its_groups_bindings_instances_and_rows() -> None:
    # applied while healthy; then NB_Global lost the probe addresses: OVN never probes
    obs = dataclasses.replace(applied(DESIRED, observed()), nf_active={}, nb_global=NbGlobal())
    e = explain("web-1", obs)
    assert (e.status, e.as_declared, e.node, e.port) == ("steered", True, "node-1", "shop_web-1")
    data = explain_json(e)
    assert list(data)[:1] == ["pod"] and {"groups", "bindings", "ovn", "warnings"} <= set(data)
    assert data["groups"] == [
        {"name": "web", "label": "app=web", "labels": ["app=web"], "bound": True}
    ]
    bindings = [
        {k: b[k] for k in ("name", "vnf", "order", "node", "instance", "healthy", "shadowedBy")}
        for b in data["bindings"]
    ]
    assert bindings == [  # evaluation order: web-ips (5) before web-fw (10)
        {"name": "web-ips", "vnf": "ips", "order": 5, "node": "node-1",
         "instance": "security/ips-node-1", "healthy": False, "shadowedBy": None},
        {"name": "web-fw", "vnf": "fw", "order": 10, "node": "node-1",
         "instance": "security/fw-node-1", "healthy": False, "shadowedBy": None},
    ]  # fmt: skip
    # no NB_Global svc_monitor options here: OVN never probes, so it reports neither healthy
    assert e.bindings[0].health_detail.startswith("NB_Global options:svc_monitor_ip and")
    assert data["bindings"][0]["traffic"] == [{"protocol": "tcp", "ports": [80, 443]}]
    assert data["bindings"][1]["traffic"] == [{"protocol": "any", "ports": []}]
    rows = [(r["table"], r["name"], r["state"]) for r in data["ovn"]]
    assert rows == [
        ("Port_Group", "osc.web.node_1", "ok"),
        ("ACL", "osc.web_fw.node_1.from", "ok"),
        ("ACL", "osc.web_fw.node_1.to", "ok"),
        ("ACL", "osc.web_fw.node_1.to.crossed", "ok"),
        ("ACL", "osc.web_ips.node_1.to", "ok"),
        ("Network_Function_Group", "osc.fw.node_1.fail_close", "ok"),
        ("Network_Function_Group", "osc.ips.node_1.fail_close", "ok"),
        ("Network_Function", "osc.fw.node_1", "ok"),
        ("Network_Function", "osc.ips.node_1", "ok"),
        ("Network_Function_Health_Check", "osc.fw.node_1", "ok"),
        ("Network_Function_Health_Check", "osc.ips.node_1", "ok"),
        ("Logical_Switch_Port", "nf_fw_node-1_in", "ok"),
        ("Logical_Switch_Port", "nf_fw_node-1_out", "ok"),
        ("Logical_Switch_Port", "nf_ips_node-1_in", "ok"),
        ("Logical_Switch_Port", "nf_ips_node-1_out", "ok"),
    ]
    assert json.loads(json.dumps(data)) == data  # plain JSON


def test_health_is_what_ovn_reports_per_instance() -> None:
    obs = applied(DESIRED, observed())
    active = {"osc.fw.node_1.fail_close": "osc.fw.node_1", "osc.ips.node_1.fail_close": None}
    nb_global = dataclasses.replace(
        obs.nb_global, options={"svc_monitor_ip": "169.254.254.1", "svc_monitor_ip_dst": "x"}
    )
    e = explain("web-1", dataclasses.replace(obs, nf_active=active, nb_global=nb_global))
    health = {b.name: (b.healthy, b.health) for b in e.bindings}
    assert health == {"web-ips": (False, "not healthy"), "web-fw": (True, "healthy")}
    assert e.status == "steered"  # health is reported, not judged: fail-close acts as declared
    assert [w for w in e.warnings if "healthy" in w] == [
        "VNF ips on node node-1 is not healthy as OVN reports it: Binding web-ips (fail-close) "
        "drops the traffic it steers"
    ]
    fail_open = desired(
        sg("web", "app=web", "tier=front", namespaces=["shop"]), vnf("fw"),
        vnf("ips", nodeSelector={"ips": "yes"}),
        binding("web-ips", "web", "ips", 5, failurePolicy="fail-open"),
    )  # fmt: skip
    live = dataclasses.replace(applied(fail_open, observed()), nb_global=nb_global)
    live = dataclasses.replace(live, nf_active={"osc.ips.node_1.fail_open": None})
    e = explain("web-1", live, fail_open)
    assert [w for w in e.warnings if "healthy" in w] == [
        "VNF ips on node node-1 is not healthy as OVN reports it: Binding web-ips (fail-open) "
        "bypasses the VNF for the traffic it steers"
    ]


def test_a_selected_pod_on_a_node_without_the_vnf_is_not_steered() -> None:
    e = explain("web-2", applied(DESIRED, observed()))
    assert (e.status, e.as_declared) == ("not-steered", False)
    assert e.groups[0].label == "app=web" and e.groups[0].labels == ("app=web", "tier=front")
    ips, fw = e.bindings
    assert (ips.steers, ips.instance, ips.healthy) == (False, None, None)
    assert (
        ips.reason
        == "VnfDeployment ips does not run on node node-2: its nodeSelector wants ips=yes"
    )
    assert fw.steers and fw.instance == "security/fw-node-2"
    assert f"Binding web-ips does not steer this pod: {ips.reason}" in e.warnings
    assert {r.state for r in e.ovn} == {"ok"}


def test_a_selected_pod_before_apply_is_pending_with_its_rows_missing() -> None:
    e = explain("web-1", observed())
    assert (e.status, e.as_declared) == ("pending", False)
    assert {r.state for r in e.ovn} == {"missing"}
    assert {b.vm_state for b in e.bindings} == {"missing"}
    assert all(b.steers for b in e.bindings)


def test_drift_in_a_row_of_the_pod_makes_it_pending_but_other_pods_joining_does_not() -> None:
    obs = applied(DESIRED, observed())
    live = live_of(obs)
    live[("Port_Group", "osc.web.node_1")]["ports"].append("shop_someone-else")
    e = explain("web-1", with_live(obs, live))
    assert e.status == "steered"  # another pod's membership is not this pod's business
    live[("ACL", "osc.web_fw.node_1.to")]["match"] = "outport == @osc.web.node_1 && tcp"
    e = explain("web-1", with_live(obs, live))
    assert e.status == "pending"
    (acl,) = [r for r in e.ovn if r.name == "osc.web_fw.node_1.to"]
    assert (acl.state, acl.changed) == ("differs", ("['match']",))


def test_an_unselected_pod_is_as_declared_unless_our_rows_still_steer_it() -> None:
    obs = applied(DESIRED, observed())
    e = explain("static-1", obs)
    assert (e.status, e.as_declared, e.groups, e.bindings, e.ovn) == (
        "not-selected", True, [], [], []
    )  # fmt: skip
    # the label went away after the last apply: the live Port_Group still holds the pod
    relabelled = dataclasses.replace(
        obs,
        pods=tuple(
            dataclasses.replace(p, labels={"app": "gone"}) if p.name == "web-2" else p
            for p in obs.pods
        ),
    )
    e = explain("web-2", relabelled)
    assert (e.status, e.as_declared, e.groups) == ("pending", False, [])
    assert e.warnings == [
        "rows of an earlier apply still steer this pod although no Binding applies to it any "
        "more: apply removes them"
    ]
    # it was web's only member on node-2: the pair's rows go (no clock here, so no grace)
    assert ("Port_Group", "osc.web.node_2", "stale") in [(r.table, r.name, r.state) for r in e.ovn]


def test_a_group_excluding_the_pods_namespace_is_explained() -> None:
    e = explain("web-x", applied(DESIRED, observed()), namespace="ops")
    assert e.status == "not-selected"
    assert e.warnings == [
        "SecurityGroup web: the pod carries app=web, but the group only looks in namespace(s) "
        "shop: not a member"
    ]


def test_a_group_without_bindings_selects_but_declares_nothing() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"))
    e = explain("web-1", applied(want, observed()), want)
    assert (e.status, e.as_declared) == ("no-bindings", True)
    assert [(g.name, g.bound) for g in e.groups] == [("web", False)]


def test_shadowed_bindings_in_evaluation_order_across_groups() -> None:
    want = desired(
        sg("web", "app=web"),
        sg("front", "tier=front"),
        vnf("fw"),
        vnf("ips"),
        vnf("av"),
        binding("web-all", "web", "fw", 10),
        binding("web-http", "web", "ips", 20, traffic={"protocol": "tcp", "ports": [80]}),
        binding("front-all", "front", "av", 10, redirection="both"),
    )
    e = explain("web-2", applied(want, observed()), want)
    by_name = {b.name: b for b in e.bindings}
    assert [b.name for b in e.bindings] == ["front-all", "web-all", "web-http"]
    assert by_name["web-http"].shadowed_by == "front-all"
    assert by_name["web-all"].shadowed_by == "front-all"  # another group's, same port
    assert by_name["front-all"].shadowed_by is None
    assert explain_json(e)["bindings"][2]["shadowedBy"] == "front-all"
    assert (
        "Bindings front-all, web-all (different groups of this pod) have the same order and "
        "precedence: their rows have the same priority, and OVN picks either for a packet both "
        "match" in e.warnings
    )


def test_a_binding_shadowed_in_one_direction_only_has_no_shadowed_by() -> None:
    want = desired(
        sg("web", "app=web"),
        vnf("fw"),
        vnf("ips"),
        binding("in-all", "web", "fw", 10),
        binding("both-http", "web", "ips", 20, redirection="both",
                traffic={"protocol": "tcp", "ports": [80]}),
    )  # fmt: skip
    e = explain("web-1", applied(want, observed()), want)
    both = e.bindings[1]
    assert both.shadowed == {"to-lport": ["in-all"]} and both.shadowed_by is None
    assert "shadowed for to-lport traffic by in-all" in render_explain_text(e)
    assert [w for w in e.warnings if "shadowed" in w] == [
        "Binding both-http is shadowed for to-lport traffic by Binding in-all (evaluated first, "
        "takes every packet it would take): a packet is steered by the first matching binding "
        "only"
    ]


def test_network_policy_load_balancer_and_missing_port_warnings() -> None:
    obs = applied(DESIRED, observed())
    obs = dataclasses.replace(
        obs,
        network_policies=(
            NetworkPolicy("shop", "deny-all", {}),
            NetworkPolicy("shop", "db-only", {"matchLabels": {"app": "db"}}),
            NetworkPolicy("shop", "front-only", {"matchLabels": {"tier": "front"}}),
        ),
        switches=(Switch("node-1", "10.244.1.0/24", load_balancers=True), *obs.switches[1:]),
    )
    e = explain("web-1", obs)
    # the plan's finding, as compile words it (explain filters, never words it again)
    assert (
        "NetworkPolicy shop/deny-all selects 2 steered pod(s): towards them (exit-lport), flows "
        "it allows are not steered (precedence after-network-policy)" in e.warnings
    )
    assert not [w for w in e.warnings if "db-only" in w]
    # a policy the plan found selecting other steered pods (web-2) is not this pod's
    assert any("front-only" in f.text for f in compile_plan(DESIRED, obs, NF).target.findings)
    assert not [w for w in e.warnings if "front-only" in w]
    assert any(w.startswith("switch node-1 has load balancers") for w in e.warnings)
    no_port = dataclasses.replace(
        obs, pod_ports=tuple(p for p in obs.pod_ports if p.name != "shop_web-1")
    )
    e = explain("web-1", no_port)
    assert e.status == "not-steered" and e.port is None
    assert {(b.name, b.steers, b.reason) for b in e.bindings} == {
        (name, False, "the pod has no OVN port of its own yet") for name in ("web-ips", "web-fw")
    }
    assert (
        "OVN has no port shop_web-1 for this pod yet (OVN-Kubernetes adds it once the pod is "
        "wired): nothing can steer it until then"
    ) in e.warnings


def test_an_old_port_of_a_recreated_pod_does_not_count() -> None:
    obs = applied(DESIRED, observed())
    ports = tuple(
        dataclasses.replace(p, pod_uid="uid-of-an-older-pod") if p.name == "shop_web-1" else p
        for p in obs.pod_ports
    )
    e = explain("web-1", dataclasses.replace(obs, pod_ports=ports))
    assert e.status == "not-steered"
    assert (
        "OVN's port shop_web-1 belongs to an earlier pod of the same name (its iface-id-ver is "
        "another UID): it is not steered until OVN-Kubernetes updates it"
    ) in e.warnings


def test_router_policy_rows_and_caveats() -> None:
    options = CompileOptions(steering="router-policy")
    obs = applied(DESIRED, observed(nf=False), options)
    e = explain("web-1", obs, options=options)
    assert e.status == "steered" and e.steering == "router-policy"
    tables = {r.table for r in e.ovn}
    assert tables == {"Port_Group", "Logical_Router_Policy", "Logical_Switch_Port"}
    policies = {r.name for r in e.ovn if r.table == "Logical_Router_Policy"}
    # towards the pod (its node) and from it (towards every node where the VNF runs)
    assert policies == {
        "osc.web_fw.node_1.to",
        "osc.web_fw.node_1.from",
        "osc.web_fw.node_2.from",
        "osc.web_ips.node_1.to",
    }
    assert {b.health for b in e.bindings} == {"unknown"}
    assert e.bindings[0].health_detail == "no health check with router-policy steering"
    assert e.warnings == [ROUTED_ONLY]


def test_an_unknown_pod_is_a_user_error_with_a_hint() -> None:
    with pytest.raises(PodNotFound, match=r"pod shop/web1 not found \(did you mean shop/web-1\?\)"):
        explain("web1", observed())
    with pytest.raises(PodNotFound, match=r"^pod shop/qqqqqq not found$"):  # nothing close
        explain("qqqqqq", observed())
    with pytest.raises(PodNotFound, match="no pod at all in namespace nowhere"):
        explain("web-1", observed(), namespace="nowhere")


def test_the_text_rendering_reads_top_down() -> None:
    text = render_explain_text(explain("web-2", applied(DESIRED, observed())))
    lines = text.splitlines()
    assert lines[0] == (
        "Pod shop/web-2 on node-2 (OVN port shop_web-2): selected, but not steered by every "
        "Binding that applies (see below)"
    )
    assert "  SecurityGroup web through app=web (also tier=front)" in lines
    assert "  1. web-ips  (SecurityGroup web, order 5, exit-lport): tcp 80,443" in lines
    assert any(line.startswith("     does not steer this pod: VnfDeployment ips") for line in lines)
    assert any(
        line.startswith("  ok       Port_Group") and "holds the pod's port" in line
        for line in lines
    )
    assert "Warnings:" in lines


# --- the command on a snapshot file ------------------------------------------------------------


def write_snapshot(path: Path, obs: Observed) -> Path:
    path.write_text(json.dumps(obs.to_json()))
    return path


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "all.yaml").write_text(
        "apiVersion: osc.io/v1alpha1\nkind: SecurityGroup\nmetadata: {name: web}\n"
        "spec: {labels: [app=web]}\n---\n"
        "apiVersion: osc.io/v1alpha1\nkind: VnfDeployment\nmetadata: {name: fw}\n"
        "spec: {namespace: security, image: quay.io/osc/fw:1.0, nodeSelector: {ips: 'yes'}}\n---\n"
        "apiVersion: osc.io/v1alpha1\nkind: Binding\nmetadata: {name: web-fw}\n"
        "spec: {securityGroup: web, vnf: fw}\n"
    )
    return folder


def test_the_command_offline_exit_codes_and_json(manifests: Path, tmp_path: Path) -> None:
    from reconciler.manifests.load import load_path

    want = load_path(manifests)
    snap = write_snapshot(tmp_path / "snap.json", applied(want, observed()))
    steered = cli("explain", "shop/web-1", manifests, "--observed", snap, "-o", "json")
    assert steered.code == 0, steered.err
    data = json.loads(steered.out)
    assert data["status"] == "steered" and data["bindings"][0]["order"] == 100
    assert data["bindings"][0]["orderDefault"] is True
    unsteered = cli("explain", "shop/web-2", manifests, "--observed", snap)  # fw not on node-2
    assert unsteered.code == 3
    assert "does not steer this pod: VnfDeployment fw does not run on node node-2" in unsteered.out
    unselected = cli("explain", "shop/static-1", manifests, "--observed", snap)
    assert unselected.code == 0 and "no SecurityGroup selects it" in unselected.out
    missing = cli("explain", "shop/nope", manifests, "--observed", snap)
    assert missing.code == 1 and missing.err.startswith("error: pod shop/nope not found")
    bad = cli("explain", "web-1", manifests, "--observed", snap)
    assert bad.code == 1 and "is not NAMESPACE/POD" in bad.err


def test_the_command_names_the_pod_port_it_read(manifests: Path, tmp_path: Path) -> None:
    obs = observed()
    port: PodPort = next(p for p in obs.pod_ports if p.name == "shop_web-1")
    assert port.switch == "node-1"
    snap = write_snapshot(tmp_path / "snap.json", obs)
    result = cli("explain", "shop/web-1", manifests, "--observed", snap)
    assert result.code == 3  # nothing applied yet: pending
    assert result.out.startswith("Pod shop/web-1 on node-1 (OVN port shop_web-1): not steered")


def test_a_binding_held_until_its_vnf_is_healthy_is_said_with_why() -> None:
    """Before the first apply the plan holds the steering (northd never probed the VNF): each
    binding says why, and the pod's warnings say what that means for its traffic."""
    e = explain("web-1", observed())
    held = {b.name: b.held for b in e.bindings}
    assert set(held) == {"web-ips", "web-fw"} and all(held.values())
    assert [w for w in e.warnings if " is held: " in w] == [
        f"Binding {name} on node-1 is held: {held[name]} (steering is switched on by the next "
        "reconcile after OVN reports it healthy; until then the pod's traffic is not steered)"
        for name in ("web-ips", "web-fw")
    ]
    assert {b.precedence for b in e.bindings} == {"after-network-policy"}
    # once applied, only the held steering is missing: the pod's status says it is held
    from reconciler.core.planning.full import make_plan
    from tests.support.simulate import apply_to

    once = with_live(observed(), apply_to(live_of(observed()), make_plan(DESIRED, observed(), NF)))
    assert explain("web-1", once).status == "held"
    steady = explain("web-1", applied(DESIRED, observed()))
    assert [b.held for b in steady.bindings] == ["", ""]
    assert not [w for w in steady.warnings if " is held: " in w]


TIED = desired(
    sg("web", "app=web"), sg("front", "tier=front"),
    vnf("fw", healthCheck={"enabled": False}), vnf("ips"),
    binding("a", "web", "fw", 10), binding("b", "front", "ips", 10),
)  # fmt: skip
SHADOWED = (
    "Binding b is shadowed for to-lport traffic by Binding a (evaluated first, takes every packet "
    "it would take): a packet is steered by the first matching binding only"
)
ROUTED_ONLY = (
    "router-policy steering reroutes routed traffic only: traffic between this pod and pods on "
    "its own node is not steered, and failurePolicy cannot act (no health check)"
)


def test_the_warnings_of_one_pod_are_its_backends() -> None:
    """Two groups of the pod bound with the same order: a tie (of order and precedence where
    ACLs are tiered); a VNF without health check; router policies steer routed traffic only and
    have no health check at all, so they say so instead."""
    e = explain("web-2", applied(TIED, observed()), TIED)
    assert e.warnings == [
        SHADOWED,
        "Bindings a, b (different groups of this pod) have the same order and precedence: their "
        "rows have the same priority, and OVN picks either for a packet both match",
        "VnfDeployment fw has healthCheck.enabled: false: OVN counts it healthy whenever its "
        "ports are bound, so the failure policy cannot act for this pod",
    ]
    routed = CompileOptions(steering="router-policy")
    e = explain("web-2", applied(TIED, observed(nf=False), routed), TIED, options=routed)
    assert e.warnings == [
        SHADOWED,
        "Bindings a, b (different groups of this pod) have the same order: their rows have the "
        "same priority, and OVN picks either for a packet both match",
        ROUTED_ONLY,
    ]


def test_under_tiered_acls_the_earlier_tier_goes_first_and_is_no_tie() -> None:
    """With the same order, a binding before NetworkPolicy (an earlier ACL tier) is evaluated
    first and shadows the other: they are not tied."""
    tiers = desired(
        sg("web", "app=web"), sg("front", "tier=front"), vnf("fw"), vnf("ips"),
        binding("a", "web", "fw", 10),
        binding("b", "front", "ips", 10, precedence="before-network-policy"),
    )  # fmt: skip
    e = explain("web-2", applied(tiers, observed()), tiers)
    assert [b.name for b in e.bindings] == ["b", "a"]
    assert e.warnings == [
        "Binding a is shadowed for to-lport traffic by Binding b (evaluated first, takes every "
        "packet it would take): a packet is steered by the first matching binding only"
    ]
