"""Service chains with real packets on OVN 26.03 (issue 21): ``vnf: [firewall, inspector]``.

A chain is ONE Network_Function per direction and node, wired through VLAN child ports of the
hops' NICs and a link switch between them (``reconciler.core.steering.chains``), so OVN keeps
conntrack and the reply path of a single function: each VNF sees every packet of a steered
connection once, requests and replies, routed and on one switch, ICMP and TCP. Pods: ``web-a``
(the protected one) and ``other-b`` on node-1, ``client-c`` on node-2; both VNFs run on
node-1 (``inspector`` there only). Evidence as in ``test_network_function_packets.py``: replies,
and the pod frames each VNF guest sent out of each NIC (``forwarded_per_nic``: out of data-in,
out of data-out). An echo request and its reply cross a bridge once each, so 3 pings through a
VNF count (3, 3); TCP connections count the same on both VNFs.
"""

from __future__ import annotations

import time

import pytest
from osc_gitops_sandbox.datapath.world import (
    ROUTED_TTL,
    SAME_SWITCH_TTL,
    VNF_NAMESPACE,
    World,
    security_group,
    vnf_deployment,
)

from reconciler.cli.app import main

pytestmark = pytest.mark.datapath

FW = f"{VNF_NAMESPACE}/firewall-node-1"
FW2 = f"{VNF_NAMESPACE}/firewall-node-2"
INSPECTOR = f"{VNF_NAMESPACE}/inspector-node-1"
PORT = 8080


def chain_binding(vnf: str, *, redirection: str = "exit-lport", policy: str = "fail-close") -> str:
    return (
        "apiVersion: osc.io/v1alpha1\nkind: Binding\n"
        "metadata: {name: web-chain}\nspec:\n  securityGroup: web\n"
        f"  vnf: {vnf}\n  order: 10\n  redirection: {redirection}\n  failurePolicy: {policy}\n"
    )


def _steer(w: World, vnf: str, *, wait: bool = True, **kw: str) -> str:
    """Apply the chain binding through ``vnf`` (``[firewall, inspector]`` or one name)."""
    w.write_manifests(
        security_group(), vnf_deployment("firewall"), vnf_deployment("inspector", node="node-1"),
        chain_binding(vnf, **kw),
    )  # fmt: skip
    text = w.apply(wait=wait)
    if not wait:
        w.dp.wait_hv()
    return text


def _nics(w: World) -> dict[str, tuple[int, int]]:
    return {name: w.vnf("node-1", name).forwarded_per_nic() for name in ("firewall", "inspector")}


def _crosses_both_once(w: World, src: str, dst: str, ttl: int) -> None:
    """ICMP and TCP from ``src`` to ``dst``: answered, and each VNF of the chain passes every
    echo request and every reply once (3 frames out of each NIC), TCP equally on both."""
    a, b = w.pod(src), w.pod(dst)
    before = _nics(w)
    ping = w.dp.probe(a, b)
    after = _nics(w)
    assert ping.replies == 3 and ping.ttl == ttl, (src, dst, ping)
    assert ping.forwarded == {FW: 6, FW2: 0, INSPECTOR: 6}, (src, dst, ping)
    for name in after:
        sent = tuple(x - y for x, y in zip(after[name], before[name], strict=True))
        assert sent == (3, 3), (src, dst, name, sent)
    with b.listen_tcp(PORT):
        tcp = w.dp.tcp_probe(a, b.ip, PORT, count=2)
    assert tcp.replies == 2, (src, dst, tcp)
    assert tcp.forwarded[FW] == tcp.forwarded[INSPECTOR] > 0 and tcp.forwarded[FW2] == 0, tcp


def _wait_active(w: World, group: str, active: bool, limit: float = 30.0) -> None:
    start = time.monotonic()
    while (w.active_functions().get(group) is not None) != active:
        if time.monotonic() - start > limit:
            raise AssertionError(f"{group} active={active}: not within {limit} s")
        time.sleep(0.05)


def test_an_exit_chain_crosses_both_vnfs_once_each_way_routed_and_on_one_switch(
    nf_fresh: World,
) -> None:
    nf_fresh.label("web-a", "web")
    _steer(nf_fresh, "[firewall, inspector]")
    _crosses_both_once(nf_fresh, "client-c", "web-a", ROUTED_TTL)
    _crosses_both_once(nf_fresh, "other-b", "web-a", SAME_SWITCH_TTL)
    # connections web-a opens are not steered (exit-lport)
    out = nf_fresh.dp.probe(nf_fresh.pod("web-a"), nf_fresh.pod("client-c"))
    assert out.replies == 3 and out.through == []
    assert nf_fresh.dp.controller_errors() == [], "ovn-controller rejected a logical flow"
    plan = [a if a != "apply" else "plan" for a in nf_fresh.apply_args]
    assert main(plan) == 0, "plan after apply must report no changes (exit 0)"


