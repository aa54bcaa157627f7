"""A VNF that stops forwarding, with real packets on OVN 26.03: ``fail-close`` drops the group's
traffic, ``fail-open`` bypasses the VNF, and both are steered through it again once it is back.

Only ``osc-gitops apply`` with default flags writes to OVN here: the health checks that let OVN
notice a dead VNF (a ``Network_Function_Health_Check`` per function, ``NB_Global``'s
``svc_monitor_ip``/``svc_monitor_ip_dst``) are the product's, with its default settings. OVN's
probe is an ICMP echo sent into the function's inport and expected back on its outport, which
the bridging guest passes while it forwards.

One VNF serves both policies at once: Binding ``web-firewall`` (``fail-close``) for ``web-a``
and ``api-firewall`` (``fail-open``) for ``other-b``, both on node-1, so one dead firewall shows
both behaviours side by side. Waiting is bounded by what the health check's own settings allow
(see :func:`_detection_limit`), never by fixed sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from osc_gitops_sandbox.datapath.world import (
    VNF_NAMESPACE,
    World,
    binding,
    security_group,
    vnf_deployment,
)

pytestmark = pytest.mark.datapath

FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
CLOSED_GROUP = "osc.firewall.node_1.fail_close"
OPEN_GROUP = "osc.firewall.node_1.fail_open"
MANIFESTS = (
    security_group("web", ["app=web"]),
    security_group("api", ["app=api"]),
    vnf_deployment("firewall"),
    binding("web-firewall", group="web", failure_policy="fail-close"),
    binding("api-firewall", group="api", failure_policy="fail-open"),
)
SLACK = 3.0
"""Seconds on top of what the health-check settings allow: northd, ovn-controller, polling."""


@pytest.fixture
def failover(nf_fresh: World) -> World:
    """``web-a`` in a fail-close group, ``other-b`` in a fail-open group, one firewall per node,
    applied, health checks passing, flows installed."""
    nf_fresh.write_manifests(*MANIFESTS)
    nf_fresh.label("web-a", "web")
    nf_fresh.label("other-b", "api")
    nf_fresh.apply()
    assert nf_fresh.health_checked(), (
        "apply wrote no Network_Function_Health_Check: OVN counts a dead VNF healthy, so "
        "neither failure policy can act"
    )
    return nf_fresh


def _health_check_options(w: World) -> dict[str, float]:
    rows = w.cluster.ovn.nbctl("--bare", "--columns=options", "list",
                               "Network_Function_Health_Check")  # fmt: skip
    first = rows.strip().splitlines()[0] if rows.strip() else ""
    return {k: float(v) for k, _, v in (kv.partition("=") for kv in first.split()) if v}


def _detection_limit(w: World) -> float:
    """How long OVN may take to declare a dead VNF offline with the product's settings:
    ``failure_count`` missed probes, each up to ``interval`` + ``timeout`` apart, plus one."""
    opts = _health_check_options(w)
    interval, timeout = opts.get("interval", 5.0), opts.get("timeout", 20.0)
    return (opts.get("failure_count", 3.0) + 1) * (interval + timeout) + SLACK


def _recovery_limit(w: World) -> float:
    opts = _health_check_options(w)
    interval, timeout = opts.get("interval", 5.0), opts.get("timeout", 20.0)
    return opts.get("success_count", 1.0) * interval + timeout + SLACK


def _wait_for(condition: Callable[[], bool], limit: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > limit:
            raise AssertionError(f"{what}: not within {limit:.1f} s")
        time.sleep(0.02)
    return time.monotonic() - start


def _answers(w: World, pod: str, *, through_vnf: bool) -> bool:
    """One echo (a new connection) from ``client-c`` to ``pod``: answered, and crossing
    node-1's firewall or not as asked."""
    probe = w.dp.probe(w.pod("client-c"), w.pod(pod), count=1, timeout=0.05)
    return probe.replies == 1 and (probe.through == [FW1]) == through_vnf


def test_apply_writes_health_checks_so_the_failure_policy_can_act(failover: World):
    assert failover.health_checked()
    options = failover.cluster.ovn.nbctl("get", "NB_Global", ".", "options")
    assert "svc_monitor_ip=" in options and "svc_monitor_ip_dst=" in options
    assert failover.active_functions()[OPEN_GROUP] == "osc.firewall.node_1"
    assert failover.active_functions()[CLOSED_GROUP] == "osc.firewall.node_1"


def test_fail_close_drops_while_the_vnf_is_dead_and_steers_again_when_it_is_back(
    failover: World,
):
    dp = failover.dp
    client, web = failover.pod("client-c"), failover.pod("web-a")
    assert dp.probe(client, web).through == [FW1]
    vnf = failover.vnf("node-1")

    dp.set_forwarding(vnf, False)
    _wait_for(lambda: failover.active_functions()[CLOSED_GROUP] is None,
              _detection_limit(failover), "OVN marks the dead VNF offline")  # fmt: skip
    dropped = dp.probe(client, web, count=2, timeout=0.3)
    assert dropped.replies == 0, "fail-close: OVN drops the group's traffic, no bypass"

    dp.set_forwarding(vnf, True)
    _wait_for(lambda: _answers(failover, "web-a", through_vnf=True),
              _recovery_limit(failover), "steered through the revived VNF")  # fmt: skip
    back = dp.probe(client, web)
    assert back.replies == 3 and back.through == [FW1]


def test_fail_open_bypasses_a_dead_vnf_and_steers_again_when_it_is_back(failover: World):
    dp = failover.dp
    client, other, web = failover.pod("client-c"), failover.pod("other-b"), failover.pod("web-a")
    assert dp.probe(client, other).through == [FW1]
    vnf = failover.vnf("node-1")

    dp.set_forwarding(vnf, False)
    _wait_for(lambda: _answers(failover, "other-b", through_vnf=False),
              _detection_limit(failover), "fail-open traffic bypasses the dead VNF")  # fmt: skip
    bypass = dp.probe(client, other)
    assert bypass.replies == 3 and bypass.through == []
    assert failover.active_functions()[OPEN_GROUP] is None
    # the same dead VNF, the fail-close group next door: still dropped
    assert dp.probe(client, web, count=2, timeout=0.3).replies == 0

    dp.set_forwarding(vnf, True)
    _wait_for(lambda: _answers(failover, "other-b", through_vnf=True),
              _recovery_limit(failover), "steered through the revived VNF")  # fmt: skip
    back = dp.probe(client, other)
    assert back.replies == 3 and back.through == [FW1]
