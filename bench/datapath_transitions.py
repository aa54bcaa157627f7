"""Benchmark: the transitions of issue 22 with real packets (OVN 26.03), repeated for figures.

Runs the scenarios of ``tests/datapath/transition_scenarios.py`` ``--runs`` times each on one
data-path world (two nodes on one OVS + ovn-controller chassis, pods and VNF guests as network
namespaces; guests boot ``--boot`` seconds before they forward) and prints a Markdown table of
medians and ranges, with the load average before each run:

- ``first``: the first ``apply --wait`` of two bindings (fail-close, fail-open) onto firewalls
  that boot: echoes lost (ICMP every 20 ms to each protected pod), TCP segments retransmitted,
  the TCP stream's longest stall, and how long ``--wait`` took;
- ``node``: the firewall newly runs on node-2, where a protected pod receives a stream;
- ``rollout``: two firewalls per node, a new image rolled out (``maxUnavailable: 2``, 1 s
  boots): lost echoes, and how long the rollout took;
- ``rollout-single`` (for comparison): one firewall per node, the same rollout
  (``maxUnavailable: 1``): each restart is an outage of its node's firewall;
- ``failover``: two firewalls per node, node-1's active one stops forwarding: the outage (the
  protected pod's longest time without a reply) with the default health check (interval 1,
  timeout 1, failureCount 2) and with failureCount 1.

Needs root and the sid root of ``make setup``. From the repository's root:

    .venv/bin/python -m bench.datapath_transitions [--runs 5] [--boot 3] [--what first,rollout]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

from osc_gitops_sandbox.datapath.world import world

from tests.datapath import transition_scenarios as sc

DEFAULT_CHECK = "  healthCheck: {interval: 1, timeout: 1, successCount: 1, failureCount: 2}\n"


def load() -> float:
    return float(os.getloadavg()[0])


def cell(values: list[float], fmt: str = "{:.2f}") -> str:
    if not values:
        return "-"
    median = statistics.median(values)
    return f"{fmt.format(median)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--boot", type=float, default=3.0)
    parser.add_argument("--what", default="first,node,rollout,failover")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 1
    wanted = args.what.split(",")
    rows: list[tuple[str, str, str, str, str, str]] = []
    with world("26.03") as w:
        runs: dict[str, Callable[[], dict[str, Any]]] = {
            "first": lambda: sc.first_apply(w, args.boot),
            "node": lambda: sc.new_node(w, args.boot),
            "rollout": lambda: sc.rollout(w, 1.0),
            "rollout-single": lambda: sc.rollout_single(w, 1.0),
            "failover": lambda: sc.failover(w, DEFAULT_CHECK),
            "failover-fast": lambda: sc.failover(w, sc.FAST_CHECK),
        }
        if "failover" in wanted:
            wanted.append("failover-fast")
        for name in [n for n in runs if n in wanted]:
            results: list[dict[str, Any]] = []
            loads: list[float] = []
            for i in range(args.runs):
                loads.append(load())
                got = runs[name]()
                results.append(got)
                close = got["fail-close"]
                print(f"[{name} {i + 1}/{args.runs}] load {loads[-1]:.2f}: lost "
                      f"{close.lost}/{close.sent} fail-close"
                      + (f", {got['fail-open'].lost}/{got['fail-open'].sent} fail-open"
                         if "fail-open" in got else "")
                      + f", TCP retransmitted {got['retransmitted']}, stall "
                      f"{got['tcp'].longest_gap:.3f} s"
                      + (f", {got['seconds']:.2f} s" if "seconds" in got else "")
                      + (f", outage {got['outage']:.2f} s" if "outage" in got else "")
                      + (f", TCP stream broke: {got['tcp'].error}" if got["tcp"].error else ""),
                      flush=True)  # fmt: skip
            lost = [float(r["fail-close"].lost + (r["fail-open"].lost if "fail-open" in r
                                                  else 0)) for r in results]  # fmt: skip
            sent = [float(r["fail-close"].sent + (r["fail-open"].sent if "fail-open" in r
                                                  else 0)) for r in results]  # fmt: skip
            rows.append((
                name,
                f"{cell(lost, '{:.0f}')} of ~{statistics.median(sent):.0f}",
                cell([float(r["retransmitted"]) for r in results], "{:.0f}"),
                cell([r["tcp"].longest_gap for r in results])
                + (f"; reset in {broken} of {len(results)}"
                   if (broken := sum(bool(r["tcp"].error) for r in results)) else ""),
                cell([r["seconds"] for r in results if "seconds" in r]
                     or [r["outage"] for r in results]),
                cell(loads),
            ))  # fmt: skip
    print()
    print("| scenario | echoes lost | TCP retransmitted | TCP longest stall (s) | "
          "seconds (apply --wait / rollout / outage) | load |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
