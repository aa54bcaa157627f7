"""``osc-gitops demo --datapath --zones``: the interconnect story, with real packets.

OVN-Kubernetes' default topology: every node its own zone (NB, SB, northd, ovn-controller on
local unix sockets), the zones joined by the transit switch over Geneve; osc-gitops runs as a
central ``--kubernetes-only`` owner and one ``--node`` agent per zone. The world is the one of
the packet tests (:func:`osc_gitops_sandbox.datapath.world.world`, ``topology="zones"``); the
story, every step timed:

1. the central owner deploys the firewall VMs, each node's agent its zone's rows;
2. a pod is labelled: its agent steers it, packets from the other zone cross its node's
   firewall (label -> first steered packet, measured); unlabelled pods are not steered;
3. a firewall dies: fail-close drops, fail-open bypasses; it comes back: steered again;
4. one zone's NB dies: both zones keep steering, the other agent keeps converging,
   ``status --all-nodes`` names the dead zone; the NB returns and its agent catches up;
5. a protected pod is rescheduled on the other node: the other zone steers it.
"""

from __future__ import annotations

import signal
import time

from osc_gitops_sandbox.datapath.world import VNF_NAMESPACE, World, ZoneApply, world
from osc_gitops_sandbox.demo.datapath import (
    FAILURE_POLICY_MANIFESTS,
    answered,
    first_times,
    label,
    say,
    show,
    step,
)


def _agents(w: World) -> ZoneApply:
    assert isinstance(w.applier, ZoneApply)
    return w.applier


def _converge(w: World, revision: str, nodes: tuple[str | None, ...] = (None, "node-1", "node-2")
              ) -> None:  # fmt: skip
    """``osc-gitops run --once``: the central owner (None) and the agents of ``nodes``."""
    for node in nodes:
        who = "--kubernetes-only" if node is None else f"--node {node}"
        start = time.perf_counter()
        code, _, err = _agents(w).run_once(w.manifests, node, revision)
        took = (time.perf_counter() - start) * 1000
        root = str(w.manifests.parent)
        verdict = "converged" if code == 0 else f"exit {code}: {err.splitlines()[-1]}"
        verdict = verdict.replace(root, "…")
        say(f"$ osc-gitops run --once {who}   -> {verdict} ({took:.0f} ms)")


def _settle(w: World) -> None:
    w.dp.sync_vnfs()
    w.wait_all_active()
    w.dp.wait_hv()


def _status(w: World) -> None:
    code, report = _agents(w).status()
    nodes = ", ".join(f"{n['node']} {n['state']}" for n in report.get("nodes", []))
    say(f"$ osc-gitops status --all-nodes   -> exit {code}: {nodes}")


def _introduce(w: World, started: float) -> None:
    dist = w.cluster.distribution
    versions = dist.versions(("ovn-northd", "ovn-controller", "ovs-vswitchd"))
    say("osc-gitops demo --datapath --zones: OVN-Kubernetes interconnect, one zone per node")
    say("  " + ", ".join(f"{tool} {version}" for tool, version in versions.items()))
    for node in ("node-1", "node-2"):
        stack, chassis = w.dp.stack_of(node), w.dp.chassis_of(node)
        say(
            f"  zone {node}: NB {stack.nb_remote}, SB + northd beside it; chassis "
            f"{chassis.name} (Geneve {chassis.encap_ip}), transit switch port tstor-{node}"
        )
    for lsp, ep in sorted(w.dp.pods.items()):
        say(f"  pod {lsp:<16} {ep.ip:<12} on {ep.node}")
    say(f"  set up in {time.perf_counter() - started:.2f} s")


