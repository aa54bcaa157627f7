"""Traffic per VNF instance in ``status`` and ``status --all-nodes``: from what a node's binder
published (``reconciler.core.views.traffic.node_traffic``), an instance that saw nothing while
pods on its node talked first and marked, the exit code untouched."""

from __future__ import annotations

import datetime as dt
from typing import Any

from reconciler.core.views.traffic import node_traffic
from reconciler.engine.reporting import status
from reconciler.engine.reporting.fleet import Heartbeat, judge, render_text

NOW = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)


def record(node: str, crossed: dict[str, int | None], talking: dict[str, int] | None,
           ) -> dict[str, Any]:  # fmt: skip
    """A binder's record: ``crossed`` by instance, ``talking`` pods (``None``: not sampled)."""
    return {
        "role": "binder", "node": node, "instance": "osc-gitops", "ok": True,
        "traffic": [
            {"vnf": inst.split("-")[0], "node": node, "instance": inst, "ports": {},
             "crossed_last_minute": n}
            for inst, n in crossed.items()
        ],
        "traffic_sampled_at": None if talking is None else "2026-11-20T09:59:58Z",
        "pods_talking": talking or {},
    }  # fmt: skip


def test_each_verdict_from_a_binder_record_silent_first() -> None:
    verdicts = node_traffic(record("node-1", {
        "ids-node-1": 0, "firewall-node-1": 12, "web-node-1": 0,
    }, {"shop_web-a": 40, "shop_client-c": 2}))  # fmt: skip
    assert [(t.instance, t.verdict) for t in verdicts] == [
        ("ids-node-1", "silent-while-pods-talked"),
        ("web-node-1", "silent-while-pods-talked"),
        ("firewall-node-1", "crossed"),
    ]
    assert verdicts[0].pods_talked == 42 and verdicts[2].crossed_last_minute == 12
    assert "NOTHING crossed it in the last minute while 2 pod(s) on node-1" in verdicts[0].text
    quiet = node_traffic(record("node-2", {"firewall-node-2": 0}, {}))
    assert [(t.verdict, t.pods_talked) for t in quiet] == [("quiet", 0)]
    unknown = node_traffic(record("node-2", {"firewall-node-2": None}, None))
    assert [t.verdict for t in unknown] == ["unknown"]
    assert node_traffic(None) == [] and node_traffic({}) == []


def test_status_shows_traffic_before_the_instances_and_marks_the_silent_ones() -> None:
    st = status.Status(instance="osc-gitops", result="applied", revision="r1")
    st.vnf_instances = [{"vnf": "firewall", "node": "node-1", "health": "healthy"}]
    st.binder = record("node-1", {"firewall-node-1": 0, "ids-node-1": 3}, {"shop_web-a": 9})
    text = status.render_text(st)
    assert text.index("Traffic per VNF instance") < text.index("VNF instances (health")
    assert ("  ! firewall-node-1 on node-1: silent-while-pods-talked: NOTHING crossed it"
            in text)  # fmt: skip
    assert "    ids-node-1 on node-1: crossed: traffic crossed it" in text
    # what status filled from the binders' Leases wins over this process's binder
    st.traffic = [t.to_json() for t in node_traffic(record("node-9", {"fw-node-9": 1}, {}))]
    assert "fw-node-9 on node-9: crossed" in status.render_text(st)
    st.traffic, st.binder = [], None
    st.traffic_problem = "cannot read the node binders' Leases: 403 Forbidden"
    assert "not known: cannot read the node binders' Leases: 403 Forbidden" in status.render_text(
        st
    )
    assert status.Status.from_json(st.to_json()).traffic_problem == st.traffic_problem


