"""Security-manager notifications through the real CLI and loop, against the sandbox's security
manager (an HTTP server that validates every message against
``schemas/security-manager-notification.json``, drops stale sequences and assembles parts).

``examples/policies``: VnfDeployment ``ips`` (node-1 only) has a security manager; Bindings
``web-ips`` (group ``web``) and ``api-ips`` (group ``api``) go through it. The manager must hold
the members of each group on node-1 exactly as OVN's Port_Group does, follow a label, and never
stand in the way of a reconcile: down, answering 500 or slow, the writes go on and the failure
is reported (stderr, status, metrics) and retried until it is delivered.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from osc_gitops_sandbox.datapath.security_manager import SecurityManager
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from prometheus_client.parser import text_string_to_metric_families

from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.notify import JsonPoster, SecurityManagerError, post_json
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compiling.compile import CompileOptions
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.notifications import NotifySettings, Outbox
from reconciler.engine.reporting.metrics import Metrics, PrometheusReporter
from reconciler.engine.sources import LocalSource
from tests.support.cli import cli, conn

pytestmark = pytest.mark.timeout(120)

EXAMPLE_URL = "https://secmgr.example.com/api/v1/osc-events"


@pytest.fixture
def manager() -> Iterator[SecurityManager]:
    with SecurityManager() as sm:
        yield sm


@pytest.fixture
def managed(policies: Path, manager: SecurityManager) -> Path:
    """examples/policies with the ips VNF's securityManager pointing at ``manager``."""
    vnfs = policies / "vnfs.yaml"
    vnfs.write_text(vnfs.read_text().replace(EXAMPLE_URL, manager.url))
    return policies


def apply(cluster: SandboxCluster, policies: Path, *extra: str) -> tuple[int, str]:
    result = cli("apply", policies, *conn(cluster), "--wait", "--wait-timeout", "30s",
                 "--cache-dir", policies.parent / "cache", *extra)  # fmt: skip
    return result.code, result.err


def status(policies: Path) -> tuple[int, str]:
    result = cli("status", "--cache-dir", policies.parent / "cache")
    return result.code, result.out


def pg_members(cluster: SandboxCluster, name: str) -> set[str]:
    """The LSP names in Port_Group ``name`` (the steered members on its node)."""
    tables = ["Logical_Switch_Port", "Port_Group"]
    dump = ovsdb_rpc.dump(cluster.nb_remote, "OVN_Northbound", tables)
    names = {p["_uuid"]: p["name"] for p in dump["Logical_Switch_Port"]}
    (group,) = [g for g in dump["Port_Group"] if g["name"] == name]
    ports = group["ports"] if isinstance(group["ports"], list) else [group["ports"]]
    return {names[u] for u in ports}


def as_lsps(members: list[str]) -> set[str]:
    return {m.replace("/", "_") for m in members}


def test_each_manager_holds_its_groups_members_per_node_and_follows_a_label(
    nf_cluster: SandboxCluster, managed: Path, manager: SecurityManager
):
    code, err = apply(nf_cluster, managed)
    assert code == 0, err
    kinds = sorted({m["event"] for m in manager.received})
    assert kinds == ["deployed", "members"], "every message valid (the manager validates)"
    for binding, group in (("web-ips", "web"), ("api-ips", "api")):
        held = as_lsps(manager.members(binding, "ips", "node-1"))
        assert held and held == pg_members(nf_cluster, f"osc.{group}.node_1"), binding
    assert manager.groups("ips", "node-1")["SG_WEB"], "addresses, for the VNF's address groups"
    first = {m["sequence"] for m in manager.received if m.get("binding") == "web-ips"}

    nf_cluster.label_pod("shop-backend", "cache-1", {"app": "web"})
    code, err = apply(nf_cluster, managed)
    assert code == 0, err
    held = manager.members("web-ips", "ips", "node-1")
    assert "shop-backend/cache-1" in held
    assert as_lsps(held) == pg_members(nf_cluster, "osc.web.node_1")
    latest = max(m["sequence"] for m in manager.received if m.get("binding") == "web-ips")
    assert latest > max(first), "a newer sequence"
    counts = manager.counts
    assert counts["invalid"] == counts["stale"] == counts["duplicate"] == 0
    api = [m for m in manager.received if m.get("binding") == "api-ips"]
    assert len(api) == 1, "an apply tells what changed since the last one (its --cache-dir)"

    state = managed.parent / "cache" / "notify"
    for told in state.iterdir():  # a CronJob's fresh emptyDir: no memory, everything again
        told.unlink()
    code, err = apply(nf_cluster, managed)
    assert code == 0, err
    assert len([m for m in manager.received if m.get("binding") == "api-ips"]) == 2
    assert manager.counts["duplicate"] == 2, "the manager holds it: nothing reloaded"


