"""Protection changes compare with the live OVN rows by default, through the CLI and offline
(``plan --observed``): a pull request's plan of a snapshot, plain or zoned, says which pods stop
being steered and the likely typo with no record of any apply on the machine that plans."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.planning.full import compile_plan
from reconciler.core.planning.slicing import NodeScope, kubernetes_observed
from reconciler.core.planning.zoned import ZonedSnapshot
from reconciler.manifests.load import load_path
from tests.support.cli import cli
from tests.support.paths import POLICIES
from tests.support.simulate import apply_to, live_of, northd_healthy, with_live
from tests.unit.cli.snapshots import cluster_observed, converged, converged_snapshot

TYPO = (
    "! Binding db-firewall stops steering 2 pods it steered before (shop-backend: 2); likely "
    "typo: SecurityGroup db: no pod runs in namespace 'shop-backnd' (did you mean "
    "'shop-backend'?)"
)


@pytest.fixture(autouse=True)
def no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine that never applied anything (an empty cache dir)."""
    monkeypatch.setenv("OSC_CACHE_DIR", str(tmp_path / "empty-cache"))


def edited(tmp_path: Path, old: str, new: str) -> Path:
    folder = tmp_path / "policies"
    shutil.copytree(POLICIES, folder)
    for file in folder.rglob("*.yaml"):
        if old in file.read_text():
            file.write_text(file.read_text().replace(old, new))
            return folder
    raise AssertionError(f"{old!r} not in {POLICIES}")


def test_a_snapshot_plan_compares_with_the_rows_it_holds(tmp_path: Path) -> None:
    snapshot = converged_snapshot(tmp_path)
    typo = edited(tmp_path, "    - shop-backend", "    - shop-backnd")
    result = cli("plan", typo, "--observed", snapshot)
    assert result.code == 2, result.err
    assert (
        f"Protection changes, compared with what the live OVN rows of this instance steer when "
        f"{snapshot} was taken:\n"
        "  Binding db-firewall (SecurityGroup db → firewall): 2 shop-backend pods lose their "
        "firewall; 2 → 0 pods steered\n"
        "      - shop-backend/db-0 on node-1 (via role=database)\n"
        "      - shop-backend/db-1 on node-2 (via role=database)\n"
    ) in result.out
    assert TYPO in result.out
    data = json.loads(cli("plan", typo, "--observed", snapshot, "-o", "json").out)
    assert data["meta"]["protection_basis"]["source"] == "live"
    assert [p["pod"] for p in data["protection_changes"][0]["stop"]] == ["db-0", "db-1"]

    same = cli("plan", POLICIES, "--observed", snapshot)
    assert same.code == 0
    assert "steer when" in same.out and "no pod starts or stops being steered" in same.out


def test_a_label_typo_lists_the_pods_without_a_label_the_manifests_no_longer_have(
    tmp_path: Path,
) -> None:
    snapshot = converged_snapshot(tmp_path)
    typo = edited(tmp_path, "role=database", "role=databse")
    result = cli("plan", typo, "--observed", snapshot)
    assert "      - shop-backend/db-0 on node-1\n" in result.out
    assert "likely typo: SecurityGroup db: no pod carries role=databse (did you mean " \
           "role=database?)" in result.out  # fmt: skip
    stop = json.loads(cli("plan", typo, "--observed", snapshot, "-o", "json").out)
    assert stop["protection_changes"][0]["stop"][0]["label"] is None


def test_a_zoned_snapshot_compares_with_the_rows_of_every_zone(tmp_path: Path) -> None:
    """``snapshot --all-nodes`` of an interconnect cluster: each zone holds the rows its agent
    applied; the plan's protection changes gather them from every zone."""
    desired, options = load_path(POLICIES), CompileOptions()
    world = cluster_observed()
    applied = converged(POLICIES, world)
    central = kubernetes_observed(
        [(node, f"10.244.{i + 1}.0/24") for i, node in enumerate(world.nodes)],
        applied.kube_objects,
    )
    slices = {}
    for node in ("node-1", "node-2"):
        scope = NodeScope(node)
        view = scope.view(world)
        zone = view.observed
        for _ in range(3):  # steering held until northd reports the VNFs healthy (issue 22)
            plan = scope.restrict(compile_plan(desired, zone, scope.options(options)).plan, view)
            zone = northd_healthy(with_live(zone, apply_to(live_of(zone), plan)))
        slices[node] = (zone, "2026-11-26T10:00:00Z", "r1")
    snapshot = tmp_path / "zoned.json"
    snapshot.write_text(json.dumps(ZonedSnapshot.assemble(central, slices).to_json()))
    assert cli("plan", POLICIES, "--observed", snapshot).code == 0  # converged in every zone
    result = cli("plan", edited(tmp_path, "    - shop-backend", "    - shop-backnd"),
                 "--observed", snapshot)  # fmt: skip
    assert result.code == 2, result.err
    assert "      - shop-backend/db-0 on node-1 (via role=database)\n" in result.out
    assert "      - shop-backend/db-1 on node-2 (via role=database)\n" in result.out
    assert TYPO in result.out
