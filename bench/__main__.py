"""``python -m bench``: run the scenarios, write ``docs/benchmarks.md`` and ``docs/benchmarks.png``.

    .venv/bin/python -m bench                       # both backends, 1k/10k/50k, OVN 26.03
    .venv/bin/python -m bench --scales 1000 --runs 1 --events 5 --out /tmp/b.md
    .venv/bin/python -m bench --report-only         # re-render from bench/results.json

Every backend is measured at every scale in a sandbox of its own (ovsdb-server from
``--distribution``), one after the other in this one process, then once more with ovn-northd
running (``--northd-scale``, informative). Results (every run, not only medians, each with the
load average before it) are kept in a JSON file next to the report so the tables and plot can
be re-rendered without re-measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench.report import machine_info, write_report
from bench.run import measure_northd, measure_scale
from bench.scenario import Scale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="1000,10000,50000", help="pod counts, comma-separated")
    parser.add_argument("--steering", default="network-function,router-policy",
                        help="backends, comma-separated")  # fmt: skip
    parser.add_argument("--distribution", default="sid", choices=("sid", "host"),
                        help="OVN of the sandbox: sid (26.03) or host (23.03)")  # fmt: skip
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--bindings", type=int, default=200)
    parser.add_argument("--vnfs", type=int, default=1)
    parser.add_argument("--both-every", type=int, default=0,
                        help="every Nth binding redirects both ways (0: none)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="repeats per figure (median)")
    parser.add_argument("--runs-large", type=int, default=1, help="repeats at >= 50k pods")
    parser.add_argument("--events", type=int, default=1000, help="label events per scale")
    parser.add_argument("--events-large", type=int, default=200, help="label events at >= 50k")
    parser.add_argument("--nbctl-runs", type=int, default=1, help="repeats of (b), slow")
    parser.add_argument("--nbctl-max-pods", type=int, default=10_000,
                        help="no (b) above this many pods (minutes per run)")  # fmt: skip
    parser.add_argument("--northd-scale", type=int, default=10_000,
                        help="pods of the northd-on run (0: none)")  # fmt: skip
    parser.add_argument("--out", default="docs/benchmarks.md", help="Markdown report")
    parser.add_argument("--results", default="bench/results.json", help="JSON results")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib)")
    parser.add_argument("--report-only", action="store_true", help="re-render from --results")
    args = parser.parse_args(argv)

    out = Path(args.out)
    results_path = Path(args.results)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.report_only:
        data = json.loads(results_path.read_text())
    else:
        data = {"machine": machine_info(args.distribution), "started": time.strftime(
            "%Y-%m-%d %H:%M:%S %Z"), "measurements": [], "northd": []}  # fmt: skip

        def save() -> None:
            data["load_after"] = os.getloadavg()
            results_path.parent.mkdir(parents=True, exist_ok=True)
            results_path.write_text(json.dumps(data, indent=1) + "\n")

        steerings = [s.strip() for s in args.steering.split(",") if s.strip()]
        for pods in (int(p) for p in args.scales.split(",") if p.strip()):
            large = pods >= 50_000
            scale = Scale(pods, args.nodes, args.groups, args.bindings, args.vnfs,
                          args.both_every)  # fmt: skip
            for steering in steerings:
                data["measurements"].append(
                    measure_scale(
                        scale,
                        runs=args.runs_large if large else args.runs,
                        events=args.events_large if large else args.events,
                        steering=steering,
                        dist=args.distribution,
                        nbctl_runs=args.nbctl_runs if pods <= args.nbctl_max_pods else 0,
                        log=log,
                    )
                )
                save()
        if args.northd_scale:
            scale = Scale(args.northd_scale, args.nodes, args.groups, args.bindings, args.vnfs,
                          args.both_every)  # fmt: skip
            for steering in steerings:
                data["northd"].append(
                    measure_northd(scale, steering=steering, dist=args.distribution, log=log)
                )
                save()
        data["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        save()
    png = None if args.no_plot else out.with_suffix(".png")
    made = write_report(data, out, png)
    note = f" and {png}" if made else (" (no PNG: pip install matplotlib)" if png else "")
    print(f"wrote {out}{note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
