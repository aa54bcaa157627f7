"""Figures of the interconnect topology for docs/datapath.md (issue 23).

``python -m osc_gitops_sandbox.demo.zone_measure [--runs N] [--failovers N]`` (root; OVN 26.03 from
the sid root) builds the two-zone world (:func:`osc_gitops_sandbox.datapath.world.world`,
``topology="zones"``) and measures, printing the load average before each part:

- **label -> first steered packet**, zone mode: t0 = the label PATCH, then node-1's agent
  applies (``osc-gitops apply --node node-1 --ovn-nb <zone node-1>``, in-process, as a fresh
  command would) or the long-running agent reacts (``osc-gitops run --node node-1`` as a
  subprocess, ``--debounce 0.05``), then one ping from node-2 (a new connection each) every
  5 ms until a reply comes back *and* node-1's firewall passed it on; median and range;
- **a VNF dying and coming back, per zone**: the firewall of zone node-1, then of zone node-2,
  stops forwarding (after a random 0-1 s pause, so the failure meets the health probe cycle
  at a different point each run); the time until OVN marks it offline, until fail-open
  traffic bypasses it, and, once it forwards again, until OVN marks it online and fail-close
  and fail-open traffic cross it again;
- **router-policy in zone mode** (``--steering router-policy``, routing guests): which probes
  of each redirection cross which firewall, and the label latency.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.datapath.world import (
    VNF_NAMESPACE,
    World,
    ZoneApply,
    binding,
    run_cli,
    security_group,
    vnf_deployment,
    world,
)
from osc_gitops_sandbox.demo.datapath import answered, first_times

FAILOVER = (
    security_group("web", ["app=web"]), security_group("api", ["app=api"]),
    vnf_deployment(), binding("web-firewall", group="web", failure_policy="fail-close"),
    binding("api-firewall", group="api", failure_policy="fail-open"),
)  # fmt: skip
PEERS = {"node-1": ("web-a", "other-b", "client-c"), "node-2": ("client-c", "client-d", "web-a")}
"""Per zone: its fail-close pod, its fail-open pod, and a client on the other node."""


def load() -> str:
    """The 1, 5 and 15 minute load averages (the figures are provisional while others run)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def spread(values: Sequence[float], unit: float = 1000, fmt: str = "{:.0f}") -> str:
    """``median (min-max)`` in ms (``unit`` 1000) or s (``unit`` 1)."""
    scaled = [v * unit for v in values]
    return (f"{fmt.format(statistics.median(scaled))} "
            f"({fmt.format(min(scaled))}-{fmt.format(max(scaled))})")  # fmt: skip


def agent_apply(w: World, node: str) -> None:
    assert isinstance(w.applier, ZoneApply)
    args = ["apply", str(w.manifests), "--node", node, "--ovn-nb", w.applier.nb_remotes[node],
            "--kubeconfig", w.cluster.kubeconfig]  # fmt: skip
    args += ["--steering", w.applier.steering] if w.applier.steering else []
    code, _, err = run_cli(args)
    if code:
        raise RuntimeError(f"agent apply failed: {err}")


