"""A chain edit is visible in the review (issue 33 item 1): through the CLI against the sandbox,
a reordered chain and a removed hop are named per pod set, in text, JSON and Markdown (the
removed hop struck through in the diagram), with a warning, compared with the live rows and with
``--base``; a new binding whose VNF is not healthy yet says its pods will be steered once it is.

One sandbox for the module (OVN 26.03 NB without northd and the API emulator, the VNFs' health
played as ``test_review_cli`` plays it); the tests run in order on one copy of the policies."""

from __future__ import annotations

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

WAIT = ("--wait", "--wait-timeout", "30s")
WEB_IPS = "  vnf: ips\n  order: 5"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SandboxCluster, Path]]:
    require_ovn_or_fail(northd=False)
    work = tmp_path_factory.mktemp("routes")
    with SandboxCluster(work / "sb", nb_schema="26.03", northd=False) as cluster:
        cluster.seed_dir(CLUSTER)
        yield cluster, work


def run(world: tuple[SandboxCluster, Path], command: str, *args: object) -> CliResult:
    cluster, work = world
    conn = ["--ovn-nb", cluster.nb_remote, "--kubeconfig", cluster.kubeconfig]
    return cli(command, *args, *conn, "--cache-dir", work / "cache")


def chain(policies: Path, hops: str) -> None:
    """Binding web-ips (order 5, group web) through ``hops``."""
    file = policies / "bindings" / "web.yaml"
    text = file.read_text()
    start = text.index("  vnf: ", text.index("name: web-ips"))
    end = text.index("\n", start)
    file.write_text(f"{text[:start]}  vnf: {hops}{text[end:]}")


def test_chain_reorder_and_removed_hop_are_named_per_pod(
    world: tuple[SandboxCluster, Path], tmp_path: Path
) -> None:
    policies, base = tmp_path / "policies", tmp_path / "base"
    shutil.copytree(POLICIES, policies)
    chain(policies, "[firewall, ips]")
    applied = run(world, "apply", policies, "--auto-approve", *WAIT)
    assert applied.code == 0, applied.err
    shutil.copytree(policies, base)

    # 1. the order of the chain changes: every pod of the binding crosses ips first now
    chain(policies, "[ips, firewall]")
    reorder = "chain order changes: firewall → ips becomes ips → firewall"
    for extra in ((), ("--base", base)):
        plan = run(world, "plan", policies, *extra)
        assert plan.code == 2, plan.err
        head = plan.out.index("Protection changes")
        assert plan.out.index(reorder) > head, plan.out
        assert "no pod starts or stops being steered" not in plan.out
    data = json.loads(run(world, "plan", policies, "-o", "json").out)
    (change,) = data["protection_changes"]
    (route,) = change["route_changes"]
    assert (change["binding"], route["order_changed"], route["lost"]) == ("web-ips", True, [])
    assert (route["before"]["vnfs"], route["after"]["vnfs"]) == (
        ["firewall", "ips"], ["ips", "firewall"])  # fmt: skip
    assert {p["pod"] for p in route["pods"]} == {"web-1", "cdn-edge-1", "web-canary"}
    assert run(world, "apply", policies, "--auto-approve", *WAIT).code == 0
    shutil.rmtree(base)
    shutil.copytree(policies, base)

    # 2. the firewall hop is removed: pods stay steered but lose it, and a warning says so
    chain(policies, "ips")
    lost = "3 pods lose firewall (ips → firewall becomes ips)"
    warning = "Binding web-ips: 3 pods stop crossing firewall (ips → firewall becomes ips)"
    for extra in ((), ("--base", base)):
        plan = run(world, "plan", policies, *extra)
        assert plan.code == 2
        assert f"Binding web-ips (SecurityGroup web → ips): {lost}\n" in plan.out, plan.out
        assert "      ~ shop-frontend/web-1 on node-1 (via app=web)\n" in plan.out
        assert f"! {warning}" in plan.out
        markdown = run(world, "plan", policies, "-o", "markdown", *extra).out
        assert f"- 🔴 Binding web-ips (SecurityGroup web → ips): {lost}" in markdown
        assert '["<s>VNF firewall</s><br/>removed"]' in markdown
        assert f"- ⚠️ {warning}" in markdown
    route = json.loads(run(world, "plan", policies, "-o", "json").out)["protection_changes"][0]
    assert route["route_changes"][0]["lost"] == ["firewall"]
    assert run(world, "apply", policies, "--auto-approve", *WAIT).code == 0
    assert run(world, "plan", policies).code == 0


def test_a_new_binding_says_its_pods_will_be_steered_once_its_vnf_is_healthy(
    world: tuple[SandboxCluster, Path], tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    assert run(world, "apply", policies, "--auto-approve", *WAIT).code == 0
    with (policies / "vnfs.yaml").open("a") as fh:
        fh.write(
            "---\napiVersion: osc.io/v1alpha1\nkind: VnfDeployment\nmetadata: {name: ids}\n"
            "spec: {namespace: osc-vnfs, image: quay.io/example/vnf-ids:1.0}\n---\n"
            "apiVersion: osc.io/v1alpha1\nkind: Binding\nmetadata: {name: db-ids}\n"
            "spec: {securityGroup: db, vnf: ids, order: 50}\n"
        )
    plan = run(world, "plan", policies)
    assert plan.code == 2
    assert (
        "  New Binding db-ids (SecurityGroup db → ids): 2 pods of shop-backend will be steered "
        "once their VNFs are healthy\n"
        "      + shop-backend/db-0 on node-1 (via role=database), once healthy\n"
    ) in plan.out, plan.out
    data = json.loads(run(world, "plan", policies, "-o", "json").out)
    (change,) = data["protection_changes"]
    assert (change["change"], change["start"], len(change["pending"])) == ("added", [], 2)
    assert run(world, "apply", policies, "--auto-approve", *WAIT).code == 0
    shutil.rmtree(policies)
    shutil.copytree(POLICIES, policies)
    assert run(world, "apply", policies, "--auto-approve", *WAIT).code == 0
