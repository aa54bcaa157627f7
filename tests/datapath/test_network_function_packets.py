"""Network Function steering on OVN 26.03, proved with real packets.

``osc-gitops apply`` with default flags (``network-function`` steering) against northd 26.03,
ovn-controller 26.03 and OVS 4.0's userspace datapath; pods are network namespaces, each
VirtualMachine the reconciler creates becomes a guest that bridges its two NICs, plugged on the
OVN ports its NADs name (``args.cni.ovnPort``). Pods: ``web-a`` and ``other-b`` on node-1,
``client-c`` and ``client-d`` on node-2.

Evidence: whether echo replies / TCP handshakes come back, and the pod frames each VNF guest
sent out of its NICs (``Probe.forwarded``; OVN's own health probes are not counted). An echo
request and its reply cross the VNF once each, so three pings through it count 6 frames; a
bridge leaves the TTL alone (63 across nodes, 64 on one switch).
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from osc_gitops_sandbox.datapath.world import (
    ROUTED_TTL,
    SAME_SWITCH_TTL,
    VNF_NAMESPACE,
    World,
    binding,
    security_group,
    vnf_deployment,
)

from tests.support.ovn import northd_waits_seen

pytestmark = pytest.mark.datapath

FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
FW2 = f"{VNF_NAMESPACE}/firewall-node-2"
PORT = 8080


def _redirect(w: World, redirection: str) -> None:
    """The default manifests with the Binding's ``redirection`` changed, applied."""
    w.write_manifests(security_group(), vnf_deployment(), binding(redirection=redirection))
    w.apply()


def test_default_flags_steer_through_network_functions_of_ovn_26_03(nf_fresh: World):
    """No flag chooses the backend: the NB of 26.03 has the Network Function tables. The VNF
    guests are bridges on the NF ports, and a plan right after the apply is empty although
    northd has written its own columns meanwhile."""
    assert "--steering" not in nf_fresh.apply_args
    assert nf_fresh.cluster.distribution.name == "sid"
    for node in ("node-1", "node-2"):
        vnf = nf_fresh.vnf(node)
        assert vnf.bridge
        assert [e.lsp for e in vnf.endpoints] == [
            f"nf_firewall_{node}_in",
            f"nf_firewall_{node}_out",
        ]
    assert set(nf_fresh.active_functions()) == {
        "osc.firewall.node_1.fail_close",
        "osc.firewall.node_2.fail_close",
    }
    from reconciler.cli.app import main

    plan = [a if a != "apply" else "plan" for a in nf_fresh.apply_args]
    assert main(plan) == 0, "plan after apply must report no changes (exit 0)"


def test_exit_lport_steers_connections_towards_the_pod(nf_fresh: World):
    dp = nf_fresh.dp
    web, other, client = nf_fresh.pod("web-a"), nf_fresh.pod("other-b"), nf_fresh.pod("client-c")
    _redirect(nf_fresh, "exit-lport")
    nf_fresh.label("web-a", "web")
    nf_fresh.apply()

    routed = dp.probe(client, web)
    assert routed.replies == 3 and routed.ttl == ROUTED_TTL
    assert routed.forwarded == {FW1: 6, FW2: 0}, "request and reply once each, at web-a's node"
    same_switch = dp.probe(other, web)
    assert same_switch.replies == 3 and same_switch.ttl == SAME_SWITCH_TTL
    assert same_switch.forwarded == {FW1: 6, FW2: 0}
    # connections the pod opens itself are entry-lport traffic: not steered
    assert dp.probe(web, client).forwarded == {FW1: 0, FW2: 0}
    assert dp.probe(web, other).forwarded == {FW1: 0, FW2: 0}

    with web.listen_tcp(PORT), client.listen_tcp(PORT):
        towards = dp.tcp_probe(client, web.ip, PORT, count=2)
        assert towards.replies == 2 and towards.forwarded[FW1] >= 6 and towards.forwarded[FW2] == 0
        away = dp.tcp_probe(web, client.ip, PORT, count=2)
        assert away.replies == 2 and away.through == []


