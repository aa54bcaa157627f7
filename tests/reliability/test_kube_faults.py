"""Kubernetes API faults injected by the emulator: retried when transient, a clear exit 1 when
persistent, converge once cleared, and nothing half-applied on OVN meanwhile."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from reconciler.adapters.kube.client import KubeCluster, KubeError, KubeSettings
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compiling.compile import CompileOptions
from reconciler.engine.pipeline import reconcile
from reconciler.manifests.load import load_path
from tests.reliability import nbstate
from tests.reliability.harness import WAIT, cli, conn, record
from tests.support.transitions import wait_groups_active


@pytest.mark.parametrize(
    ("status", "retry_after"), [(500, None), (503, None), (429, 1)], ids=["500", "503", "429"]
)
def test_transient_errors_are_retried(
    nf_cluster: SandboxCluster, policy_sets, status: int, retry_after: int | None
) -> None:
    a, _b = policy_sets
    nf_cluster.kube.faults.fail(2, status, retry_after=retry_after, path_contains="/pods")
    result = cli("apply", a, *conn(nf_cluster), *WAIT)
    assert result.code == 0, result.err
    assert nf_cluster.kube.faults.take_failure("GET", "/api/v1/pods") is None  # both consumed
    assert cli("plan", a, *conn(nf_cluster)).code == 0
    record("kubernetes API faults", faults=2, converged=True)


@pytest.mark.parametrize("status", [500, 429, 403])
def test_persistent_error_exits_1_clearly_then_converges(
    nf_cluster: SandboxCluster, policy_sets, status: int
) -> None:
    a, b = policy_sets
    assert cli("apply", a, *conn(nf_cluster), *WAIT).code == 0
    before = nbstate.owned(nf_cluster.nb_remote)
    nf_cluster.kube.faults.fail(1000, status, retry_after=0 if status == 429 else None,
                                path_contains="/pods")  # fmt: skip
    failed = cli("apply", b, *conn(nf_cluster))
    assert failed.code == 1
    assert failed.err.startswith("error: ") and "Traceback" not in failed.err
    assert nf_cluster.kube.url in failed.err
    assert (
        ("forbidden" in failed.err and "RBAC" in failed.err)
        if status == 403
        else (str(status) in failed.err)
    )
    assert nbstate.owned(nf_cluster.nb_remote) == before  # nothing half-applied on OVN
    nf_cluster.kube.faults.clear()
    assert cli("apply", b, *conn(nf_cluster), *WAIT).code == 0
    assert cli("plan", b, *conn(nf_cluster)).code == 0
    record("kubernetes API faults", faults=1, converged=True)


def _reconcile(cluster: SandboxCluster, path: Any, **kube: Any) -> Any:
    kc = KubeCluster(KubeSettings(kubeconfig=cluster.kubeconfig, **kube.pop("settings", {})))
    for name, value in kube.items():
        setattr(kc, name, value)
    with OvnNorthbound.connect(OvnSettings(remote=cluster.nb_remote)) as nb:
        return reconcile(load_path(path), kc, nb, CompileOptions())


def _switched_on(cluster: SandboxCluster, path: Any) -> None:
    """The reconcile after the new VNF instances were reported healthy (the sandbox's VNFs
    answer OVN's probe): it switches on the steering the first one held."""
    wait_groups_active(cluster.nb_remote)
    _reconcile(cluster, path)


def test_slow_responses_beyond_the_timeout(nf_cluster: SandboxCluster, policy_sets) -> None:
    a, _b = policy_sets
    before = nbstate.owned(nf_cluster.nb_remote)
    nf_cluster.kube.faults.delay(1.5, path_contains="/pods")
    with pytest.raises(KubeError) as err:
        _reconcile(nf_cluster, a, settings={"timeout": 0.3})
    assert nf_cluster.kube.url in str(err.value) and "timed out" in str(err.value)
    assert nbstate.owned(nf_cluster.nb_remote) == before
    nf_cluster.kube.faults.clear()
    report = _reconcile(nf_cluster, a, settings={"timeout": 0.3})
    assert report.plan.changes
    _switched_on(nf_cluster, a)
    assert cli("plan", a, *conn(nf_cluster)).code == 0
    record("kubernetes API faults", faults=1, converged=True)


def test_410_on_paginated_list_continuation(nf_cluster: SandboxCluster, policy_sets) -> None:
    a, _b = policy_sets
    nf_cluster.kube.faults.fail(2, 410, path_contains="continue=",
                                message="The provided continue parameter is too old")  # fmt: skip
    report = _reconcile(nf_cluster, a, page_size=2)
    assert report.plan.changes
    assert nf_cluster.kube.faults.take_failure("GET", "/api/v1/pods?continue=x") is None
    _switched_on(nf_cluster, a)
    assert cli("plan", a, *conn(nf_cluster)).code == 0
    record("kubernetes API faults", faults=2, converged=True)


def watching(cluster: SandboxCluster, started: int) -> None:
    """Wait until a new watch reached its starting point (the emulator counts them)."""
    deadline = time.monotonic() + 20
    while cluster.kube.watches_started <= started:
        assert time.monotonic() < deadline, "the watch never (re)started"
        time.sleep(0.01)


def test_dropped_watch_stream_and_410_on_watch(nf_cluster: SandboxCluster) -> None:
    """The loop's pod watch survives a dropped stream and a compacted resourceVersion."""
    kc = KubeCluster(KubeSettings(kubeconfig=nf_cluster.kubeconfig))
    events: list[tuple[str, str]] = []
    seen = threading.Condition()
    stop = threading.Event()

    def on_event(etype: str, obj: dict[str, Any]) -> None:
        with seen:
            events.append((etype, (obj.get("metadata") or {}).get("name", "")))
            seen.notify_all()

    def wait_for(item: tuple[str, str]) -> None:
        with seen:
            assert seen.wait_for(lambda: item in events, timeout=20), events

    thread = threading.Thread(target=kc.watch, args=("Pod", on_event, stop),
                              kwargs={"backoff": (0.05, 0.2)}, daemon=True)  # fmt: skip
    started = nf_cluster.kube.watches_started
    thread.start()
    try:
        watching(nf_cluster, started)
        nf_cluster.add_pod("shop-frontend", "web-a", "node-1", {"app": "web"})
        wait_for(("ADDED", "web-a"))
        started = nf_cluster.kube.watches_started
        nf_cluster.kube.faults.drop_watches()
        nf_cluster.add_pod("shop-frontend", "web-b", "node-2", {"app": "web"})
        wait_for(("ADDED", "web-b"))  # resumed from the last resourceVersion, nothing lost
        watching(nf_cluster, started)
        # 410: history compacted while the stream is down -> RELIST, then events again
        nf_cluster.kube.faults.fail(1, 410, path_contains="watch=true")
        nf_cluster.kube.compact()
        nf_cluster.kube.faults.drop_watches()
        nf_cluster.add_pod("shop-frontend", "web-c", "node-1", {"app": "web"})
        wait_for(("RELIST", ""))
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    record("kubernetes API faults", faults=3, converged=True)
