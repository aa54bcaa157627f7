"""The pipeline and the loop in each scope, against the in-memory fakes: node agents and a
central run on one NB, ``--kubernetes-only`` without any NB, the status a loop publishes, and
how ``status --all-nodes`` judges what was published."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model import ownership as own
from reconciler.core.model.observed import Node
from reconciler.core.model.target import OVN_TABLES
from reconciler.core.planning.slicing import CentralScope, KubernetesScope, NodeScope
from reconciler.core.planning.zoned import decode_slice
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.pipeline import Pipeline, reconcile
from reconciler.engine.reporting.fleet import Heartbeat, judge, render_text
from reconciler.engine.reporting.metrics import Metrics
from reconciler.engine.scoped import NO_OVN, ReadOnlyKube, writer_for
from reconciler.engine.sources import LocalSource
from reconciler.errors import InternalError
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.fakes import FakeClock, FakeKube, FakeOvn, world
from tests.unit.engine.scenario import write_policies

OPTIONS = CompileOptions()
NODES = ("node-1", "node-2", "node-3")
WANT = desired(sg("web", "app=web"), vnf("firewall"), binding("web-fw", "web", "firewall", 10))


def shared_nb() -> tuple[FakeKube, FakeOvn]:
    """Three nodes, one web pod each, all in ONE NB (a central NB)."""
    pods = [("shop", f"web-{i}", node, {"app": "web"}) for i, node in enumerate(NODES)]
    return world(cluster(pods, nodes=NODES))


def agent_rows(ovn: FakeOvn, node: str) -> set[tuple[str, str]]:
    return {
        ident
        for ident, fields in ovn.rows.items()
        if (fields.get("external_ids") or {}).get(own.AGENT) == node
    }


def test_central_run_and_agents_on_one_nb_converge_without_fighting() -> None:
    kube, ovn = shared_nb()
    reconcile(WANT, kube, ovn, OPTIONS)  # a central-NB run: everything
    rows = set(ovn.rows)
    kube.journal.entries.clear()
    for node in NODES:  # then one agent per node adopts its node's rows
        reconcile(WANT, kube, ovn, OPTIONS, scope=NodeScope(node))
    assert set(ovn.rows) == rows, "adopted, not recreated"
    assert all(agent_rows(ovn, node) for node in NODES)
    assert kube.journal.systems() == ["ovn"] * 3, "agents never write Kubernetes"
    # every party's next plan is empty, whoever runs first
    for scope in (CentralScope(), *(NodeScope(n) for n in NODES)):
        assert reconcile(WANT, kube, ovn, OPTIONS, scope=scope).plan.empty, scope.name
    # the central run changes its manifests: its own objects follow, the agents' rows stay
    kube.journal.entries.clear()
    # (the VMs' namespace stays ours through --vnf-namespaces once no VnfDeployment names it)
    options = dataclasses.replace(OPTIONS, vnf_namespaces=("security",))
    report = reconcile(desired(sg("web", "app=web")), kube, ovn, options, allow_empty=True)
    assert not report.plan.ovn_changes() and report.plan.kube_changes()
    assert set(ovn.rows) == rows


def test_an_agent_never_touches_another_nodes_rows_in_a_shared_nb() -> None:
    kube, ovn = shared_nb()
    for node in NODES:
        reconcile(WANT, kube, ovn, OPTIONS, scope=NodeScope(node))
    before = {ident: dict(fields) for ident, fields in ovn.rows.items()}
    # node-2's agent runs with manifests that steer nothing: only node-2's rows go
    reconcile(desired(), kube, ovn, OPTIONS, scope=NodeScope("node-2"), allow_empty=True)
    gone = set(before) - set(ovn.rows)
    assert gone and all(before[i]["external_ids"].get(own.NODE) == "node-2" for i in gone)
    assert {i: f for i, f in before.items() if i not in gone} == ovn.rows


class NodeSubnets(FakeKube):
    """A FakeKube that also answers what ``--kubernetes-only`` reads: nodes with subnets."""

    def __init__(self, subnets: Mapping[str, str | None]) -> None:
        super().__init__(nodes=[Node(n) for n in subnets])
        self.subnets = dict(subnets)

    def list_pods(self) -> Sequence[Any]:
        raise AssertionError("--kubernetes-only never reads pods")

    def list_node_subnets(self) -> Sequence[tuple[Node, str | None]]:
        return [(Node(n), s) for n, s in sorted(self.subnets.items())]


def test_kubernetes_only_writes_vms_and_nads_and_never_reaches_ovn() -> None:
    kube = NodeSubnets({"node-1": "10.244.1.0/24", "node-2": "10.244.2.0/24", "new": None})
    report = reconcile(WANT, kube, NO_OVN, OPTIONS, scope=KubernetesScope())  # type: ignore[arg-type]
    assert sorted(kube.objects("VirtualMachine")) == [
        "security/firewall-node-1",
        "security/firewall-node-2",
    ]
    assert len(kube.objects("NetworkAttachmentDefinition")) == 4
    assert report.plan.changes and not report.plan.ovn_changes()
    again = reconcile(WANT, kube, NO_OVN, OPTIONS, scope=KubernetesScope())  # type: ignore[arg-type]
    assert again.plan.empty
    with pytest.raises(InternalError):
        NO_OVN.read()


def test_kubernetes_only_tells_the_security_manager_and_an_agent_never_does() -> None:
    manager = {"securityManager": {"url": "https://secmgr.example/events"}}
    want = desired(sg("web", "app=web"), vnf("firewall", **manager),
                   binding("web-fw", "web", "firewall", 10))  # fmt: skip
    sent: list[tuple[str, dict[str, Any]]] = []
    kube = NodeSubnets({"node-1": "10.244.1.0/24"})
    reconcile(want, kube, NO_OVN, OPTIONS, scope=KubernetesScope(),  # type: ignore[arg-type]
              notify=lambda url, event: sent.append((url, event)))  # fmt: skip
    assert [(u, e["event"], e["node"]) for u, e in sent] == [
        ("https://secmgr.example/events", "deployed", "node-1")
    ]
    sent.clear()
    agent_kube, ovn = shared_nb()
    reconcile(want, agent_kube, ovn, OPTIONS, scope=NodeScope("node-1"),
              notify=lambda url, event: sent.append((url, event)))  # fmt: skip
    assert sent == [] and ovn.rows


def test_members_come_from_the_scopes_that_read_pods_never_the_kubernetes_side() -> None:
    """Per binding and node the members go to the security manager from whoever reads that
    node's pods: a central run (every node) or the node's agent; ``--kubernetes-only`` reads no
    pods and tells events only."""
    manager = {"securityManager": {"url": "https://secmgr.example/events"}}
    want = desired(sg("web", "app=web"), vnf("firewall", **manager),
                   binding("web-fw", "web", "firewall", 10))  # fmt: skip

    class Sink:
        def __init__(self) -> None:
            self.events: list[str] = []
            self.nodes: list[list[str]] = []

        def send(self, url: str, payload: dict[str, Any]) -> None:
            self.events.append(payload["event"])

        def members(self, notices: Mapping[Any, Any]) -> None:
            self.nodes.append(sorted(key[3] for key in notices))

    owner = Sink()
    reconcile(want, NodeSubnets({"node-1": "10.244.1.0/24"}), NO_OVN, OPTIONS,  # type: ignore[arg-type]
              scope=KubernetesScope(), notices=owner)  # fmt: skip
    assert owner.events == ["deployed"] and owner.nodes == []
    agent = Sink()
    agent_kube, ovn = shared_nb()
    reconcile(want, agent_kube, ovn, OPTIONS, scope=NodeScope("node-1"), notices=agent)
    assert agent.events == [] and agent.nodes == [["node-1"]]


def test_an_agents_kubernetes_writer_refuses_every_write() -> None:
    kube, _ = shared_nb()
    assert writer_for(CentralScope(), kube) is kube
    writer = writer_for(NodeScope("node-1"), kube)
    assert isinstance(writer, ReadOnlyKube)
    for write in (
        lambda: writer.create("VirtualMachine", "ns", "vm", {}),
        lambda: writer.replace_managed("VirtualMachine", "ns", "vm", {}),
        lambda: writer.delete("VirtualMachine", "ns", "vm"),
    ):
        with pytest.raises(InternalError, match="never writes Kubernetes"):
            write()


class Recorder:
    """A status publisher in memory."""

    where = "Lease test/recorder"

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.observed: list[str | None] = []

    def publish(self, status: Mapping[str, Any], observed: str | None = None) -> None:
        self.records.append(dict(status))
        self.observed.append(observed)


def test_an_agent_loop_publishes_its_nodes_state_after_each_pass(tmp_path: Path) -> None:
    kube, ovn = shared_nb()
    recorder = Recorder()
    config = LoopConfig(options=OPTIONS, scope=NodeScope("node-1"), watch=False)
    source = LocalSource(write_policies(tmp_path / "policies"), "rev-1")
    clock = FakeClock()
    loop = Loop(config, source, kube, ovn, publisher=recorder, clock=clock)
    assert loop.run_once() == 0
    record = recorder.records[-1]
    assert (record["role"], record["node"], record["result"]) == ("agent", "node-1", "applied")
    assert record["revision"] == "rev-1" and record["format_version"] == 1
    assert record["rows"] and set(record["rows"]) <= set(OVN_TABLES)
    assert kube.journal.systems() == ["ovn"]
    view = decode_slice(recorder.observed[-1] or "")  # its zone, for snapshot --all-nodes
    assert [p.name for p in view.pods] == ["web-0"] and view.ovn_rows
    assert loop.run_once() == 0
    assert recorder.records[-1]["result"] == "unchanged"
    # nothing new: no Lease write per pass, only a heartbeat about once per interval
    published = len(recorder.records)
    loop.reconcile_pass("pod")
    assert len(recorder.records) == published
    clock.advance(config.interval)
    loop.reconcile_pass("periodic")
    assert len(recorder.records) == published + 1


def test_metrics_of_an_agent_carry_its_node_on_every_series() -> None:
    metrics = Metrics({"node": "node-7"})
    metrics.errors.labels("ovn").inc()
    metrics.set_vnf_health({("firewall", "node-7"): True})
    text = metrics.exposition().decode()
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert series and all('node="node-7"' in line for line in series)
    assert 'osc_gitops_errors_total{cause="ovn",node="node-7"} 1.0' in text
    assert "osc_gitops_errors_total" in Metrics().exposition().decode()
    assert 'node="' not in Metrics().exposition().decode()


# ------------------------------------------------------------------------ status --all-nodes

NOW = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)


def beat(result: str, revision: str | None, age: float = 5, **extra: Any) -> Heartbeat:
    record = {"result": result, "revision": revision, "rows": {"ACL": 2}, **extra}
    return Heartbeat(record, NOW - dt.timedelta(seconds=age), 180)


def test_status_across_nodes_names_every_node_that_is_not_ok() -> None:
    verdict = judge(
        ["a", "b", "c", "d", "e", "f"],
        {
            "a": beat("unchanged", "r2"),
            "b": beat("error", "r2", message="cannot connect to OVN NB at unix:/x"),
            "c": beat("applied", "r1"),
            "d": beat("unchanged", "r2", age=900),
            "e": Heartbeat(None, NOW, 180, "osc.io/agent-status is not JSON"),
            "gone": beat("unchanged", "r2"),
        },
        Heartbeat({"result": "unchanged", "revision": "r2"}, NOW, 180),
        NOW,
    )
    states = {line.node: line.state for line in verdict.lines}
    assert states == {
        "a": "ok", "b": "failed", "c": "lagging", "d": "stale", "e": "failed", "f": "missing",
    }  # fmt: skip
    assert not verdict.ok
    text = render_text(verdict)
    assert "cannot connect to OVN NB" in text and "the central owner is at r2" in text
    assert "1 ok, 2 failed, 1 lagging, 1 stale, 1 missing" in text
    assert "gone" in " ".join(verdict.notes)
    data = verdict.to_json()
    assert data["ok"] is False and data["revision"] == "r2" and len(data["nodes"]) == 6


def test_all_nodes_ok_without_a_central_owner_compares_the_nodes() -> None:
    verdict = judge(
        ["a", "b"], {"a": beat("unchanged", "r1"), "b": beat("applied", "r1")}, None, NOW
    )
    assert verdict.ok and verdict.reference == "r1"
    lagging = judge(
        ["a", "b", "c"],
        {"a": beat("unchanged", "r2"), "b": beat("unchanged", "r2"), "c": beat("unchanged", "r1")},
        None,
        NOW,
    )
    assert [line.state for line in lagging.lines] == ["ok", "ok", "lagging"]


def test_the_pipeline_compiles_an_agent_with_its_options() -> None:
    kube, ovn = shared_nb()
    pipeline = Pipeline(kube, ovn, OPTIONS, scope=NodeScope("node-3"))
    assert getattr(pipeline.compile_options, "node", None) == "node-3"
    assert Pipeline(kube, ovn, OPTIONS).compile_options is OPTIONS
