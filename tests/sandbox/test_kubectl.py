"""kubectl as a second, independent client: if it agrees with the official Python client,
the emulator speaks the wire protocol, not just what our adapter happens to send."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from reconciler.adapters.kube.client import KubeCluster
from tests.support.kube import pod


def run(kubectl: str, kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "--request-timeout=10s", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl failed: {result.stderr}"
    return result.stdout


@pytest.fixture
def seeded(kube_server: KubeApiServer) -> None:
    kube_server.add_objects(
        [
            pod("web-1", "shop", {"tier": "web"}, "n1"),
            pod("api-1", "shop", {"tier": "api"}, "n2"),
            pod("db-1", "shop", {"tier": "db"}, "n1"),
            pod("web-9", "blog", {"tier": "web", "app.kubernetes.io/name": "blog"}, "n2"),
            {"kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "a"}}},
            {"kind": "Node", "metadata": {"name": "n2"}},
            {
                "kind": "VirtualMachine",
                "metadata": {"name": "fw-n1", "namespace": "osc"},
                "spec": {"runStrategy": "Always"},
            },
        ]
    )


@pytest.mark.usefixtures("seeded")
def test_selector_agrees_with_python_client(
    kubectl: str, kubeconfig: str, cluster: KubeCluster
) -> None:
    out = json.loads(
        ok(run(kubectl, kubeconfig, "get", "pods", "-A", "-l", "tier in (web,api)", "-o", "json"))
    )
    from_kubectl = sorted((i["metadata"]["namespace"], i["metadata"]["name"]) for i in out["items"])
    from_client = sorted(
        (p.namespace, p.name) for p in cluster.list_pods(label_selector="tier in (web,api)")
    )
    assert from_kubectl == from_client == [("blog", "web-9"), ("shop", "api-1"), ("shop", "web-1")]
    prefixed = ok(
        run(
            kubectl,
            kubeconfig,
            "get",
            "pods",
            "-A",
            "-l",
            "app.kubernetes.io/name=blog,!missing",
            "-o",
            "name",
        )
    )
    assert prefixed.split() == ["pod/web-9"]
    bad = run(kubectl, kubeconfig, "get", "pods", "-A", "-l", "tier in web")
    assert bad.returncode != 0


@pytest.mark.usefixtures("seeded")
def test_get_nodes_and_virtual_machines(kubectl: str, kubeconfig: str) -> None:
    table = ok(run(kubectl, kubeconfig, "get", "nodes"))
    assert table.splitlines()[0].split()[0] == "NAME"
    assert [line.split()[0] for line in table.splitlines()[1:]] == ["n1", "n2"]
    nodes = json.loads(ok(run(kubectl, kubeconfig, "get", "nodes", "-l", "zone=a", "-o", "json")))
    assert [n["metadata"]["name"] for n in nodes["items"]] == ["n1"]
    vms = ok(
        run(kubectl, kubeconfig, "get", "virtualmachines.kubevirt.io", "-n", "osc", "-o", "name")
    )
    assert vms.split() == ["virtualmachine.kubevirt.io/fw-n1"]
    short = ok(run(kubectl, kubeconfig, "get", "vm", "fw-n1", "-n", "osc", "-o", "json"))
    assert json.loads(short)["spec"] == {"runStrategy": "Always"}
    assert ok(
        run(kubectl, kubeconfig, "api-resources", "--api-group=kubevirt.io", "-o", "name")
    ).split() == ["virtualmachineinstances.kubevirt.io", "virtualmachines.kubevirt.io"]


@pytest.mark.usefixtures("seeded")
def test_create_label_delete(
    kubectl: str, kubeconfig: str, kube_server: KubeApiServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: made-by-kubectl\n  namespace: shop\n"
        "  labels: {tier: web}\nspec:\n  containers:\n  - name: c\n    image: nginx\n"
    )
    created = run(kubectl, kubeconfig, "create", "-f", str(manifest))
    assert ok(created).strip() == "pod/made-by-kubectl created"
    again = run(kubectl, kubeconfig, "create", "-f", str(manifest))
    assert again.returncode != 0 and "AlreadyExists" in again.stderr

    ok(
        run(
            kubectl,
            kubeconfig,
            "label",
            "pod",
            "made-by-kubectl",
            "-n",
            "shop",
            "tier=api",
            "extra=1",
            "--overwrite",
        )
    )
    obj: dict[str, Any] | None = kube_server.get_object("Pod", "shop", "made-by-kubectl")
    assert obj is not None and obj["metadata"]["labels"] == {"tier": "api", "extra": "1"}
    ok(run(kubectl, kubeconfig, "label", "pod", "made-by-kubectl", "-n", "shop", "extra-"))
    obj = kube_server.get_object("Pod", "shop", "made-by-kubectl")
    assert obj is not None and obj["metadata"]["labels"] == {"tier": "api"}

    deleted = ok(run(kubectl, kubeconfig, "delete", "pod", "made-by-kubectl", "-n", "shop"))
    assert 'pod "made-by-kubectl" deleted' in deleted
    assert kube_server.get_object("Pod", "shop", "made-by-kubectl") is None
    missing = run(kubectl, kubeconfig, "get", "pod", "made-by-kubectl", "-n", "shop")
    assert missing.returncode != 0 and "NotFound" in missing.stderr


def test_invalid_name_via_kubectl(kubectl: str, kubeconfig: str, tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec: {}\n")
    result = run(kubectl, kubeconfig, "create", "-f", str(manifest))
    assert result.returncode != 0
    assert "is invalid" in result.stderr and "Bad_Name" in result.stderr


def test_apply_twice_updates(
    kubectl: str, kubeconfig: str, kube_server: KubeApiServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "vm.yaml"
    body = (
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: fw\n"
        "  namespace: default\n  labels: {{v: '{v}'}}\nspec:\n  runStrategy: {rs}\n"
    )
    manifest.write_text(body.format(v=1, rs="Always"))
    ok(run(kubectl, kubeconfig, "apply", "-f", str(manifest)))
    manifest.write_text(body.format(v=2, rs="Halted"))
    ok(run(kubectl, kubeconfig, "apply", "-f", str(manifest)))
    obj = kube_server.get_object("VirtualMachine", "default", "fw")
    assert obj is not None
    assert obj["metadata"]["labels"] == {"v": "2"}
    assert obj["spec"] == {"runStrategy": "Halted"}
    assert obj["metadata"]["generation"] == 2
    assert not any(k.startswith("$") for k in json.dumps(obj).split('"'))