def test_a_failing_manager_never_stops_an_apply_and_is_told_once_it_is_back(
    nf_cluster: SandboxCluster, managed: Path, manager: SecurityManager
):
    manager.fault.status = 500
    code, err = apply(nf_cluster, managed, "--notify-timeout", "0.5")
    assert code == 0, err
    assert f"security manager {manager.url}" in err and "not delivered" in err
    assert "HTTP 500" in err
    assert pg_members(nf_cluster, "osc.web.node_1"), "OVN was written all the same"
    assert manager.members("web-ips", "ips", "node-1") == []
    code, text = status(managed)
    assert code == 0, "the apply stood (the metric osc_gitops_security_manager_up alerts)"
    assert f"{manager.url}: FAILING" in text and "HTTP 500" in text

    manager.fault.status = None
    code, err = apply(nf_cluster, managed)
    assert code == 0 and "not delivered" not in err, err
    assert as_lsps(manager.members("web-ips", "ips", "node-1")) == pg_members(
        nf_cluster, "osc.web.node_1"
    )
    code, text = status(managed)
    assert code == 0 and f"{manager.url}: up" in text, text


def test_a_slow_manager_costs_an_apply_at_most_its_notify_timeout(
    nf_cluster: SandboxCluster, managed: Path, manager: SecurityManager
):
    manager.fault.delay = 3.0
    code, err = apply(nf_cluster, managed, "--notify-timeout", "0.3")
    assert code == 0, err
    assert "not delivered" in err and "timed out" in err
    assert pg_members(nf_cluster, "osc.web.node_1")


def test_a_refused_notification_is_reported_and_not_sent_again(
    nf_cluster: SandboxCluster, managed: Path, manager: SecurityManager
):
    manager.fault.status = 400
    code, err = apply(nf_cluster, managed)
    assert code == 0, err
    assert "refused" in err and "HTTP 400" in err
    # the ips instance deployed, members of web-ips and of api-ips: each once, never again
    assert manager.counts["fault"] == 3


def test_a_long_member_list_arrives_in_parts_and_whole(
    nf_cluster: SandboxCluster, managed: Path, manager: SecurityManager
):
    code, err = apply(nf_cluster, managed, "--notify-max-members", "1")
    assert code == 0, err
    parts = [m for m in manager.received if m.get("binding") == "web-ips"]
    expected = pg_members(nf_cluster, "osc.web.node_1")
    assert len(expected) >= 2 and len(parts) == len(expected)
    assert {(p["part"], p["parts"]) for p in parts} == {
        (i, len(expected)) for i in range(1, len(expected) + 1)
    }
    assert as_lsps(manager.members("web-ips", "ips", "node-1")) == expected


