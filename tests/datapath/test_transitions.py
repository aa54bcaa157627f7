"""Zero-drop transitions with packets (OVN 26.03, issue 22): a continuous probe (ICMP every
20 ms to a fail-close protected pod and to a fail-open one, and a TCP echo stream) through

1. the first apply of a binding onto VNFs that boot for several seconds (``apply --wait``):
   no echo lost, and steered through the VNF once ``--wait`` returned;
2. a node the VNF newly runs on, with a protected pod: no echo lost;
3. a VNF image change rolled out with ``instancesPerNode: 2`` (standby drained and restarted
   first, then the active one): no echo lost;
4. the active instance dying with a standby present: the outage is OVN's failover time
   (bounded by the health check: ``failureCount * (interval + timeout)`` and a probe), and the
   standby carries the traffic afterwards.

The scenarios live in :mod:`tests.datapath.transition_scenarios`; ``bench/datapath_transitions.py``
repeats them for the figures of docs/datapath.md, "Transitions". One data-path world for the
module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.datapath.world import World, world

from tests.datapath import transition_scenarios as scenario

pytestmark = pytest.mark.datapath

BOOT = 3.0
"""Seconds a new guest boots (a real VM takes tens of seconds; the mechanism is the same)."""
STALL = 0.5
"""Longest pause of the TCP stream that still means "nothing lost" (measured 0.02-0.10 s in
these scenarios, docs/datapath.md "Transitions"); a dropped path stalls it for a
retransmission timeout (>= 200 ms) or more."""
LOST = 1
"""Echoes that may be lost at the instant the flows change (at most one, seldom: see the
figures in docs/datapath.md); a held or dropped path loses dozens."""


@pytest.fixture(scope="module")
def tw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if os.geteuid() != 0:
        pytest.skip("the data path needs root (network namespaces, veths, ovs-vswitchd)")
    with world("26.03", workdir=tmp_path_factory.mktemp("tr")) as w:
        yield w
        w.dp.boot_delay = 0.0


def quiet(got: dict, *names: str) -> None:
    for name in names:
        assert got[name].lost <= LOST, (name, got[name])
    assert not got["tcp"].error and got["tcp"].lost == 0 and got["tcp"].longest_gap < STALL, got


def test_the_first_apply_onto_booting_vnfs_loses_nothing(tw: World) -> None:
    got = scenario.first_apply(tw, BOOT)
    assert got["seconds"] >= BOOT, "--wait returned before the VNFs booted"
    quiet(got, "fail-close", "fail-open")
    # once --wait returned, the protected pod is steered through its node's firewall
    assert got["after"].replies == 3 and got["after"].through == [scenario.FW1]


def test_a_node_the_vnf_newly_runs_on_loses_nothing(tw: World) -> None:
    got = scenario.new_node(tw, BOOT)
    assert got["seconds"] >= BOOT
    quiet(got, "fail-close")
    assert scenario.FW2 in got["after"].through and got["after"].replies == 3


def test_a_rollout_with_a_standby_per_node_loses_nothing(tw: World) -> None:
    got = scenario.rollout(tw, 1.0)
    assert len(got["before"]) == 4 and got["restarted"] == got["before"], "each VM restarted"
    quiet(got, "fail-close", "fail-open")
    node1 = sum(v for k, v in got["forwarded"].items() if "node-1" in k)
    assert node1 >= got["fail-close"].sent, "the protected pod's echoes crossed node-1's VNFs"


def test_the_standby_takes_over_when_the_active_instance_dies(tw: World) -> None:
    got = scenario.failover(tw)
    # failureCount 1 x (interval 1 + timeout 1), plus up to a probe interval and northd's and
    # the chassis' turn
    assert 0.2 < got["outage"] < 4.0, got
    assert got["forwarded"][got["standby"]] > 0, "the standby carried it"
