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
from reconciler.core.plan import Change
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
         "--events", "2", "--out", str(out), "--results", str(tmp_path / "r.json"), "--no-plot"]
    )  # fmt: skip
    assert code == 0
    data = json.loads((tmp_path / "r.json").read_text())
    (scale,) = data["scales"]
    # the three ways wrote the same rows (run.py checks a plan against them is empty)
    assert scale["owned_ovn_rows"] == sum(scale["ovn_rows_by_table"].values())
    assert scale["ovn_rows_by_table"]["Port_Group"] == 6 * 3
    for figure in (
        scale["raw"]["total"],
        scale["nbctl"]["total"],
        scale["apply_inproc"]["ovn_transaction"],
        scale["cold_apply"]["seconds"],
        scale["cold_plan"]["seconds"],
        scale["noop"]["seconds"],
        scale["label"]["p50"],
    ):
        assert figure > 0 and math.isfinite(figure)
    assert scale["label"]["events"] == 2
    assert scale["cold_plan"]["rss_mib"] > 10
    text = out.read_text()
    assert "(a) raw JSON-RPC" in text and "batched `ovn-nbctl`" in text
    assert "pod labelled" in text
    # re-rendering from the JSON keeps one generated block
    again = ["--report-only", "--out", str(out), "--results", str(tmp_path / "r.json")]
    assert main([*again, "--no-plot"]) == 0
    assert out.read_text().count("bench:begin") == 1