def test_all_nodes_lists_silent_instances_before_the_table_and_keeps_its_exit_code() -> None:
    ok = {"result": "unchanged", "revision": "r1", "rows": {"ACL": 1}}
    agents = {n: Heartbeat(ok, NOW, 180) for n in ("node-1", "node-2", "node-3")}
    binders = {
        "node-1": Heartbeat(record("node-1", {"firewall-node-1": 0}, {"shop_web-a": 7}), NOW, 30),
        "node-2": Heartbeat(record("node-2", {"firewall-node-2": 5}, {}), NOW, 30),
        # a binder that stopped says nothing
        "node-3": Heartbeat(record("node-3", {"firewall-node-3": 0}, {"shop_x": 1}),
                            NOW - dt.timedelta(seconds=90), 30),
    }  # fmt: skip
    verdict = judge(["node-1", "node-2", "node-3"], agents, None, NOW, binders)
    assert verdict.ok  # a VNF that saw nothing is no failed node
    text = render_text(verdict)
    head, _, table = text.partition("NODE ")
    assert "saw NOTHING while pods on their node talked" in head
    assert "! firewall-node-1 on node-1: NOTHING crossed it" in head
    assert "firewall-node-2 on node-2: crossed" in table and "firewall-node-3" not in text
    nodes = {n["node"]: n for n in verdict.to_json()["nodes"]}
    assert [t["verdict"] for t in nodes["node-1"]["traffic"]] == ["silent-while-pods-talked"]
    assert nodes["node-3"]["traffic"] == []
    assert judge(["node-1"], agents, None, NOW).lines[0].traffic == ()  # no binders read


def test_all_nodes_names_the_unbound_ports_agents_published_and_exits_1() -> None:
    """An agent publishes its status's unbound ports (``status_record``); ``--all-nodes`` lists
    them before the table and is not ok, as ``status`` is not for its own."""
    from reconciler.engine.reporting.fleet import status_record

    st = status.Status(instance="osc-gitops", result="unchanged", revision="r1")
    st.unbound = [
        {
            "vnf": "firewall",
            "node": "node-1",
            "vm": "osc-vnfs/firewall-node-1",
            "port": "nf_firewall_node-1_in",
            "side": "in",
            "cause": "no binder runs",
        }
    ]
    agent = status_record(st, role="agent", node="node-1", rows={"ACL": 2})
    assert agent["unbound"] == st.unbound
    fine = status_record(status.Status(instance="osc-gitops", result="unchanged", revision="r1"),
                         role="agent", node="node-2", rows={})  # fmt: skip
    verdict = judge(["node-1", "node-2"],
                    {"node-1": Heartbeat(agent, NOW, 180), "node-2": Heartbeat(fine, NOW, 180)},
                    None, NOW)  # fmt: skip
    assert [line.state for line in verdict.lines] == ["ok", "ok"] and not verdict.ok
    text = render_text(verdict)
    head, _, _table = text.partition("NODE ")
    assert ("! osc-vnfs/firewall-node-1 in port nf_firewall_node-1_in on node-1: no binder runs"
            in head)  # fmt: skip
    assert verdict.to_json()["unbound"] == st.unbound
    # a stale node's old record says nothing any more (it is judged stale)
    stale = Heartbeat(agent, NOW - dt.timedelta(seconds=900), 180)
    assert judge(["node-1"], {"node-1": stale}, None, NOW).unbound == []


def test_an_instance_no_binder_counts_is_unknown_and_says_why() -> None:
    from reconciler.core.views.traffic import uncounted

    counted = node_traffic(record("node-1", {"firewall-node-1": 4}, {}))
    instances = [{"vnf": "firewall", "node": "node-1"}, {"vnf": "firewall", "node": "node-2"}]
    (missing,) = uncounted(instances, counted)
    assert (missing.instance, missing.node, missing.verdict) == ("firewall-node-2", "node-2",
                                                                 "unknown")  # fmt: skip
    assert "no binder on node-2 counts it (no fresh Lease osc-gitops-binder-node-2" in missing.text
    # --all-nodes: the node's own VNF instances its binder does not count
    agent = {"result": "unchanged", "revision": "r1", "vnf_instances": [
        {"vnf": "firewall", "node": "node-2", "health": "healthy"}]}  # fmt: skip
    verdict = judge(["node-2"], {"node-2": Heartbeat(agent, NOW, 180)}, None, NOW,
                    {"node-1": Heartbeat(record("node-1", {}, {}), NOW, 30)})  # fmt: skip
    (line,) = verdict.lines
    assert [(t.instance, t.verdict) for t in line.traffic] == [("firewall-node-2", "unknown")]
    assert verdict.ok
