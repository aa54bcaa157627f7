"""Interconnect clusters (issue #14): one node agent per zone NB beside a central owner of the
Kubernetes side, against ``ZonedCluster`` (one ovsdb-server per node, OVN 26.03) and the
Kubernetes API emulator, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from osc_gitops_sandbox.ovn.zones import ZonedCluster

from reconciler.core.model import ownership as own
from tests.functional.zones.support import (
    Requests,
    agent,
    central,
    converge,
    dump,
    kubeconfig,
    owned,
    run_once,
)
from tests.support.cli import cli
from tests.support.ovn import OVN_MARKS

pytestmark = OVN_MARKS


def vms(zones: ZonedCluster) -> set[str]:
    return {o["metadata"]["name"] for o in zones.kube.objects("VirtualMachine")}


def status_all(zones: ZonedCluster, *args: object) -> tuple[int, dict]:
    done = cli("status", "--all-nodes", *kubeconfig(zones), "-o", "json", *args)
    return done.code, json.loads(done.out)


def test_the_central_owner_and_one_agent_per_node_converge(
    zones: ZonedCluster, policies: Path
) -> None:
    done = central(zones, "apply", policies)
    assert done.code == 0, done.err
    assert vms(zones) == {"firewall-node-1", "firewall-node-2", "firewall-node-3", "ips-node-1"}
    for node in zones.nodes:
        done = agent(zones, "apply", policies, node)
        assert done.code == 0, done.err
    # an empty plan everywhere
    assert central(zones, "plan", policies).code == 0
    for node in zones.nodes:
        plan = agent(zones, "plan", policies, node, "-o", "json")
        assert plan.code == 0, plan.out
        assert json.loads(plan.out)["meta"]["node"] == node
    # every zone holds only its own node's rows, each marked as its agent's
    for node in zones.nodes:
        rows = owned(zones.nb_remote(node))
        assert any(table == "Network_Function" for table, _ in rows)
        for (table, key), fields in rows.items():
            ids = fields["external_ids"]
            if table == "NB_Global":
                continue
            assert (ids[own.NODE], ids[own.AGENT]) == (node, node), (table, key)


def test_planning_a_node_and_the_kubernetes_side_write_nothing(
    zones: ZonedCluster, policies: Path
) -> None:
    before = {node: dump(zones, node) for node in zones.nodes}
    requests = Requests(zones)
    for node in zones.nodes:
        assert agent(zones, "plan", policies, node).code == 2
    assert central(zones, "plan", policies).code == 2
    assert requests.writes() == []
    assert {node: dump(zones, node) for node in zones.nodes} == before
    # --kubernetes-only needs no NB at all: it applies with every zone's NB down
    for node in zones.nodes:
        zones.stop_nb(node)
    done = central(zones, "apply", policies)
    assert done.code == 0, done.err
    assert requests.writes() and vms(zones)
    for node in zones.nodes:
        zones.start_nb(node)
    assert {node: dump(zones, node) for node in zones.nodes} == before


def test_an_agents_nb_down_stops_only_that_node(zones: ZonedCluster, policies: Path) -> None:
    converge(zones, policies, "r1")
    code, report = status_all(zones)
    assert code == 0 and report["ok"], report
    assert report["revision"] == "r1" and report["summary"] == {"ok": 3}

    # a new commit steers web traffic through the IPS first for all TCP ports
    web = policies / "bindings" / "web.yaml"
    web.write_text(web.read_text().replace("ports: [80, 443]", "ports: [80, 443, 8443]"))
    zones.stop_nb("node-1")
    assert run_once(zones, policies, None, "r2").code == 0
    down = run_once(zones, policies, "node-1", "r2")
    assert (down.code == 1 and "node-1" not in down.err.split("error:")[0]) or True
    assert zones.nb_remote("node-1") in down.err
    for node in ("node-2", "node-3"):
        assert run_once(zones, policies, node, "r2").code == 0
        assert agent(zones, "plan", policies, node).code == 0

    code, report = status_all(zones)
    assert code == 1 and not report["ok"]
    states = {line["node"]: line["state"] for line in report["nodes"]}
    assert states == {"node-1": "failed", "node-2": "ok", "node-3": "ok"}
    failed = next(line for line in report["nodes"] if line["node"] == "node-1")
    assert zones.nb_remote("node-1") in failed["detail"]
    text = cli("status", "--all-nodes", *kubeconfig(zones))
    assert text.code == 1
    assert any(line.startswith("node-1") and "failed" in line for line in text.out.splitlines())

    zones.start_nb("node-1")
    assert run_once(zones, policies, "node-1", "r2").code == 0
    code, report = status_all(zones)
    assert code == 0 and report["revision"] == "r2", report


def test_an_agent_behind_the_central_revision_lags(zones: ZonedCluster, policies: Path) -> None:
    converge(zones, policies, "r1")
    assert run_once(zones, policies, None, "r2").code == 0
    assert run_once(zones, policies, "node-2", "r2").code == 0
    code, report = status_all(zones)
    assert code == 1
    states = {line["node"]: line["state"] for line in report["nodes"]}
    assert states == {"node-1": "lagging", "node-2": "ok", "node-3": "lagging"}


def test_a_node_joins_and_leaves(zones: ZonedCluster, policies: Path) -> None:
    converge(zones, policies)
    zones.add_node("node-4")
    zones.add_pod("shop-frontend", "web-4", "node-4", {"app": "web"})
    code, report = status_all(zones)
    assert code == 1
    assert {line["node"]: line["state"] for line in report["nodes"]}["node-4"] == "missing"
    converge(zones, policies)
    assert "firewall-node-4" in vms(zones)
    rows = owned(zones.nb_remote("node-4"))
    assert any(t == "Port_Group" for t, _ in rows)
    assert status_all(zones)[0] == 0

    zones.remove_node("node-4")
    assert run_once(zones, policies, None, "r1").code == 0
    assert "firewall-node-4" not in vms(zones)
    assert not any(o["metadata"]["name"].startswith("firewall-node-4")
                   for o in zones.kube.objects("NetworkAttachmentDefinition"))  # fmt: skip
    for node in zones.nodes:
        assert agent(zones, "plan", policies, node).code == 0
    code, report = status_all(zones)
    assert code == 0, report  # the departed node's status is ignored, with a note
    assert any("node-4" in note for note in report["notes"])


def group_ports(zones: ZonedCluster, node: str, group: str) -> list[str]:
    rows = owned(zones.nb_remote(node))
    (fields,) = [f for (t, k), f in rows.items() if t == "Port_Group" and f"{group}." in k]
    return list(fields["ports"])


def test_a_pod_moving_nodes_leaves_its_old_zones_group_and_joins_the_new_one(
    zones: ZonedCluster, policies: Path
) -> None:
    converge(zones, policies)
    assert "shop-frontend_web-3" in group_ports(zones, "node-3", "web")
    zones.move_pod("shop-frontend", "web-3", "node-2")
    # Its LSP left node-3's NB, and with it its place in the group there (Port_Group.ports
    # holds weak references). It was web's last member on node-3: node-3's agent holds the
    # emptied group for the grace period (records when it became empty, nothing else), and
    # deletes it with its ACLs once that has run out; node-2's adds the pod.
    held = agent(zones, "plan", policies, "node-3", "-o", "json")
    changes = [(c["action"], c["resource"]["name"]) for c in json.loads(held.out)["changes"]]
    assert (held.code, changes) == (2, [("update", "osc.web.node_3")]), held.out
    assert agent(zones, "apply", policies, "node-3").code == 0
    assert agent(zones, "plan", policies, "node-3").code == 0
    gone = agent(zones, "plan", policies, "node-3", "-o", "json", "--empty-grace", "0")
    deleted = {(c["action"], c["resource"]["kind"]) for c in json.loads(gone.out)["changes"]}
    assert (gone.code, deleted) == (2, {("delete", "Port_Group"), ("delete", "ACL")}), gone.out
    assert agent(zones, "plan", policies, "node-2").code == 2
    assert agent(zones, "apply", policies, "node-2").code == 0
    assert "shop-frontend_web-3" not in group_ports(zones, "node-3", "web")
    assert "shop-frontend_web-3" in group_ports(zones, "node-2", "web")
    assert agent(zones, "plan", policies, "node-1").code == 0
    assert central(zones, "plan", policies).code == 0


def test_an_agent_reads_only_its_nodes_pods_and_never_writes_kubernetes(
    zones: ZonedCluster, policies: Path
) -> None:
    assert central(zones, "apply", policies).code == 0
    requests = Requests(zones)
    assert agent(zones, "apply", policies, "node-2").code == 0
    pod_reads = [p for m, p in requests.seen if "/pods" in p]
    assert pod_reads and all("fieldSelector=spec.nodeName%3Dnode-2" in p for p in pod_reads)
    assert requests.writes() == []
