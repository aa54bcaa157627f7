"""What the CLI tells a user in the corners an independent check found unclear, through the CLI
against the sandbox: ``run --once`` after a failed pass, a node agent pointed at a node that
does not exist, a saved plan given to ``plan``, the protection headline of new, removed and
mistyped bindings, and the git flags' help.

One sandbox for the module (OVN 26.03 NB without northd and the API emulator), the example
policies applied once; no test leaves a change behind."""

from __future__ import annotations

import json
import logging
import re
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.support.cli import CliResult, cli
from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import CLUSTER, POLICIES

pytestmark = pytest.mark.ovn

World = tuple[SandboxCluster, Path]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_ovn_or_fail(northd=False)
    work = tmp_path_factory.mktemp("clarity")
    with SandboxCluster(work / "sb", nb_schema="26.03", northd=False) as cluster:
        cluster.seed_dir(CLUSTER)
        # --wait: the steering is held until OVN reports the VNFs healthy (issue 22; the
        # sandbox plays their answers to OVN's probe)
        applied = run(cluster, work, "apply", POLICIES, "--auto-approve", "--wait")
        assert applied.code == 0, applied.err
        yield cluster, work


def run(cluster: SandboxCluster, work: Path, command: str, *args: object) -> CliResult:
    conn = ["--ovn-nb", cluster.nb_remote, "--kubeconfig", cluster.kubeconfig]
    return cli(command, *args, *conn, "--cache-dir", work / "cache")


def on(world: World, command: str, *args: object) -> CliResult:
    return run(*world, command, *args)


@pytest.fixture
def restored_process() -> Iterator[None]:
    """``run`` in this process sets up logging and signal handlers: put them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    signals = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for sig, handler in signals.items():
        signal.signal(sig, handler)


def edited(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of the example policies with ``old`` replaced by ``new`` in one file."""
    target = tmp_path / name
    shutil.copytree(POLICIES, target)
    for file in sorted(target.rglob("*.yaml")):
        if old in file.read_text():
            file.write_text(file.read_text().replace(old, new))
            return target
    raise AssertionError(f"{old!r} not in {POLICIES}")


