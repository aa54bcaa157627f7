"""Benchmark: time from a pod's label change to its packets crossing the VNF, on a real data path.

Uses the ``osc-gitops demo --datapath`` world (two nodes on one OVS + ovn-controller chassis,
pods and VNF guests as network namespaces, ``--steering router-policy``). Each run:

1. baseline: ``web-a`` unlabelled, applied, flows installed (not timed);
2. t0; ``kubectl label pod web-a app=web`` (merge-patch through the API emulator);
3. ``osc-gitops apply`` (in-process ``reconciler.cli.app.main``, or the console script as a new
   process with ``--process``);
4. poll: one ICMP echo from ``client-c`` (node-2) to ``web-a`` every 5 ms until a reply comes
   back *and* the node-1 firewall's ``IpForwDatagrams`` rose. t1.

Prints the median (and every run) of t1 - t0 and of the apply step alone; the rest is northd
recomputing + ovn-controller installing flows. Needs root (see ``docs/datapath.md``).

    .venv/bin/python bench/datapath_latency.py [--runs 7] [--process]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from osc_gitops_sandbox.demo_datapath import World, world


def _apply_in_new_process(w: World) -> None:
    exe = shutil.which("osc-gitops") or str(Path(sys.executable).with_name("osc-gitops"))
    subprocess.run([exe, *w.apply_args], check=True, capture_output=True, env=os.environ.copy())
    w.dp.sync_vnfs()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--process", action="store_true", help="run the console script per apply (new process)"
    )
    args = parser.parse_args()

    totals, applies = [], []
    with world() as w:
        w.reset()
        web, client = w.pod("web-a"), w.pod("client-c")
        for _ in range(args.runs):
            w.label("web-a", None)
            w.apply()
            assert w.dp.probe(client, web, count=1).through == [], "baseline must bypass"
            vnf = w.vnf("node-1")
            t0 = time.perf_counter()
            w.label("web-a", "web")
            if args.process:
                _apply_in_new_process(w)
            else:
                w.apply(wait=False)
            t_apply = time.perf_counter()
            w.dp.wait_steered(client, web, vnf, timeout=10)
            t1 = time.perf_counter()
            totals.append(t1 - t0)
            applies.append(t_apply - t0)

    def ms(values: list[float]) -> str:
        return ", ".join(f"{v * 1000:.0f}" for v in values)

    mode = "console script, new process per apply" if args.process else "in-process apply"
    print(f"label change -> steered packets ({mode}, {args.runs} runs)")
    print(f"  total:  median {statistics.median(totals) * 1000:.0f} ms  (runs: {ms(totals)})")
    print(f"  apply:  median {statistics.median(applies) * 1000:.0f} ms  (runs: {ms(applies)})")
    rest = [t - a for t, a in zip(totals, applies, strict=True)]
    print(
        f"  northd + ovn-controller + first steered ping: median "
        f"{statistics.median(rest) * 1000:.0f} ms  (runs: {ms(rest)})"
    )


if __name__ == "__main__":
    main()
