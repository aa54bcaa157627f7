"""Upgrading an NB written before issue 20 (every bound group had a Port_Group and its ACLs on
every node where the VNF runs, members or not): the first plan deletes the empty Port_Groups
and the ACLs on them, and nothing else; apply leaves every other row as it was, byte for byte.

The old shape is written through the product's own OVN adapter (one transaction of creates),
from what compile emits for every pair (``Compiled.potential``) without the key this version
adds (``osc.io/presence``), as the previous release wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from reconciler.adapters.ovn.oneshot import OvnOneShot
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.core.compiling.compile import CompileOptions, compile_full
from reconciler.core.compiling.diff import diff
from reconciler.core.model import ownership as own
from reconciler.core.model.observed import Observed
from reconciler.core.model.target import OVN_TABLES, Resource, Target
from reconciler.manifests.load import load_path
from tests.support.cli import cli, conn

EDGE = """\
apiVersion: osc.io/v1alpha1
kind: SecurityGroup
metadata: {name: edge}
spec: {labels: [app=cdn-edge]}     # cdn-edge-1, on node-1 only
---
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: edge-firewall}
spec: {securityGroup: edge, vnf: firewall, order: 30}
"""


# What northd writes into rows we own (its verdict on a function group), at its own moment: a
# verdict landing between the two reads is northd's write, not ours, and bumps ``_version``.
NORTHD_WRITES = ("network_function_active", "_version")


def _raw(remote: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every row we own, whole (``_uuid`` included), by (table, key), without what northd
    writes into it (:data:`NORTHD_WRITES`)."""
    dump = ovsdb_rpc.dump(remote, "OVN_Northbound", [t for t in OVN_TABLES if t != "NB_Global"])
    rows = {}
    for table, found in dump.items():
        for row in found:
            ids = row.get("external_ids") or {}
            if isinstance(ids, dict) and ids.get(own.OWNER):
                kept = {k: v for k, v in row.items() if k not in NORTHD_WRITES}
                rows[(table, ids[own.KEY])] = kept
    return rows


def _ours_of(row: dict[str, Any]) -> dict[str, Any]:
    """A raw row without what northd writes into it (``network_function_active``, and the
    ``_version`` that changes with it)."""
    if "network_function_active" not in row:
        return row
    return {k: v for k, v in row.items() if k not in ("network_function_active", "_version")}


def _old_shape(resource: Resource) -> Resource:
    if "external_ids" not in resource.fields:
        return resource
    ids = {k: v for k, v in resource.fields["external_ids"].items() if k != own.PRESENCE}
    return Resource(resource.kind, resource.key, resource.origin, resource.node,
                    {**resource.fields, "external_ids": ids})  # fmt: skip


def test_an_nb_of_the_old_row_shape_upgrades_by_deleting_its_empty_port_groups(
    nf_cluster: SandboxCluster, policies: Path, tmp_path: Path
) -> None:
    (policies / "edge.yaml").write_text(EDGE)
    snapshot = tmp_path / "observed.json"
    assert cli("snapshot", "-f", snapshot, *conn(nf_cluster)).code == 0
    observed = Observed.from_json(json.loads(snapshot.read_text()))
    compiled = compile_full(load_path(policies), observed, CompileOptions())
    old = Target.of(_old_shape(r) for r in compiled.potential.values() if r.is_ovn)
    empty = {i for i in compiled.potential if i not in compiled.target.resources}
    assert empty == {
        ("Port_Group", "osc.edge.node_2"),
        ("ACL", "osc.edge_firewall.node_2.to"),
        ("ACL", "osc.edge_firewall.node_2.to.crossed"),  # the firewall is entered from-lport
    }
    with OvnOneShot.connect(OvnSettings(remote=nf_cluster.nb_remote)) as nb:
        nb.apply(diff(old, {}).changes)
    before = _raw(nf_cluster.nb_remote)
    assert set(before) == {i for i in old.resources if i[0] != "NB_Global"}

    planned = cli("plan", policies, *conn(nf_cluster), "-o", "json")
    assert planned.code == 2, planned.err
    changes = json.loads(planned.out)["changes"]
    ovn = [c for c in changes if c["resource"]["kind"] in OVN_TABLES]
    assert {c["action"] for c in ovn} == {"delete"}, ovn
    assert {(c["resource"]["kind"], c["resource"]["name"]) for c in ovn} == empty

    assert cli("apply", policies, *conn(nf_cluster)).code == 0
    after = _raw(nf_cluster.nb_remote)
    assert set(after) == set(before) - empty
    # northd's column (played by the sandbox meanwhile) is not ours: compared without it
    changed = [i for i in after if _ours_of(after[i]) != _ours_of(before[i])]
    assert not changed, f"rows that were kept were rewritten: {changed}"
    assert cli("plan", policies, *conn(nf_cluster)).code == 0