def test_an_entry_chain_and_a_both_chain_between_two_members(nf_fresh: World) -> None:
    """entry-lport: connections web-a opens cross both, routed and on its switch. ``both``
    with web-a and other-b in the group: between them a packet crosses the chain once (the
    twin lets what left the entry function through), routed ones as before."""
    nf_fresh.label("web-a", "web")
    _steer(nf_fresh, "[firewall, inspector]", redirection="entry-lport")
    _crosses_both_once(nf_fresh, "web-a", "client-c", ROUTED_TTL)
    _crosses_both_once(nf_fresh, "web-a", "other-b", SAME_SWITCH_TTL)
    inbound = nf_fresh.dp.probe(nf_fresh.pod("client-c"), nf_fresh.pod("web-a"))
    assert inbound.replies == 3 and inbound.through == []

    nf_fresh.label("other-b", "web")
    _steer(nf_fresh, "[firewall, inspector]", redirection="both")
    _crosses_both_once(nf_fresh, "web-a", "other-b", SAME_SWITCH_TTL)
    _crosses_both_once(nf_fresh, "client-c", "web-a", ROUTED_TTL)
    assert nf_fresh.dp.controller_errors() == []


def test_the_chain_order_is_the_list_order(nf_fresh: World) -> None:
    """With the second VNF dead (its bridge down, fail-close), requests towards web-a still
    cross the first one and die in the second: the firewall passes 3 echo requests, the
    inspector nothing. Reordered in git (while both are healthy: a new chain is switched on
    only then, issue 22), the same dead inspector is hit first."""
    nf_fresh.label("web-a", "web")
    _steer(nf_fresh, "[firewall, inspector]")
    inspector = nf_fresh.vnf("node-1", "inspector")
    nf_fresh.dp.set_forwarding(inspector, False)
    try:
        dead = nf_fresh.dp.probe(nf_fresh.pod("client-c"), nf_fresh.pod("web-a"), timeout=0.3)
        assert dead.replies == 0 and dead.forwarded == {FW: 3, FW2: 0, INSPECTOR: 0}, dead
    finally:
        nf_fresh.dp.set_forwarding(inspector, True)
    _wait_active(nf_fresh, "osc.inspector.node_1.fail_close", active=True)
    _steer(nf_fresh, "[inspector, firewall]")
    nf_fresh.dp.set_forwarding(inspector, False)
    try:
        swapped = nf_fresh.dp.probe(nf_fresh.pod("client-c"), nf_fresh.pod("web-a"), timeout=0.3)
        assert swapped.replies == 0 and swapped.forwarded[FW] == 0, swapped
    finally:
        nf_fresh.dp.set_forwarding(inspector, True)


def test_a_dead_hop_under_each_policy(nf_fresh: World) -> None:
    """fail-close: the inspector stops forwarding and the chain's traffic is dropped (nothing
    bypasses it). fail-open: OVN finds it dead through its own health check, the next apply
    rewires the chain on node-1 without it, and traffic crosses the firewall alone; when it
    forwards again, the next apply puts it back. Every connection stays answered meanwhile
    for the pods outside the group."""
    nf_fresh.label("web-a", "web")
    client, web = nf_fresh.pod("client-c"), nf_fresh.pod("web-a")
    _steer(nf_fresh, "[firewall, inspector]")
    inspector = nf_fresh.vnf("node-1", "inspector")
    nf_fresh.dp.set_forwarding(inspector, False)
    try:
        closed = nf_fresh.dp.probe(client, web, timeout=0.3)
        assert closed.replies == 0, closed

        hop = "[firewall, {name: inspector, failurePolicy: fail-open}]"
        text = _steer(nf_fresh, hop, wait=False)  # the inspector stays dead
        assert "osc.inspector.node_1.fail_open" in text  # the hop's own function and group
        _wait_active(nf_fresh, "osc.inspector.node_1.fail_open", active=False)
        nf_fresh.apply(wait=False)  # the next pass sees it dead
        nf_fresh.dp.wait_hv()
        bypass = nf_fresh.dp.probe(client, web)
        assert bypass.replies == 3 and bypass.forwarded == {FW: 6, FW2: 0, INSPECTOR: 0}
    finally:
        nf_fresh.dp.set_forwarding(inspector, True)
    _wait_active(nf_fresh, "osc.inspector.node_1.fail_open", active=True)
    nf_fresh.apply()
    _crosses_both_once(nf_fresh, "client-c", "web-a", ROUTED_TTL)


def test_a_chain_changed_in_git_resteers_live_traffic_with_only_the_changed_rows(
    nf_fresh: World,
) -> None:
    """A ping flow that started through the firewall alone goes on through both when the
    inspector is added as a hop, and through the firewall alone when it is removed again:
    each plan changes the binding's ACLs and the chain's wiring, never a Port_Group."""
    nf_fresh.label("web-a", "web")
    client, web = nf_fresh.pod("client-c"), nf_fresh.pod("web-a")
    _steer(nf_fresh, "firewall")
    first = nf_fresh.dp.probe(client, web)
    assert first.replies == 3 and first.through == [FW]
    for vnf, through in (("[firewall, inspector]", [FW, INSPECTOR]), ("firewall", [FW])):
        n = len(nf_fresh.outputs)
        _steer(nf_fresh, vnf)  # the ACLs wait for the new hop's health (issue 22): 2 applies
        text = "\n".join(nf_fresh.outputs[n:])
        kinds = {line.split()[0] for line in text.splitlines() if line and line[0].isupper()}
        groups = [line for line in text.splitlines() if " osc.web.node_" in line]
        assert not groups and "ACL" in kinds, text  # (beside Services the stateless ports change)
        same_flow = nf_fresh.dp.probe(client, web, new_flow=False)
        assert same_flow.replies == 3 and same_flow.through == through, (vnf, same_flow)
