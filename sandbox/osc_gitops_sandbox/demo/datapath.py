"""``osc-gitops demo --datapath``: real packets through the VNF, on this machine.

The NB-rows demo (``osc_gitops_sandbox.demo.story``) shows what the reconciler writes; this one
shows what the rows *do*. It builds the world of the packet tests
(:mod:`osc_gitops_sandbox.datapath.world`: two nodes, four pods, a firewall VM per node, real
OVN and OVS daemons, pods and VNF guests as network namespaces) and drives the reconciler
through its library, as a long-running reconciler would
(:func:`reconciler.engine.pipeline.reconcile` with the Kubernetes and OVN adapters).

- ``--ovn 26.03`` (default): Network Function steering on OVN 26.03. A labelled pod is steered,
  on one node switch too, an unlabelled one is not; when a firewall stops forwarding,
  ``fail-close`` traffic is dropped and ``fail-open`` traffic bypasses it (if OVN can notice:
  health checks), and both are steered again once it is back. Then a real VNF: Suricata 8
  inline (``osc_gitops_sandbox.demo.inspection``): an attack on a protected pod dropped, on an
  unprotected one passed uninspected, a newly labelled pod's next attack dropped (members
  pushed, rules reloaded), a chain of the bridge firewall and Suricata. Then a standby firewall
  per node and a new firewall image rolled out node by node (issue 22) under a 20 ms ping
  stream: what is lost is counted. Every time is measured.
- ``--ovn 23.03``: the host's OVN, router-policy steering of routed traffic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from osc_gitops_sandbox.datapath.streams import IcmpStream
from osc_gitops_sandbox.datapath.world import (
    DEFAULT_OVN,
    World,
    binding,
    security_group,
    vnf_deployment,
    world,
)
from osc_gitops_sandbox.demo.inspection import inspection_stories

FAILURE_POLICY_MANIFESTS = (
    security_group("web", ["app=web"]),
    security_group("api", ["app=api"]),
    vnf_deployment("firewall"),
    binding("web-firewall", group="web", failure_policy="fail-close"),
    binding("api-firewall", group="api", failure_policy="fail-open"),
)
STANDBY = (
    "  instancesPerNode: 2\n  updateStrategy: {maxUnavailable: 1}\n"
    "  healthCheck: {interval: 1, timeout: 1, successCount: 1, failureCount: 1}\n"
)
"""A second firewall per node (the standby), rolled one node at a time, probed every second."""
BOOT_DELAY = 1.0
"""Seconds a (re)started firewall guest takes to forward, in the rolling-update story."""
FAILOVER_LIMIT = 60.0
"""Seconds the demo waits for OVN to notice a dead or revived VNF before it says it did not."""


def say(text: str = "") -> None:
    print(text, flush=True)


def step(title: str) -> None:
    say()
    say(f"=== {title}")


def show(label: str, probe: Any, *, tcp: bool = False) -> None:
    via = ", ".join(f"{k.split('/')[-1]} +{v}" for k, v in sorted(probe.forwarded.items()))
    verdict = f"{probe.replies}/{probe.sent} " + ("connected" if tcp else "replies")
    if probe.ttl:
        verdict += f", TTL {probe.ttl}"
    path = "direct" if probe.replies else "dropped"
    if probe.through:
        path = "through " + ", ".join(t.split("/")[-1] for t in probe.through)
    say(f"  {label:<36} {verdict:<20} {path:<28} [{via}]")


def first_times(
    conditions: dict[str, Callable[[], bool]], since: float, limit: float = FAILOVER_LIMIT
) -> dict[str, float]:
    """Seconds from ``since`` until each condition first held (polled in turn); conditions
    that did not hold within ``limit`` are missing from the result."""
    seen: dict[str, float] = {}
    while len(seen) < len(conditions) and time.perf_counter() - since < limit:
        for name, condition in conditions.items():
            if name not in seen and condition():
                seen[name] = time.perf_counter() - since
        time.sleep(0.005)
    return seen


def _apply(w: World, *, wait: bool = True) -> float:
    """Apply; with ``wait`` also wait (and say how long) until OVN counts every VNF instance
    healthy and the chassis installed everything. Returns when the apply itself returned
    (``time.perf_counter()``)."""
    say(f"$ osc-gitops {' '.join(w.apply_args)}")
    start = time.perf_counter()
    plan = w.apply(wait=False)
    finished = time.perf_counter()
    summary = next((ln for ln in reversed(plan.splitlines()) if ln.startswith("Plan:")), "")
    say(f"  applied in {(finished - start) * 1000:.0f} ms. {summary}")
    if wait:
        inactive = [g for g, nf in w.active_functions().items() if nf is None]
        took = w.wait_all_active()
        if inactive:
            say(f"  OVN's health probes found the new VNF instances alive {took:.2f} s later "
                 "(until then their fail-close traffic is dropped)")  # fmt: skip
        if w.switch_on(plan):  # steering held until the new instances were healthy (issue 22)
            say("  steering onto them switched on by the next apply, once OVN saw them healthy")
        w.dp.wait_hv()
    return finished


def answered(dp: Any, src: Any, dst: Any, vnf: str, *, through: bool) -> Callable[[], bool]:
    """A check for :func:`first_times`: one echo (a new connection) from ``src`` to ``dst``
    comes back, crossing VNF ``vnf`` (``<namespace>/<vm>``) or not, as ``through`` says."""

    def check() -> bool:
        probe = dp.probe(src, dst, count=1, timeout=0.03)
        return probe.replies == 1 and (probe.through == [vnf]) == through

    return check


def label(w: World, pod: str, value: str | None) -> None:
    say(f"$ kubectl label pod {pod} app{'=' + value if value else '-'}")
    w.label(pod, value)


def _introduce(w: World, started: float) -> None:
    dist = w.cluster.distribution
    versions = dist.versions(("ovn-northd", "ovn-controller", "ovs-vswitchd"))
    steering = w.applier.steering or "network-function"
    say(f"osc-gitops demo --datapath: real packets, {steering} steering on OVN {w.ovn_version} "
         f"({dist.name})")  # fmt: skip
    say("  " + ", ".join(f"{tool} {version}" for tool, version in versions.items()))
    say(f"  OVN NB {w.cluster.nb_remote}")
    (chassis,) = w.dp.chassis
    say(f"  one chassis ({chassis!r}): OVS userspace datapath + ovn-controller, both nodes")
    for lsp, ep in sorted(w.dp.pods.items()):
        say(f"  pod {lsp:<16} {ep.ip:<12} on {ep.node}")
    say(f"  set up in {time.perf_counter() - started:.2f} s")


def _deploy(w: World) -> None:
    step("1. Apply: a firewall VM on each node, binding web -> firewall (nobody labelled yet)")
    _apply(w)
    for key, vnf in sorted(w.dp.vnfs.items()):
        kind = "bridges" if vnf.bridge else "routes on"
        ports = " + ".join(e.lsp for e in vnf.endpoints)
        say(f"  VM {key}: the guest {kind} OVN port(s) {ports}")
    if w.dp.binders:
        say(f"  ovs-cni {w.dp.ovs_cni} made the NICs' OVS ports; the node binder (osc-gitops bind) "
            "set their iface-id (contPodUid + Multus' network-status, MAC checked)")  # fmt: skip
    show("client-c -> web-a", w.dp.probe(w.pod("client-c"), w.pod("web-a")))


def _label_and_measure(w: World) -> None:
    step("2. A pod gets the label: steered with the next apply")
    dp, web, client = w.dp, w.pod("web-a"), w.pod("client-c")
    t0 = time.perf_counter()
    label(w, "web-a", "web")
    _apply(w, wait=False)
    polled = dp.wait_steered(client, web, w.vnf("node-1"))
    total = (time.perf_counter() - t0) * 1000
    say(f"  first steered packet {total:.0f} ms after the label change "
         f"({polled * 1000:.0f} ms of it after apply returned)")  # fmt: skip


def _first_probes(w: World, same_node: str) -> tuple[Any, Any, Any, Any]:
    """Probe the steered pod web-a routed, back, and from its own node (``same_node`` names
    that last probe); ``(web-a, other-b, client-c, client-d)``."""
    dp = w.dp
    web, other = w.pod("web-a"), w.pod("other-b")
    client_c, client_d = w.pod("client-c"), w.pod("client-d")
    show("client-c -> web-a (routed)", dp.probe(client_c, web))
    show("web-a -> client-c", dp.probe(web, client_c))
    show(f"other-b -> web-a ({same_node})", dp.probe(other, web))
    return web, other, client_c, client_d


def _network_function_story(w: World) -> None:
    dp = w.dp
    web, other, client_c, client_d = _first_probes(w, "same node switch")
    with web.listen_tcp(8080):
        tcp = dp.tcp_probe(client_c, web.ip, 8080, count=3)
        show("client-c -> web-a:8080 (TCP)", tcp, tcp=True)
    show("other-b -> client-d (unlabelled)", dp.probe(other, client_d))
    show("client-d -> client-c (unlabelled)", dp.probe(client_d, client_c))

    step("3. Failure policy: web -> firewall fail-close, api -> firewall fail-open")
    w.write_manifests(*FAILURE_POLICY_MANIFESTS)
    say("(manifests: SecurityGroup api [app=api], Binding api-firewall failurePolicy: fail-open)")
    label(w, "other-b", "api")
    _apply(w)
    checked = w.health_checked()
    if checked:
        say("  OVN health-checks every firewall instance (Network_Function_Health_Check)")
    else:
        say("  ! apply wrote no health check: OVN counts a dead firewall as healthy, so the")
        say("    failure policy cannot act (fail-open traffic is swallowed like fail-close)")
    show("client-c -> web-a (fail-close)", dp.probe(client_c, web))
    show("client-c -> other-b (fail-open)", dp.probe(client_c, other))

    step("4. The node-1 firewall stops forwarding")
    vnf = w.vnf("node-1")
    key = f"{vnf.namespace}/{vnf.vm}"
    groups = [g for g in w.active_functions() if "node_1" in g]

    t0 = time.perf_counter()
    dp.set_forwarding(vnf, False)
    if checked:
        seen = first_times({
            "offline": lambda: all(w.active_functions()[g] is None for g in groups),
            "bypass": answered(dp, client_c, other, key, through=False),
        }, t0)  # fmt: skip
        if len(seen) < 2:
            say(f"  ! OVN did not react within {FAILOVER_LIMIT:.0f} s: {seen}")
        else:
            say(f"  OVN marked it offline after {seen['offline']:.2f} s; fail-open traffic "
                 f"bypassed it after {seen['bypass']:.2f} s")  # fmt: skip
    show("client-c -> web-a (fail-close)", dp.probe(client_c, web, count=2, timeout=0.3))
    show("client-c -> other-b (fail-open)", dp.probe(client_c, other, count=2, timeout=0.3))
    show("other-b -> client-d (unlabelled)", dp.probe(other, client_d))

    step("5. The firewall forwards again")
    t1 = time.perf_counter()
    dp.set_forwarding(vnf, True)
    if checked:
        back = first_times({
            "online": lambda: all(w.active_functions()[g] is not None for g in groups),
            "fail-close": answered(dp, client_c, web, key, through=True),
            "fail-open": answered(dp, client_c, other, key, through=True),
        }, t1)  # fmt: skip
        if len(back) < 3:
            say(f"  ! not steered again within {FAILOVER_LIMIT:.0f} s: {back}")
        else:
            say(f"  OVN marked it online after {back['online']:.2f} s; steered again after "
                 f"{back['fail-close']:.2f} s (fail-close) / {back['fail-open']:.2f} s "
                 "(fail-open)")  # fmt: skip
    show("client-c -> web-a (fail-close)", dp.probe(client_c, web))
    show("client-c -> other-b (fail-open)", dp.probe(client_c, other))


def _apply_wait(w: World, timeout: str = "120s") -> float:
    """``osc-gitops apply --wait`` (the CLI, in-process): its seconds; the plan's last line."""
    import contextlib
    import io

    from reconciler.cli.app import main

    args = [*w.apply_args, "--wait", "--wait-timeout", timeout]
    say(f"$ osc-gitops {' '.join(args)}")
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    took = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"apply --wait exited {code}: {err.getvalue()}")
    summary = next((ln for ln in reversed(out.getvalue().splitlines()) if ln.startswith("Plan:")),
                   "")  # fmt: skip
    if summary.startswith("Plan: 0 to create, 0 to change, 0 to delete"):
        summary = "(its first pass held every template change; the rollout wrote them VM by VM)"
    say(f"  ready after {took:.1f} s. {summary}")
    w.dp.sync_vnfs()
    w.dp.wait_hv()
    return took


