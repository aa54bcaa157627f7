"""Fixtures: an interconnect cluster (``ZonedCluster``: one NB per node, OVN 26.03 from the sid
root) seeded with the example cluster plus a third node, and a private copy of the example
policies."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.zones import ZonedCluster

from tests.functional.zones.support import namespaces
from tests.support.paths import CLUSTER, POLICIES


@pytest.fixture
def zones(tmp_path: Path) -> Iterator[ZonedCluster]:
    """node-1 (vnf-capable: firewall and IPS), node-2 and node-3 (firewall only), each its own
    zone, with the example pods and one web pod on node-3."""
    with ZonedCluster(tmp_path / "z", distribution="sid") as cluster:
        cluster.seed_dir(CLUSTER)
        cluster.add_node("node-3")
        cluster.add_pod("shop-frontend", "web-3", "node-3", {"app": "web"})
        namespaces(cluster)
        yield cluster


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    copy = tmp_path / "policies"
    shutil.copytree(POLICIES, copy)
    return copy
