"""Profile one phase of the pipeline at a given scale with cProfile (stdlib, no extra deps).

    .venv/bin/python -m bench.profile --pods 10000 --phase apply   # cold OVN transaction
    .venv/bin/python -m bench.profile --pods 10000 --phase noop    # warm no-op reconcile
    .venv/bin/python -m bench.profile --pods 10000 --phase observe|plan|connect

Prints the top functions by cumulative and by own time; ``--out FILE`` keeps the pstats file
(readable with ``python -m pstats`` or snakeviz).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import tempfile
import time
from pathlib import Path

from bench.run import reset_owned, wait_adapter
from bench.sandbox_proc import SandboxProcess
from bench.scenario import Scale, write_manifests
from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compile import CompileOptions
from reconciler.core.planning import make_plan
from reconciler.engine.pipeline import observe, reconcile
from reconciler.manifests.load import load_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--bindings", type=int, default=200)
    parser.add_argument("--phase", default="apply",
                        choices=("apply", "noop", "observe", "plan", "connect"))  # fmt: skip
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", default=None)
    parser.add_argument("--gc-freeze", action="store_true",
                        help="gc.freeze() before the phase (what the CLI and loop do)")  # fmt: skip
    args = parser.parse_args()
    scale = Scale(args.pods, args.nodes, args.groups, args.bindings)
    options = CompileOptions(steering="router-policy")
    with tempfile.TemporaryDirectory(prefix="oscp-") as tmp:
        manifests = write_manifests(scale, Path(tmp) / "policies")
        desired = load_path(manifests)
        with SandboxProcess(scale, Path(tmp) / "sb") as sb:
            settings = OvnSettings(remote=sb.info.nb_remote, timeout=300)
            kube = KubeCluster(KubeSettings(kubeconfig=sb.info.kubeconfig, timeout=120))
            prof = cProfile.Profile()
            if args.phase == "connect":
                prof.enable()
                ovn = OvnNorthbound.connect(settings)
                prof.disable()
            else:
                ovn = OvnNorthbound.connect(settings)
            try:
                if args.phase in ("noop", "observe", "plan"):
                    reconcile(desired, kube, ovn, options)
                    wait_adapter(ovn, len(ovn.read().owned))
                if args.phase == "apply":
                    reset_owned(sb.info.nb_remote)
                    the_plan = make_plan(desired, observe(kube, ovn, "osc-gitops"), options)
                    t0 = time.perf_counter()
                    prof.enable()
                    ovn.apply(the_plan.ovn_changes())
                    prof.disable()
                elif args.phase == "noop":
                    t0 = time.perf_counter()
                    prof.enable()
                    reconcile(desired, kube, ovn, options)
                    prof.disable()
                elif args.phase == "observe":
                    t0 = time.perf_counter()
                    prof.enable()
                    observe(kube, ovn, "osc-gitops")
                    prof.disable()
                elif args.phase == "plan":
                    observed = observe(kube, ovn, "osc-gitops")
                    if args.gc_freeze:
                        gc.freeze()
                    t0 = time.perf_counter()
                    prof.enable()
                    make_plan(desired, observed, options)
                    prof.disable()
                else:
                    t0 = time.perf_counter()
                print(f"{args.phase}: {time.perf_counter() - t0:.3f} s (under the profiler)")
            finally:
                ovn.close()
                kube.close()
    if args.out:
        prof.dump_stats(args.out)
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
        print(buf.getvalue())


if __name__ == "__main__":
    main()
