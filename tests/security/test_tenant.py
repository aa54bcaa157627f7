"""A tenant who may create VirtualMachines in their own namespace (issue 31, item 4).

On main, owned VMs and NADs were listed cluster-wide by label: a tenant's VM labelled as ours
was deleted by ``apply``, and its ``osc.io/ports`` annotation made us send the security manager
a forged "removed" event naming other pods' ports (with the shipped RBAC the delete was refused
and every apply failed from then on). Now only the namespaces our manifests name (and
``--vnf-namespaces``) hold objects of ours; labelled objects anywhere else are never changed,
their annotations never read, and the plan says they exist.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from reconciler.core.model.ownership import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NODE_LABEL,
    OWNER,
    RESOURCE,
    VNF_LABEL,
)
from tests.support.cli import cli, conn
from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import CLUSTER, POLICIES
from tests.support.security_manager import event_receiver

pytestmark = [pytest.mark.ovn, pytest.mark.timeout(180)]

LABELS = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, OWNER: "osc-gitops", VNF_LABEL: "ips",
          NODE_LABEL: "node-1"}  # fmt: skip


def _forged(kind: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
    api = "kubevirt.io/v1" if kind == "VirtualMachine" else "k8s.cni.cncf.io/v1"
    spec: dict[str, Any] = {"runStrategy": "Always", "template": {"spec": {}}}
    if kind != "VirtualMachine":
        spec = {"config": "{}"}
    return {"apiVersion": api, "kind": kind, "metadata": {
        "name": name, "namespace": "tenant-a", "labels": dict(LABELS),
        "annotations": {RESOURCE: "VnfDeployment/ips", **annotations}}, "spec": spec}  # fmt: skip


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SandboxCluster]:
    require_ovn_or_fail(northd=False)
    with SandboxCluster(tmp_path / "sb", nb_schema="26.03", northd=False) as sandbox:
        sandbox.seed_dir(CLUSTER)
        sandbox.kube.add_objects([{"kind": "Namespace", "metadata": {"name": "tenant-a"}}])
        yield sandbox


@pytest.fixture
def manager() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with event_receiver() as receiver:
        yield receiver


def _names(cluster: SandboxCluster, kind: str, namespace: str) -> set[str]:
    return {o["metadata"]["name"] for o in cluster.kube.objects(kind)
            if o["metadata"].get("namespace") == namespace}  # fmt: skip


def test_a_tenants_look_alike_is_never_deleted_nor_believed(
    cluster: SandboxCluster, manager: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, events = manager
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    vnfs = policies / "vnfs.yaml"
    vnfs.write_text(vnfs.read_text().replace("https://secmgr.example.com/api/v1/osc-events", url))
    assert cli("apply", policies, *conn(cluster), "--auto-approve").code == 0
    events.clear()
    forged_ports = "in=shop-frontend_web-1,out=shop-frontend_web-2"
    cluster.kube.add_objects([
        _forged("VirtualMachine", "ips-node-9", {"osc.io/ports": forged_ports,
                                                 "rollout.osc.io/phase": "draining"}),
        _forged("NetworkAttachmentDefinition", "ips-node-9-in", {}),
    ])  # fmt: skip

    planned = cli("plan", policies, *conn(cluster), "-o", "json")
    # before the fix: deletes of both. Exit 2 only for steering held until a VNF is healthy
    # (nothing here answers OVN's probe, issue 33): the forged "draining" rollout is not believed
    assert planned.code in (0, 2), planned.out + planned.err
    plan = json.loads(planned.out)
    assert plan["changes"] == []
    assert all(p["kind"] == "Binding" for p in plan["meta"].get("pending") or ())
    (warning,) = [w for w in plan["warnings"] if "tenant-a" in w]
    assert warning.startswith(
        "2 object(s) in namespace tenant-a carry this instance's ownership labels "
        "(NetworkAttachmentDefinition ips-node-9-in, VirtualMachine ips-node-9), but no "
        "VnfDeployment names tenant-a"
    )
    applied = cli("apply", policies, *conn(cluster), "--auto-approve")
    assert applied.code == 0, applied.err
    assert _names(cluster, "VirtualMachine", "tenant-a") == {"ips-node-9"}
    assert _names(cluster, "NetworkAttachmentDefinition", "tenant-a") == {"ips-node-9-in"}
    assert not [e for e in events if e["event"] == "removed"]  # main: ports of web-1/web-2


def test_objects_a_removed_vnf_left_are_pruned_where_the_operator_says(
    cluster: SandboxCluster, tmp_path: Path
) -> None:
    """Namespaces no manifest names any more: ``--vnf-namespaces`` (the deployment's
    ``OSC_VNF_NAMESPACES``) keeps them ours, so ``--allow-empty`` still prunes everything."""
    assert cli("apply", POLICIES, *conn(cluster), "--auto-approve").code == 0
    assert _names(cluster, "VirtualMachine", "osc-vnfs")
    empty = tmp_path / "empty"
    empty.mkdir()
    kept = cli("apply", empty, *conn(cluster), "--auto-approve", "--allow-empty")
    assert kept.code == 0, kept.err
    assert _names(cluster, "VirtualMachine", "osc-vnfs"), "not named any more: left alone"
    assert "no VnfDeployment names osc-vnfs" in kept.err + kept.out
    pruned = cli("apply", empty, *conn(cluster), "--auto-approve", "--allow-empty",
                 "--vnf-namespaces", "osc-vnfs")  # fmt: skip
    assert pruned.code == 0, pruned.err
    assert not _names(cluster, "VirtualMachine", "osc-vnfs")
    assert not _names(cluster, "NetworkAttachmentDefinition", "osc-vnfs")


def test_the_namespaces_flag_is_checked() -> None:
    snapshot = POLICIES.parent.parent / "deploy/ci/observed-snapshot.json"
    bad = cli("plan", POLICIES, "--observed", snapshot, "--vnf-namespaces", "osc-vnfs,Bad_NS")
    assert bad.code == 1
    assert (
        bad.err.strip() == "error: --vnf-namespaces: 'Bad_NS' is not a namespace (a DNS-1123 label)"
    )
