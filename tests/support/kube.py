"""Plain helpers shared by the Kubernetes tests (imported as a module, not fixtures)."""

from __future__ import annotations

from typing import Any


def pod(
    name: str,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    node: str | None = "node-1",
) -> dict[str, Any]:
    """A minimal pod body, as a manifest."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.example/app:1"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }
