"""One stage with OVN-Kubernetes' policy, with real packets on OVN 26.03 (issue 29).

OVN-Kubernetes writes every egress NetworkPolicy ACL ``from-lport`` with
``options:apply-after-lb=true``: OVN evaluates it in ``ls_in_acl_after_lb_eval``, not in
``ls_in_acl_eval`` where a plain from-lport ACL is, and the two stages' tiers are independent.
The product's from-lport steering ACLs carry the same option, so ``precedence`` orders them
against NetworkPolicy in both directions: ``before-network-policy`` (tier 1) steers what a
policy would deny or allow, ``after-network-policy`` (tier 3) steers only what no policy decided.

Each case below is the product applied (``osc-gitops apply``, default flags) with ``web-a``
(node-1) protected in one direction at one precedence, beside a NetworkPolicy written as
OVN-Kubernetes writes it (``osc_gitops_sandbox.ovn.netpol``) that selects ``web-a``: none, one
denying everything in that direction, or one allowing exactly the peer. The peer is
``client-c`` (node-2), reached directly and through a ClusterIP Service whose only backend it
is (or whose backend is ``web-a``, for traffic towards it). Outcome per connection: whether it
completed, and whether node-1's firewall passed its frames on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.datapath.world import (
    NAMESPACE,
    VNF_NAMESPACE,
    World,
    binding,
    security_group,
    vnf_deployment,
)
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.netpol import add_network_policy, remove_network_policy

pytestmark = pytest.mark.datapath

PORT = 8080
SERVICE_PORT = 80
WEB_VIP, CLIENT_VIP = "10.96.1.10", "10.96.1.11"  # Services web -> web-a, client -> client-c
STEERED, PASSED, DENIED = "steered", "passed unsteered", "denied"
EXPECTED = {
    # (precedence, policy) -> outcome; the same for both directions, direct and via a Service
    ("before-network-policy", "none"): STEERED,
    ("before-network-policy", "deny"): STEERED,  # the VNF is the enforcer: the deny is bypassed
    ("before-network-policy", "allow"): STEERED,
    ("after-network-policy", "none"): STEERED,  # no policy decided: steered
    ("after-network-policy", "deny"): DENIED,  # the policy decides first
    ("after-network-policy", "allow"): PASSED,  # allowed by the policy, never steered
}


@pytest.fixture
def services(nf_fresh: World) -> Iterator[World]:
    w = nf_fresh
    with w.service("web", WEB_VIP, SERVICE_PORT, ["web-a"], PORT), \
            w.service("client", CLIENT_VIP, SERVICE_PORT, ["client-c"], PORT):  # fmt: skip
        listeners = [w.pod(p).listen_tcp(PORT) for p in ("web-a", "client-c")]
        try:
            yield w
        finally:
            for listener in listeners:
                listener.close()


def connections(redirection: str) -> dict[str, tuple[str, str, int]]:
    """The two connections of a direction: name -> (source pod, destination address, port)."""
    if redirection == "exit-lport":  # towards web-a
        return {"direct": ("client-c", "web-a", PORT), "service": ("client-c", WEB_VIP, 80)}
    return {"direct": ("web-a", "client-c", PORT), "service": ("web-a", CLIENT_VIP, 80)}


def outcome(w: World, src: str, dst: str, port: int) -> str:
    ip = w.pod(dst).ip if dst in ("web-a", "client-c") else dst
    fw = f"{VNF_NAMESPACE}/firewall-node-1"
    probe = w.dp.tcp_probe(w.pod(src), ip, port, count=2, timeout=1.0)
    crossed = probe.forwarded[fw]
    if probe.replies == 0:
        assert crossed == 0, f"{src} -> {dst}: denied, yet {crossed} frames crossed the VNF"
        return DENIED
    assert probe.replies == 2, f"{src} -> {dst}: {probe.replies}/2 connected"
    return STEERED if crossed else PASSED


def ours(w: World) -> dict[str, dict[str, object]]:
    """Our from-lport and to-lport steering ACLs: direction -> (tier, options)."""
    rows = ovsdb_rpc.transact(w.cluster.nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "ACL", "where": [["network_function_group", "!=", ["set", []]]],
         "columns": ["direction", "tier", "options"]},
    ])[0]["rows"]  # fmt: skip
    return {r["direction"]: {"tier": r["tier"], "options": ovsdb_rpc.from_atom(r["options"])}
            for r in rows}  # fmt: skip


def lost_port_groups(w: World) -> list[str]:
    """The NB Port_Groups with ports that have no Southbound row (``<datapath key>_<name>``)."""
    (nb,) = ovsdb_rpc.transact(w.cluster.nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Port_Group", "where": [["ports", "!=", ["set", []]]],
         "columns": ["name"]},
    ])  # fmt: skip
    (sb,) = ovsdb_rpc.transact(w.dp.stacks[0].sb_remote, "OVN_Southbound", [
        {"op": "select", "table": "Port_Group", "where": [], "columns": ["name"]},
    ])  # fmt: skip
    present = {r["name"].partition("_")[2] for r in sb["rows"]}
    return sorted(r["name"] for r in nb["rows"] if r["name"] not in present)


@pytest.mark.parametrize("precedence", ["before-network-policy", "after-network-policy"])
@pytest.mark.parametrize("redirection", ["exit-lport", "entry-lport"])
def test_precedence_against_a_network_policy(
    services: World, redirection: str, precedence: str
) -> None:
    w = services
    text = binding(redirection=redirection).rstrip("\n") + f"\n  precedence: {precedence}\n"
    w.write_manifests(security_group(), vnf_deployment(), text)
    w.label("web-a", "web")
    w.apply()
    direction = "to-lport" if redirection == "exit-lport" else "from-lport"
    (acl,) = ours(w).values()
    assert acl["tier"] == (1 if precedence == "before-network-policy" else 3)
    assert acl["options"] == ({"apply-after-lb": "true"} if direction == "from-lport" else {})
    policy_type = "Ingress" if redirection == "exit-lport" else "Egress"
    lsp = f"{NAMESPACE}_web-a"
    seen: dict[tuple[str, str], str] = {}
    for policy in ("none", "deny", "allow"):
        if policy != "none":
            peer = w.pod("client-c").ip if policy == "allow" else None
            add_network_policy(w.cluster.nb_remote, NAMESPACE, "np", [lsp], policy_type, peer)
        try:
            w.dp.wait_hv()
            lost = lost_port_groups(w)
            assert not lost, f"Port_Groups without a Southbound row (northd lost them): {lost}"
            for name, (src, dst, port) in connections(redirection).items():
                seen[(policy, name)] = outcome(w, src, dst, port)
        finally:
            if policy != "none":
                remove_network_policy(w.cluster.nb_remote, NAMESPACE, "np", policy_type)
                # The next policy re-creates both Port_Groups under the same names: northd
                # must have processed their deletion first. ovn-northd 26.03.1 handling the
                # deletion and the re-creation in one iteration (a busy machine) deletes the
                # groups' Southbound rows, and the next policy's ACLs match nothing
                # (docs/upstream/northd-port-group-recreated.sh).
                w.dp.wait_hv()
    print(f"\n{redirection} {precedence}: {seen}")
    for (policy, name), got in seen.items():
        assert got == EXPECTED[(precedence, policy)], f"{policy} policy, {name}: {got}"


@pytest.mark.parametrize("redirection", ["exit-lport", "entry-lport"])
def test_ports_match_the_backend_port_of_service_traffic(services: World, redirection: str) -> None:
    """A ``ports:`` filter sees a Service connection after load balancing in both directions:
    the backend's port (the Service's targetPort, here 8080), never the Service's port (80)."""
    w = services
    w.label("web-a", "web")
    seen = {}
    for ports in ([PORT], [SERVICE_PORT]):
        w.write_manifests(
            security_group(), vnf_deployment(),
            binding(redirection=redirection, protocol="tcp", ports=ports),
        )  # fmt: skip
        w.apply()
        src, dst, port = connections(redirection)["service"]
        seen[ports[0]] = outcome(w, src, dst, port)
    assert seen == {PORT: STEERED, SERVICE_PORT: PASSED}
