"""A dying worker thread is never healthy (issue 31).

On main, a ``.oscignore`` with ``[z-a]`` pushed to the repository of ``run --repo`` raised
``re.error`` in the source poller, whose thread died: the loop never moved past that commit
while ``/healthz``, ``/readyz`` and ``osc_gitops_source_up`` stayed green. Now such a commit is
refused like any invalid one and the poller lives; and any worker that still dies (a bug of
ours) turns ``/healthz`` and ``osc_gitops_worker_up`` red and is logged as one JSON line.
"""

from __future__ import annotations

import io
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from reconciler.adapters.git import GitSettings, GitSource
from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compiling.compile import CompileOptions
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.reporting.metrics import Metrics, MetricsServer, PrometheusReporter
from reconciler.engine.sources import GitManifestSource, Snapshot
from tests.support.builders import cluster as observed_cluster
from tests.support.fakes import FakeSource, world
from tests.support.gitops import Remote, wait_for


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.ovn
@pytest.mark.timeout(120)
def test_an_oscignore_the_loader_cannot_compile_is_refused_and_the_poller_lives(
    remote: Remote, cluster: SandboxCluster, tmp_path: Path
) -> None:
    policies = remote.copy_examples()
    first = remote.commit("policies")
    kube = KubeCluster(KubeSettings(kubeconfig=cluster.kubeconfig))
    ovn = OvnNorthbound.connect(OvnSettings(remote=cluster.nb_remote))
    metrics = Metrics()
    source = GitManifestSource(GitSource(GitSettings(
        repo=remote.url, path="policies", cache_dir=str(tmp_path / "cache"))))  # fmt: skip
    config = LoopConfig(options=CompileOptions(), git_interval=0.1, backoff_base=0.05,
                        backoff_max=0.2, status_file=tmp_path / "status.json")  # fmt: skip
    loop = Loop(config, source, kube, ovn, reporter=PrometheusReporter(metrics))
    server = MetricsServer("127.0.0.1:0", metrics, loop.health, loop.readiness,
                           supervise=loop.supervised).start()  # fmt: skip
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()

    def status() -> dict[str, Any]:
        path = tmp_path / "status.json"
        return json.loads(path.read_text()) if path.exists() else {}

    try:
        wait_for(lambda: status().get("revision") == first, what="first commit applied")
        (policies / ".oscignore").write_text("fixtures/\n[z-a]*.yaml\n")
        bad = remote.commit("an .oscignore that cannot be compiled")
        wait_for(lambda: status().get("attempted") == bad, what="the bad commit refused")
        assert status()["errors"] == [
            "policies/.oscignore:2:2: character range z-a is reversed and matches nothing "
            "(write a-z)"
        ]
        (policies / ".oscignore").write_text("fixtures/\n[a-z]*.txt\n")
        (policies / "bindings" / "backend.yaml").unlink()
        good = remote.commit("fixed")
        wait_for(lambda: status().get("revision") == good, what="the loop moved past it")
        poller = [t for t in loop._threads if t.name == "source-poller"]
        assert poller and poller[0].is_alive() and not loop.dead_workers
        code, body = _get(f"http://{server.address}/healthz")
        assert code == 200 and body["ok"] is True and "dead_threads" not in body
    finally:
        loop.shutdown()
        thread.join(timeout=10)
        server.stop()
        ovn.close()
        kube.close()


class _Bug(BaseException):
    """Something no ``except Exception`` catches (as ``SystemExit`` from a library would be)."""


class _BrokenSource(FakeSource):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.publish("r1", directory)
        self.broken = threading.Event()

    def fetch(self) -> Snapshot:
        if self.broken.is_set():
            raise _Bug("a bug outside every poll's error handling")
        return super().fetch()


