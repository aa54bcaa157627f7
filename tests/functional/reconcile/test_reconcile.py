"""Issue #4 and the 2017 acceptance criteria, through the CLI against the sandbox.

Real ovsdb-server (OVN 26.03 NB schema, so Network Function rows are real rows) and the
Kubernetes API emulator; the reconciler under test is `osc-gitops` itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from osc_gitops_sandbox.ovn.stack import seed_foreign_rows

from tests.support.cli import cli, conn
from tests.support.security_manager import event_receiver

NB = "OVN_Northbound"
TABLES = ["Logical_Switch", "Logical_Switch_Port", "Port_Group", "ACL", "Network_Function",
          "Network_Function_Group", "Logical_Router", "Logical_Router_Port",
          "Logical_Router_Policy"]  # fmt: skip


def plan_json(cluster: SandboxCluster, policies: Path, *extra: str) -> dict:
    result = cli("plan", policies, *conn(cluster), "-o", "json", *extra)
    assert result.code in (0, 2), result.err
    return json.loads(result.out)


def apply(cluster: SandboxCluster, policies: Path, *extra: str) -> None:
    """``apply --wait``: steering onto a VNF instance is switched on once OVN reports it
    healthy (the sandbox's VNFs answer the probe at once), so one apply converges fully."""
    result = cli("apply", policies, *conn(cluster), "--wait", "--wait-timeout", "30s", *extra)
    assert result.code == 0, result.err


def changes(plan: dict) -> list[tuple[str, str, str]]:
    return [(c["action"], c["resource"]["kind"], c["resource"]["name"]) for c in plan["changes"]]


def rows(cluster: SandboxCluster, table: str) -> list[dict]:
    return ovsdb_rpc.dump(cluster.nb_remote, NB, [table])[table]


def pg_members(cluster: SandboxCluster, name: str) -> set[str]:
    names = {p["_uuid"]: p["name"] for p in rows(cluster, "Logical_Switch_Port")}
    (pg,) = [p for p in rows(cluster, "Port_Group") if p["name"] == name]
    return {names[u] for u in as_list(pg["ports"])}


def as_list(value: object) -> list:
    """The raw dump gives a one-element set as its element (OVSDB's datum shorthand)."""
    return value if isinstance(value, list) else [value]


def ext(row: dict) -> dict:
    return dict(row["external_ids"])


def test_plan_apply_then_nothing_to_do(nf_cluster, policies):
    first = cli("plan", policies, *conn(nf_cluster))
    assert first.code == 2
    # 3 health checks + NB_Global; the 14 steering ACLs (4 of them letting through what
    # crossed the firewall) wait until OVN reports the new VNF instances healthy
    assert "Plan: 33 to create, 0 to change, 0 to delete." in first.out
    assert first.out.count("~ held: Binding/") == 8  # one per (binding, node)
    apply(nf_cluster, policies)
    again = cli("plan", policies, *conn(nf_cluster))
    assert again.code == 0, again.out
    assert "No changes." in again.out
    apply(nf_cluster, policies)  # idempotent: a second apply changes nothing
    assert cli("plan", policies, *conn(nf_cluster)).code == 0


def test_vnf_vm_per_node_on_the_workload_switch_with_ports_recorded(nf_cluster, policies):
    plan = plan_json(nf_cluster, policies)
    apply(nf_cluster, policies)
    vms = {o["metadata"]["name"]: o for o in nf_cluster.kube.objects("VirtualMachine")}
    # firewall on every node, ips only where osc.io/vnf-capable=true (node-1)
    assert sorted(vms) == ["firewall-node-1", "firewall-node-2", "ips-node-1"]
    vm = vms["firewall-node-2"]
    assert vm["spec"]["runStrategy"] == "Always"
    affinity = vm["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]  # pinned by name
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]
    }
    assert vm["metadata"]["annotations"]["osc.io/ports"] == (
        "in=nf_firewall_node-2_in,out=nf_firewall_node-2_out"
    )
    # its OVN ports sit on the same logical switch as the node's workloads
    switches = {s["name"]: s for s in rows(nf_cluster, "Logical_Switch")}
    lsps = {p["name"]: p for p in rows(nf_cluster, "Logical_Switch_Port")}
    node2_ports = {str(u) for u in as_list(switches["node-2"]["ports"])}
    for name in ("nf_firewall_node-2_in", "nf_firewall_node-2_out", "shop-frontend_web-2"):
        assert str(lsps[name]["_uuid"]) in node2_ports
    port = lsps["nf_firewall_node-2_in"]
    assert dict(port["options"])["nf-linked-port"] == "nf_firewall_node-2_out"
    assert ext(port)["osc.io/owner"] == "osc-gitops"
    assert ext(port)["osc.io/resource"] == "VnfDeployment/firewall"
    assert ext(port)["osc.io/node"] == "node-2"
    # and the port ids are in the JSON plan
    created = {c["resource"]["name"] for c in plan["changes"]
               if c["resource"]["kind"] == "Logical_Switch_Port"}  # fmt: skip
    assert "nf_firewall_node-2_in" in created


