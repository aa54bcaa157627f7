"""kubectl, unchanged, against the emulator: the wire formats a real API server speaks and
kubectl relies on. Protobuf request bodies (``kubectl create namespace``), the OpenAPI v3
documents behind kubectl's default ``--validate=strict`` (server-side field validation,
``--dry-run=server``), and the ``Table`` that ``kubectl get`` prints."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from osc_gitops_sandbox.kubeapi.protobuf import MAGIC, MEDIA_TYPE
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from tests.support.kube import pod


def kubectl_run(
    kubectl: str, kubeconfig: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    cache = Path(kubeconfig).parent / "kube-cache"
    return subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "--cache-dir", str(cache),
         "--request-timeout=10s", *args],
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl failed: {result.stderr}"
    return result.stdout


def rows(table: str) -> list[list[str]]:
    """``kubectl get`` output split into cells (columns are separated by 2+ spaces)."""
    import re

    return [re.split(r"\s{2,}", line.strip()) for line in table.strip().splitlines()]


MANIFESTS = """\
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: storefront}}
---
apiVersion: v1
kind: Node
metadata: {name: node-9, labels: {kubernetes.io/hostname: node-9}}
spec: {podCIDR: 10.244.9.0/24}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec:
  nodeName: node-9
  containers: [{name: main, image: nginx}]
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: fw-node-9, namespace: shop}
spec: {runStrategy: Always}
"""


def test_kubectl_create_namespace_sends_protobuf_and_the_server_decodes_it(
    kubectl: str, kubeconfig: str, kube_server: KubeApiServer, core: client.CoreV1Api
) -> None:
    # kubectl's typed client posts v1.Namespace as protobuf (client-go falls back to JSON after
    # a 415 only for CBOR), so the emulator decodes it as a real server does.
    created = ok(kubectl_run(kubectl, kubeconfig, "create", "namespace", "made-by-kubectl"))
    assert created.strip() == "namespace/made-by-kubectl created"
    stored = kube_server.get_object("Namespace", None, "made-by-kubectl")
    assert stored is not None and stored["status"] == {"phase": "Active"}
    # the official Python client, as a third reader, sees what kubectl created
    assert core.read_namespace("made-by-kubectl").status.phase == "Active"
    bad = kubectl_run(kubectl, kubeconfig, "create", "namespace", "Bad_Name")
    assert bad.returncode == 1 and 'The Namespace "Bad_Name" is invalid' in bad.stderr
    again = kubectl_run(kubectl, kubeconfig, "create", "namespace", "made-by-kubectl")
    assert again.returncode == 1 and "AlreadyExists" in again.stderr


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (all this test needs)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def _post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, body, {"Content-Type": MEDIA_TYPE}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_protobuf_the_emulator_cannot_decode_is_refused_never_guessed(
    kube_server: KubeApiServer,
) -> None:
    type_meta = _field(1, b"v1") + _field(2, b"Node")
    node = _field(1, _field(1, b"node-x"))  # metadata.name only
    status, doc = _post(f"{kube_server.url}/api/v1/nodes", MAGIC + _field(1, type_meta) +
                        _field(2, node))  # fmt: skip
    assert status == 415 and doc["reason"] == "UnsupportedMediaType"
    assert "decodes protobuf for v1 Namespace only" in doc["message"]
    type_meta = _field(1, b"v1") + _field(2, b"Namespace")
    odd = _field(1, _field(1, b"ns-x") + _field(15, b"?"))  # ObjectMeta has no field 15
    status, doc = _post(f"{kube_server.url}/api/v1/namespaces", MAGIC + _field(1, type_meta) +
                        _field(2, odd))  # fmt: skip
    assert status == 415 and "field 15 of meta.v1.ObjectMeta is not known" in doc["message"]
    assert kube_server.get_object("Namespace", None, "ns-x") is None


def test_plain_kubectl_apply_validates_on_the_server(
    kubectl: str, kubeconfig: str, kube_server: KubeApiServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "all.yaml"
    manifest.write_text(MANIFESTS)
    applied = ok(kubectl_run(kubectl, kubeconfig, "apply", "-f", str(manifest))).splitlines()
    assert applied == [
        "namespace/shop created", "node/node-9 created", "pod/web-1 created",
        "virtualmachine.kubevirt.io/fw-node-9 created",
    ]  # fmt: skip
    again = ok(kubectl_run(kubectl, kubeconfig, "apply", "-f", str(manifest))).splitlines()
    assert all(line.endswith(" unchanged") for line in again) and len(again) == 4
    # kubectl found `fieldValidation` in the OpenAPI v3 PATCH operation, so it sends
    # fieldValidation=Strict and the server refuses an unknown field
    typo = tmp_path / "typo.yaml"
    typo.write_text(MANIFESTS.replace("labels: {app: web}", "labelz: {app: web}"))
    refused = kubectl_run(kubectl, kubeconfig, "apply", "-f", str(typo))
    assert refused.returncode == 1
    assert 'strict decoding error: unknown field "metadata.labelz"' in refused.stderr
    warned = kubectl_run(kubectl, kubeconfig, "apply", "-f", str(typo), "--validate=warn")
    assert warned.returncode == 0 and 'Warning: unknown field "metadata.labelz"' in warned.stderr
    # --dry-run=server is honoured: answered, nothing stored
    dry = tmp_path / "dry.yaml"
    dry.write_text(MANIFESTS.split("---")[0].replace("shop", "dry-shop"))
    out = ok(kubectl_run(kubectl, kubeconfig, "apply", "-f", str(dry), "--dry-run=server"))
    assert "namespace/dry-shop created (server dry run)" in out
    assert kube_server.get_object("Namespace", None, "dry-shop") is None
    ok(kubectl_run(kubectl, kubeconfig, "delete", "node", "node-9", "--dry-run=server"))
    assert kube_server.get_object("Node", None, "node-9") is not None
    # label and delete each kind, as a user would
    for target in (["namespace", "shop"], ["node", "node-9"], ["pod", "web-1", "-n", "shop"],
                   ["vm", "fw-node-9", "-n", "shop"]):  # fmt: skip
        ok(kubectl_run(kubectl, kubeconfig, "label", *target, "checked=yes"))
    assert kube_server.get_object("Node", None, "node-9")["metadata"]["labels"]["checked"] == "yes"  # type: ignore[index]
    ok(kubectl_run(kubectl, kubeconfig, "delete", "pod/web-1", "vm/fw-node-9", "-n", "shop"))
    ok(kubectl_run(kubectl, kubeconfig, "delete", "node/node-9", "namespace/shop"))
    assert kube_server.objects("Pod") == [] and kube_server.objects("Node") == []
    assert kube_server.get_object("Namespace", None, "shop") is None


def test_openapi_v3_lists_every_served_group_version(kube_server: KubeApiServer) -> None:
    with urllib.request.urlopen(f"{kube_server.url}/openapi/v3", timeout=10) as answer:
        index = json.loads(answer.read())["paths"]
    assert set(index) == {
        "api/v1", "apis/kubevirt.io/v1", "apis/k8s.cni.cncf.io/v1",
        "apis/coordination.k8s.io/v1", "apis/networking.k8s.io/v1",
        # what an install (kubectl apply -k deploy/...) creates (issue 33)
        "apis/apps/v1", "apis/batch/v1", "apis/policy/v1", "apis/rbac.authorization.k8s.io/v1",
        "apis/admissionregistration.k8s.io/v1",
    }  # fmt: skip
    url = kube_server.url + index["api/v1"]["serverRelativeURL"]
    with urllib.request.urlopen(url, timeout=10) as answer:
        doc = json.loads(answer.read())
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    assert {p["name"] for p in patch["parameters"]} == {"dryRun", "fieldValidation"}
    # no strategic merge patch advertised: the emulator applies it as a merge patch
    assert set(patch["requestBody"]["content"]) == {
        "application/json-patch+json", "application/merge-patch+json"}  # fmt: skip
    assert "io.k8s.api.core.v1.Pod" in doc["components"]["schemas"]
    v2 = urllib.request.Request(f"{kube_server.url}/openapi/v2")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(v2, timeout=10)
    assert missing.value.code == 404


def test_kubectl_get_prints_the_columns_a_real_server_sends(
    kubectl: str, kubeconfig: str, kube_server: KubeApiServer
) -> None:
    running = pod("web-1", "shop", {"app": "web"}, "node-1")
    running["status"] = {
        "phase": "Running", "podIP": "10.244.1.5",
        "containerStatuses": [{"name": "c", "ready": True, "restartCount": 2}],
    }  # fmt: skip
    kube_server.add_objects([
        running,
        {"kind": "Node", "metadata": {"name": "node-1", "labels": {
            "node-role.kubernetes.io/control-plane": ""}},
         "status": {"conditions": [{"type": "Ready", "status": "True"}],
                    "addresses": [{"type": "InternalIP", "address": "172.18.0.2"}],
                    "nodeInfo": {"kubeletVersion": "v1.32.4"}}},
        {"kind": "Node", "metadata": {"name": "node-2"}, "spec": {"unschedulable": True}},
        {"kind": "VirtualMachine", "metadata": {"name": "fw-node-1", "namespace": "osc"},
         "spec": {"runStrategy": "Always"}, "status": {"printableStatus": "Running",
         "conditions": [{"type": "Ready", "status": "True"}]}},
        {"kind": "NetworkAttachmentDefinition",
         "metadata": {"name": "fw-node-1-in", "namespace": "osc"}, "spec": {"config": "{}"}},
    ])  # fmt: skip
    # created through the API without a status: Pending, as a real server sets it
    ok(kubectl_run(kubectl, kubeconfig, "create", "-f", "-", stdin=json.dumps(
        pod("api-1", "shop", {"app": "api"}, "node-2"))))  # fmt: skip
    pods = rows(ok(kubectl_run(kubectl, kubeconfig, "get", "pods", "-A")))
    assert pods[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [r[:5] for r in pods[1:]] == [
        ["shop", "api-1", "0/1", "Pending", "0"],
        ["shop", "web-1", "1/1", "Running", "2"],
    ]
    wide = rows(ok(kubectl_run(kubectl, kubeconfig, "get", "pods", "-n", "shop", "-o", "wide")))
    assert wide[0][:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert wide[2][5:7] == ["10.244.1.5", "node-1"] and wide[1][5:7] == ["<none>", "node-2"]
    nodes = rows(ok(kubectl_run(kubectl, kubeconfig, "get", "nodes", "-o", "wide")))
    assert nodes[0][:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    assert nodes[1][:3] == ["node-1", "Ready", "control-plane"] and nodes[1][4:6] == [
        "v1.32.4", "172.18.0.2"]  # fmt: skip
    assert nodes[2][:3] == ["node-2", "Unknown,SchedulingDisabled", "<none>"]
    namespaces = rows(ok(kubectl_run(kubectl, kubeconfig, "get", "namespaces")))
    assert namespaces[0] == ["NAME", "STATUS", "AGE"] and namespaces[1][:2] == ["default", "Active"]
    vms = rows(ok(kubectl_run(kubectl, kubeconfig, "get", "vm", "-A")))
    # KubeVirt's CRD printer columns
    assert vms[0] == ["NAMESPACE", "NAME", "AGE", "STATUS", "READY"]
    assert vms[1][:2] == ["osc", "fw-node-1"] and vms[1][3:] == ["Running", "True"]
    nads = rows(ok(kubectl_run(kubectl, kubeconfig, "get", "net-attach-def", "-A")))
    assert nads[0] == ["NAMESPACE", "NAME", "AGE"]  # a CRD without printer columns
    assert nads[1][:2] == ["osc", "fw-node-1-in"]
    one = rows(ok(kubectl_run(kubectl, kubeconfig, "get", "pod", "web-1", "-n", "shop",
                              "--show-labels")))  # fmt: skip
    assert one[0][-1] == "LABELS" and one[1][-1] == "app=web"
    # machine output is unchanged: the objects themselves
    listed = json.loads(ok(kubectl_run(kubectl, kubeconfig, "get", "pods", "-A", "-o", "json")))
    assert [p["metadata"]["name"] for p in listed["items"]] == ["api-1", "web-1"]