@pytest.mark.parametrize("worker", ["source-poller", "watch-pods"])
def test_a_worker_that_dies_turns_healthz_and_its_metric_red(
    tmp_path: Path, json_log: io.StringIO, worker: str
) -> None:
    from tests.support.paths import POLICIES

    kube, ovn = world(observed_cluster([("shop", "web-1", "node-1", {"app": "web"})]))
    source = _BrokenSource(POLICIES)
    if worker == "watch-pods":
        real_watch = kube.watch

        def watch(kind: str, *args: Any, **kwargs: Any) -> None:
            if kind == "Pod":
                raise RuntimeError("the pod watch broke")
            real_watch(kind, *args, **kwargs)

        kube.watch = watch  # type: ignore[method-assign]
    metrics = Metrics()
    config = LoopConfig(options=CompileOptions(), git_interval=0.05,
                        status_file=tmp_path / "status.json", lag_retries=())  # fmt: skip
    loop = Loop(config, source, kube, ovn, reporter=PrometheusReporter(metrics))
    server = MetricsServer("127.0.0.1:0", metrics, loop.health, loop.readiness,
                           supervise=loop.supervised).start()  # fmt: skip
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: loop.passes > 0, what="a first pass")
        if worker == "source-poller":
            source.broken.set()
        wait_for(lambda: worker in loop.dead_workers, what=f"{worker} recorded dead")
        code, body = _get(f"http://{server.address}/healthz")
        assert code == 503 and body["ok"] is False and body["dead_threads"] == [worker]
        assert metrics.worker_up.labels(worker)._value.get() == 0
        assert metrics.worker_up.labels("metrics-http")._value.get() == 1
        lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
        (died,) = [line for line in lines if line["msg"].startswith("worker thread died")]
        assert died["level"] == "error" and died["worker"] == worker
        assert isinstance(died["traceback"], list) and died["traceback"]
        time.sleep(0.2)
        assert thread.is_alive(), "the reconcile loop itself goes on"
    finally:
        loop.shutdown()
        thread.join(timeout=10)
        server.stop()


def test_a_security_manager_thread_that_dies_turns_healthz_red_and_a_closed_one_does_not(
    tmp_path: Path, json_log: io.StringIO
) -> None:
    """The outbox's delivery threads (one per security manager) are the loop's workers too:
    every delivery error is the manager's state, so only a bug ends one before the outbox
    closes, and that fails ``/healthz`` like any worker's death; closing it is no death."""
    from reconciler.engine.notifications import NotifySettings, Outbox
    from tests.support.paths import POLICIES

    def post(url: str, payload: dict[str, Any]) -> None:
        if payload.get("event") == "deployed":
            raise _Bug("a bug outside every delivery's error handling")

    kube, ovn = world(observed_cluster([("shop", "web-1", "node-1", {"app": "web"})]))
    source = FakeSource()
    source.publish("r1", POLICIES)
    metrics = Metrics()
    config = LoopConfig(options=CompileOptions(), status_file=tmp_path / "status.json")
    outbox = Outbox(post, NotifySettings(debounce=0.0))
    loop = Loop(config, source, kube, ovn, reporter=PrometheusReporter(metrics), outbox=outbox)
    healthy, dying = "http://healthy.example/events", "http://dying.example/events"
    try:
        outbox.send(healthy, {"event": "removed"})
        assert outbox.flush(5)
        outbox.send(dying, {"event": "deployed"})
        name = f"notify-{dying}"
        wait_for(lambda: name in loop.dead_workers, what="the dying manager's thread recorded")
        ok, detail = loop.health()
        assert not ok and detail["dead_threads"] == [name]
        assert metrics.worker_up.labels(name)._value.get() == 0
        assert metrics.worker_up.labels(f"notify-{healthy}")._value.get() == 1
        lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
        (died,) = [line for line in lines if line["msg"].startswith("worker thread died")]
        assert died["worker"] == name and died["traceback"]
    finally:
        outbox.close()
    assert list(loop.dead_workers) == [name], "closing the outbox ends its threads, no death"
