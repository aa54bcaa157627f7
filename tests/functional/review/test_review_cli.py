"""Safe review through the CLI against the sandbox (issue #24 items 1, 2 and 6): a plan after
an apply shows which pods stop being steered (compared with the live OVN rows, from any machine)
and the likely typo; apply on a terminal asks and writes nothing unless told ``yes``; apply
records its status by default.

One sandbox for the module (OVN 26.03 NB without northd and the API emulator); each test starts
from the policies applied and leaves them applied."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.support.cli import CliResult, cli
from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import CLUSTER, POLICIES

pytestmark = pytest.mark.ovn


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SandboxCluster, Path]]:
    require_ovn_or_fail(northd=False)
    work = tmp_path_factory.mktemp("review")
    with SandboxCluster(work / "sb", nb_schema="26.03", northd=False) as cluster:
        cluster.seed_dir(CLUSTER)
        yield cluster, work


@pytest.fixture
def policies(world: tuple[SandboxCluster, Path], tmp_path: Path) -> Iterator[Path]:
    """A private copy of examples/policies, applied; applied again afterwards (so the next test
    starts from it, whatever this one changed)."""
    target = tmp_path / "policies"
    shutil.copytree(POLICIES, target)
    assert run(world, "apply", target, "--auto-approve", *WAIT).code == 0
    yield target
    shutil.rmtree(target)
    shutil.copytree(POLICIES, target)
    assert run(world, "apply", target, "--auto-approve", *WAIT).code == 0


WAIT = ("--wait", "--wait-timeout", "30s")
"""Until the steering is switched on: it is held until OVN reports the VNFs healthy (issue 22;
the sandbox plays the VNFs' answers to OVN's probe)."""


def run(world: tuple[SandboxCluster, Path], command: str, *args: object) -> CliResult:
    cluster, work = world
    conn = ["--ovn-nb", cluster.nb_remote, "--kubeconfig", cluster.kubeconfig]
    return cli(command, *args, *conn, "--cache-dir", work / "cache")


def typo(policies: Path, old: str, new: str) -> None:
    for file in policies.rglob("*.yaml"):
        text = file.read_text()
        if old in text:
            file.write_text(text.replace(old, new))
            return
    raise AssertionError(f"{old!r} not in {policies}")


def test_a_typo_warns_with_the_binding_the_count_and_the_likely_typo(
    world: tuple[SandboxCluster, Path], policies: Path
) -> None:
    typo(policies, "    - shop-backend", "    - shop-backnd")
    result = run(world, "plan", policies)
    assert result.code == 2, result.err
    out = result.out
    assert out.index(
        "Protection changes, compared with what the live OVN rows of this instance steer now:"
    ) < out.index("osc-gitops will perform the following actions:")
    assert (
        "Binding db-firewall (SecurityGroup db → firewall): 2 shop-backend pods lose their "
        "firewall; 2 → 0 pods steered" in out
    )
    assert (
        "! Binding db-firewall stops steering 2 pods it steered before (shop-backend: 2); "
        "likely typo: SecurityGroup db: no pod runs in namespace 'shop-backnd' (did you mean "
        "'shop-backend'?)"
    ) in out
    data = json.loads(run(world, "plan", policies, "-o", "json").out)
    (change,) = data["protection_changes"]
    assert change["binding"] == "db-firewall"
    assert sorted(p["pod"] for p in change["stop"]) == ["db-0", "db-1"]
    assert data["meta"]["protection_basis"]["source"] == "live"


def test_a_label_typo_in_a_vnf_node_selector(
    world: tuple[SandboxCluster, Path], policies: Path
) -> None:
    typo(policies, 'osc.io/vnf-capable: "true"', 'osc.io/vnf-capable: "ture"')
    out = run(world, "plan", policies).out
    assert "Binding api-ips stops steering 1 pod it steered before (shop-backend: 1); likely " \
           "typo: VnfDeployment ips nodeSelector: no node carries osc.io/vnf-capable=ture " \
           "(did you mean osc.io/vnf-capable=true?)" in out  # fmt: skip


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_apply_on_a_terminal_asks_and_writes_nothing_without_yes(
    world: tuple[SandboxCluster, Path], policies: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    typo(policies, "app=web", "app=wbe")
    monkeypatch.setattr("sys.stdin", _Terminal("no\n"))
    cancelled = run(world, "apply", policies)
    assert cancelled.code == 1
    assert "Do you want to apply these changes? Only 'yes' will be accepted:" in cancelled.err
    assert cancelled.err.rstrip().endswith("error: apply cancelled: nothing was written")
    assert "Protection changes" in cancelled.out and "loses its firewall" in cancelled.out
    assert run(world, "plan", policies).code == 2  # nothing was written

    monkeypatch.setattr("sys.stdin", _Terminal("yes\n"))
    approved = run(world, "apply", policies)
    assert approved.code == 0, approved.err
    assert approved.out.count("Protection changes") == 1  # shown once, before the question
    assert run(world, "plan", policies).code == 0


def test_auto_approve_and_no_terminal_never_ask(
    world: tuple[SandboxCluster, Path], policies: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    typo(policies, "app=web", "app=wbe")
    monkeypatch.setattr("sys.stdin", _Terminal(""))
    result = run(world, "apply", policies, "--auto-approve")
    assert result.code == 0 and "Do you want" not in result.err
    typo(policies, "app=wbe", "app=web")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal (CI, a pipe)
    result = run(world, "apply", policies)
    assert result.code == 0 and "Do you want" not in result.err


def test_apply_records_its_status_by_default(
    world: tuple[SandboxCluster, Path], policies: Path
) -> None:
    _, work = world
    status = cli("status", "--cache-dir", work / "cache", "-o", "json")
    assert status.code == 0, status.err
    data = json.loads(status.out)
    assert data["result"] in ("applied", "unchanged") and data["source"] == str(policies)
    assert not (work / "cache" / "applied").exists()  # no record of manifests: the NB says it


def test_a_plan_from_another_machine_compares_with_the_live_rows(
    world: tuple[SandboxCluster, Path], policies: Path, tmp_path: Path
) -> None:
    """Someone else applied (another cache dir, another kubeconfig file): the plan still says
    which pods stop being steered, from the rows; --base overrides; --kubernetes-only, which
    reads no OVN, says it cannot tell and why."""
    cluster, _ = world
    other = tmp_path / "kubeconfig"
    shutil.copy(cluster.kubeconfig, other)
    elsewhere = ["--ovn-nb", cluster.nb_remote, "--kubeconfig", other,
                 "--cache-dir", tmp_path / "laptop-cache"]  # fmt: skip
    typo(policies, "    - shop-backend", "    - shop-backnd")
    result = cli("plan", policies, *elsewhere)
    assert result.code == 2
    assert "steer now:\n  Binding db-firewall (SecurityGroup db → firewall): 2 shop-backend " \
           "pods lose their firewall; 2 → 0 pods steered\n" in result.out  # fmt: skip
    base = cli("plan", policies, *elsewhere, "--base", policies)
    assert (
        f"Protection changes, compared with the manifests in {policies}: no pod starts or stops "
        "being steered, and no route changes."
    ) in base.out
    central = cli("plan", policies, "--kubeconfig", other, "--kubernetes-only")
    assert central.code == 0, central.err
    assert "Protection changes: unknown (a --kubernetes-only plan reads no OVN rows" in central.out


def test_a_saved_plan_is_applied_exactly_and_refused_when_the_live_state_moved(
    world: tuple[SandboxCluster, Path], policies: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    cluster, _ = world
    saved = tmp_path / "plan.json"
    typo(policies, "app=web", "app=wbe")
    planned = run(world, "plan", policies, f"-out={saved}")
    assert planned.code == 2 and f"Saved the plan to {saved}." in planned.err
    # The live state moves underneath: a new pod the plan did not know of.
    cluster.add_pod("shop-frontend", "web-late", "node-1", {"app": "wbe"})
    stale = run(world, "apply", saved)
    assert stale.code == 1
    assert f"the live state changed since {saved} was planned" in stale.err
    assert (
        "now also update Port_Group osc.web.node_1" in stale.err
        and "nothing was written" in stale.err
    )
    cluster.delete_pod("shop-frontend", "web-late")

    monkeypatch.setattr("sys.stdin", _Terminal(""))  # a saved plan never asks
    applied = run(world, "apply", saved)
    assert applied.code == 0, applied.err
    assert "Do you want" not in applied.err and "Protection changes" in applied.out
    assert run(world, "plan", policies).code == 0  # exactly what was planned, converged
    again = run(world, "apply", saved)  # applied already: the fresh plan is empty
    assert again.code == 1 and "no longer update Port_Group" in again.err

    data = json.loads(saved.read_text())
    data["manifests"]["bindings"].pop("web-ips")
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    refused = run(world, "apply", tampered)
    assert refused.code == 1 and "was changed after it was saved" in refused.err
    other = run(world, "apply", saved, "--instance", "other")
    assert other.code == 1
    assert "was planned with --instance osc-gitops, this apply gives --instance other" in other.err


def test_a_snapshot_plan_compares_with_the_rows_the_snapshot_holds(
    world: tuple[SandboxCluster, Path], policies: Path, tmp_path: Path
) -> None:
    cluster, _ = world
    snapshot = tmp_path / "snapshot.json"
    taken = cli("snapshot", "-f", snapshot, "--ovn-nb", cluster.nb_remote,
                "--kubeconfig", cluster.kubeconfig)  # fmt: skip
    assert taken.code == 0, taken.err
    typo(policies, "app=web", "app=wbe")
    offline = cli("plan", policies, "--observed", snapshot)
    assert offline.code == 2
    assert (
        "Protection changes, compared with what the live OVN rows of this instance steer when "
        f"{snapshot} was taken:"
    ) in offline.out
    assert (
        "Binding web-firewall stops steering 1 pod it steered before (shop-backend: 1); likely "
        "typo: SecurityGroup web: no pod carries app=wbe (did you mean app=web?)"
    ) in offline.out
