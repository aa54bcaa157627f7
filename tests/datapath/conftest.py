"""Data-path fixtures: one real OVN stack + OVS + ovn-controller per module, pods and VNF guests
as network namespaces, the reconciler driven only through ``osc-gitops apply``.

The setup itself is ``osc_gitops_sandbox.demo_datapath.world`` (shared with ``osc-gitops demo
--datapath`` and ``bench/datapath_latency.py``). Everything here needs root, ``ip netns`` and
Debian's ovn-central/ovn-host/openvswitch-switch; without them every test is skipped with the
reason. Processes and namespaces are removed by the ``with`` blocks (and by atexit hooks and
``PR_SET_PDEATHSIG`` if pytest itself dies).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.datapath import datapath_unavailable_reason
from osc_gitops_sandbox.demo_datapath import VNF_NAMESPACE, World
from osc_gitops_sandbox.demo_datapath import world as make_world


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    reason = datapath_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with make_world() as w:
        yield w


@pytest.fixture
def fresh(world: World) -> World:
    """Baseline before each test (see ``World.reset``)."""
    world.reset()
    assert set(world.dp.vnfs) == {f"{VNF_NAMESPACE}/firewall-{n}" for n in ("node-1", "node-2")}
    return world