def _failure_policy(w: World) -> None:
    dp = w.dp
    client, web, other = w.pod("client-c"), w.pod("web-a"), w.pod("other-b")
    step("3. node-1's firewall dies: web fail-close, api fail-open (probes from node-2)")
    w.write_manifests(*FAILURE_POLICY_MANIFESTS)
    label(w, "other-b", "api")
    _converge(w, "r2")
    _settle(w)
    vnf = w.vnf("node-1")
    key = f"{VNF_NAMESPACE}/{vnf.vm}"

    t0 = time.perf_counter()
    dp.set_forwarding(vnf, False)
    seen = first_times({"bypass": answered(dp, client, other, key, through=False)}, t0)
    say(f"  fail-open traffic bypasses the dead firewall after {seen.get('bypass', -1):.2f} s")
    show("client-c -> web-a (fail-close)", dp.probe(client, web, count=2, timeout=0.3))
    show("client-c -> other-b (fail-open)", dp.probe(client, other, count=2, timeout=0.3))
    t1 = time.perf_counter()
    dp.set_forwarding(vnf, True)
    back = first_times({"steered": answered(dp, client, web, key, through=True)}, t1)
    say(f"  it forwards again: steered again after {back.get('steered', -1):.2f} s")
    show("client-c -> web-a (fail-close)", dp.probe(client, web))


def _dead_nb(w: World) -> None:
    dp = w.dp
    client, web, peer = w.pod("client-c"), w.pod("web-a"), w.pod("client-d")
    step("4. zone node-1's NB dies (SIGKILL of its ovsdb-server)")
    nb = dp.stack_of("node-1").nb
    assert nb is not None
    nb.stop(sig=signal.SIGKILL)
    try:
        show("client-c -> web-a (node-1 still steers)", dp.probe(client, web))
        label(w, "client-d", "web")
        _converge(w, "r3", (None, "node-2", "node-1"))
        dp.stack_of("node-2").nbctl("--wait=hv", "--timeout=15", "sync")
        dp.chassis_of("node-2").purge(5)
        show("web-a -> client-d (node-2 converged)", dp.probe(web, peer))
        _status(w)
    finally:
        w.cluster.start_nb("node-1")
    say("  the NB is back on its database file")
    _converge(w, "r3", ("node-1",))
    _status(w)


def _move(w: World) -> None:
    step("5. web-a is rescheduled on node-2 (new UID and address, its port in zone node-2)")
    label(w, "client-d", None)
    label(w, "other-b", None)
    moved = w.move_pod("web-a", "node-2")
    _converge(w, "r4")
    _settle(w)
    show("other-b -> web-a (now on node-2)", w.dp.probe(w.pod("other-b"), moved))
    show("client-c -> web-a (now one switch)", w.dp.probe(w.pod("client-c"), moved))


def run() -> int:
    """The narrated run; returns the exit code (0). Everything is torn down at the end."""
    started = time.perf_counter()
    with world(topology="zones") as w:
        dp = w.dp
        _introduce(w, started)
        step("1. The central owner deploys the firewall VMs; each agent programs its zone")
        _converge(w, "r1")
        _settle(w)
        client, web = w.pod("client-c"), w.pod("web-a")
        show("client-c -> web-a (nobody labelled)", dp.probe(client, web))

        step("2. web-a (node-1) is labelled app=web; node-1's agent steers it")
        t0 = time.perf_counter()
        label(w, "web-a", "web")
        _converge(w, "r1", ("node-1",))
        polled = dp.wait_steered(client, web, w.vnf("node-1"))
        say(f"  first steered packet {(time.perf_counter() - t0) * 1000:.0f} ms after the "
             f"label change ({polled * 1000:.0f} ms after the agent's pass)")  # fmt: skip
        show("client-c -> web-a (across zones)", dp.probe(client, web))
        show("web-a -> client-c", dp.probe(web, client))
        show("other-b -> web-a (same switch)", dp.probe(w.pod("other-b"), web))
        show("client-d -> client-c (unlabelled)", dp.probe(w.pod("client-d"), client))
        with web.listen_tcp(8080):
            show("client-c -> web-a:8080 (TCP)", dp.tcp_probe(client, web.ip, 8080, count=3),
                  tcp=True)  # fmt: skip
        _failure_policy(w)
        _dead_nb(w)
        _move(w)
        say()
        say("demo finished: zones, chassis, namespaces and the API emulator are being removed.")
    say(f"done in {time.perf_counter() - started:.1f} s, nothing left running.")
    return 0
