"""Snapshot files for offline CLI tests (``plan --observed``): a small cluster with
``examples/policies`` (or given manifests) applied, built in memory from the pure core."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.observed import Observed
from reconciler.manifests.load import load_path
from tests.support.builders import cluster
from tests.support.paths import POLICIES
from tests.support.simulate import converge

PODS: list[tuple[str, str, str, dict[str, str]]] = [
    ("shop-frontend", "web-1", "node-1", {"app": "web"}),
    ("shop-frontend", "web-2", "node-2", {"app": "web", "tier": "frontend"}),
    ("shop-backend", "api-1", "node-1", {"app.kubernetes.io/name": "api"}),
    ("shop-backend", "db-0", "node-1", {"role": "database"}),
    ("shop-backend", "db-1", "node-2", {"role": "database"}),
]
NODE_LABELS = {"node-1": {"osc.io/vnf-capable": "true"}, "node-2": {"osc.io/vnf-capable": "true"}}


def cluster_observed(pods: list[tuple[str, str, str, dict[str, str]]] | None = None) -> Observed:
    return cluster(pods if pods is not None else PODS, node_labels=NODE_LABELS)


def converged(policies: Path = POLICIES, observed: Observed | None = None) -> Observed:
    """``observed`` (default: :func:`cluster_observed`) after ``policies`` was applied."""
    base = observed if observed is not None else cluster_observed()
    # with healthy VNFs: steering held until northd reports them active is switched on
    return converge(load_path(policies), base, CompileOptions())


def write_snapshot(path: Path, observed: Observed) -> Path:
    data: dict[str, Any] = observed.to_json()
    path.write_text(json.dumps(data))
    return path


def converged_snapshot(folder: Path, policies: Path = POLICIES) -> Path:
    """A snapshot file of the cluster with ``policies`` applied."""
    return write_snapshot(folder / "snapshot.json", converged(policies))
