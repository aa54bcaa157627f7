"""Services beside Network Function steering, with real packets on two chassis (issue 23).

OVN documents Network Function insertion together with a load balancer on the same switch as
unsupported, and OVN-Kubernetes puts its cluster load-balancer group on every node switch, so
every steered pod meets it. Each world here holds three ClusterIP Services written as
OVN-Kubernetes writes them (``osc_gitops_sandbox.services``: ``clusterLBGroup`` on every node
switch, in every NB, its load-balancer options):

- ``web`` ``10.96.0.10:80`` -> ``web-a:8080`` (the protected pod, node-1),
- ``client`` ``10.96.0.11:80`` -> ``client-c:8080`` (node-2, the other chassis),
- ``peer`` ``10.96.0.12:80`` -> ``other-b:8080`` (node-1, web-a's switch),

and ``web-a`` is protected with each redirection in turn. Each case is three TCP connections
(one where they fail), classified by the frames node-1's firewall passed on out of each NIC:
``data-in`` carries what travels towards the protected pod, ``data-out`` what travels away
from it. The table is the one in docs/datapath.md ("Services"); it is the same in both
topologies (and on one chassis).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.datapath_world import World, binding, security_group, vnf_deployment

pytestmark = pytest.mark.datapath

PORT = 8080
SERVICES = {"web": ("10.96.0.10", "web-a"), "client": ("10.96.0.11", "client-c"),
            "peer": ("10.96.0.12", "other-b")}  # fmt: skip
STEERED, NOT, TOWARDS_ONLY, FAILS = (
    "steered both ways", "not steered", "towards the pod only", "never connects",
)  # fmt: skip
CASES = {
    # case: (source pod, Service or pod) -> outcome per redirection (exit, entry, both)
    "other node -> Service -> protected pod": (("client-c", "web"), (STEERED, NOT, STEERED)),
    "same switch -> Service -> protected pod": (("other-b", "web"), (STEERED, NOT, STEERED)),
    "protected pod -> own Service (hairpin)": (("web-a", "web"), (TOWARDS_ONLY, NOT, TOWARDS_ONLY)),
    "protected pod -> Service -> other node": (("web-a", "client"), (NOT, FAILS, FAILS)),
    "protected pod -> Service -> same switch": (("web-a", "peer"), (NOT, FAILS, FAILS)),
    "protected pod -> other node, direct": (("web-a", "client-c"), (NOT, STEERED, STEERED)),
    "unprotected -> Service -> other node": (("other-b", "client"), (NOT, NOT, NOT)),
}
REDIRECTIONS = ("exit-lport", "entry-lport", "both")


@pytest.fixture
def services(mc: World) -> Iterator[World]:
    with mc.service("web", *_vip("web")), mc.service("client", *_vip("client")), \
            mc.service("peer", *_vip("peer")):  # fmt: skip
        listeners = [mc.pod(p).listen_tcp(PORT) for p in ("web-a", "client-c", "other-b")]
        try:
            yield mc
        finally:
            for listener in listeners:
                listener.close()


def _vip(name: str) -> tuple[str, int, list[str], int]:
    vip, backend = SERVICES[name]
    return vip, 80, [backend], PORT


def outcome(w: World, src: str, dst: str, tries: int) -> tuple[str, tuple[int, int]]:
    """Connect ``tries`` times from ``src`` to a Service (by name) or a pod (directly) and
    classify it by what node-1's firewall passed on: (outcome, (frames towards the pod,
    frames away from it)). node-2's firewall never sees any of it (web-a lives on node-1)."""
    ip, port = (SERVICES[dst][0], 80) if dst in SERVICES else (w.pod(dst).ip, PORT)
    vnf, other = w.vnf("node-1"), w.vnf("node-2")
    before, other_before = vnf.forwarded_per_nic(), other.forwarded
    # timeout 1.5 s: a first hairpin connection may need its SYN retransmitted (after 1 s)
    tcp = w.dp.tcp_probe(w.pod(src), ip, port, count=tries, timeout=1.5)
    after = vnf.forwarded_per_nic()
    assert other.forwarded == other_before, f"{src} -> {dst} crossed node-2's firewall"
    towards, away = (a - b for a, b in zip(after, before, strict=True))
    if tcp.replies == 0:
        return FAILS, (towards, away)
    assert tcp.replies == tries, f"{src} -> {dst}: {tcp.replies}/{tries} connected"
    if towards and away > 1:
        return STEERED, (towards, away)
    if towards and away <= 1:
        return TOWARDS_ONLY, (towards, away)
    assert (towards, away) == (0, 0), f"{src} -> {dst}: {towards}/{away} frames"
    return NOT, (towards, away)


@pytest.mark.parametrize("redirection", REDIRECTIONS)
def test_service_traffic_of_a_protected_pod(services: World, redirection: str) -> None:
    w = services
    w.write_manifests(security_group(), vnf_deployment(), binding(redirection=redirection))
    w.label("web-a", "web")
    w.apply()
    plan = w.outputs[-1]
    assert "has load balancers" in plan and "never complete (OVN drops the replies" in plan
    column = REDIRECTIONS.index(redirection)
    seen = {}
    for case, ((src, dst), expected) in CASES.items():
        # a connection that fails does so every time: one attempt shows it (and costs 1.5 s)
        seen[case] = outcome(w, src, dst, 1 if expected[column] == FAILS else 3)
    print(f"\n{'zones' if w.dp.zoned else 'central'} {redirection}: "
          + "; ".join(f"{c}: {o} {f}" for c, (o, f) in seen.items()))  # fmt: skip
    for case, (_, expected) in CASES.items():
        got, frames = seen[case]
        assert got == expected[column], f"{case} ({redirection}): {got}, frames {frames}"
        if got == FAILS:  # the SYN crossed the firewall away from the pod; no reply came
            assert frames[1] >= 1 and frames[0] == 0, f"{case}: {frames}"