def test_a_binding_produces_network_function_steering_rows(nf_cluster, policies):
    apply(nf_cluster, policies)
    lsp_names = {p["_uuid"]: p["name"] for p in rows(nf_cluster, "Logical_Switch_Port")}
    # ANY label: app=web (web-1, web-canary) or tier=frontend (cdn-edge-1)
    assert {m.split("_")[1] for m in pg_members(nf_cluster, "osc.web.node_1")} == {
        "web-1",
        "cdn-edge-1",
        "web-canary",
    }
    acls = {ext(a)["osc.io/key"]: a for a in rows(nf_cluster, "ACL")}
    to = acls["osc.web_firewall.node_1.to"]
    assert to["match"] == (  # node traffic left out: node-1's management port, join, transit
        "outport == @osc.web.node_1 && (ip4.src != {10.244.1.2, 100.64.0.0/16, 100.88.0.0/16} "
        "|| ip6.src != {fd98::/64, fd97::/64}) && ip"
    )
    assert to["action"] == "allow-related"
    nfgs = {g["_uuid"]: g for g in rows(nf_cluster, "Network_Function_Group")}
    group = nfgs[to["network_function_group"]]
    assert group["fallback"] == "fail-close" and group["mode"] == "inline"
    nfs = {f["_uuid"]: f for f in rows(nf_cluster, "Network_Function")}
    (nf_uuid,) = as_list(group["network_function"])
    assert lsp_names[nfs[nf_uuid]["inport"]] == "nf_firewall_node-1_in"
    assert lsp_names[nfs[nf_uuid]["outport"]] == "nf_firewall_node-1_out"
    assert 1 <= nfs[nf_uuid]["id"] <= 255


def test_single_pod_events_change_exactly_that_pod(nf_cluster, policies):
    apply(nf_cluster, policies)
    # a new pod with one of the labels joins its node's port group: one mutation
    nf_cluster.add_pod("shop-frontend", "web-3", "node-2", {"tier": "frontend"})
    plan = plan_json(nf_cluster, policies)
    assert changes(plan) == [("update", "Port_Group", "osc.web.node_2")]
    (change,) = plan["changes"]
    assert set(change["after"]["ports"]) - set(change["before"]["ports"]) == {"shop-frontend_web-3"}
    assert set(change["before"]["ports"]) <= set(change["after"]["ports"])
    apply(nf_cluster, policies)
    # a pod with none of the labels changes nothing
    nf_cluster.add_pod("shop-frontend", "batch-1", "node-2", {"app": "batch"})
    assert changes(plan_json(nf_cluster, policies)) == []
    # relabelled out: leaves, exactly one mutation
    nf_cluster.label_pod("shop-frontend", "web-3", {"tier": None})
    plan = plan_json(nf_cluster, policies)
    assert changes(plan) == [("update", "Port_Group", "osc.web.node_2")]
    assert "shop-frontend_web-3" not in plan["changes"][0]["after"]["ports"]
    apply(nf_cluster, policies)
    # deleted: OVN-Kubernetes deletes its LSP, and Port_Group.ports is a weak reference, so
    # OVSDB drops it from the group by itself: nothing is left for us to change.
    nf_cluster.label_pod("shop-frontend", "web-3", {"tier": "frontend"})
    apply(nf_cluster, policies)
    assert pg_members(nf_cluster, "osc.web.node_2") == {
        "shop-frontend_web-2",
        "shop-frontend_web-3",
    }
    nf_cluster.delete_pod("shop-frontend", "web-3")
    assert changes(plan_json(nf_cluster, policies)) == []
    assert pg_members(nf_cluster, "osc.web.node_2") == {"shop-frontend_web-2"}


def test_vm_deleted_by_a_user_is_recreated(nf_cluster, policies):
    apply(nf_cluster, policies)
    nf_cluster.delete_vm("osc-vnfs", "firewall-node-1")
    assert changes(plan_json(nf_cluster, policies)) == [
        ("create", "VirtualMachine", "osc-vnfs/firewall-node-1")
    ]
    apply(nf_cluster, policies)
    names = {o["metadata"]["name"] for o in nf_cluster.kube.objects("VirtualMachine")}
    assert "firewall-node-1" in names


