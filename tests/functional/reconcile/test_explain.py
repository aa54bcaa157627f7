"""``osc-gitops explain`` and traffic lists on the sandbox: OVN 26.03 (sid) with ovn-northd running,
the Kubernetes API emulator, the example policies (issue #16 items 1-3).

No ovn-controller runs here: the sandbox plays VNFs that answer OVN's health probe
(``osc_gitops_sandbox.ovn.vnf_health``), so northd reports every instance healthy and ``apply
--wait`` switches the steering on. ``ovn-trace`` (26.03) reads the
logical flows northd made from our rows: it parses every match (and warns about any it cannot)
and shows which ACL a packet hits, so the OR of a traffic list is checked by OVN itself.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.functional.reconcile.test_reconcile import apply, rows
from tests.support.cli import CliResult, cli, conn

WEB_IPS_MATCH = (  # node traffic left out first (reconciler.core.steering.node_traffic)
    "outport == @osc.web.node_1 && (ip4.src != {10.244.1.2, 100.64.0.0/16, 100.88.0.0/16} || "
    "ip6.src != {fd98::/64, fd97::/64}) && ((tcp && (tcp.dst == 80 || tcp.dst == 443)) || "
    "(udp && udp.dst == 443))"
)


def explain(cluster: SandboxCluster, policies: Path, pod: str, *extra: object) -> CliResult:
    return cli("explain", pod, policies, *conn(cluster), *extra)


def explain_json(cluster: SandboxCluster, policies: Path, pod: str, *extra: object) -> dict:
    result = explain(cluster, policies, pod, "-o", "json", *extra)
    assert result.code in (0, 3), result.err
    data = json.loads(result.out)
    assert data["steeredAsDeclared"] is (result.code == 0)
    return data


def test_explain_before_and_after_apply(
    nf_northd_cluster: SandboxCluster, policies: Path, tmp_path: Path
) -> None:
    cluster = nf_northd_cluster
    before = explain(cluster, policies, "shop-frontend/web-1")
    assert before.code == 3, before.err  # selected, nothing applied yet
    assert "not steered as declared yet" in before.out.splitlines()[0]

    apply(cluster, policies)
    cluster.ovn.wait_northd_sync()

    # a steered pod: exit 0, text and JSON
    text = explain(cluster, policies, "shop-frontend/web-1")
    assert text.code == 0, text.out + text.err
    assert text.out.startswith(
        "Pod shop-frontend/web-1 on node-1 (OVN port shop-frontend_web-1): steered as declared"
    )
    assert "  SecurityGroup web through app=web (also tier=frontend)" in text.out
    assert "  1. web-ips  (SecurityGroup web, order 5, exit-lport): tcp 80,443; udp 443" in text.out
    data = explain_json(cluster, policies, "shop-frontend/web-1")
    assert data["pod"]["node"] == "node-1" and data["status"] == "steered"
    assert data["groups"] == [
        {"name": "web", "label": "app=web", "labels": ["app=web", "tier=frontend"], "bound": True}
    ]
    bindings = [
        {k: b[k] for k in ("name", "vnf", "order", "node", "instance", "healthy", "shadowedBy")}
        for b in data["bindings"]
    ]
    assert bindings == [
        {"name": "web-ips", "vnf": "ips", "order": 5, "node": "node-1",
         "instance": "osc-vnfs/ips-node-1", "healthy": True, "shadowedBy": None},
        {"name": "web-firewall", "vnf": "firewall", "order": 10, "node": "node-1",
         "instance": "osc-vnfs/firewall-node-1", "healthy": True, "shadowedBy": None},
    ]  # fmt: skip
    assert {r["state"] for r in data["ovn"]} == {"ok"}
    acl = next(r for r in data["ovn"] if r["name"] == "osc.web_ips.node_1.to")
    assert acl["fields"]["match"] == WEB_IPS_MATCH
    tables = {r["table"] for r in data["ovn"]}
    assert {"Port_Group", "ACL", "Network_Function_Group", "Network_Function",
            "Network_Function_Health_Check"} <= tables  # fmt: skip
    assert not any("is not healthy as OVN reports it" in w for w in data["warnings"])

    # a binding without order: the default, said so
    db = explain_json(cluster, policies, "shop-backend/db-0")
    assert [(b["name"], b["order"], b["orderDefault"]) for b in db["bindings"]] == [
        ("db-firewall", 100, True)
    ]
    assert db["status"] == "steered"

    # selected, but the IPS does not run on node-2: exit 3, and why
    web2 = explain(cluster, policies, "shop-frontend/web-2")
    assert web2.code == 3
    assert (
        "does not steer this pod: VnfDeployment ips does not run on node node-2: its "
        "nodeSelector wants osc.io/vnf-capable=true" in web2.out
    )
    data = explain_json(cluster, policies, "shop-frontend/web-2")
    assert data["status"] == "not-steered"
    assert [(b["name"], b["instance"]) for b in data["bindings"]] == [
        ("web-ips", None),
        ("web-firewall", "osc-vnfs/firewall-node-2"),
    ]

    # unselected: nothing is declared for it, so it is as declared (exit 0)
    static = explain(cluster, policies, "shop-frontend/static-1")
    assert static.code == 0 and "no SecurityGroup selects it" in static.out
    data = explain_json(cluster, policies, "shop-frontend/db-tools")
    assert (data["status"], data["groups"], data["bindings"], data["ovn"]) == (
        "not-selected", [], [], []
    )  # fmt: skip
    assert data["warnings"] == [
        "SecurityGroup db: the pod carries role=database, but the group only looks in "
        "namespace(s) shop-backend: not a member"
    ]

    # offline, from a snapshot: the same answer
    snap = tmp_path / "snap.json"
    assert cli("snapshot", *conn(cluster), "-f", snap).code == 0
    for pod in ("shop-frontend/web-1", "shop-frontend/web-2"):
        offline = cli("explain", pod, policies, "--observed", snap, "-o", "json")
        assert json.loads(offline.out) == explain_json(cluster, policies, pod)

    missing = explain(cluster, policies, "shop-frontend/web1")
    assert (missing.code, missing.out) == (1, "")
    assert missing.err == (
        "error: pod shop-frontend/web1 not found (did you mean shop-frontend/web-1?)\n"
    )


def test_a_row_removed_by_hand_makes_the_pod_pending(
    nf_northd_cluster: SandboxCluster, policies: Path
) -> None:
    cluster = nf_northd_cluster
    apply(cluster, policies)
    (acl,) = [a for a in rows(cluster, "ACL") if a["name"] == "web-ips"]
    cluster.ovn.nbctl("acl-del", "osc.web.node_1", "to-lport", str(acl["priority"]), acl["match"])
    result = explain(cluster, policies, "shop-frontend/web-1")
    assert result.code == 3
    assert any(
        line.startswith("  missing  ACL") and "osc.web_ips.node_1.to" in line
        for line in result.out.splitlines()
    )


def ovn_trace(cluster: SandboxCluster, workdir: Path, switch: str, flow: str) -> tuple[str, str]:
    """``ovn-trace --detailed`` of the 26.03 distribution against the sandbox's SB."""
    dist = cluster.ovn.distribution
    # the distribution's loader prefix (if any), then its ovn-trace binary
    argv = [*dist.command("ovn-sbctl")[:-1], str(dist.root / "usr" / "bin" / "ovn-trace")]
    argv += [f"--db={cluster.ovn.sb_remote}", "--ct=new", "--detailed", switch, flow]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env=dist.env(workdir), check=True
    )
    return proc.stdout, proc.stderr


