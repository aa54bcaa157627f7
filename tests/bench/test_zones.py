"""``python -m bench.zones``: the sparse interconnect world it builds (every node in the API,
NBs only for the sampled nodes, each with every other node's transit port) and its report.
The measurements themselves are fresh processes (seconds each): the benchmark runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.zones import TRANSIT_SWITCH, ZonedCluster

from bench.scenario import Scale, node_name
from bench.zones import BEGIN, GOALS, build, changes_applied, report, write_block
from tests.support.ovn import require_ovn_or_fail

pytestmark = pytest.mark.ovn


def test_the_world_has_every_node_and_nbs_only_for_the_sampled_ones(tmp_path: Path) -> None:
    require_ovn_or_fail(northd=False)
    scale = Scale(pods=60, nodes=6, vnfs=1, both_every=0)
    sampled = [node_name(0), node_name(3)]
    with ZonedCluster(tmp_path / "z", distribution="sid") as zones:
        build(zones, scale, sampled)
        assert zones.nodes == sampled
        assert len(zones.kube.objects("Node")) == 6 and len(zones.kube.objects("Pod")) == 60
        node3 = zones.kube.get_object("Node", None, node_name(3))
        assert node3 is not None and node3["metadata"]["annotations"]["k8s.ovn.org/node-id"] == "4"
        for node in sampled:
            dump = ovsdb_rpc.dump(zones.nb_remote(node), "OVN_Northbound",
                                  ["Logical_Switch", "Logical_Switch_Port"])  # fmt: skip
            names = {p["name"] for p in dump["Logical_Switch_Port"]}
            # its own pods only, and the transit port of each of the five other nodes
            assert sum("_pod-" in n for n in names) == 10
            remote = {f"tstor-{node_name(i)}" for i in range(6)} - {f"tstor-{node}"}
            assert remote <= names
            transit = next(s for s in dump["Logical_Switch"] if s["name"] == TRANSIT_SWITCH)
            assert len(transit["ports"]) == 6


def _run(seconds: float, load: float = 1.0, rss: float = 70.0) -> dict[str, Any]:
    return {"seconds": seconds, "cpu_seconds": seconds * 0.8, "rss_mib": rss, "load": load,
            "rows": 406, "code": 0}  # fmt: skip


def test_the_report_states_each_figure_against_its_goal(tmp_path: Path) -> None:
    result = {
        "scale": {"pods": 100_000, "nodes": 1000, "groups": 200, "bindings": 200, "vnfs": 1},
        "zones": ["node-000", "node-333"], "machine": "x86_64, 2 cores", "started": "t0",
        "finished": "t1", "seed_seconds": 12.0, "pod_list_s": 0.12,
        "central": {"applies": [_run(4.2), _run(4.6, 1.5)], "vms": 1000, "nads": 2000,
                    "plan": _run(1.1),
                    "running": {"noop_pass_s": 0.3, "passes": 5, "load": 1.0,
                                "vm_repaired_s": 0.05, "vm_load": 1.0, "rss_mib": 120,
                                "hwm_mib": 130}},
        "agents": [{"node": "node-000", "applies": [_run(0.45), _run(0.6, rss=85)],
                    "plan": _run(0.4)}],
        "label": {"label_seconds": [0.01, 0.02, 0.015], "loads": [0.5, 0.7], "rss_mib": 75,
                  "hwm_mib": 79, "idle_rss_mib": 74},
    }  # fmt: skip
    text = report(result)
    assert f"≤ {GOALS['central_apply_s']:g} ✅" in text  # median 4.4 s
    agent = next(line for line in text.splitlines() if "cold `apply --node`" in line)
    assert "≤ 0.5 ❌" in agent and "| 2 (1 zones) |" in agent
    rss = next(line for line in text.splitlines() if "peak RSS of that apply" in line
               and "agent" in line)  # fmt: skip
    assert "85 MiB" in rss and "≤ 80 ❌" in rss
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\nkept\n")
    write_block(text, out)
    write_block(text, out)
    assert out.read_text().count(BEGIN) == 1 and "kept" in out.read_text()


def test_changes_applied_reads_the_apply_summary() -> None:
    assert changes_applied("...\nApply complete: 406 change(s) applied, converged") == 406
    assert changes_applied("No changes.") == 0
