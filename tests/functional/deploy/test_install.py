"""A first install that works (issue 33 item 5): every overlay applies with the installed
``kubectl apply -k`` to an empty cluster (the sandbox's API server started empty: only
``default``), namespaces included; the image the overlays deploy is the one ``make image`` builds
and the docs name; the RBAC list in the docs is generated from ``deploy/`` and checked here."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from tests.support import rbac_doc
from tests.support.paths import REPO

OVERLAYS = ("", "overlays/interconnect", "overlays/central-nb/deployment",
            "overlays/central-nb/cronjob")  # fmt: skip
"""``deploy/`` itself (= the interconnect overlay) and every overlay."""


@pytest.fixture
def empty_cluster(tmp_path: Path) -> Iterator[Path]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed")
    with KubeApiServer() as api:
        assert [o["metadata"]["name"] for o in api.objects("Namespace")] == ["default"]
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        yield kubeconfig


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_applies_to_an_empty_cluster(empty_cluster: Path, overlay: str) -> None:
    path = REPO / "deploy" / overlay
    applied = kubectl(empty_cluster, "apply", "-k", str(path))
    assert applied.returncode == 0, applied.stderr
    built = rbac_doc.render(overlay or "overlays/interconnect")
    namespaced = {d["metadata"]["namespace"] for d in built if d["metadata"].get("namespace")}
    listed = kubectl(empty_cluster, "get", "namespaces", "-o", "name").stdout.split()
    assert {f"namespace/{ns}" for ns in namespaced} <= set(listed)  # created, not assumed
    assert "namespace/osc-vnfs" in listed  # where the VNF VMs and their Role live
    again = kubectl(empty_cluster, "apply", "-k", str(path))  # idempotent
    assert again.returncode == 0 and "created" not in again.stdout, again.stdout


def test_the_image_the_overlays_deploy_is_the_one_make_image_builds_and_the_docs_name() -> None:
    version = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert version is not None
    image = f"ghcr.io/example/osc-gitops:{version.group(1)}"
    made = subprocess.run(["make", "-s", "-n", "image"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert made.strip() == f"docker build -t {image} ."
    for overlay in OVERLAYS[1:]:
        for doc in rbac_doc.render(overlay):
            spec = doc.get("spec") or {}
            pod = (spec.get("jobTemplate", {}).get("spec") or spec).get("template", {}).get("spec")
            for container in (pod or {}).get("containers") or ():
                assert container["image"] == image, (overlay, container["name"])
    operations = (REPO / "docs" / "operations.md").read_text()
    assert f"make image                    # = docker build -t {image} ." in operations
    assert f"kind load docker-image {image}" in (REPO / "docs" / "run-in-a-cluster.md").read_text()


def test_the_rbac_list_in_the_docs_is_what_deploy_grants() -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed")
    text = rbac_doc.DOC.read_text(encoding="utf-8")
    assert rbac_doc.block(text, rbac_doc.table()) == text, (
        "docs/operations.md's RBAC list differs from deploy/: python -m tests.support.rbac_doc "
        "--write"
    )
    # what issue 33 found missing: the restart a rolling update makes, where one is made
    assert "`virtualmachines/restart` (subresources.kubevirt.io) | update |" in text
