"""The loop in-process against the sandbox (real ovsdb-server, API emulator, git remote).

The git repository is made in the test and changed with plain ``git`` commits and pushes; the
loop only sees the bare remote. Checks are on the live NB (raw dump) and the status file.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from prometheus_client.parser import text_string_to_metric_families

from reconciler.adapters.git import GitSettings, GitSource
from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.ownership import RESOURCE, REVISION
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.reporting.metrics import Metrics, MetricsServer, PrometheusReporter
from reconciler.engine.sources import GitManifestSource, LocalSource
from tests.support.gitops import Remote, git, owned_rows, wait_for
from tests.support.transitions import wait_groups_active

pytestmark = [pytest.mark.ovn, pytest.mark.timeout(120)]


class Running:
    """A loop thread plus its connections; stopped (and joined) by the fixture."""

    def __init__(self, loop: Loop, thread: threading.Thread, tmp: Path) -> None:
        self.loop = loop
        self.thread = thread
        self.tmp = tmp

    def status(self) -> dict[str, Any]:
        path = self.loop.config.status_file
        assert path is not None
        if not path.exists():
            return {}
        return json.loads(path.read_text())


@pytest.fixture
def connections(cluster: SandboxCluster) -> Iterator[tuple[KubeCluster, OvnNorthbound]]:
    kube = KubeCluster(KubeSettings(kubeconfig=cluster.kubeconfig))
    ovn = OvnNorthbound.connect(OvnSettings(remote=cluster.nb_remote))
    try:
        yield kube, ovn
    finally:
        ovn.close()
        kube.close()


def start_loop(
    source: Any, kube: KubeCluster, ovn: OvnNorthbound, tmp: Path, **config: Any
) -> tuple[Loop, threading.Thread]:
    settings: dict[str, Any] = {
        "options": CompileOptions(),
        "interval": 30.0,
        "git_interval": 0.1,
        "backoff_base": 0.05,
        "backoff_max": 0.2,
        "status_file": tmp / "status.json",
    }
    settings.update(config)
    loop = Loop(LoopConfig(**settings), source, kube, ovn, reporter=PrometheusReporter(Metrics()))
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return loop, thread


def metrics_of(loop: Loop) -> Metrics:
    reporter = loop.reporter
    assert isinstance(reporter, PrometheusReporter)
    return reporter.metrics


@pytest.fixture
def running_git(
    remote: Remote, connections: tuple[KubeCluster, OvnNorthbound], tmp_path: Path
) -> Iterator[tuple[Running, Remote]]:
    remote.copy_examples()
    remote.commit("policies: the shop")
    kube, ovn = connections
    source = GitManifestSource(
        GitSource(
            GitSettings(
                repo=remote.url, ref="main", path="policies", cache_dir=str(tmp_path / "cache")
            )
        )
    )
    loop, thread = start_loop(source, kube, ovn, tmp_path)
    try:
        yield Running(loop, thread, tmp_path), remote
    finally:
        loop.shutdown()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the loop did not stop"


def revisions(rows: dict[str, dict[str, str]]) -> set[str]:
    return {ext.get(REVISION, "") for ext in rows.values()}


def test_git_commits_drive_the_loop(
    running_git: tuple[Running, Remote], cluster: SandboxCluster
) -> None:
    run, remote = running_git
    first = git(remote.work, "rev-parse", "HEAD")

    # create: the first commit is applied and every row records it
    wait_for(lambda: run.status().get("revision") == first, what="first commit applied")
    # the steering follows once the new VNF instances are reported healthy (the loop wakes on it)
    wait_for(lambda: not run.status().get("held"), what="held steering switched on")
    full = owned_rows(cluster.nb_remote)
    assert full and revisions(full) == {first}
    assert run.status()["result"] in ("applied", "unchanged")

    # update: a binding removed from git is removed from OVN
    (remote.policies() / "bindings" / "backend.yaml").unlink()
    second = remote.commit("drop the backend bindings")
    wait_for(lambda: run.status().get("revision") == second, what="second commit applied")
    reduced = owned_rows(cluster.nb_remote)
    assert set(reduced) < set(full)
    resources = {ext.get(RESOURCE) for ext in reduced.values()}
    assert not resources & {"Binding/api-firewall", "Binding/db-firewall", "Binding/api-ips"}
    assert "Binding/web-firewall" in {ext.get(RESOURCE) for ext in full.values()}
    assert all(ext.get(REVISION) in (first, second) for ext in reduced.values()), (
        "rows record the commit they were written from"
    )

    # revert: git revert brings the rows back, written from the revert commit
    git(remote.work, "revert", "--no-edit", "HEAD")
    git(remote.work, "push", "-q", "origin", "HEAD:main")
    third = git(remote.work, "rev-parse", "HEAD")
    wait_for(lambda: run.status().get("revision") == third, what="revert applied")
    wait_for(lambda: not run.status().get("held"), what="held steering switched on")
    restored = owned_rows(cluster.nb_remote)
    assert set(restored) == set(full)
    assert third in revisions(restored)

    # invalid commit: refused whole, nothing applied from it, errors with file:line
    bad = remote.policies() / "groups" / "frontend.yaml"
    text = bad.read_text()
    bad.write_text(text.replace("kind: SecurityGroup", "kind: SecurityGroupp", 1))
    (remote.policies() / "bindings" / "web.yaml").unlink()  # would prune, must not happen
    fourth = remote.commit("broken: typo in a kind and a binding removed")
    wait_for(lambda: run.status().get("result") == "refused", what="invalid commit refused")
    st = run.status()
    assert st["revision"] == third and st["attempted"] == fourth
    assert any(e.startswith("policies/groups/frontend.yaml:") for e in st["errors"]), st
    assert set(owned_rows(cluster.nb_remote)) == set(full), "nothing from the bad commit"
    assert metrics_of(run.loop).errors.labels("manifests")._value.get() >= 1

    # unreachable remote: the last good commit keeps being reconciled, and it is reported
    moved = remote.bare.with_name("moved.git")
    shutil.move(remote.bare, moved)
    try:
        wait_for(lambda: run.status().get("result") == "source-unreachable", what="reported")
        applies = run.loop.applies
        cluster.label_pod("shop-frontend", "static-1", {"app": "web"})
        wait_for(
            lambda: run.loop.applies > applies,
            what="reconcile with the last good commit while git is unreachable",
        )
        st = run.status()
        assert st["revision"] == third
        assert "remote.git" in st["message"]
    finally:
        shutil.move(moved, remote.bare)
    # back online: the bad commit is still refused; fix it and it is applied
    bad.write_text(text)
    fifth = remote.commit("fix the kind")
    wait_for(lambda: run.status().get("revision") == fifth, what="fixed commit applied")
    assert run.status()["result"] in ("applied", "unchanged")
    live = {e.get(RESOURCE) for e in owned_rows(cluster.nb_remote).values()}
    assert "Binding/web-firewall" not in live, "the fixed commit (no web bindings) is live"


def _port_groups_with(nb: OvnNorthbound, lsp: str) -> list[str]:
    state = nb.read()
    return [
        row.key
        for row in state.owned
        if row.table == "Port_Group" and lsp in (row.fields.get("ports") or ())
    ]


def test_labelled_pod_is_steered_quickly_and_metrics_are_served(
    connections: tuple[KubeCluster, OvnNorthbound],
    cluster: SandboxCluster,
    tmp_path: Path,
    record_property: Any,
) -> None:
    kube, ovn = connections
    from tests.support.paths import POLICIES

    loop, thread = start_loop(LocalSource(POLICIES, "local-1"), kube, ovn, tmp_path)
    server = MetricsServer("127.0.0.1:0", metrics_of(loop), loop.health, loop.readiness).start()
    try:
        wait_for(lambda: loop.applies >= 1 and loop.last and loop.last.result != "error",
                 what="initial apply")  # fmt: skip
        lsp = "shop-frontend_static-1"
        assert not _port_groups_with(ovn, lsp)
        latencies = []
        for i, pod in enumerate(("static-1", "cache-1", "worker-1")):
            namespace = "shop-frontend" if pod == "static-1" else _namespace_of(cluster, pod)
            started = time.monotonic()
            cluster.label_pod(namespace, pod, {"app": "web"} if i != 1 else {"role": "database"})
            wait_for(lambda n=namespace, p=pod: _port_groups_with(ovn, f"{n}_{p}"), timeout=10,
                     what=f"{pod} steered")  # fmt: skip
            latencies.append(time.monotonic() - started)
        print(f"label -> steered latency (debounce 0.2 s): {[round(x, 3) for x in latencies]}")
        record_property("steer_latency_seconds", max(latencies))

        # burst: 300 label changes are coalesced into a handful of reconciles
        before = loop.passes
        for i in range(300):
            cluster.label_pod("shop-frontend", "static-1", {"burst": str(i % 7)})
        wait_for(lambda: loop.passes > before, what="burst reconciled")
        time.sleep(1.0)  # let the debounce window close: we count, not time
        burst_passes = loop.passes - before
        print(f"300 pod events -> {burst_passes} reconciles")
        assert burst_passes <= 15

        base = f"http://{server.address}"
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as resp:
            assert resp.status == 200 and json.loads(resp.read())["ok"] is True
        with urllib.request.urlopen(f"{base}/readyz", timeout=5) as resp:
            assert json.loads(resp.read())["leader"] is True
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        duration = families["osc_gitops_reconcile_duration_seconds"]
        count = sum(s.value for s in duration.samples if s.name.endswith("_count"))
        assert count >= loop.passes - 1
        applied = {
            (s.labels["kind"], s.labels["action"]): s.value
            for s in families["osc_gitops_changes_applied"].samples
            if s.name.endswith("_total")
        }
        assert applied[("VirtualMachine", "create")] >= 1
        assert applied[("Port_Group", "update")] >= 3
        last = families["osc_gitops_last_success_timestamp_seconds"].samples[0].value
        assert last > time.time() - 60
        managed = {
            s.labels["kind"]: s.value for s in families["osc_gitops_managed_objects"].samples
        }
        assert managed["VirtualMachine"] >= 1 and managed["Port_Group"] >= 1
        drift = families["osc_gitops_drift_detected"].samples[0].value
        assert drift >= 3, "pod label changes show as drift (same revision, non-empty plan)"
        info = families["osc_gitops_applied_revision_info"].samples[0]
        assert info.labels["revision"] == "local-1"
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/nope", timeout=5)
        assert missing.value.code == 404
    finally:
        server.stop()
        loop.shutdown()
        thread.join(timeout=10)
    assert not thread.is_alive()


def _namespace_of(cluster: SandboxCluster, pod: str) -> str:
    for obj in cluster.kube.objects("Pod"):
        if obj["metadata"]["name"] == pod:
            return str(obj["metadata"]["namespace"])
    raise AssertionError(pod)


def test_failed_reconciles_back_off_and_recover(
    connections: tuple[KubeCluster, OvnNorthbound], cluster: SandboxCluster, tmp_path: Path
) -> None:
    kube, ovn = connections
    from tests.support.paths import POLICIES

    cluster.kube.faults.fail(count=6, status=403, method="PATCH", path_contains="virtualmachines",
                             message="forbidden for the test")  # fmt: skip
    loop, thread = start_loop(LocalSource(POLICIES), kube, ovn, tmp_path,
                              backoff_base=0.05, backoff_max=0.4)  # fmt: skip
    try:
        wait_for(lambda: loop.last is not None and loop.last.result == "applied", timeout=20,
                 what="recovery after the injected 403s")  # fmt: skip
        metrics = metrics_of(loop)
        errors = metrics.errors.labels("kubernetes")._value.get()
        assert errors >= 6
        assert metrics.reconciles.labels("error", "retry")._value.get() >= 1
    finally:
        loop.shutdown()
        thread.join(timeout=10)


def test_warm_passes_plan_only_what_changed(
    connections: tuple[KubeCluster, OvnNorthbound], cluster: SandboxCluster, tmp_path: Path
) -> None:
    """The loop re-reads a local folder only when it changed, keeps its ``Desired`` object, and
    its planner answers an unchanged world from memory and a pod label with one node's slice;
    an edited manifest is a full compile again. Checked on the live NB, not only on the modes."""
    from tests.support.paths import POLICIES

    kube, ovn = connections
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    config = LoopConfig(options=CompileOptions(), status_file=tmp_path / "status.json")
    loop = Loop(config, LocalSource(policies), kube, ovn)

    assert loop.reconcile_pass("start").result == "applied"
    wait_groups_active(cluster.nb_remote)  # the sandbox's VNFs answer OVN's probe
    assert loop.reconcile_pass("ovn-health").result == "applied"  # the held steering
    desired = loop.sources.desired
    assert loop.reconcile_pass("periodic").result == "unchanged"
    assert loop.sources.desired is desired  # the folder was not loaded again
    assert loop.planner.last_mode in ("cached", "incremental")

    pod = "static-1"
    cluster.label_pod("shop-frontend", pod, {"app": "web"})
    wait_for(lambda: _pod_labelled(kube, pod), what="label visible")
    assert loop.reconcile_pass("pod").result == "applied"
    assert _port_groups_with(ovn, f"shop-frontend_{pod}")
    assert loop.planner.last_mode in ("incremental", "cached")  # the verify pass

    (policies / "bindings" / "backend.yaml").unlink()
    assert loop.reconcile_pass("periodic").result == "applied"
    assert loop.sources.desired is not desired
    assert not any("backend" in key for key in owned_rows(cluster.nb_remote))
    assert loop.reconcile_pass("periodic").result == "unchanged"


def _pod_labelled(kube: KubeCluster, pod: str) -> bool:
    return any(p.name == pod and p.labels.get("app") == "web" for p in kube.list_pods())
