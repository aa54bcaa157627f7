"""Plans in pull requests for interconnect clusters: the agents publish their view of their
zone, ``snapshot --all-nodes`` assembles one file without reaching any NB, and ``plan
--observed`` on it shows per node exactly what each agent will change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.ovn.zones import ZonedCluster

from tests.functional.zones.support import agent, central, converge, kubeconfig
from tests.support.cli import cli
from tests.support.ovn import OVN_MARKS

pytestmark = OVN_MARKS


def changes(plan_json: str) -> set[tuple[str, str, str, str | None]]:
    data: dict[str, Any] = json.loads(plan_json)
    return {
        (c["action"], c["resource"]["kind"], c["resource"]["name"], c["resource"]["node"])
        for c in data["changes"]
    }


def test_a_pull_request_is_planned_per_zone_from_the_agents_published_views(
    zones: ZonedCluster, policies: Path, tmp_path: Path
) -> None:
    converge(zones, policies)
    snapshot = tmp_path / "snapshot.json"
    # the CI job's snapshot: no NB is reachable from there
    for node in zones.nodes:
        zones.stop_nb(node)
    done = cli("snapshot", "--all-nodes", *kubeconfig(zones), "-f", snapshot)
    assert done.code == 0, done.err
    for node in zones.nodes:
        zones.start_nb(node)
    data = json.loads(snapshot.read_text())
    assert data["kind"] == "zoned" and sorted(data["zones"]) == zones.nodes and not data["missing"]
    assert cli("plan", policies, "--observed", snapshot).code == 0  # the base branch: no change

    # the pull request: the IPS also inspects port 8443, the firewall gets a new image
    pr = tmp_path / "pr"
    shutil.copytree(policies, pr)
    web = pr / "bindings" / "web.yaml"
    web.write_text(web.read_text().replace("ports: [80, 443]", "ports: [80, 443, 8443]"))
    vnfs = pr / "vnfs.yaml"
    vnfs.write_text(vnfs.read_text().replace("vnf-firewall:1.4.2", "vnf-firewall:1.4.3"))
    planned = cli("plan", pr, "--observed", snapshot, "-o", "json")
    assert planned.code == 2, planned.err
    offline = changes(planned.out)
    markdown = cli("plan", pr, "--observed", snapshot, "-o", "markdown")
    assert (
        markdown.code == 2 and "interconnect, 3 zone(s)" not in markdown.out.split("<details>")[0]
    )

    # what the agents and the central owner will really do, asked live
    live = changes(central(zones, "plan", pr, "-o", "json").out)
    for node in zones.nodes:
        live |= changes(agent(zones, "plan", pr, node, "-o", "json").out)
    assert offline == live
    assert {c[3] for c in offline if c[1] == "ACL"} == {"node-1"}  # the IPS runs on node-1
    assert {c[1] for c in offline} == {"ACL", "VirtualMachine"}
    # the central owner reads no NB: no rolling restarts, and the plan says so
    assert any("restart them one node at a time" in w for w in json.loads(planned.out)["warnings"])

    # one zone only, and the Kubernetes side only
    one = changes(cli("plan", pr, "--observed", snapshot, "--node", "node-1", "-o", "json").out)
    assert one == {c for c in offline if c[3] == "node-1" and c[1] != "VirtualMachine"}
    kube = cli("plan", pr, "--observed", snapshot, "--kubernetes-only", "-o", "json")
    assert changes(kube.out) == {c for c in offline if c[1] == "VirtualMachine"}


def test_a_zone_whose_agent_never_published_is_named_in_the_plan(
    zones: ZonedCluster, policies: Path, tmp_path: Path
) -> None:
    converge(zones, policies)
    zones.add_node("node-4")  # no agent ran there yet
    snapshot = tmp_path / "snapshot.json"
    assert cli("snapshot", "--all-nodes", *kubeconfig(zones), "-f", snapshot).code == 0
    assert json.loads(snapshot.read_text())["missing"] == ["node-4"]
    planned = cli("plan", policies, "--observed", snapshot, "-o", "json")
    data = json.loads(planned.out)
    assert any("node node-4" in w and "not in this plan" in w for w in data["warnings"])
    # the central owner's share of the new node is planned all the same
    assert {c["resource"]["node"] for c in data["changes"]} == {"node-4"}
    assert {c["resource"]["kind"] for c in data["changes"]} == {
        "VirtualMachine", "NetworkAttachmentDefinition",
    }  # fmt: skip
