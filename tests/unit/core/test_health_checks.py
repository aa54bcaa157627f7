"""Health checks (issue #13 item 3) and the NF id budget (issue #16 item 6), in the pure core.

The model's defaults and limits; one ``Network_Function_Health_Check`` per function; the
``NB_Global`` ownership rules (set only what is absent and record it, never touch what someone
else set, remove only what we set); health as a report that never re-plans; the id budget.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from pydantic import ValidationError

from reconciler.core.compiling.compile import CompileError, CompileOptions, compile_target
from reconciler.core.compiling.diff import diff
from reconciler.core.model.desired import HealthCheck, VnfDeployment
from reconciler.core.model.facts import Finding
from reconciler.core.model.observed import NbGlobal, Observed
from reconciler.core.model.target import Target
from reconciler.core.planning.full import make_plan
from reconciler.core.planning.incremental import IncrementalPlanner
from reconciler.core.steering import HealthIndex, id_budget, live_id_budget
from reconciler.core.transitions.health import plan_report
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to, with_live


def vnf_health(observed: Observed) -> dict[tuple[str, str], Any]:
    return HealthIndex(observed).instances()


PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
]
MARKER = "osc.io/svc-monitor.osc-gitops"
DEFAULTS = {"svc_monitor_ip": "169.254.254.1", "svc_monitor_ip_dst": "169.254.254.2"}


def manifests(**check: object):
    spec = {"healthCheck": check} if check else {}
    return desired(
        sg("web", "app=web"),
        vnf("fw", **spec),
        binding("web-fw", "web", "fw", 10, failurePolicy="fail-open"),
    )


def rows(target: Target, kind: str) -> dict[str, dict]:
    return {r.key: r.fields for r in target if r.kind == kind}


def live_from(target: Target) -> dict:
    """The owned live state right after ``target`` was applied."""
    return {r.ident: copy.deepcopy(r.fields) for r in target}


def nb_global(target: Target) -> dict | None:
    return rows(target, "NB_Global").get("options")


# --- the model ---------------------------------------------------------------------------------


def test_defaults_detect_a_dead_firewall_within_seconds() -> None:
    check = vnf("fw").spec.healthCheck
    assert check == HealthCheck(enabled=True, interval=1, timeout=1, successCount=1, failureCount=2)


@pytest.mark.parametrize(
    "bad",
    [
        {"interval": 0},
        {"interval": 301},
        {"timeout": 0},
        {"successCount": 101},
        {"failureCount": 0},
        {"interval": "1"},  # strict: a quoted number is a typo, not a number
        {"interval": 1.5},
        {"failurecount": 2},  # unknown field
        {"enabled": "no"},
    ],
)
def test_health_check_limits(bad: dict) -> None:
    with pytest.raises(ValidationError):
        vnf("fw", healthCheck=bad)


def test_the_json_schema_documents_the_defaults() -> None:
    schema = VnfDeployment.model_json_schema()
    props = schema["$defs"]["HealthCheck"]["properties"]
    assert {k: v["default"] for k, v in props.items()} == {
        "enabled": True,
        "interval": 1,
        "timeout": 1,
        "successCount": 1,
        "failureCount": 2,
    }


# --- compile: one check per function -------------------------------------------------------------


def test_every_function_gets_its_check_with_our_ownership_keys() -> None:
    target = compile_target(manifests(interval=3, failureCount=4), cluster(PODS))
    functions = rows(target, "Network_Function")
    checks = rows(target, "Network_Function_Health_Check")
    assert set(checks) == set(functions) == {"osc.fw.node_1", "osc.fw.node_2"}
    check = checks["osc.fw.node_1"]
    assert check["name"] == check["network_function"] == "osc.fw.node_1"
    assert check["options"] == {
        "interval": "3",
        "timeout": "1",
        "success_count": "1",
        "failure_count": "4",
    }
    assert check["external_ids"] == {
        "osc.io/owner": "osc-gitops",
        "osc.io/resource": "VnfDeployment/fw",
        "osc.io/key": "osc.fw.node_1",
        "osc.io/node": "node-1",
    }
    assert not [w for w in target.warnings if "healthCheck" in w]


def test_a_vnf_without_bindings_has_no_function_so_no_check_and_no_options() -> None:
    target = compile_target(desired(sg("web", "app=web"), vnf("fw")), cluster(PODS))
    assert not rows(target, "Network_Function_Health_Check")
    assert nb_global(target) is None


def test_disabled_checks_are_allowed_with_a_warning_naming_the_bindings() -> None:
    target = compile_target(manifests(enabled=False), cluster(PODS))
    assert rows(target, "Network_Function")
    assert not rows(target, "Network_Function_Health_Check")
    assert nb_global(target) is None  # no health-checked function: nothing to probe with
    (warning,) = [w for w in target.warnings if "healthCheck.enabled: false" in w]
    assert "VnfDeployment fw" in warning and "web-fw (fail-open)" in warning
    assert "cannot act" in warning


def test_router_policy_steering_writes_no_checks() -> None:
    options = CompileOptions(steering="router-policy")
    target = compile_target(manifests(), cluster(PODS, nf=False), options)
    assert not rows(target, "Network_Function_Health_Check") and nb_global(target) is None


# --- NB_Global: the cluster's row ------------------------------------------------------------


def observed_with(options: dict | None = None, external_ids: dict | None = None) -> Observed:
    return dataclasses.replace(
        cluster(PODS), nb_global=NbGlobal(dict(options or {}), dict(external_ids or {}))
    )


def test_absent_options_are_set_and_recorded_as_ours() -> None:
    target = compile_target(manifests(), observed_with())
    assert nb_global(target) == {
        "options": DEFAULTS,
        "external_ids": {MARKER: "svc_monitor_ip,svc_monitor_ip_dst"},
    }
    (res,) = [r for r in target if r.kind == "NB_Global"]
    assert res.key == "options" and res.node is None


def test_flags_choose_the_addresses_we_set() -> None:
    options = CompileOptions(svc_monitor_ip="169.254.10.1", svc_monitor_ip_dst="169.254.10.2")
    target = compile_target(manifests(), observed_with(), options)
    assert nb_global(target)["options"] == {
        "svc_monitor_ip": "169.254.10.1",
        "svc_monitor_ip_dst": "169.254.10.2",
    }


def test_options_someone_else_set_are_kept_and_a_differing_flag_is_a_warning() -> None:
    foreign = {"svc_monitor_ip": "10.0.0.1", "svc_monitor_ip_dst": "10.0.0.2"}
    # both set by someone else: nothing to write, nothing to say (the defaults are not a wish)
    target = compile_target(manifests(), observed_with(foreign))
    assert nb_global(target) is None and not target.warnings
    # the same value as the flag: no warning either
    same = CompileOptions(svc_monitor_ip="10.0.0.1")
    assert not compile_target(manifests(), observed_with(foreign), same).warnings
    # a flag that differs: kept as it is, and the plan says so
    other = CompileOptions(svc_monitor_ip="169.254.10.1")
    target = compile_target(manifests(), observed_with(foreign), other)
    assert nb_global(target) is None
    (warning,) = target.warnings
    assert [f.code for f in target.findings] == ["health-check"]
    assert "svc_monitor_ip is 10.0.0.1, set by someone else" in warning
    assert "--svc-monitor-ip 169.254.10.1 is not used" in warning


def test_only_the_absent_one_of_two_options_becomes_ours() -> None:
    target = compile_target(manifests(), observed_with({"svc_monitor_ip": "10.0.0.1"}))
    assert nb_global(target) == {
        "options": {"svc_monitor_ip_dst": DEFAULTS["svc_monitor_ip_dst"]},
        "external_ids": {MARKER: "svc_monitor_ip_dst"},
    }


def test_another_instances_options_are_someone_elses() -> None:
    theirs = observed_with(
        {"svc_monitor_ip": "10.0.0.1", "svc_monitor_ip_dst": "10.0.0.2"},
        {"osc.io/svc-monitor.blue": "svc_monitor_ip,svc_monitor_ip_dst"},
    )
    assert nb_global(compile_target(manifests(), theirs)) is None


def test_ours_follow_the_flags_and_go_with_the_last_health_checked_function() -> None:
    live_view = observed_with(DEFAULTS, {MARKER: "svc_monitor_ip,svc_monitor_ip_dst"})
    target = compile_target(manifests(), live_view)
    live = live_from(target)
    assert diff(target, live).empty
    # ours, so a new flag value is an update (what someone else set never is)
    moved = compile_target(manifests(), live_view, CompileOptions(svc_monitor_ip="169.254.9.9"))
    (change,) = diff(moved, live).changes
    assert (change.action, change.kind, change.changed) == (
        "update",
        "NB_Global",
        ("['options']['svc_monitor_ip']",),
    )
    # the last health check goes: the options and the marker we wrote go, nothing else
    plan = diff(compile_target(manifests(enabled=False), live_view), live)
    deletes = {(c.kind, c.key): c for c in plan.changes if c.action == "delete"}
    assert deletes[("NB_Global", "options")].before == {
        "options": DEFAULTS,
        "external_ids": {MARKER: "svc_monitor_ip,svc_monitor_ip_dst"},
    }
    assert {k for k, _ in deletes} == {"NB_Global", "Network_Function_Health_Check"}


def test_bad_addresses_are_refused() -> None:
    for options in (
        CompileOptions(svc_monitor_ip="not-an-ip"),
        CompileOptions(svc_monitor_ip="169.254.254.2"),  # the same as the default destination
        CompileOptions(svc_monitor_ip="fd00::1"),  # a different IP version than the other
    ):
        with pytest.raises(CompileError):
            compile_target(manifests(), observed_with(), options)


# --- health: a report that never re-plans ------------------------------------------------------


def applied(options: CompileOptions | None = None) -> tuple[Target, Observed]:
    observed = cluster(PODS)
    target = compile_target(manifests(), observed, options)
    after = with_live(observed, apply_to({}, diff(target, {})))
    return target, after


def test_health_as_northd_reports_it() -> None:
    target, observed = applied()
    groups = rows(target, "Network_Function_Group")
    assert set(groups) == {"osc.fw.node_1.fail_open", "osc.fw.node_2.fail_open"}
    observed = dataclasses.replace(
        observed,
        nf_active={"osc.fw.node_1.fail_open": "osc.fw.node_1", "osc.fw.node_2.fail_open": None},
        nb_global=NbGlobal(DEFAULTS, {MARKER: "svc_monitor_ip,svc_monitor_ip_dst"}),
    )
    health = vnf_health(observed)
    assert {k: (h.health, h.healthy) for k, h in health.items()} == {
        ("fw", "node-1"): ("healthy", True),
        ("fw", "node-2"): ("not healthy", False),
    }
    # an ACL steers to it (applied whole here): its bindings' failure policy is in force
    assert "its bindings' failure policy acts" in health[("fw", "node-2")].detail
    # no ACL steers to it yet (its steering held, issue 22): the pods talk unsteered (issue 33)
    held = dataclasses.replace(observed, ovn_rows=tuple(r for r in observed.ovn_rows
                                                        if r.table != "ACL"))  # fmt: skip
    detail = vnf_health(held)[("fw", "node-2")].detail
    assert "failure policy" not in detail
    assert "no traffic is steered to it yet (its steering is held: the pods' traffic flows " \
           "unsteered); next: check that the guest forwards" in detail  # fmt: skip
    # without the NB_Global options OVN never probes: the detail says why
    bare = dataclasses.replace(observed, nb_global=NbGlobal())
    assert "never probes" in vnf_health(bare)[("fw", "node-2")].detail


def test_unknown_health_says_why() -> None:
    observed = cluster(PODS)
    off = compile_target(manifests(enabled=False), observed)
    live = with_live(observed, apply_to({}, diff(off, {})))
    assert {h.detail for h in vnf_health(live).values()} == {"no health check"}
    assert vnf_health(live)[("fw", "node-1")].healthy is None
    # an instance a plan is about to create
    report = plan_report(compile_target(manifests(), observed), observed)
    assert [(i.node, i.health, i.detail) for i in report["vnf_instances"]] == [
        ("node-1", "unknown", "not in the Northbound DB yet"),
        ("node-2", "unknown", "not in the Northbound DB yet"),
    ]


def test_a_health_change_is_no_reason_to_compile_and_changes_no_plan() -> None:
    _target, observed = applied()
    planner, options, wanted = IncrementalPlanner(), CompileOptions(), manifests()
    the_plan = planner.plan(wanted, observed, options)
    assert the_plan.empty
    flipped = dataclasses.replace(observed, nf_active={"osc.fw.node_1.fail_open": "osc.fw.node_1"})
    assert planner.plan(wanted, flipped, options) is the_plan
    assert planner.last_mode == "cached"
    assert make_plan(wanted, flipped, options).empty


def test_observed_snapshot_keeps_nb_global_and_health() -> None:
    observed = dataclasses.replace(
        cluster(PODS),
        nb_global=NbGlobal({"svc_monitor_ip": "10.0.0.1"}, {MARKER: "svc_monitor_ip"}),
        nf_active={"g1": "f1", "g2": None},
    )
    data = json.loads(json.dumps(observed.to_json()))
    assert Observed.from_json(data) == observed
    del data["nb_global"], data["nf_active"]  # a snapshot written before they existed
    older = Observed.from_json(data)
    assert older.nb_global == NbGlobal() and older.nf_active == {}


# --- the NF id budget per NB -----------------------------------------------------------------


def test_the_budget_counts_ours_after_the_plan_and_everyone_elses() -> None:
    observed = dataclasses.replace(
        cluster(PODS),
        used_ids={"Network_Function": (1, 2, 3), "Network_Function_Group": (9,)},
    )
    target = compile_target(manifests(), observed)
    assert id_budget(target, observed) == {
        "Network_Function": {"used": 5, "max": 255, "ours": 2, "nodes": 2, "per_node": 1},
        "Network_Function_Group": {"used": 3, "max": 255, "ours": 2, "nodes": 2, "per_node": 1},
    }
    assert plan_report(target, observed)["nf_ids"] == id_budget(target, observed)
    assert not [w for w in target.warnings if "ids:" in w]
    live = with_live(observed, apply_to({}, diff(target, {})))
    assert live_id_budget(live) == {"Network_Function": 5, "Network_Function_Group": 3}
    # nothing of ours yet: none on any node
    none = id_budget(compile_target(desired(), observed), observed)
    assert none["Network_Function"] == {"used": 3, "max": 255, "ours": 0, "nodes": 0,
                                        "per_node": 0}  # fmt: skip
    # an NB without the tables has no budget to show
    bare = cluster(PODS, nf=False)
    assert id_budget(compile_target(desired(vnf("fw")), bare), bare) == {}
    assert live_id_budget(bare) == {}


def test_the_plan_warns_above_80_percent() -> None:
    def with_foreign(n: int) -> Observed:
        return dataclasses.replace(
            cluster(PODS), used_ids={"Network_Function": tuple(range(100, 100 + n))}
        )

    # 202 others' + our 2 = 204 = 80% of 255: not above
    assert not [w for w in compile_target(manifests(), with_foreign(202)).warnings if "ids" in w]
    (warning,) = [w for w in compile_target(manifests(), with_foreign(203)).warnings if "ids:" in w]
    assert warning.startswith("Network_Function ids: 205/255 used in this Northbound DB")
    assert "(2 by osc-gitops, 203 by others), above 80%" in warning


def test_what_the_plan_says_of_vnfs_no_probe_can_find_dead_and_of_ids_running_short() -> None:
    """Health checks off: one warning per VNF a single-VNF binding steers through, naming its
    bindings and their failure policies (none for a VNF nothing steers, or one that probes);
    one per chain whose fail-open hops cannot be found dead (none for a fail-close chain). And
    the ids: a warning once more than 80 % of a table's ids are in use after the plan."""
    off = {"healthCheck": {"enabled": False}}
    want = desired(
        sg("web", "app=web"),
        vnf("av"), vnf("fw", **off), vnf("ids", **off), vnf("spare", **off),
        binding("e-chain", "web", ["ids", "av"], 40),
        binding("a-plain", "web", "av", 5),
        binding("b-open", "web", "fw", 10, failurePolicy="fail-open"),
        binding("c-close", "web", "fw", 20),
        binding("d-chain", "web", ["fw", "av", "ids"], 30, failurePolicy="fail-open"),
    )  # fmt: skip
    obs = cluster([("shop", "w", "node-1", {"app": "web"})], nf=True)
    used = {"Network_Function": tuple(range(1, 200)),
            "Network_Function_Group": tuple(range(1, 210))}  # fmt: skip
    obs = dataclasses.replace(obs, used_ids=used)
    findings = [
        f for f in compile_target(want, obs, CompileOptions(steering="network-function")).findings
        if f.code in ("health-check", "nf-ids")
    ]  # fmt: skip
    assert sorted(findings, key=str) == sorted([
        Finding(
            "health-check", "VnfDeployment/fw", None,
            "VnfDeployment fw has healthCheck.enabled: false: OVN counts its instances healthy "
            "whenever their ports are bound, so the failure policy of Binding b-open "
            "(fail-open), c-close (fail-close) cannot act when the VNF stops forwarding (a dead "
            "VNF drops the steered traffic, fail-open or not)",
        ),
        Finding(
            "health-check", "Binding/d-chain", None,
            "Binding d-chain: VnfDeployment fw, ids of the chain fw -> av -> ids may fail open "
            "but has healthCheck.enabled: false, so it is never found dead and the chain's "
            "traffic is dropped when it stops forwarding",
        ),
        Finding(
            "nf-ids", "", None,
            "Network_Function ids: 209/255 used in this Northbound DB after this plan (10 by "
            "osc-gitops, 199 by others), above 80%: bind fewer VNFs per NB, run one NB per node "
            "(OVN-Kubernetes interconnect), or use --steering router-policy before the ids run "
            "out",
        ),
        Finding(
            "nf-ids", "", None,
            "Network_Function_Group ids: 225/255 used in this Northbound DB after this plan (16 "
            "by osc-gitops, 209 by others), above 80%: bind fewer VNFs per NB, run one NB per "
            "node (OVN-Kubernetes interconnect), or use --steering router-policy before the ids "
            "run out",
        ),
    ], key=str)  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"svc_monitor_ip_dst": "169.254.10.300"},
         "--svc-monitor-ip-dst '169.254.10.300' is not an IP address"),
        ({"svc_monitor_ip": "fe80::1"},
         "--svc-monitor-ip fe80::1 and --svc-monitor-ip-dst 169.254.254.2 must be two different "
         "addresses of the same IP version (the source and destination of OVN's probe)"),
        ({"svc_monitor_ip": "169.254.254.2"},
         "--svc-monitor-ip 169.254.254.2 and --svc-monitor-ip-dst 169.254.254.2 must be two "
         "different addresses of the same IP version (the source and destination of OVN's "
         "probe)"),
    ],
)  # fmt: skip
def test_probe_addresses_that_cannot_work_are_refused_naming_the_flag(
    flags: dict[str, str], message: str
) -> None:
    with pytest.raises(CompileError) as caught:
        compile_target(manifests(), observed_with({}), CompileOptions(**flags))
    assert str(caught.value) == message


def test_a_single_vnf_written_as_a_list_falls_back_by_its_own_policy() -> None:
    own_policy = desired(sg("web", "app=web"), vnf("fw"),
                         binding("web-fw", "web", [{"name": "fw", "failurePolicy": "fail-open"}],
                                 10))  # fmt: skip
    acls = [r for r in compile_target(own_policy, cluster(PODS)) if r.kind == "ACL"]
    assert {r.fields["network_function_group"] for r in acls} == {
        "osc.fw.node_1.fail_open", "osc.fw.node_2.fail_open"
    }  # fmt: skip
