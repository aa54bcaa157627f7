"""Node traffic is left alone (issue 29), with real packets on OVN 26.03.

A kubelet probes its pods from the node's management port (``ovn-k8s-mp0``, the node subnet's
``.2``). Here node-1's management port is set up as OVN-Kubernetes does it (LSP ``k8s-node-1``
and its tier-2 allow ACL on the node switch) and plugged as a namespace standing for the host.
``web-a`` (node-1) is protected ``both`` ways, ``fail-close``, ``before-network-policy`` (tier
1: ahead of OVN-Kubernetes' allow-from-node ACL, the case where a steered probe would die with
the VNF), then node-1's firewall stops forwarding and OVN declares it dead.

Without ``steerNodeTraffic`` the probe (TCP connect and ping, both ways) still reaches the pod
and never crosses the firewall, while pod traffic is dropped; with ``steerNodeTraffic: true``
the probe is steered like pod traffic and dies with it (the control: the exclusion is what
kept it alive).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.datapath.world import (
    VNF_NAMESPACE,
    World,
    binding,
    security_group,
    vnf_deployment,
)

pytestmark = pytest.mark.datapath

PORT = 8080
FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
GROUP = "osc.firewall.node_1.fail_close"


@pytest.fixture(scope="module")
def management_port(nf_world: World) -> Iterator[object]:
    yield nf_world.dp.plug_management_port("node-1")


def _manifests(steer_node_traffic: bool) -> tuple[str, ...]:
    text = binding(redirection="both", failure_policy="fail-close").rstrip("\n")
    text += "\n  precedence: before-network-policy\n"
    if steer_node_traffic:
        text += "  steerNodeTraffic: true\n"
    return (security_group(), vnf_deployment(), text)


def _wait_group(w: World, active: bool, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while (w.active_functions().get(GROUP) is not None) != active:
        if time.monotonic() > deadline:
            raise AssertionError(f"{GROUP} not {'online' if active else 'offline'} in {timeout} s")
        time.sleep(0.05)


def _reach(w: World, src: object, dst: object) -> tuple[bool, int]:
    """(a TCP connection and a ping both got through, frames node-1's firewall passed on)."""
    tcp = w.dp.tcp_probe(src, dst.ip, PORT, count=1, timeout=1.0)  # type: ignore[attr-defined]
    ping = w.dp.probe(src, dst, count=1, timeout=1.0)
    ok = tcp.replies == 1 and ping.replies == 1
    return ok, tcp.forwarded[FW1] + ping.forwarded[FW1]


@pytest.mark.parametrize("steer_node_traffic", [False, True])
def test_a_probe_from_the_management_port_outlives_a_fail_close_outage(
    nf_fresh: World, management_port: object, steer_node_traffic: bool
) -> None:
    w, mp = nf_fresh, management_port
    web, other = w.pod("web-a"), w.pod("other-b")
    listeners = [web.listen_tcp(PORT), mp.listen_tcp(PORT)]  # type: ignore[attr-defined]
    try:
        w.write_manifests(*_manifests(steer_node_traffic))
        w.label("web-a", "web")
        w.apply()
        # healthy VNF: pod traffic is steered; node traffic only when the Binding asks
        pod_ok, crossed = _reach(w, other, web)
        assert pod_ok and crossed > 0
        probe_ok, crossed = _reach(w, mp, web)
        assert probe_ok and (crossed > 0) == steer_node_traffic
        back_ok, crossed = _reach(w, web, mp)  # the pod opening a connection to its node
        assert back_ok and (crossed > 0) == steer_node_traffic

        w.dp.set_forwarding(w.vnf("node-1"), False)
        _wait_group(w, active=False)
        assert _reach(w, other, web) == (False, 0)  # fail-close: pod traffic dropped
        assert _reach(w, mp, web)[0] is (not steer_node_traffic)
        assert _reach(w, web, mp)[0] is (not steer_node_traffic)
    finally:
        w.dp.set_forwarding(w.vnf("node-1"), True)
        for listener in listeners:
            listener.close()
    _wait_group(w, active=True)
