"""A service chain's rows in a real OVN 26.03 NB (issue 21): the link switches and VLAN child
ports the product owns are written in one apply, read back equal (a plan right after is
empty), kept when the chain is unchanged, and removed with it, while the node switches (not
ours) keep everything else. The packets are in ``tests/datapath/test_chains.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.support.cli import cli, conn

CHAIN = """\
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: api-chain}
spec:
  securityGroup: api
  vnf: [firewall, ips]      # ips runs on node-1 only: the chain steers there only
  order: 40
  redirection: both
"""


def _switches(remote: str) -> dict[str, dict[str, Any]]:
    (result,) = ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "select", "table": "Logical_Switch", "where": [],
         "columns": ["name", "ports", "external_ids"]},
    ])  # fmt: skip
    return {row["name"]: row for row in result["rows"]}


def _child_ports(remote: str) -> dict[str, tuple[str, int]]:
    (result,) = ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "select", "table": "Logical_Switch_Port", "where": [],
         "columns": ["name", "parent_name", "tag_request"]},
    ])  # fmt: skip
    out = {}
    for row in result["rows"]:
        parent, tag = (
            ovsdb_rpc.from_atom(row["parent_name"]),
            ovsdb_rpc.from_atom(row["tag_request"]),
        )
        if parent not in ([], None):
            out[row["name"]] = (parent, tag)
    return out


def _acl_groups(remote: str) -> dict[str, str]:
    """Each ACL of ours (``osc.io/key``) with the name of the function group it steers to."""
    acls, groups = ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "select", "table": "ACL", "where": [],
         "columns": ["external_ids", "network_function_group"]},
        {"op": "select", "table": "Network_Function_Group", "where": [],
         "columns": ["_uuid", "name"]},
    ])  # fmt: skip
    names = {ovsdb_rpc.from_atom(g["_uuid"]): g["name"] for g in groups["rows"]}
    out = {}
    for row in acls["rows"]:
        key = ovsdb_rpc.from_atom(row["external_ids"]).get("osc.io/key")
        group = ovsdb_rpc.from_atom(row["network_function_group"])
        if key and group not in ([], None):
            out[key] = names[group]
    return out


def test_a_chain_is_written_read_back_kept_and_removed(
    nf_cluster: SandboxCluster, policies: Path
) -> None:
    remote = nf_cluster.nb_remote
    node_switches = set(_switches(remote))
    (policies / "chain.yaml").write_text(CHAIN)
    planned = cli("plan", policies, *conn(nf_cluster), "-o", "json")
    assert planned.code == 2, planned.err
    changes = json.loads(planned.out)["changes"]
    created = {
        (c["resource"]["kind"], c["resource"]["name"])
        for c in changes
        if c["resource"].get("origin") == "Binding/api-chain"
    }
    # the JSON contract names the chain of every row that wires it
    wiring = [c for c in changes if c["resource"]["kind"] in ("Logical_Switch", "Network_Function")
              and c["resource"]["name"].startswith(("nfl", "osc.chain"))]  # fmt: skip
    assert wiring and all(c["resource"]["chain"] == ["firewall", "ips"] for c in wiring)
    # its ACLs are held until OVN reports every hop healthy (issue 22): the JSON names them
    held = {h["binding"]: h for h in json.loads(planned.out)["meta"]["held"]}
    assert held["api-chain"]["node"] == "node-1"
    assert held["api-chain"]["waiting_for"] == ["firewall-node-1", "ips-node-1"]
    assert held["api-chain"]["groups"] == [
        "osc.chain2_entry.firewall.ips.node_1.fail_close",
        "osc.chain2_exit.firewall.ips.node_1.fail_close",
    ]
    assert ["ACL", "osc.api_chain.node_1.to"] in held["api-chain"]["changes"]
    assert ("Logical_Switch", "nfl2_entry_firewall_ips_node-1_1") in created
    assert ("Network_Function", "osc.chain2_exit.firewall.ips.node_1") in created
    assert not [n for _, n in created if "node-2" in n or "node_2" in n]
    waited = cli("apply", policies, *conn(nf_cluster), "--wait", "--wait-timeout", "30s")
    assert waited.code == 0, waited.err
    assert cli("plan", policies, *conn(nf_cluster)).code == 0, "read back as written"
    assert _acl_groups(remote)["osc.api_chain.node_1.to"] == (
        "osc.chain2_exit.firewall.ips.node_1.fail_close"
    )

    links = set(_switches(remote)) - node_switches
    assert links == {"nfl2_entry_firewall_ips_node-1_1", "nfl2_exit_firewall_ips_node-1_1"}
    children = _child_ports(remote)
    assert children["nfc2_entry_firewall_ips_node-1_in"] == ("nf_firewall_node-1_in", 1)
    assert children["nfc2_exit_firewall_ips_node-1_out"] == ("nf_firewall_node-1_out", 2)
    assert children["nfl2_exit_firewall_ips_node-1_1b"] == ("nf_ips_node-1_out", 2)
    assert len(children) == 8  # 2 directions x (2 function ports + 2 link ports)

    (policies / "chain.yaml").unlink()
    assert cli("apply", policies, *conn(nf_cluster)).code == 0
    assert set(_switches(remote)) == node_switches
    assert _child_ports(remote) == {}
    assert cli("plan", policies, *conn(nf_cluster)).code == 0