def test_run_once_says_it_exits_and_never_promises_a_retry(
    world: World, tmp_path: Path, restored_process: None
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    failed = on(world, "run", empty, "--once", "--log-format", "text")
    assert failed.code == 1
    assert "ERROR reconcile failed error=no manifests were found" in failed.err
    assert "cause=empty-refused trigger=once" in failed.err
    assert "retry" not in failed.err.replace("no retry", "")
    assert failed.err.rstrip().endswith(
        "ERROR run --once: the pass did not reconcile; exiting with code 1, no retry result=error"
    )

    done = on(world, "run", POLICIES, "--once", "--log-format", "json")
    assert done.code == 0, done.err
    last = json.loads(done.err.strip().splitlines()[-1])
    assert last["msg"] == "run --once: reconciled; exiting with code 0"
    assert last["result"] == "unchanged"


def test_a_node_agent_for_a_node_that_does_not_exist_is_an_error(world: World) -> None:
    cluster, _ = world
    missing = 'error: --node node-9: nodes "node-9" not found in the Kubernetes cluster; give ' \
              "the name of the node this agent runs on (kubectl get nodes)\n"  # fmt: skip
    for command in (("plan",), ("apply", "--auto-approve")):
        result = on(world, command[0], POLICIES, "--node", "node-9", *command[1:])
        assert result.code == 1, (command, result.out)
        assert result.err.endswith(missing), result.err
        assert "No changes" not in result.out
    data = json.loads(on(world, "plan", POLICIES, "--node", "node-9", "-o", "json").out)
    assert data["error"]["cause"] == "node-not-found"

    # A Kubernetes node whose logical switch this NB does not hold (another zone's NB, or a node
    # OVN-Kubernetes has not set up yet).
    cluster.kube.add_objects([{"kind": "Node", "metadata": {"name": "node-3"}}])
    try:
        result = on(world, "plan", POLICIES, "--node", "node-3")
        assert result.code == 1
        assert result.err == (
            'error: --node node-3: the OVN Northbound DB has no logical switch "node-3" (its '
            "logical switches: node-1, node-2); --ovn-nb must be the NB of node-3's zone, or "
            "OVN-Kubernetes has not set the node up yet\n"
        )
    finally:
        cluster.kube.delete(cluster.kube.resource_type("Node"), "", "node-3")
    real = on(world, "plan", POLICIES, "--node", "node-1")  # adopts the central run's rows
    assert real.code == 2 and "error" not in real.err
    assert on(world, "plan", POLICIES).code == 0  # nothing was written


def test_run_once_for_a_missing_node_fails(world: World, restored_process: None) -> None:
    result = on(world, "run", POLICIES, "--node", "node-9", "--once", "--log-format", "text",
                "--status-namespace", "default")  # fmt: skip
    assert result.code == 1
    assert 'nodes "node-9" not found' in result.err and "cause=node-not-found" in result.err
    assert "exiting with code 1, no retry" in result.err


def test_a_saved_plan_given_to_plan_says_what_it_is_and_show_prints_it(
    world: World, tmp_path: Path
) -> None:
    typo = edited(tmp_path, "typo", "    - shop-backend", "    - shop-backnd")
    saved = tmp_path / "plan.json"
    planned = on(world, "plan", typo, "-out", saved)
    assert planned.code == 2, planned.err

    for command in ("plan", "validate"):
        refused = cli(command, saved)
        assert refused.code == 1
        assert refused.err.startswith(
            f"error: {saved} is a saved plan (osc-gitops plan -out, made "
        )
        assert refused.err.endswith(
            f"from {typo}), not manifests: `osc-gitops show {saved}` prints it, `osc-gitops "
            f"apply {saved}` applies exactly it; to plan again: osc-gitops plan {typo}\n"
        )
        assert "apiVersion" not in refused.err  # not read as broken manifests

    shown = cli("show", saved)
    assert shown.code == 0, shown.err
    assert shown.err.startswith(f"Saved plan {saved}: made ")
    assert f"from {typo}, instance osc-gitops, against {world[0].nb_remote}." in shown.err
    assert f"To apply exactly this plan: osc-gitops apply {saved}" in shown.err
    text = planned.out.splitlines()
    assert shown.out.splitlines()[1:] == text[1:]  # the same plan; the meta line's key order aside
    # A fresh plan is made a moment later: an emptied group's osc.io/empty-since (to the
    # second) may differ from the saved one's, and is the only thing that may.
    assert _without_empty_since(cli("show", saved, "-o", "json").out) == _without_empty_since(
        on(world, "plan", typo, "-o", "json").out
    )
    not_saved = cli("show", POLICIES / "vnfs.yaml")
    assert not_saved.code == 1 and "is not a saved plan" in not_saved.err


def _without_empty_since(text: str) -> object:
    """A JSON plan with the ``osc.io/empty-since`` markers' moments blanked."""
    return json.loads(re.sub(r'("osc\.io/empty-since": )"[^"]*"', r'\1"…"', text))


def test_the_protection_headline_reads_like_the_rest_of_the_plan(
    world: World, tmp_path: Path
) -> None:
    renamed = edited(tmp_path, "renamed", "name: db-firewall", "name: db-fw")
    out = on(world, "plan", renamed).out
    assert (
        "  Binding db-firewall removed (SecurityGroup db → firewall): 2 shop-backend pods lose "
        "their firewall\n"
    ) in out
    assert (
        "  New Binding db-fw (SecurityGroup db → firewall): 2 shop-backend pods newly steered "
        "through firewall\n"
        "      + shop-backend/db-0 on node-1 (via role=database)\n"
    ) in out
    markdown = on(world, "plan", renamed, "-o", "markdown").out
    assert "- 🟢 New Binding db-fw (SecurityGroup db → firewall): 2 shop-backend pods" in markdown

    one = edited(tmp_path, "one", "role=database", "role=databse")
    assert (
        "  Binding db-firewall (SecurityGroup db → firewall): 2 shop-backend pods lose their "
        "firewall; 2 → 0 pods steered\n"
    ) in on(world, "plan", one).out
    same = on(world, "plan", POLICIES).out
    assert "steer now: no pod starts or stops being steered, and no route changes.\n" in same


def test_every_git_flag_has_help() -> None:
    text = cli("plan", "--help").out
    assert "file holding an https access token" in text
    assert "private key for an ssh:// or git@host:path --repo" in text
    assert "how long one git fetch may take" in text


def test_plans_that_see_part_of_the_cluster_raise_no_false_typo_warnings(world: World) -> None:
    # --kubernetes-only reads no pod: its namespaces are not "without pods".
    central = on(world, "plan", POLICIES, "--kubernetes-only")
    assert central.code == 0, central.err
    assert "no pod runs in namespace" not in central.out
    # A node agent sees one node: ips' nodeSelector matching none of "1 node" is no typo.
    agent = on(world, "plan", POLICIES, "--node", "node-2").out
    assert "nodeSelector matches none" not in agent and "selects no pod" not in agent
    assert "VnfDeployment ips does not run there" in agent  # the node's own warnings stay


def test_run_once_with_invalid_manifests_keeps_no_last_good_one(
    world: World, tmp_path: Path, restored_process: None
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.yaml").write_text("kind: Binding\n")
    result = on(world, "run", bad, "--once", "--log-format", "text")
    assert result.code == 1
    assert "ERROR manifests invalid, revision refused; no valid one yet" in result.err
    assert "last good" not in result.err
    assert "x.yaml:1:1: apiVersion: missing required field" in result.err