def test_entry_lport_steers_connections_the_pod_opens(nf_fresh: World):
    dp = nf_fresh.dp
    web, other, client = nf_fresh.pod("web-a"), nf_fresh.pod("other-b"), nf_fresh.pod("client-c")
    _redirect(nf_fresh, "entry-lport")
    nf_fresh.label("web-a", "web")
    nf_fresh.apply()

    routed = dp.probe(web, client)
    assert routed.replies == 3 and routed.ttl == ROUTED_TTL
    assert routed.forwarded == {FW1: 6, FW2: 0}, "steered at the pod's own node"
    same_switch = dp.probe(web, other)
    assert same_switch.replies == 3 and same_switch.ttl == SAME_SWITCH_TTL
    assert same_switch.forwarded == {FW1: 6, FW2: 0}
    assert dp.probe(client, web).forwarded == {FW1: 0, FW2: 0}
    assert dp.probe(other, web).forwarded == {FW1: 0, FW2: 0}

    with web.listen_tcp(PORT), client.listen_tcp(PORT):
        away = dp.tcp_probe(web, client.ip, PORT, count=2)
        assert away.replies == 2 and away.forwarded[FW1] >= 6 and away.forwarded[FW2] == 0
        towards = dp.tcp_probe(client, web.ip, PORT, count=2)
        assert towards.replies == 2 and towards.through == []


def test_both_directions_steer_every_connection_of_the_pod_once(nf_fresh: World):
    """The default manifests (``redirection: both``): whoever opens the connection, each
    packet crosses the VNF once, routed and on one switch, ICMP and TCP."""
    dp = nf_fresh.dp
    web, other, client = nf_fresh.pod("web-a"), nf_fresh.pod("other-b"), nf_fresh.pod("client-c")
    nf_fresh.label("web-a", "web")
    nf_fresh.apply()

    for src, dst, ttl in (
        (client, web, ROUTED_TTL), (web, client, ROUTED_TTL),
        (other, web, SAME_SWITCH_TTL), (web, other, SAME_SWITCH_TTL),
    ):  # fmt: skip
        probe = dp.probe(src, dst)
        assert probe.replies == 3 and probe.ttl == ttl, (src.lsp, dst.lsp, probe)
        assert probe.forwarded == {FW1: 6, FW2: 0}, (src.lsp, dst.lsp, probe)
    with web.listen_tcp(PORT), client.listen_tcp(PORT), other.listen_tcp(PORT):
        for src, dst in ((client, web), (web, client), (other, web), (web, other)):
            tcp = dp.tcp_probe(src, dst.ip, PORT, count=2)
            assert tcp.replies == 2 and tcp.through == [FW1], (src.lsp, dst.lsp, tcp)
    assert dp.controller_errors() == [], "ovn-controller rejected a logical flow"


def test_pods_outside_the_group_are_never_steered(nf_fresh: World):
    """While ``web-a`` is steered: every other pair, routed and on one switch, both ways,
    bypasses both VNFs, and keeps talking when both VNFs are dead."""
    dp = nf_fresh.dp
    web, other = nf_fresh.pod("web-a"), nf_fresh.pod("other-b")
    client_c, client_d = nf_fresh.pod("client-c"), nf_fresh.pod("client-d")
    nf_fresh.label("web-a", "web")
    nf_fresh.apply()
    pairs = [(other, client_c), (client_c, other), (client_d, other), (other, client_d),
             (client_c, client_d), (client_d, client_c)]  # fmt: skip
    for src, dst in pairs:
        probe = dp.probe(src, dst)
        assert probe.replies == 3 and probe.through == [], (src.lsp, dst.lsp, probe)
    with other.listen_tcp(PORT), client_d.listen_tcp(PORT):
        for src, dst in ((client_c, other), (client_c, client_d)):
            tcp = dp.tcp_probe(src, dst.ip, PORT)
            assert tcp.replies == 1 and tcp.through == [], (src.lsp, dst.lsp, tcp)
    assert dp.probe(client_c, web).through == [FW1], "while the group's traffic is steered"

    for vnf in dp.vnfs.values():
        dp.set_forwarding(vnf, False)
    for src, dst in pairs:
        assert dp.probe(src, dst, count=1).replies == 1, (src.lsp, dst.lsp)
    assert dp.probe(client_c, web, count=1, timeout=0.3).replies == 0, "fail-close"