def label_latency(w: World, runs: int, *, loop: bool) -> list[float]:
    """Seconds from the label PATCH of web-a to the first ping through node-1's firewall."""
    dp, web, client = w.dp, w.pod("web-a"), w.pod("client-c")
    vnf = w.vnf("node-1")
    agent = None
    if loop:
        assert isinstance(w.applier, ZoneApply)
        agent = subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", "run", str(w.manifests), "--node", "node-1",
             "--ovn-nb", w.applier.nb_remotes["node-1"], "--kubeconfig", w.cluster.kubeconfig,
             "--debounce", "0.05", "--interval", "300", "--metrics-addr", "127.0.0.1:0",
             *(["--steering", w.applier.steering] if w.applier.steering else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    took = []
    try:
        for _ in range(runs):
            w.label("web-a", None)
            if agent is None:
                agent_apply(w, "node-1")
            first_times({"unsteered": lambda: dp.probe(client, web, count=1, timeout=0.05)
                         .through == []}, time.perf_counter())  # fmt: skip
            dp.wait_hv()
            time.sleep(random.uniform(0, 0.2))
            start = time.perf_counter()
            w.label("web-a", "web")
            if agent is None:
                agent_apply(w, "node-1")
            dp.wait_steered(client, web, vnf, timeout=20)
            took.append(time.perf_counter() - start)
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(10)
    return took


def failover(w: World, node: str, runs: int) -> dict[str, list[float]]:
    """The firewall of ``node``'s zone dies and comes back, ``runs`` times."""
    dp = w.dp
    closed, opened, other = (w.pod(p) for p in PEERS[node])
    w.write_manifests(*FAILOVER)
    for pod in ("web-a", "other-b", "client-c", "client-d"):
        w.label(pod, None)
    w.label(PEERS[node][0], "web")
    w.label(PEERS[node][1], "api")
    w.apply()
    vnf = w.vnf(node)
    key = f"{VNF_NAMESPACE}/{vnf.vm}"
    groups = [g for g in w.active_functions() if node.replace("-", "_") in g]

    times: dict[str, list[float]] = {}
    for _ in range(runs):
        time.sleep(random.uniform(0, 1))
        dp.set_forwarding(vnf, False)
        down = first_times({
            "offline": lambda: all(w.active_functions()[g] is None for g in groups),
            "fail-open bypass": answered(dp, other, opened, key, through=False),
        }, time.perf_counter())  # fmt: skip
        assert dp.probe(other, closed, count=1, timeout=0.2).replies == 0, "fail-close drops"
        dp.set_forwarding(vnf, True)
        up = first_times({
            "online": lambda: all(w.active_functions()[g] is not None for g in groups),
            "fail-close steered again": answered(dp, other, closed, key, through=True),
            "fail-open steered again": answered(dp, other, opened, key, through=True),
        }, time.perf_counter())  # fmt: skip
        for name, value in {**down, **up}.items():
            times.setdefault(name, []).append(value)
    return times


def router_policy_matrix(w: World) -> list[str]:
    lines = []
    dp = w.dp
    for redirection in ("exit-lport", "entry-lport", "both"):
        w.write_manifests(security_group(), vnf_deployment(), binding(redirection=redirection))
        w.label("web-a", "web")
        w.apply()
        for src, dst in (("client-c", "web-a"), ("web-a", "client-c"), ("other-b", "web-a")):
            probe = dp.probe(w.pod(src), w.pod(dst))
            via = ", ".join(f"{k.split('/')[-1]} {v}" for k, v in sorted(probe.forwarded.items()))
            lines.append(f"  {redirection:<11} {src} -> {dst}: {probe.replies}/3 replies, "
                         f"TTL {probe.ttl}, forwarded {via}")  # fmt: skip
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m osc_gitops_sandbox.demo.zone_measure")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("error: the data path needs root", file=sys.stderr)
        return 1
    figures: dict[str, Any] = {}
    with world(topology="zones") as w:
        w.apply()
        for loop in (False, True):
            name = "label->steered, running agent" if loop else "label->steered, agent apply"
            before = load()
            took = label_latency(w, args.runs, loop=loop)
            figures[name] = took
            print(f"{name}: {spread(took)} ms, {args.runs} runs, load {before}", flush=True)
        for node in ("node-1", "node-2"):
            before = load()
            times = failover(w, node, args.failovers)
            figures[f"failover {node}"] = times
            print(f"zone {node}, {args.failovers} runs, load {before}:", flush=True)
            for name, values in times.items():
                print(f"  {name:<26} {spread(values, 1, '{:.2f}')} s", flush=True)
    with world(topology="zones", steering="router-policy") as w:
        before = load()
        print(f"router-policy, zone mode (load {before}):")
        for line in router_policy_matrix(w):
            print(line, flush=True)
        w.write_manifests()
        took = label_latency(w, args.runs, loop=False)
        figures["router-policy label->steered, agent apply"] = took
        print(f"router-policy label->steered, agent apply: {spread(took)} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
