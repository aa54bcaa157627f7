"""Integration fixtures: the whole sandbox (real OVN processes + Kubernetes API emulator),
seeded from examples/cluster (the CLI runner is ``tests.support.cli``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import CLUSTER, POLICIES


def _skip_without_ovn(northd: bool) -> None:
    require_ovn_or_fail(northd=northd)


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    """A private copy of examples/policies the test may edit (as a commit would)."""
    target = tmp_path / "policies"
    shutil.copytree(POLICIES, target)
    return target


@pytest.fixture
def nf_cluster(tmp_path: Path) -> Iterator[SandboxCluster]:
    """OVN 26.03 from the sid distribution (Network Function tables); northd off. Without
    the sid root (`make setup`) the sandbox fails saying so."""
    _skip_without_ovn(northd=False)
    with SandboxCluster(tmp_path / "sb", nb_schema="26.03", northd=False) as cluster:
        cluster.seed_dir(CLUSTER)
        yield cluster


@pytest.fixture
def nf_northd_cluster(tmp_path: Path) -> Iterator[SandboxCluster]:
    """OVN 26.03 from the sid distribution with ovn-northd 26.03 running: what it writes into
    the NB (``Network_Function_Group.network_function_active``, ``NB_Global`` options) is
    there for the reconciler to read, and must never be drift."""
    _skip_without_ovn(northd=True)
    with SandboxCluster(tmp_path / "sb", distribution="sid", northd=True) as cluster:
        cluster.seed_dir(CLUSTER)
        yield cluster


@pytest.fixture
def rp_cluster(tmp_path: Path) -> Iterator[SandboxCluster]:
    """Installed OVN (23.03) schema with ovn-northd, for the router-policy backend."""
    _skip_without_ovn(northd=True)
    with SandboxCluster(tmp_path / "sb", nb_schema="installed", northd=True) as cluster:
        cluster.seed_dir(CLUSTER)
        yield cluster