def _rolling_update_story(w: World, number: int = 6) -> None:
    dp = w.dp
    client_c, web, other = w.pod("client-c"), w.pod("web-a"), w.pod("other-b")
    firewall = vnf_deployment("firewall") + STANDBY
    others = [m for m in FAILURE_POLICY_MANIFESTS if "kind: VnfDeployment" not in m]
    dp.boot_delay = BOOT_DELAY

    step(f"{number}. A standby per node: instancesPerNode: 2 (apply --wait)")
    say(f"(manifests: firewall instancesPerNode: 2, updateStrategy {{maxUnavailable: 1}}, "
        f"health check every second; a guest takes {BOOT_DELAY:.0f} s to boot)")  # fmt: skip
    w.write_manifests(*others, firewall)
    _apply_wait(w)
    active = w.active_functions()
    for key in sorted(dp.vnfs):
        say(f"  VM {key}")
    say("  each node's function groups hold both; OVN makes one active: "
        + ", ".join(f"{g} -> {nf}" for g, nf in sorted(active.items())
                    if g.endswith((".fail_close", ".fail_open"))))  # fmt: skip

    step(f"{number + 1}. A new firewall image: rolled node by node, the standby first, under a "
         "ping stream")  # fmt: skip
    say(
        "(manifests: image quay.io/example/vnf-firewall:1.4.2 -> 1.5.0; KubeVirt restarts a "
        "VM only when told: osc-gitops drains, restarts and waits for OVN's verdict per VM)"
    )
    before = {k: v.vmi_uid for k, v in dp.vnfs.items()}
    w.write_manifests(*others, firewall.replace(":1.4.2", ":1.5.0"))
    stream = IcmpStream(client_c, {
        "client-c -> web-a (fail-close)": web.ip,
        "client-c -> other-b (fail-open)": other.ip,
    })  # fmt: skip
    try:
        _apply_wait(w, "180s")
    finally:
        results = stream.stop()
    restarted = sorted(k for k, v in dp.vnfs.items() if before.get(k) not in (None, v.vmi_uid))
    say(f"  {len(restarted)} VMs restarted with the new image: {', '.join(restarted)}")
    for name, result in results.items():
        say(f"  {name:<36} {result.sent} echoes (every 20 ms), {result.lost} lost, longest "
            f"gap {result.longest_gap * 1000:.0f} ms")  # fmt: skip
    dp.boot_delay = 0.0


