"""Smoke test of ``python -m bench`` at a tiny scale: every figure is produced, the three ways
write the same rows, and the report renders. No timing is asserted (the machine is shared)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import ways
from bench.__main__ import main
from bench.scenario import Scale, group_labels, kube_objects, manifests, pod_labels
from reconciler.core.model.plan import Change
from reconciler.manifests.load import load_path
from tests.support.ovn import require_ovn_or_fail

pytestmark = pytest.mark.ovn


def test_scenario_is_deterministic_and_valid(tmp_path: Path) -> None:
    scale = Scale(pods=300, nodes=3, groups=9, bindings=9)
    assert manifests(scale) == manifests(scale)
    (tmp_path / "p.yaml").write_text(manifests(scale))
    desired = load_path(tmp_path)
    assert len(desired.security_groups) == 9
    assert len(desired.bindings) == 9
    assert len(desired.vnfs) == 3
    assert [len(group_labels(g)) for g in range(3)] == [1, 2, 3]
    namespaces, nodes, pods = kube_objects(scale)
    assert {n["metadata"]["name"] for n in namespaces} >= {"ns-00", "osc-vnfs"}
    assert len(nodes) == 3 and len(pods) == 300
    ips = [json.loads(p["metadata"]["annotations"]["k8s.ovn.org/pod-networks"])["default"]
           ["ip_addresses"][0] for p in pods]  # fmt: skip
    assert len(set(ips)) == 300, "every pod has its own address"
    assert pods[7]["metadata"]["labels"] == pod_labels(7)


def test_nbctl_batches_respect_the_argv_budget() -> None:
    ext = {"osc.io/owner": "osc-gitops"}
    changes = [
        Change("create", "Logical_Router_Policy", f"k{i}", "Binding/b", "n", None,
               {"router": "r", "priority": 1000, "match": "ip4.dst == 10.0.0.0/8" + "x" * 50,
                "action": "reroute", "nexthops": ["10.0.0.1"], "external_ids": ext})
        for i in range(400)
    ]  # fmt: skip
    batches = ways.nbctl_batches(changes, budget=10_000)
    assert len(batches) > 1
    for words in batches:
        assert sum(len(w) + 9 for w in words) < 2 * 10_000
        # every batch attaches the rows it created with one `add` per parent
        assert words.count("add") == 1
    created = sum(w.startswith("--id=@") for words in batches for w in words)
    assert created == 400


def test_bench_runs_end_to_end_at_tiny_scale(tmp_path: Path) -> None:
    require_ovn_or_fail(northd=False)
    out = tmp_path / "benchmarks.md"
    code = main(
        ["--scales", "60", "--nodes", "3", "--groups", "6", "--bindings", "6", "--runs", "1",
         "--events", "2", "--northd-scale", "60", "--out", str(out),
         "--results", str(tmp_path / "r.json"), "--no-plot"]
    )  # fmt: skip
    assert code == 0
    data = json.loads((tmp_path / "r.json").read_text())
    backends = {m["steering"]: m for m in data["measurements"]}
    assert set(backends) == {"network-function", "router-policy"}
    for steering, scale in backends.items():
        # the three ways wrote the same rows (run.py checks a plan against them is empty)
        assert scale["owned_ovn_rows"] == sum(scale["ovn_rows_by_table"].values()), steering
        # a Port_Group per (group, node) with members: at most 6 groups x 3 nodes
        assert 0 < scale["ovn_rows_by_table"]["Port_Group"] <= 6 * 3
        warm = scale["warm"]
        for figure in (
            scale["raw"]["total"],
            scale["nbctl"]["total"],
            scale["apply_inproc"]["ovn_transaction"],
            scale["cold_apply"]["seconds"],
            scale["cold_plan"]["seconds"],
            warm["noop"][0],
            warm["label"]["p50"],
        ):
            assert figure > 0 and math.isfinite(figure), steering
        assert warm["label"]["events"] == 2
        assert scale["cold_plan"]["rss_mib"] > 10
        assert all("load" in run for run in scale["raw_runs"]["cold_apply"])
        assert [k for k, _rss in warm["rss_samples"]] == [0, 2]
    assert backends["network-function"]["ovn_rows_by_table"]["Network_Function"] == 3
    nf_rows = backends["network-function"]["ovn_rows_by_table"]
    assert nf_rows["ACL"] == nf_rows["Port_Group"]  # one exit-lport ACL per present pair
    assert {r["steering"] for r in data["northd"]} == set(backends)
    text = out.read_text()
    assert "(a) raw JSON-RPC" in text and "batched `ovn-nbctl`" in text
    assert "pod labelled" in text and "| figure | network-function | router-policy |" in text
    # re-rendering from the JSON keeps one generated block
    again = ["--report-only", "--out", str(out), "--results", str(tmp_path / "r.json")]
    assert main([*again, "--no-plot"]) == 0
    assert out.read_text().count("bench:begin") == 1


def test_the_nf_nbctl_script_uses_the_26_03_commands() -> None:
    ext = {"osc.io/owner": "osc-gitops", "osc.io/key": "k"}
    changes = [
        Change("create", "ACL", "a", "Binding/b", "n", None,
               {"port_group": "pg", "name": "b", "direction": "to-lport", "priority": 1089,
                "tier": 3, "match": "outport == @pg && ip", "action": "allow-related",
                "network_function_group": "g", "external_ids": ext}),
        Change("create", "Port_Group", "pg", "SecurityGroup/s", "n", None,
               {"name": "pg", "ports": ["p1"], "external_ids": ext}),
        Change("create", "Network_Function_Group", "g", "VnfDeployment/v", "n", None,
               {"name": "g", "id": 1, "mode": "inline", "fallback": "fail-close",
                "network_function": ["f"], "external_ids": ext}),
        Change("create", "Network_Function", "f", "VnfDeployment/v", "n", None,
               {"name": "f", "id": 1, "inport": "in", "outport": "out", "external_ids": ext}),
    ]  # fmt: skip
    script = ways.nbctl_nf_script(changes)
    commands = [w[1] if w[1] != "--type=port-group" else "acl-add" for w in script.creates]
    # every name a step uses exists before it: functions, then groups, then port groups, ACLs
    assert commands == ["nf-add", "nfg-add", "pg-add", "acl-add"]
    acl = script.creates[-1]
    assert acl[-3:] == ["outport == @pg && ip", "allow-related", "g"] and "--tier=3" in acl
    assert script.later["ACL"] == {("to-lport", 1089, "outport == @pg && ip"): [
        'external_ids={"osc.io/owner"="osc-gitops","osc.io/key"="k"}']}  # fmt: skip
    assert script.later["Network_Function_Group"]["g"][-1] == 'fallback="fail-close"'
