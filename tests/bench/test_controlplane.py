"""``python -m bench.controlplane`` at a tiny scale: every figure is produced from real daemons
(northd 26.03, one ovn-controller on OVS with dummy devices), the counts are of distinct rows,
and the earlier row model's empty groups are rebuilt exactly. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc

from bench.controlplane import BEGIN, empty_group_ops, main
from bench.health import converge
from bench.run import reset_owned
from bench.sandbox_proc import SandboxProcess
from bench.scenario import Scale, node_name, write_manifests
from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.ovn.oneshot import OvnOneShot
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model import naming
from reconciler.engine.pipeline import reconcile
from reconciler.manifests.load import load_path
from tests.support.ovn import require_ovn_or_fail

pytestmark = pytest.mark.ovn

OWNED = ["external_ids", "includes", ["map", [["osc.io/owner", "osc-gitops"]]]]


def test_controlplane_figures_at_tiny_scale(tmp_path: Path) -> None:
    require_ovn_or_fail()
    out, results = tmp_path / "benchmarks.md", tmp_path / "cp.json"
    out.write_text("# Benchmarks\n\nhand-written text stays\n")
    code = main(["--scales", "60", "--nodes", "3", "--groups", "6", "--bindings", "6",
                 "--runs", "1", "--steering", "network-function", "--results", str(results),
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    (m,) = json.loads(results.read_text())["measurements"]
    without, with_ours, ours = m["without"], m["with"], m["ours"]
    assert m["chassis_ports"] == 20 and ours["steered_pods_on_chassis"] > 0
    # our ACLs become logical flows and OpenFlow flows on the node's chassis
    assert with_ours["lflows"] > without["lflows"] > 0
    assert with_ours["openflow"] > without["openflow"] > 0
    # northd writes two SB address sets per Port_Group, members or not: the count is of
    # rows, not of distinct column values (a select answers distinct rows)
    sets = with_ours["sb_rows"]["Address_Set"] - without["sb_rows"]["Address_Set"]
    assert sets == 2 * ours["port_groups"]
    assert ours["memberships"] >= ours["steered_pods"] > 0
    for fig in (without, with_ours):
        assert fig["recompute"]["ovn-northd-loop_ms"] >= fig["recompute"]["lflow_ms"] >= 0
        assert fig["controller_recompute"]["flow-generation_ms"] >= 0
        assert fig["rss_mib"]["ovn-controller"] > 1 and fig["load"] >= 0
        assert sum(fig["lflows_by_stage"].values()) == fig["lflows"]
    every = 6 * 3  # bound groups x nodes: the earlier model's Port_Groups
    if m["empty_groups_added"]:
        assert m["earlier_model_ours"]["port_groups"] == every
        assert (
            m["earlier_model"]["sb_rows"]["Address_Set"]
            == without["sb_rows"]["Address_Set"] + 2 * every
        )
    else:  # the row model still writes every (group, node) pair
        assert ours["port_groups"] == every
    text = out.read_text()
    assert "hand-written text stays" in text and "| network-function 60 | with our rows |" in text
    assert main(["--report-only", "--results", str(results), "--out", str(out)]) == 0
    assert out.read_text().count(BEGIN) == 1


def _owned(remote: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    selects = [
        {"op": "select", "table": "Port_Group", "where": [OWNED]},
        {"op": "select", "table": "ACL", "where": [OWNED]},
        {"op": "select", "table": "Network_Function_Group", "where": [OWNED],
         "columns": ["_uuid", "name"]},
    ]  # fmt: skip
    pgs, acls, nfgs = (r["rows"] for r in ovsdb_rpc.transact(remote, "OVN_Northbound", selects))
    return ({p["name"]: p for p in pgs}, {a["_uuid"][1]: a for a in acls},
            {n["_uuid"][1]: n["name"] for n in nfgs})  # fmt: skip


def _shape(remote: str) -> dict[str, list[tuple[str, str, str, int, str]]]:
    """Each owned Port_Group's ACLs as (match, direction, function group, priority, key)."""
    pgs, acls, nfgs = _owned(remote)
    shape = {}
    for name, pg in pgs.items():
        refs = ovsdb_rpc.from_atom(pg["acls"])
        rows = [acls[u] for u in ([refs] if isinstance(refs, str) else refs)]
        shape[name] = sorted(
            (a["match"], a["direction"], nfgs.get(ovsdb_rpc.from_atom(
                a["network_function_group"]) or "", ""), a["priority"],
             dict(ovsdb_rpc.from_atom(a["external_ids"]))["osc.io/key"])
            for a in rows
        )  # fmt: skip
    return shape


