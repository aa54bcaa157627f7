"""Fixtures for the OVN tests: real ovsdb-server/ovn-northd processes from the sandbox.

Other test folders can import the same building blocks from ``osc_gitops_sandbox.ovn``;
``ovnhelpers`` holds small conveniences for these tests only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.ovn import (
    OvnSandbox,
    SeedPod,
    make_pods,
    nf_schema_path,
    seed_ovn_kubernetes,
)
from ovnhelpers import NODES


@pytest.fixture
def pods() -> list[SeedPod]:
    return make_pods(NODES, 8, namespace="shop")


@pytest.fixture
def nb23(pods: list[SeedPod]) -> Iterator[OvnSandbox]:
    """Installed (23.03) schema, no northd, seeded with two nodes and eight pods."""
    with OvnSandbox(northd=False) as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        yield sandbox


@pytest.fixture
def nb26(pods: list[SeedPod]) -> Iterator[OvnSandbox]:
    """OVN 26.03 NB schema (Network Function tables), no northd; skips when absent."""
    if nf_schema_path() is None:
        pytest.skip("OVN 26.03 NB schema not found (set OSC_OVN_NB_SCHEMA_26)")
    with OvnSandbox(northd=False, nb_schema="26.03") as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        yield sandbox