def test_the_first_matching_binding_of_a_group_wins(nf_fresh: World):
    """Two bindings on one group: ``order: 10`` sends tcp/80 through VNF ``inspector``,
    ``order: 20`` everything else through ``firewall``. Each VNF sees only its share."""
    dp = nf_fresh.dp
    web, other, client = nf_fresh.pod("web-a"), nf_fresh.pod("other-b"), nf_fresh.pod("client-c")
    nf_fresh.write_manifests(
        security_group(),
        vnf_deployment(),
        vnf_deployment("inspector", node="node-1"),
        binding("web-http", vnf="inspector", order=10, protocol="tcp", ports=[80]),
        binding("web-rest", vnf="firewall", order=20),
    )
    nf_fresh.label("web-a", "web")
    nf_fresh.apply()
    inspector = f"{VNF_NAMESPACE}/inspector-node-1"
    assert set(dp.vnfs) == {FW1, FW2, inspector}

    with web.listen_tcp(80), web.listen_tcp(PORT):
        for src in (client, other):  # routed and same switch
            http = dp.tcp_probe(src, web.ip, 80, count=2)
            assert http.replies == 2 and http.through == [inspector], (src.lsp, http)
            rest = dp.tcp_probe(src, web.ip, PORT, count=2)
            assert rest.replies == 2 and rest.through == [FW1], (src.lsp, rest)
            ping = dp.probe(src, web)
            assert ping.replies == 3 and ping.forwarded == {FW1: 6, FW2: 0, inspector: 0}

    # the order decides, not the file: swapped, "everything" comes first and takes tcp/80 too
    nf_fresh.write_manifests(
        security_group(),
        vnf_deployment(),
        vnf_deployment("inspector", node="node-1"),
        binding("web-http", vnf="inspector", order=20, protocol="tcp", ports=[80]),
        binding("web-rest", vnf="firewall", order=10),
    )
    nf_fresh.apply()
    with web.listen_tcp(80):
        http = dp.tcp_probe(client, web.ip, 80, count=2)
        assert http.replies == 2 and http.through == [FW1]


def test_removing_the_label_stops_steering_new_connections(nf_fresh: World):
    dp = nf_fresh.dp
    web, client = nf_fresh.pod("web-a"), nf_fresh.pod("client-c")
    nf_fresh.label("web-a", "web")
    nf_fresh.apply()
    assert dp.probe(client, web).through == [FW1]

    nf_fresh.label("web-a", None)
    nf_fresh.apply()
    after = dp.probe(client, web)
    assert after.replies == 3 and after.through == []
    dp.set_forwarding(nf_fresh.vnf("node-1"), False)
    assert dp.probe(client, web).replies == 3, "bypass, not just a quiet VNF"


def test_a_group_unlabelled_and_labelled_again_while_northd_is_busy_is_steered(nf_fresh: World):
    """``--empty-grace 0``: the pod's label removed and put back deletes the group's Port_Group
    and creates it again under the same name. ovn-northd 26.03.1 taking both in one iteration
    (stopped here across the two applies, as a busy northd would be) would drop its Southbound
    row and the pod would go unsteered (docs/upstream/northd-port-group-recreated.sh); the
    second apply waits for northd instead (reconciler.adapters.ovn.northd_sync)."""
    dp, w = nf_fresh.dp, nf_fresh
    web, client = w.pod("web-a"), w.pod("client-c")
    w.label("web-a", "web")
    w.apply()
    assert dp.probe(client, web).through == [FW1]

    northd = dp.stacks[0].northd
    with northd_waits_seen() as waiting:
        os.kill(northd.pid, signal.SIGSTOP)
        try:
            w.label("web-a", None)
            assert "osc.web.node_1" in w.applier.apply(w.manifests)  # the group's rows deleted
            w.label("web-a", "web")
            failures: list[BaseException] = []

            def apply_again() -> None:
                try:
                    w.applier.apply(w.manifests)  # the label back: the same group again
                except BaseException as exc:  # reported by the test thread
                    failures.append(exc)

            again = threading.Thread(target=apply_again, daemon=True)
            again.start()
            while not waiting.event.wait(0.05) and again.is_alive():
                pass
            assert waiting.event.is_set(), "the group was created again before northd caught up"
        finally:
            os.kill(northd.pid, signal.SIGCONT)
    again.join(30)
    assert not again.is_alive() and not failures, failures
    dp.wait_hv()
    steered = dp.probe(client, web)
    assert steered.replies == 3 and steered.forwarded == {FW1: 6, FW2: 0}


def test_a_deleted_vnf_vm_drops_the_group_and_is_redeployed(nf_fresh: World):
    dp = nf_fresh.dp
    web, client = nf_fresh.pod("web-a"), nf_fresh.pod("client-c")
    nf_fresh.label("web-a", "web")
    nf_fresh.apply()
    old = nf_fresh.vnf("node-1")

    nf_fresh.cluster.delete_vm(VNF_NAMESPACE, old.vm)  # kubectl delete vm firewall-node-1
    dp.sync_vnfs()  # KubeVirt stops the guest: its NF ports are unbound
    assert dp.probe(client, web, count=2, timeout=0.3).replies == 0, "fail-close: rows stay"

    nf_fresh.apply()  # the next reconcile recreates the VM; KubeVirt starts a new guest
    new = nf_fresh.vnf("node-1")
    assert new.vm == old.vm and new.vm_uid != old.vm_uid
    restored = dp.probe(client, web)
    assert restored.replies == 3 and restored.forwarded == {FW1: 6, FW2: 0}