@pytest.mark.parametrize("steering", ["network-function", "router-policy"])
def test_empty_groups_of_the_earlier_model_are_rebuilt(tmp_path: Path, steering: str) -> None:
    """Every bound group gets its rows on every node, each pair's a copy of the group's rows
    elsewhere with that node's names and VNF. (Checked by hand against the earlier compile's
    own rows, commit 336a95b: identical for both backends, with and without ``both``.)"""
    require_ovn_or_fail(northd=False)
    scale = Scale(60, 6, 12, 12, 1, 3)  # every third binding `both`: from-lport rows, twins
    manifests = write_manifests(scale, tmp_path / "policies")
    nodes = [node_name(i) for i in range(6)]
    with SandboxProcess(scale, tmp_path / "sb", distribution="sid") as sb:
        remote = sb.info.nb_remote
        kube = KubeCluster(KubeSettings(kubeconfig=sb.info.kubeconfig))
        try:
            converge(lambda: reconcile(load_path(manifests), kube, OvnOneShot(OvnSettings(remote)),
                                       CompileOptions(steering=steering)), remote)  # fmt: skip
        finally:
            kube.close()
        applied = _shape(remote)
        policies = len(_policies(remote))
        assert len(applied) < 12 * 6, "some pairs have no members at this scale"
        ops, added = empty_group_ops(remote, nodes)
        assert added == 12 * 6 - len(applied)
        ovsdb_rpc.transact(remote, "OVN_Northbound", ops)
        rebuilt = _shape(remote)
        every = {naming.port_group("osc-gitops", f"sg-{g:03d}", node)
                 for g in range(12) for node in nodes}  # fmt: skip
        assert set(rebuilt) == every
        for pg, acls in rebuilt.items():
            node = pg.rsplit(".", 1)[1]
            if steering == "network-function":
                assert acls and all(f"@{pg} " in match for match, *_ in acls)
                assert all(nfg.startswith(f"osc.firewall.{node}.") for _m, _d, nfg, *_ in acls
                           if nfg)  # fmt: skip
            else:
                assert not acls
        if steering == "router-policy":
            lrps = _policies(remote)
            assert len(lrps) > policies
            address = _vnf_in_addresses(remote)
            for match, nexthops in lrps:
                if match.count("$") == 1:  # exit-lport: the pair's node's VNF
                    node = match.split("$", 1)[1].split("_ip4")[0].rsplit(".", 1)[1]
                    assert nexthops == [address[node]], match
        reset_owned(remote)
        assert not _owned(remote)[0] and not _policies(remote)


def _policies(remote: str) -> list[tuple[str, list[str]]]:
    rows = ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "select", "table": "Logical_Router_Policy", "where": [OWNED],
         "columns": ["_uuid", "match", "nexthops"]},
    ])[0]["rows"]  # fmt: skip
    out = []
    for row in rows:
        hops = ovsdb_rpc.from_atom(row["nexthops"])
        out.append((row["match"], [hops] if isinstance(hops, str) else list(hops)))
    return out


def _vnf_in_addresses(remote: str) -> dict[str, str]:
    """node token (``node_000``) -> the address of the VNF's in port on that node."""
    rows = ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "select", "table": "Logical_Switch_Port", "where": [OWNED],
         "columns": ["_uuid", "name", "addresses"]},
    ])[0]["rows"]  # fmt: skip
    out = {}
    for row in rows:
        if row["name"].endswith("_in") and row["addresses"] != ["set", []]:
            node = row["name"].split("_", 2)[2].rsplit("_", 1)[0]
            out[node.replace("-", "_")] = str(ovsdb_rpc.from_atom(row["addresses"])).split()[1]
    return out
