"""Data-path fixtures: one real OVN stack + OVS + ovn-controller per test module, pods and VNF
guests as network namespaces, the reconciler driven only through ``osc-gitops apply``.

The setup itself is ``osc_gitops_sandbox.datapath.world.world`` (shared with ``osc-gitops demo
--datapath`` and ``bench/datapath_latency.py``), on one of two OVN versions:

- ``nf_world`` / ``nf_fresh``: OVN 26.03 + OVS 4.0 from the sid root, ``apply`` with default
  flags (``network-function`` steering), bridging VNF guests;
- ``rp_world`` / ``rp_fresh``: the host's OVN 23.03, ``apply --steering router-policy``, routing
  VNF guests;
- ``mc_world`` / ``mc``: OVN 26.03 on two chassis, ``central`` (one NB) and ``zones``
  (interconnect: an NB, SB, northd and chassis per node), shared by the multi-chassis modules.

Everything needs root and ``ip netns``: without root every test is skipped with the reason.
A missing sid root (``make setup`` not run) is an error, not a skip. Processes and namespaces
are removed by the ``with`` blocks (and by atexit hooks and ``PR_SET_PDEATHSIG`` if pytest
itself dies).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.datapath.world import VNF_NAMESPACE, World, world

BESIDE_SERVICES = "OSC_DATAPATH_SERVICES"
"""``OSC_DATAPATH_SERVICES=1``: every OVN 26.03 world carries a ClusterIP Service on every
node switch (see :func:`_world`)."""


def _world(ovn: str, workdir: Path, topology: str = "single") -> Iterator[World]:
    if os.geteuid() != 0:
        pytest.skip("the data path needs root (network namespaces, veths, ovs-vswitchd)")
    # Tests share one world and each starts from nobody labelled: a group's rows on a node go
    # with its last member at once (--empty-grace 0), so no test sees the held rows of the one
    # before (held rows steer nothing: their Port_Group is empty).
    with pytest.MonkeyPatch.context() as env, world(ovn, workdir=workdir, topology=topology) as w:
        env.setenv("OSC_EMPTY_GRACE", "0")
        if os.environ.get(BESIDE_SERVICES) == "1" and ovn == "26.03":
            # As in an OVN-Kubernetes cluster: a Service's load balancer on every node switch
            # for the whole world, so every test runs beside load balancers (the VNF ports
            # stateless there). Not in CI: a manual check of the whole suite (docs/datapath.md).
            with w.service("everywhere", "10.96.255.1", 80, ["client-d"], 8080):
                yield w
            return
        yield w


@pytest.fixture(scope="module")
def nf_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """OVN 26.03, default flags: Network Function steering."""
    yield from _world("26.03", tmp_path_factory.mktemp("nf"))


@pytest.fixture(scope="module")
def rp_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The host's OVN 23.03, ``--steering router-policy``."""
    yield from _world("23.03", tmp_path_factory.mktemp("rp"))


@pytest.fixture(scope="package", params=["central", "zones"])
def mc_world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """Two chassis (a chassis per node, Geneve between them), OVN 26.03, default flags: one
    world per topology, shared by the multi-chassis modules (test_multichassis,
    test_services, test_zone_faults)."""
    topology = str(request.param)
    yield from _world("26.03", tmp_path_factory.mktemp(topology[0]), topology)


@pytest.fixture
def mc(mc_world: World) -> World:
    """Baseline before each test (see ``World.reset``)."""
    mc_world.reset()
    return mc_world


def _fresh(w: World) -> World:
    w.reset()
    assert set(w.dp.vnfs) == {f"{VNF_NAMESPACE}/firewall-{n}" for n in ("node-1", "node-2")}
    return w


@pytest.fixture
def nf_fresh(nf_world: World) -> World:
    """Baseline before each test (see ``World.reset``)."""
    return _fresh(nf_world)


@pytest.fixture
def rp_fresh(rp_world: World) -> World:
    """Baseline before each test (see ``World.reset``)."""
    return _fresh(rp_world)
