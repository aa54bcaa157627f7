"""Server-side apply in the API emulator (issue 29), checked with the installed kubectl as the
independent client and with the product's adapter (field manager ``osc-gitops``) on a
VirtualMachine that KubeVirt's webhook (``osc_gitops_sandbox.kubeapi.kubevirt_webhook``) has
defaulted, as KubeVirt keeps it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.kubeapi.kubevirt import KubeVirt
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from reconciler.adapters.kube.client import KubeCluster
from reconciler.adapters.kube.errors import KubeConflict

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: fw
  namespace: osc
  labels: {app: fw}
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        devices: {}
        resources: {requests: {memory: 1Gi}}
"""


def kubectl_run(kubectl: str, kubeconfig: str, *args: str, stdin: str | None = None) -> Any:
    return subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "--request-timeout=10s", *args],
        capture_output=True, text=True, timeout=60, check=False, input=stdin,
    )  # fmt: skip


@pytest.fixture
def kubevirt(kube_server: KubeApiServer) -> KubeVirt:
    kube_server.add_objects([{"kind": "Namespace", "metadata": {"name": "osc"}}])
    return KubeVirt(kube_server)  # its webhook; its controller is not needed here


def vm(kube_server: KubeApiServer) -> dict[str, Any]:
    obj = kube_server.get_object("VirtualMachine", "osc", "fw")
    assert obj is not None
    return obj


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


@pytest.mark.usefixtures("kubevirt")
def test_kubectl_server_side_apply_conflicts_and_force(
    kubectl: str, kubeconfig: str, kube_server: KubeApiServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "vm.yaml"
    manifest.write_text(VM)
    first = kubectl_run(kubectl, kubeconfig, "apply", "--server-side", "-f", str(manifest))
    assert first.returncode == 0, first.stderr
    assert "serverside-applied" in first.stdout
    live = vm(kube_server)
    domain = live["spec"]["template"]["spec"]["domain"]
    assert domain["firmware"]["uuid"] and domain["machine"] == {"type": "q35"}  # the webhook
    applied = managers(live)[("kubectl", "Apply")]
    assert applied["f:metadata"] == {"f:labels": {"f:app": {}}}
    assert "f:firmware" not in applied["f:spec"]["f:template"]["f:spec"]["f:domain"]  # nobody's

    # another manager changes a field kubectl applied: the next apply conflicts, names it
    assert kubectl_run(kubectl, kubeconfig, "label", "vm", "-n", "osc", "fw", "app=x",
                       "--overwrite").returncode == 0  # fmt: skip
    again = kubectl_run(kubectl, kubeconfig, "apply", "--server-side", "-f", str(manifest))
    assert again.returncode != 0
    assert (
        'conflict with "kubectl-label"' in again.stderr and ".metadata.labels.app" in again.stderr
    )
    forced = kubectl_run(kubectl, kubeconfig, "apply", "--server-side", "--force-conflicts",
                         "-f", str(manifest))  # fmt: skip
    assert forced.returncode == 0, forced.stderr
    assert vm(kube_server)["metadata"]["labels"] == {"app": "fw"}
    # kubectl reads the managed fields back like any other field
    shown = kubectl_run(kubectl, kubeconfig, "get", "vm", "-n", "osc", "fw", "-o", "json",
                        "--show-managed-fields")  # fmt: skip
    assert {e["manager"] for e in json.loads(shown.stdout)["metadata"]["managedFields"]} == {
        "kubectl"
    }


def body(memory: str = "1Gi", extra_label: bool = True) -> dict[str, Any]:
    labels = {
        "app.kubernetes.io/managed-by": "osc-gitops",
        **({"tier": "fw"} if extra_label else {}),
    }
    return {
        "metadata": {"labels": labels, "annotations": {"osc.io/owner": "osc-gitops"}},
        "spec": {"runStrategy": "Always", "template": {"spec": {"domain": {
            "devices": {}, "resources": {"requests": {"memory": memory}}}}}},
    }  # fmt: skip


@pytest.mark.usefixtures("kubevirt")
def test_our_writes_keep_what_kubevirt_and_others_set(
    cluster: KubeCluster, kube_server: KubeApiServer
) -> None:
    cluster.create("VirtualMachine", "osc", "fw", body())
    created = vm(kube_server)
    firmware = created["spec"]["template"]["spec"]["domain"]["firmware"]
    assert set(firmware) == {"uuid", "serial"}
    assert ("osc-gitops", "Apply") in managers(created)
    # another writer adds an annotation and a label of its own
    kube_server.patch(
        kube_server.resource_type("VirtualMachine"), "osc", "fw",
        "application/merge-patch+json",
        {"metadata": {"annotations": {"kubevirt.io/latest-observed-api-version": "v1"},
                      "labels": {"team": "sec"}}},
        manager="virt-controller",
    )  # fmt: skip
    # drift in a field we own (someone edits the memory), and we change what we state: the
    # memory back, our "tier" label dropped
    kube_server.patch(
        kube_server.resource_type("VirtualMachine"), "osc", "fw",
        "application/merge-patch+json",
        {"spec": {"template": {"spec": {"domain": {"resources": {"requests": {
            "memory": "8Gi"}}}}}}},
        manager="kubectl-edit",
    )  # fmt: skip
    cluster.replace_managed("VirtualMachine", "osc", "fw", body(extra_label=False))
    after = vm(kube_server)
    domain = after["spec"]["template"]["spec"]["domain"]
    assert domain["resources"]["requests"]["memory"] == "1Gi"  # drift reverted
    assert domain["firmware"] == firmware  # the guest's SMBIOS identity kept
    assert domain["machine"] == {"type": "q35"}
    assert after["spec"]["template"]["spec"]["architecture"] == "amd64"
    assert after["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "osc-gitops",
                                           "team": "sec"}  # fmt: skip
    assert after["metadata"]["annotations"]["kubevirt.io/latest-observed-api-version"] == "v1"


@pytest.mark.usefixtures("kubevirt")
def test_a_create_never_takes_over_an_object_someone_else_made(
    cluster: KubeCluster, kube_server: KubeApiServer
) -> None:
    foreign = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
               "metadata": {"name": "fw", "namespace": "osc"},
               "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {}}}}}  # fmt: skip
    kube_server.create(kube_server.resource_type("VirtualMachine"), "osc", foreign,
                       manager="someone")  # fmt: skip
    with pytest.raises(KubeConflict, match=r'conflict with "someone".*\.spec\.runStrategy'):
        cluster.create("VirtualMachine", "osc", "fw", body())
    assert vm(kube_server)["spec"]["runStrategy"] == "Halted"
    assert "labels" not in vm(kube_server)["metadata"]
