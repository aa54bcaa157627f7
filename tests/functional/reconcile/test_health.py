"""Health checks, NB_Global ownership and the NF id budget through the CLI, on OVN 26.03 with
ovn-northd 26.03 running (issue #13 item 3, issue #16 item 6).

northd writes into the NB on its own (``Network_Function_Group.network_function_active``,
``NB_Global`` options such as ``mac_prefix``): none of it may show as drift, so ``apply``
followed by ``plan`` exits 0. No ovn-controller runs here, so no probe is ever answered: every
health-checked instance is reported ``not healthy``, which is what OVN says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from reconciler.core.model.desired import (
    HEALTH_FAILURE_COUNT,
    HEALTH_INTERVAL,
    HEALTH_SUCCESS_COUNT,
    HEALTH_TIMEOUT,
)
from tests.functional.reconcile.test_reconcile import apply, as_list, changes, plan_json, rows
from tests.support.cli import cli, conn

MARKER = "osc.io/svc-monitor.osc-gitops"
DEFAULTS = {"svc_monitor_ip": "169.254.254.1", "svc_monitor_ip_dst": "169.254.254.2"}


def nb_global(cluster: SandboxCluster) -> tuple[dict[str, str], dict[str, str]]:
    (row,) = rows(cluster, "NB_Global")
    return dict(row["options"]), dict(row["external_ids"])


def disable_checks(policies: Path, vnf: str) -> None:
    """Set ``healthCheck.enabled: false`` on one VnfDeployment of the example policies."""
    path = policies / "vnfs.yaml"
    docs = path.read_text().split("\n---\n")
    for i, doc in enumerate(docs):
        if f"\n  name: {vnf}\n" not in doc:
            continue
        if "\n  healthCheck:\n" in doc:
            docs[i] = doc.replace("\n  healthCheck:\n", "\n  healthCheck:\n    enabled: false\n")
        else:
            docs[i] = doc.rstrip("\n") + "\n  healthCheck:\n    enabled: false\n"
    path.write_text("\n---\n".join(docs))


def test_apply_then_plan_is_empty_with_northd_running(
    nf_northd_cluster: SandboxCluster, policies: Path, tmp_path: Path
) -> None:
    cluster = nf_northd_cluster
    assert cluster.forwarding_vnfs is not None
    cluster.forwarding_vnfs.stop()  # no VNF answers OVN's probe here: nothing becomes healthy
    first = plan_json(cluster, policies)
    created = {(kind, name) for action, kind, name in changes(first) if action == "create"}
    functions = {name for kind, name in created if kind == "Network_Function"}
    assert {n for k, n in created if k == "Network_Function_Health_Check"} == functions
    assert ("NB_Global", "options") in created
    applied = cli("apply", policies, *conn(cluster), "--cache-dir", tmp_path / "cache")
    assert applied.code == 0, applied.err  # converged for now: the steering is held
    cluster.ovn.wait_northd_sync()  # northd has seen (and written) everything

    again = cli("plan", policies, *conn(cluster), "-o", "json")
    plan = json.loads(again.out)
    # nothing to write (northd's verdicts are no drift), but the held steering is pending:
    # the live state is not what the manifests say, so not converged (issue 33)
    assert again.code == 2 and plan["changes"] == [], again.out
    assert plan["summary"]["pending"] == len(plan["meta"]["held"]) > 0

    # every function holds its check, with the documented defaults
    checks = {c["_uuid"]: c for c in rows(cluster, "Network_Function_Health_Check")}
    nfs = rows(cluster, "Network_Function")
    assert {n["name"] for n in nfs} == functions
    for nf in nfs:
        (check,) = (checks[u] for u in as_list(nf["health_check"]))
        assert check["name"] == nf["name"]
        assert dict(check["options"]) == {
            "interval": str(HEALTH_INTERVAL),
            "timeout": str(HEALTH_TIMEOUT),
            "success_count": str(HEALTH_SUCCESS_COUNT),
            "failure_count": str(HEALTH_FAILURE_COUNT),
        }
        assert dict(check["external_ids"])["osc.io/owner"] == "osc-gitops"
    # the service-monitor options nobody had set, recorded as ours, beside northd's own
    options, external_ids = nb_global(cluster)
    assert {k: options[k] for k in DEFAULTS} == DEFAULTS
    assert external_ids[MARKER] == "svc_monitor_ip,svc_monitor_ip_dst"
    assert "mac_prefix" in options and "svc_monitor_mac" in options  # northd's
    # northd judged every group: nothing answers its probes here, so none is active
    groups = rows(cluster, "Network_Function_Group")
    assert groups and all(as_list(g["network_function_active"]) == [] for g in groups)

    # the plan reports health as OVN sees it, and the id budget of this NB
    health = {(i["vnf"], i["node"]): i["health"] for i in plan["meta"]["vnf_instances"]}
    assert health == {
        ("firewall", "node-1"): "not healthy",
        ("firewall", "node-2"): "not healthy",
        ("ips", "node-1"): "not healthy",
    }
    assert plan["meta"]["nf_ids"] == {
        "Network_Function": {"used": 3, "max": 255, "ours": 3, "nodes": 2, "per_node": 2},
        "Network_Function_Group": {
            "used": len(groups), "max": 255, "ours": len(groups), "nodes": 2, "per_node": 3
        },
    }  # fmt: skip
    text = cli("plan", policies, *conn(cluster))
    assert "firewall on node-1: not healthy" in text.out
    assert (
        f"Network_Function 3/255 (ours: 2 nodes x up to 2), Network_Function_Group "
        f"{len(groups)}/255 (ours: 2 nodes x up to 3)" in text.out
    )
    # and so does the status file apply wrote
    status = cli("status", "--cache-dir", tmp_path / "cache", "-o", "json")
    assert {i["health"] for i in json.loads(status.out)["vnf_instances"]} == {"not healthy"}


def test_options_someone_else_set_are_never_changed_and_prune_removes_only_ours(
    nf_northd_cluster: SandboxCluster, policies: Path, tmp_path: Path
) -> None:
    cluster = nf_northd_cluster
    cluster.ovn.nbctl("set", "NB_Global", ".", "options:svc_monitor_ip=10.1.2.3")
    before_options, before_ids = nb_global(cluster)

    plan = plan_json(cluster, policies, "--svc-monitor-ip", "169.254.254.9")
    (mine,) = [c for c in plan["changes"] if c["resource"]["kind"] == "NB_Global"]
    assert mine["action"] == "create"
    assert mine["after"] == {
        "options": {"svc_monitor_ip_dst": "169.254.254.2"},
        "external_ids": {MARKER: "svc_monitor_ip_dst"},
    }
    assert any(
        "svc_monitor_ip is 10.1.2.3, set by someone else" in w and "169.254.254.9" in w
        for w in plan["warnings"]
    )
    apply(cluster, policies, "--svc-monitor-ip", "169.254.254.9")
    options, external_ids = nb_global(cluster)
    assert options["svc_monitor_ip"] == "10.1.2.3"
    assert options["svc_monitor_ip_dst"] == "169.254.254.2"
    assert external_ids[MARKER] == "svc_monitor_ip_dst"
    cluster.ovn.wait_northd_sync()
    assert cli("plan", policies, *conn(cluster), "--svc-monitor-ip", "169.254.254.9").code == 0

    # prune: exactly what we set goes; the admin's value and northd's options stay
    empty = tmp_path / "empty"
    empty.mkdir()
    apply(cluster, empty, "--allow-empty")
    options, external_ids = nb_global(cluster)
    assert MARKER not in external_ids and external_ids == before_ids
    assert "svc_monitor_ip_dst" not in options
    assert options["svc_monitor_ip"] == "10.1.2.3"
    assert {k: v for k, v in options.items() if k in before_options} == before_options
    assert rows(cluster, "Network_Function") == []
    assert rows(cluster, "Network_Function_Health_Check") == []
    cluster.ovn.wait_northd_sync()
    assert cli("plan", empty, *conn(cluster)).code == 0


def test_svc_monitor_addresses_come_from_the_environment_too(
    nf_northd_cluster: SandboxCluster, policies: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = nf_northd_cluster
    monkeypatch.setenv("OSC_SVC_MONITOR_IP", "169.254.77.1")
    monkeypatch.setenv("OSC_SVC_MONITOR_IP_DST", "169.254.77.2")
    apply(cluster, policies)
    options, _ = nb_global(cluster)
    assert options["svc_monitor_ip"] == "169.254.77.1"
    assert options["svc_monitor_ip_dst"] == "169.254.77.2"
    bad = cli("plan", policies, *conn(cluster), "--svc-monitor-ip", "not-an-ip")
    assert bad.code == 1 and "--svc-monitor-ip 'not-an-ip' is not an IP address" in bad.err


def test_disabled_checks_warn_and_our_options_go_with_the_last_check(
    nf_northd_cluster: SandboxCluster, policies: Path
) -> None:
    cluster = nf_northd_cluster
    apply(cluster, policies)
    disable_checks(policies, "firewall")
    plan = plan_json(cluster, policies)
    assert {(a, k) for a, k, n in changes(plan)} == {("delete", "Network_Function_Health_Check")}
    assert {n for _a, _k, n in changes(plan)} == {"osc.firewall.node_1", "osc.firewall.node_2"}
    (warning,) = [w for w in plan["warnings"] if "healthCheck.enabled: false" in w]
    assert "VnfDeployment firewall" in warning and "cannot act" in warning
    apply(cluster, policies)
    assert [c["name"] for c in rows(cluster, "Network_Function_Health_Check")] == ["osc.ips.node_1"]
    assert len(rows(cluster, "Network_Function")) == 3  # the functions stay
    health = {
        (i["vnf"], i["node"]): (i["health"], i["detail"])
        for i in plan_json(cluster, policies)["meta"]["vnf_instances"]
    }
    assert health[("firewall", "node-1")] == ("unknown", "no health check")

    disable_checks(policies, "ips")  # the last check goes: so do the options we set
    plan = plan_json(cluster, policies)
    assert ("delete", "NB_Global", "options") in changes(plan)
    apply(cluster, policies)
    options, external_ids = nb_global(cluster)
    assert not set(DEFAULTS) & set(options) and MARKER not in external_ids
    cluster.ovn.wait_northd_sync()
    assert cli("plan", policies, *conn(cluster)).code == 0