def test_the_loop_goes_on_while_the_manager_hangs_and_reports_it(
    nf_cluster: SandboxCluster, managed: Path, manager: SecurityManager, tmp_path: Path
):
    """A pass of ``run`` hands the outbox its notifications and returns while the manager
    holds the request; the metrics and the status say what waits; once the manager answers,
    what it holds is the group's members."""
    gate = threading.Event()

    kube = KubeCluster(KubeSettings(kubeconfig=nf_cluster.kubeconfig))
    ovn = OvnNorthbound.connect(OvnSettings(remote=nf_cluster.nb_remote))
    metrics = Metrics()
    reporter = PrometheusReporter(metrics)

    def post(url: str, payload: dict[str, object]) -> None:
        assert gate.wait(60), "the test never released the manager"
        post_json(url, payload, timeout=5)

    outbox = Outbox(post, NotifySettings(debounce=0.0), reporter=reporter)
    config = LoopConfig(options=CompileOptions(), status_file=tmp_path / "status.json")
    loop = Loop(config, LocalSource(str(managed)), kube, ovn, reporter=reporter, outbox=outbox)
    try:
        first = loop.reconcile_pass()
        assert first.result == "applied", first
        second = loop.reconcile_pass()  # health-gated steering switched on
        assert second.ok and not gate.is_set(), "both passes ended while the manager hung"
        assert pg_members(nf_cluster, "osc.web.node_1")
        saved = json.loads((tmp_path / "status.json").read_text())
        (state,) = saved["security_managers"]
        assert state["manager"] == manager.url and state["pending"] >= 3
        pending = _sample(metrics, "osc_gitops_security_manager_pending", manager.url)
        assert pending is not None and pending >= 3

        gate.set()
        assert outbox.flush(30)
        assert as_lsps(manager.members("web-ips", "ips", "node-1")) == pg_members(
            nf_cluster, "osc.web.node_1"
        )
        assert _sample(metrics, "osc_gitops_security_manager_up", manager.url) == 1
        assert _sample(metrics, "osc_gitops_security_manager_pending", manager.url) == 0
        delivered = _sample(metrics, "osc_gitops_security_manager_notifications_total",
                            manager.url, event="members", result="delivered")  # fmt: skip
        assert delivered is not None and delivered >= 2
    finally:
        gate.set()
        outbox.close()
        ovn.close()
        kube.close()


def _sample(metrics: Metrics, name: str, manager: str, **labels: str) -> float | None:
    text = metrics.exposition().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == name
                and sample.labels.get("manager") == manager
                and all(sample.labels.get(k) == v for k, v in labels.items())
            ):
                return float(sample.value)
    return None


class _Recorder(BaseHTTPRequestHandler):
    """Answers with the status the test sets; records connections, paths and credentials."""

    protocol_version = "HTTP/1.1"
    status = 200
    close_after = False
    seen: list[tuple[int, str, str | None]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append((id(self.connection), self.path, self.headers.get("Authorization")))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "2")
        if type(self).close_after:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"no")

    def log_message(self, *args: object) -> None:
        pass


def test_the_wire_keeps_a_connection_sends_credentials_and_says_what_to_retry() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    poster = JsonPoster(timeout=5)
    base = f"127.0.0.1:{server.server_port}"
    try:
        _Recorder.seen = []
        for _ in range(3):
            poster(f"http://osc:s%3Acret@{base}/events?x=1", {"event": "members"})
        assert len({conn for conn, _, _ in _Recorder.seen}) == 1, "one kept connection"
        assert {path for _, path, _ in _Recorder.seen} == {"/events?x=1"}
        assert {auth for _, _, auth in _Recorder.seen} == {"Basic b3NjOnM6Y3JldA=="}
        _Recorder.close_after = True  # the manager closes after answering: a new one next time
        poster(f"http://{base}/e", {})
        poster(f"http://{base}/e", {})
        _Recorder.close_after = False
        for status, retryable in (
            (500, True),
            (503, True),
            (429, True),
            (400, False),
            (404, False),
        ):
            _Recorder.status = status
            with pytest.raises(SecurityManagerError, match=f"answered HTTP {status}") as caught:
                poster(f"http://osc:secret@{base}/e", {})
            assert caught.value.retryable is retryable
            assert "secret" not in str(caught.value)
        with pytest.raises(SecurityManagerError, match="not an http") as bad:
            poster(f"http://{base.split(':')[0]}:port/e", {})
        assert bad.value.retryable is False
    finally:
        poster.close()
        server.shutdown()
        server.server_close()
    with pytest.raises(SecurityManagerError, match="cannot notify security manager") as down:
        JsonPoster(timeout=1)(f"http://{base}/e", {})
    assert down.value.retryable is True
