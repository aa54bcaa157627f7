"""Every kustomization under deploy/ renders offline (``kubectl kustomize``, what the other deploy
tests use; kustomize itself is not installed) and each object it renders is valid, strictly
(unknown fields refused), against the OpenAPI schemas of every Kubernetes version we support
(``kubernetes-validate``, a dev extra: the test skips without it).

Supported: Kubernetes 1.30 (ValidatingAdmissionPolicy GA; bound tokens carry the node name,
which deploy/overlays/interconnect/agent-status-policy.yaml needs) to the newest release the
installed kubernetes-validate knows. Custom resources (the Prometheus Operator's PrometheusRule
and PodMonitor in deploy/monitoring) have no schema there; promtool checks those
(tests/functional/deploy/test_monitoring.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support.paths import REPO

DEPLOY = REPO / "deploy"
OLDEST = (1, 30)
CUSTOM_KINDS = {"PrometheusRule", "PodMonitor"}


def kustomizations() -> list[Path]:
    """Every directory under deploy/ that kubectl kustomize builds (components are built by
    the overlays that use them)."""
    out = []
    for found in sorted(DEPLOY.rglob("kustomization.yaml")):
        doc = YAML(typ="safe").load(found.read_text(encoding="utf-8"))
        if doc.get("kind") != "Component":
            out.append(found.parent)
    return out


def supported_versions() -> list[str]:
    utils = pytest.importorskip("kubernetes_validate.utils")
    newest = tuple(int(p) for p in utils.latest_version().split(".")[:2])
    return [f"1.{minor}.0" for minor in range(OLDEST[1], newest[1] + 1)]


def render(directory: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (its built-in kustomize renders the overlays)")
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return [d for d in YAML(typ="safe").load_all(out) if d]


def test_every_overlay_is_found() -> None:
    found = {str(d.relative_to(DEPLOY)) for d in kustomizations()}
    assert {".", "overlays/interconnect", "overlays/central-nb/deployment",
            "overlays/central-nb/cronjob", "monitoring", "base"} <= found  # fmt: skip


@pytest.mark.parametrize(
    "directory", kustomizations(), ids=lambda d: str(d.relative_to(DEPLOY)) or "deploy"
)
def test_every_rendered_object_is_valid_for_every_supported_kubernetes(directory: Path) -> None:
    validate = pytest.importorskip("kubernetes_validate")
    docs = render(directory)
    assert docs
    failures = []
    for version in supported_versions():
        for doc in docs:
            what = f"{doc.get('kind')} {doc.get('metadata', {}).get('name')} (Kubernetes {version})"
            try:
                validate.validate(doc, version, strict=True)
            except validate.SchemaNotFoundError:
                assert doc.get("kind") in CUSTOM_KINDS, f"no schema for {what}"
            except validate.ValidationError as exc:
                failures.append(f"{what}: {exc.message} at {'.'.join(map(str, exc.path))}")
    assert not failures, "\n".join(failures)