def test_ovn_parses_a_traffic_list_and_steers_any_of_its_filters(
    nf_northd_cluster: SandboxCluster, policies: Path, tmp_path: Path
) -> None:
    cluster = nf_northd_cluster
    apply(cluster, policies)
    cluster.ovn.wait_northd_sync()
    acls = {dict(a["external_ids"])["osc.io/key"]: a for a in rows(cluster, "ACL")}
    assert acls["osc.web_ips.node_1.to"]["match"] == WEB_IPS_MATCH

    # cache-1 (no group) to web-1 on node-1: the to-lport ACLs of web decide
    flow = (
        'inport == "shop-backend_cache-1" && eth.src == 0a:58:0a:f4:01:09 && '
        "eth.dst == 0a:58:0a:f4:01:05 && ip4.src == 10.244.1.9 && ip4.dst == 10.244.1.5 && "
        "ip.ttl == 64 && "
    )
    hit = {}
    for l4 in ("udp && udp.dst == 443", "tcp && tcp.dst == 80", "udp && udp.dst == 53"):
        out, err = ovn_trace(cluster, tmp_path, "node-1", flow + l4)
        assert "parsing expression failed" not in err, err
        evaluated = [line for line in out.splitlines() if "ls_out_acl_eval" in line]
        hit[l4] = next(
            ("web-ips" if WEB_IPS_MATCH in line else "web-firewall")
            for line in evaluated
            if "@osc.web.node_1" in line
        )
    assert hit == {
        "udp && udp.dst == 443": "web-ips",  # the list's second filter
        "tcp && tcp.dst == 80": "web-ips",  # its first
        "udp && udp.dst == 53": "web-firewall",  # neither: the next binding takes it
    }