def _router_policy_story(w: World) -> None:
    dp = w.dp
    web, other, client_c, client_d = _first_probes(w, "same node")
    show("other-b -> client-d (unlabelled)", dp.probe(other, client_d))
    say("  (router-policy steers routed traffic only; the guest routes, TTL one lower)")

    step("3. The node-1 firewall stops forwarding: no health check, so always fail-close")
    dp.set_forwarding(w.vnf("node-1"), False)
    show("client-c -> web-a", dp.probe(client_c, web, count=2, timeout=0.3))
    show("other-b -> client-d (unlabelled)", dp.probe(other, client_d))
    dp.set_forwarding(w.vnf("node-1"), True)
    show("client-c -> web-a (forwarding again)", dp.probe(client_c, web))


def run(ovn: str = DEFAULT_OVN, steering: str | None = None) -> int:
    """The narrated run; returns the exit code (0). Everything is torn down at the end."""
    started = time.perf_counter()
    with world(ovn, via="library", steering=steering) as w:
        _introduce(w, started)
        _deploy(w)
        _label_and_measure(w)
        if w.dp.vnf_on("node-1", "firewall").bridge:
            _network_function_story(w)
            after = inspection_stories(w, FAILURE_POLICY_MANIFESTS, 6, _apply, label)
            _rolling_update_story(w, after)
        else:
            _router_policy_story(w)
        step("Last: kubectl label pod web-a app-; apply: new connections bypass the firewall")
        label(w, "web-a", None)
        _apply(w)
        show("client-c -> web-a", w.dp.probe(w.pod("client-c"), w.pod("web-a")))
        say()
        say("demo finished: namespaces, OVS, ovn-controller and the sandbox are being removed.")
    say(f"done in {time.perf_counter() - started:.1f} s, nothing left running.")
    return 0
