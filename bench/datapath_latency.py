"""Benchmark: real packets on the data path: label change -> steered, and VNF failure -> failover.

Uses the world of ``osc-gitops demo --datapath`` and ``tests/datapath``
(``osc_gitops_sandbox.datapath.world``: two nodes on one OVS + ovn-controller chassis, pods and
VNF guests as network namespaces). ``--ovn 26.03`` (default): OVN 26.03 + OVS 4.0 from the sid
root, default flags (``network-function`` steering, bridging VNF guests); ``--ovn 23.03``: the
host's OVN with ``--steering router-policy`` (routing guests).

``steer`` (``--runs`` times, median):

1. baseline: ``web-a`` unlabelled, applied, flows installed (not timed);
2. t0; ``kubectl label pod web-a app=web`` (merge-patch through the API emulator);
3. apply: ``--via cli`` the CLI's ``main`` in-process (a fresh connection per apply, as
   ``osc-gitops apply``), ``library`` :func:`reconciler.engine.pipeline.reconcile` with adapters
   connected once (as the loop runs it), ``process`` the console script as a new process;
4. poll: one ICMP echo (each a new connection) from ``client-c`` (node-2) to ``web-a`` every
   5 ms until a reply comes back *and* node-1's firewall passed it on. t1.

``failover`` (26.03 only; ``--failover-runs`` times): Binding ``web-firewall`` (``fail-close``)
for ``web-a`` and ``api-firewall`` (``fail-open``) for ``other-b``, both through node-1's
firewall, with the health checks ``apply`` writes; if the product writes none, the script adds
them by hand (interval 1 s, timeout 1 s, success 1, failure 2, and the two ``svc_monitor_ip``
options) and says so. Then, each after a random pause of up to a second (so that the runs meet
OVN's probe cycle at different points), node-1's firewall stops forwarding (t0) and comes back
(t1); a loop pings both pods from ``client-c`` (new connections, 30 ms timeout) and reads
``Network_Function_Group.network_function_active`` until:

- *offline*: northd cleared the active function (both groups share the function);
- *bypass*: the fail-open pod answers again (not through the dead VNF);
- *back online*: the active function is set again after t1;
- *steered again*: each pod answers through the revived VNF after t1.

Needs root and (for 26.03) the sid root of ``make setup``; see ``docs/datapath.md``.

    .venv/bin/python bench/datapath_latency.py [--ovn 26.03] [--runs 9] [--via cli]
    .venv/bin/python bench/datapath_latency.py --what failover --failover-runs 3
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from osc_gitops_sandbox.datapath.world import (
    DEFAULT_OVN,
    OVN_VERSIONS,
    World,
    binding,
    security_group,
    vnf_deployment,
    world,
)

HAND_HEALTH_CHECK = {"interval": "1", "timeout": "1", "success_count": "1", "failure_count": "2"}
HAND_MONITOR_IPS = {"svc_monitor_ip": "169.254.100.1", "svc_monitor_ip_dst": "169.254.100.2"}
POLL_PING_TIMEOUT = 0.03
PHASE_SPREAD = 1.0
"""A random pause of up to this many seconds (the default probe interval) before the VNF
dies and before it comes back, so that each run meets OVN's probe cycle at another point:
back-to-back runs would otherwise all start at the same phase."""


def ms(values: list[float]) -> str:
    return ", ".join(f"{v * 1000:.0f}" for v in values)


def summary(label: str, values: list[float]) -> str:
    if not values:
        return f"  {label}: no runs"
    return (
        f"  {label}: median {statistics.median(values) * 1000:.0f} ms, range "
        f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f} ms  (runs: {ms(values)})"
    )


# ---------------------------------------------------------------------------------------------
# label change -> first steered packet


def _apply_in_new_process(w: World) -> None:
    exe = shutil.which("osc-gitops") or str(Path(sys.executable).with_name("osc-gitops"))
    subprocess.run([exe, *w.apply_args], check=True, capture_output=True, env=os.environ.copy())
    w.dp.sync_vnfs()


def bench_steer(ovn: str, runs: int, via: str) -> None:
    totals, applies = [], []
    with world(ovn, via="cli" if via == "process" else via) as w:
        w.reset()
        web, client = w.pod("web-a"), w.pod("client-c")
        for _ in range(runs):
            w.label("web-a", None)
            w.apply()
            assert w.dp.probe(client, web, count=1).through == [], "baseline must bypass"
            vnf = w.vnf("node-1")
            t0 = time.perf_counter()
            w.label("web-a", "web")
            if via == "process":
                _apply_in_new_process(w)
            else:
                w.apply(wait=False)
            t_apply = time.perf_counter()
            w.dp.wait_steered(client, web, vnf, timeout=10)
            t1 = time.perf_counter()
            totals.append(t1 - t0)
            applies.append(t_apply - t0)
    modes = {
        "cli": "osc-gitops apply in-process (CLI main, new connections each time)",
        "library": "reconcile() with adapters connected once (as the loop)",
        "process": "console script, a new process per apply",
    }
    print(f"label change -> steered packets on OVN {ovn} ({modes[via]}, {runs} runs)")
    print(summary("total", totals))
    print(summary("apply", applies))
    print(summary("northd + ovn-controller + first steered ping",
                  [t - a for t, a in zip(totals, applies, strict=True)]))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# VNF failure -> fail open / closed -> recovery

FAILOVER_MANIFESTS = (
    security_group("web", ["app=web"]),
    security_group("api", ["app=api"]),
    vnf_deployment("firewall"),
    binding("web-firewall", group="web", failure_policy="fail-close"),
    binding("api-firewall", group="api", failure_policy="fail-open"),
)


def add_health_checks_by_hand(w: World) -> None:
    """What the product should write itself: a health check per Network_Function and the two
    monitor addresses. Only for measuring while the product writes none."""
    ovn = w.cluster.ovn
    uuids = ovn.nbctl("--bare", "--columns=_uuid", "list", "Network_Function").split()
    settings = [f"options:{k}={v}" for k, v in HAND_HEALTH_CHECK.items()]
    commands: list[str] = []
    for n, uuid in enumerate(uuids):
        commands += ["--", f"--id=@hc{n}", "create", "Network_Function_Health_Check",
                     f"name=hand-{n}", *settings,
                     "--", "set", "Network_Function", uuid, f"health_check=@hc{n}"]  # fmt: skip
    ips = [f"options:{k}={v}" for k, v in HAND_MONITOR_IPS.items()]
    ovn.nbctl(*commands, "--", "set", "NB_Global", ".", *ips)


def _until(condition: Callable[[], bool], start: float, timeout: float) -> float:
    while not condition():
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"not within {timeout} s")
        time.sleep(0.005)
    return time.perf_counter() - start


def bench_failover(runs: int) -> None:
    results: dict[str, list[float]] = {
        k: [] for k in ("offline", "bypass", "online", "fail-close steered", "fail-open steered")
    }
    leaks = 0
    with world("26.03") as w:
        w.reset()
        w.write_manifests(*FAILOVER_MANIFESTS)
        w.label("web-a", "web")
        w.label("other-b", "api")
        w.apply()
        by_hand = not w.health_checked()
        if by_hand:
            add_health_checks_by_hand(w)
        w.wait_all_active()
        w.dp.wait_hv()
        dp, client = w.dp, w.pod("client-c")
        closed_pod, open_pod = w.pod("web-a"), w.pod("other-b")
        vnf = w.vnf("node-1")
        groups = [g for g in w.active_functions() if "node_1" in g]

        def offline() -> bool:
            active = w.active_functions()
            return all(active[g] is None for g in groups)

        def online() -> bool:
            active = w.active_functions()
            return all(active[g] is not None for g in groups)

        def answers(pod: object, steered: bool | None = None) -> bool:
            before = vnf.forwarded
            client.new_flow()
            ok = client.ping(pod.ip, POLL_PING_TIMEOUT).ok  # type: ignore[attr-defined]
            crossed = vnf.forwarded > before
            return ok and (steered is None or crossed == steered)

        for _ in range(runs):
            assert dp.probe(client, open_pod).forwarded[f"osc-vnfs/{vnf.vm}"] >= 6
            time.sleep(random.uniform(0, PHASE_SPREAD))
            t0 = time.perf_counter()
            dp.set_forwarding(vnf, False)
            seen: dict[str, float] = {}
            while len(seen) < 2:
                if "offline" not in seen and offline():
                    seen["offline"] = time.perf_counter() - t0
                if "bypass" not in seen and answers(open_pod, steered=False):
                    seen["bypass"] = time.perf_counter() - t0
                leaks += answers(closed_pod)  # fail-close: never an answer
                if time.perf_counter() - t0 > 60:
                    raise TimeoutError(f"no failover within 60 s: {seen}")
            time.sleep(random.uniform(0, PHASE_SPREAD))
            t1 = time.perf_counter()
            dp.set_forwarding(vnf, True)
            back: dict[str, float] = {}
            while len(back) < 3:
                if "online" not in back and online():
                    back["online"] = time.perf_counter() - t1
                if "fail-close steered" not in back and answers(closed_pod, steered=True):
                    back["fail-close steered"] = time.perf_counter() - t1
                if "fail-open steered" not in back and answers(open_pod, steered=True):
                    back["fail-open steered"] = time.perf_counter() - t1
                if time.perf_counter() - t1 > 60:
                    raise TimeoutError(f"no recovery within 60 s: {back}")
            for key, value in {**seen, **back}.items():
                results[key].append(value)
            _until(online, time.perf_counter(), 30)
            w.dp.wait_hv()
        hc = "written by hand: " if by_hand else "as apply wrote them: "
        rows = w.cluster.ovn.nbctl("--bare", "--columns=options", "list",
                                   "Network_Function_Health_Check").split("\n")[0]  # fmt: skip
    print(f"VNF failure on OVN 26.03, health checks {hc}{rows} ({runs} runs)")
    print("  after the VNF stopped forwarding:")
    print(summary("  OVN marks it offline (network_function_active cleared)", results["offline"]))
    print(summary("  fail-open traffic answered again, bypassing the VNF", results["bypass"]))
    print(f"    fail-close traffic answered meanwhile: {leaks} time(s)")
    print("  after the VNF forwards again:")
    print(summary("  OVN marks it online", results["online"]))
    print(summary("  fail-close traffic answered through the VNF", results["fail-close steered"]))
    print(summary("  fail-open traffic steered through the VNF", results["fail-open steered"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ovn", choices=sorted(OVN_VERSIONS), default=DEFAULT_OVN)
    parser.add_argument("--what", default="steer,failover", help="steer, failover or both")
    parser.add_argument("--runs", type=int, default=9, help="label-change runs (median)")
    parser.add_argument("--via", choices=("cli", "library", "process"), default="cli")
    parser.add_argument("--failover-runs", type=int, default=3)
    args = parser.parse_args()
    what = set(args.what.split(","))
    if "steer" in what:
        bench_steer(args.ovn, args.runs, args.via)
    if "failover" in what:
        if args.ovn != "26.03":
            print("failover: OVN 23.03 has no Network Functions (no failure policy); skipped")
        else:
            bench_failover(args.failover_runs)


if __name__ == "__main__":
    main()