def test_removed_from_git_is_pruned_and_undeployed(nf_cluster, policies):
    apply(nf_cluster, policies)
    # drop the ips VNF and every binding that uses it
    (policies / "vnfs.yaml").write_text(
        (policies / "vnfs.yaml").read_text().split("\n---")[0] + "\n"
    )
    for path in (policies / "bindings").glob("*.yaml"):
        docs = path.read_text().split("\n---")
        path.write_text("\n---".join(d for d in docs if "vnf: ips" not in d))
    plan = plan_json(nf_cluster, policies)
    assert plan["summary"]["create"] == 0 and plan["summary"]["update"] == 0
    deleted = {(k, n) for a, k, n in changes(plan) if a == "delete"}
    assert ("VirtualMachine", "osc-vnfs/ips-node-1") in deleted
    assert ("Network_Function", "osc.ips.node_1") in deleted
    assert ("ACL", "osc.web_ips.node_1.to") in deleted
    apply(nf_cluster, policies)
    assert "ips-node-1" not in {o["metadata"]["name"] for o in nf_cluster.kube.objects(
        "VirtualMachine")}  # fmt: skip
    assert not [r for r in rows(nf_cluster, "ACL") if "ips" in ext(r).get("osc.io/key", "")]


def _not_ours(dump: dict) -> dict:
    """Every row we do not own; switches without our LSPs in `ports` (we only add our own)."""
    ours = {
        r["_uuid"]
        for t in dump.values()
        for r in t
        if dict(r.get("external_ids", {})).get("osc.io/owner") == "osc-gitops"
    }
    out = {}
    for table, table_rows in dump.items():
        kept = []
        for r in table_rows:
            if r["_uuid"] in ours:
                continue
            r = dict(r)
            for col in ("ports", "acls", "policies"):
                if col in r:
                    r[col] = sorted(str(u) for u in as_list(r[col]) if u not in ours)
            kept.append(r)
        out[table] = kept
    return out


def test_rows_of_others_are_never_modified_or_deleted(nf_cluster, policies):
    foreign = seed_foreign_rows(nf_cluster.nb_remote)
    assert foreign is not None
    before = _not_ours(ovsdb_rpc.dump(nf_cluster.nb_remote, NB, TABLES))
    apply(nf_cluster, policies)
    nf_cluster.add_pod("shop-frontend", "web-4", "node-1", {"app": "web"})
    apply(nf_cluster, policies)
    empty = policies.parent / "empty"
    empty.mkdir()
    refused = cli("apply", empty, *conn(nf_cluster))
    assert refused.code == 1 and "--allow-empty" in refused.err
    apply(nf_cluster, empty, "--allow-empty")  # prune everything we own
    after = ovsdb_rpc.dump(nf_cluster.nb_remote, NB, TABLES)
    assert not [
        r
        for t in after.values()
        for r in t
        if dict(r.get("external_ids", {})).get("osc.io/owner") == "osc-gitops"
    ]
    after_foreign = _not_ours(after)
    # the only difference: OVN-Kubernetes' new pod port web-4
    lsp_before = {r["name"] for r in before["Logical_Switch_Port"]}
    lsp_after = {r["name"] for r in after_foreign["Logical_Switch_Port"]}
    assert lsp_after - lsp_before == {"shop-frontend_web-4"}
    for table in ("Port_Group", "ACL", "Logical_Router", "Logical_Router_Port"):
        assert after_foreign[table] == before[table], table


def test_security_manager_notified_on_deploy_and_remove(nf_cluster, policies):
    with event_receiver() as (url, events):
        vnfs = policies / "vnfs.yaml"
        vnfs.write_text(vnfs.read_text().replace(
            "https://secmgr.example.com/api/v1/osc-events", url))  # fmt: skip
        apply(nf_cluster, policies)
        deployed = [e for e in events if e["event"] == "deployed"]
        assert [(e["vnf"], e["node"]) for e in deployed] == [("ips", "node-1")]
        assert deployed[0]["ovnPorts"] == {"in": "nf_ips_node-1_in", "out": "nf_ips_node-1_out"}
        nf_cluster.delete_vm("osc-vnfs", "ips-node-1")
        apply(nf_cluster, policies)  # recreated: deployed again
        instances = [e for e in events if e["event"] != "members"]  # (members: their own test)
        assert [e["event"] for e in instances] == ["deployed", "deployed"]
        node = nf_cluster.kube.get_object("Node", None, "node-1")
        assert node is not None
        nf_cluster.kube.add_objects([{**node, "metadata": {
            **node["metadata"], "labels": {"kubernetes.io/hostname": "node-1"}}}])  # fmt: skip
        apply(nf_cluster, policies)  # node no longer selected: the VNF instance is removed
        last = [e for e in events if e["event"] != "members"][-1]
        assert last["event"] == "removed" and last["node"] == "node-1"


def test_snapshot_then_offline_plan_equals_live_plan(nf_cluster, policies, tmp_path):
    snap = tmp_path / "snap.json"
    result = cli("snapshot", *conn(nf_cluster), "-f", snap)
    assert result.code == 0, result.err
    live = cli("plan", policies, *conn(nf_cluster), "-o", "json")
    offline = cli("plan", policies, "--observed", snap, "-o", "json")
    assert offline.code == live.code == 2
    assert json.loads(offline.out) == json.loads(live.out)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    bad = cli("plan", policies, "--observed", broken)
    assert bad.code == 1 and f"{broken} is not an osc-gitops snapshot" in bad.err
