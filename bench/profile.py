"""Profile one phase of the pipeline at a given scale with cProfile (stdlib, no extra deps).

    .venv/bin/python -m bench.profile --pods 10000 --phase cli-apply  # `osc-gitops apply`, cold
    .venv/bin/python -m bench.profile --pods 10000 --phase cli-plan   # `osc-gitops plan`, cold
    .venv/bin/python -m bench.profile --pods 10000 --phase apply      # the OVN transaction only
    .venv/bin/python -m bench.profile --pods 10000 --phase noop       # warm no-op reconcile
    .venv/bin/python -m bench.profile --pods 10000 --phase observe|plan|connect
    ... --steering network-function --vnfs 1 --distribution sid      # the default backend
    .venv/bin/python -m bench.profile --pods 100000 --nodes 1000 --phase agent-apply
                                      # interconnect (bench.zones' world): agent-apply|
                                      # agent-plan|central-apply|central-plan

Every thread is profiled (:class:`AllThreads`): the OVN adapter's connection thread commits the
transaction and parses the server's updates, which a main-thread-only profile would not show.
The ``cli-*`` phases run ``reconciler.cli.app.main`` in this process against a sandbox in a
child process (the same command line as the benchmark's fresh processes), so connect, read,
compile, diff, transaction and verify are all in one profile; they print the process's CPU time
and the load average next to the wall time (the machine may be shared).

Prints the top functions by cumulative and by own time, per thread; ``--out FILE`` keeps the
merged pstats file (readable with ``python -m pstats`` or snakeviz).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import resource
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from bench.run import reset_owned, wait_adapter
from bench.sandbox_proc import SandboxProcess
from bench.scenario import Scale, write_manifests
from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.planning.full import make_plan
from reconciler.engine.pipeline import observe, reconcile
from reconciler.manifests.load import load_path

PHASES = ("cli-apply", "cli-plan", "apply", "noop", "observe", "plan", "connect")
ZONE_PHASES = ("agent-apply", "agent-plan", "central-apply", "central-plan")


class AllThreads:
    """cProfile of the calling thread and of every thread started while it is enabled.

    ``threading.setprofile`` installs a hook in each new thread; on its first event the hook
    replaces itself with a fresh ``cProfile.Profile`` of that thread. A thread's profile ends
    with the thread (the OVN adapter's connection thread ends when the adapter is closed).
    """

    def __init__(self) -> None:
        self.main = cProfile.Profile()
        self.threads: list[tuple[str, cProfile.Profile]] = []

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        prof = cProfile.Profile()
        self.threads.append((threading.current_thread().name, prof))
        prof.enable()

    def enable(self) -> None:
        threading.setprofile(self._hook)
        self.main.enable()

    def disable(self) -> None:
        self.main.disable()
        threading.setprofile(None)  # type: ignore[arg-type,unused-ignore]

    def report(self, top: int, out: str | None) -> str:
        buf = io.StringIO()
        every = [("main", self.main), *self.threads]
        for name, prof in every:
            stats = pstats.Stats(prof, stream=buf)
            if not stats.stats:  # type: ignore[attr-defined]
                continue
            buf.write(f"\n===== thread {name}: {stats.total_tt:.2f} s profiled "  # type: ignore[attr-defined]
                      "=====\n")  # fmt: skip
            for key in ("cumulative", "tottime"):
                stats.sort_stats(key).print_stats(top)
        if out:
            merged = pstats.Stats(self.main)
            for _name, prof in self.threads:
                merged.add(prof)
            merged.dump_stats(out)
        return buf.getvalue()


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--bindings", type=int, default=200)
    parser.add_argument("--vnfs", type=int, default=1)
    parser.add_argument("--both-every", type=int, default=0,
                        help="every Nth binding redirects both ways (0: none)")  # fmt: skip
    parser.add_argument("--steering", default="network-function",
                        choices=("router-policy", "network-function"))  # fmt: skip
    parser.add_argument("--distribution", default="sid", choices=("host", "sid"),
                        help="OVN of the sandbox: host 23.03, sid 26.03")  # fmt: skip
    parser.add_argument("--phase", default="cli-apply", choices=PHASES + ZONE_PHASES)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--cli-args", default="", help="extra flags for the cli-* phases")
    parser.add_argument("--out", default=None)
    parser.add_argument("--gc-freeze", action="store_true",
                        help="gc.freeze() before the phase (what the CLI and loop do)")  # fmt: skip
    args = parser.parse_args()
    scale = Scale(args.pods, args.nodes, args.groups, args.bindings, args.vnfs, args.both_every)
    options = CompileOptions(steering=args.steering)
    prof = AllThreads()
    if args.phase in ZONE_PHASES:
        wall, cpu = _profile_zones(args, scale, prof)
        print(f"{args.phase}: {wall:.3f} s wall, {cpu:.3f} s CPU (under the profiler); load "
              f"average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
        print(prof.report(args.top, args.out))
        return
    with tempfile.TemporaryDirectory(prefix="oscp-") as tmp:
        manifests = write_manifests(scale, Path(tmp) / "policies")
        with SandboxProcess(scale, Path(tmp) / "sb", distribution=args.distribution) as sb:
            remote = sb.info.nb_remote
            if args.phase.startswith("cli-"):
                extra = args.cli_args.split()
                wall, cpu = _profile_cli(args.phase[4:], prof, sb, manifests, options, extra)
            else:
                wall, cpu = _profile_phase(args.phase, prof, remote, sb, manifests, options, args)
    load = os.getloadavg()
    print(f"{args.phase}: {wall:.3f} s wall, {cpu:.3f} s CPU of this process (under the "
          f"profiler); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    print(prof.report(args.top, args.out))


def _profile_zones(args: argparse.Namespace, scale: Scale, prof: AllThreads) -> tuple[float, float]:
    """``osc-gitops apply|plan`` of a node agent or the central owner, in this process, in
    ``bench.zones``' world (every node and pod in the API, one zone NB: ``node-000``'s). The
    agent's plan runs against its converged zone, the central plan after a central apply."""
    import contextlib

    from osc_gitops_sandbox.ovn.zones import ZonedCluster

    from bench.scenario import node_name
    from bench.zones import build
    from reconciler.cli.app import main as cli_main

    scale = Scale(scale.pods, scale.nodes, scale.groups, scale.bindings, args.vnfs, 0)
    node = node_name(0)
    with tempfile.TemporaryDirectory(prefix="oscp-") as tmp:
        manifests = write_manifests(scale, Path(tmp) / "policies")
        with ZonedCluster(Path(tmp) / "z", distribution="sid", kubevirt=False) as zones:
            build(zones, scale, [node])
            who, command = args.phase.split("-")
            flags = ["--kubeconfig", zones.kubeconfig]
            flags += (["--node", node, "--ovn-nb", zones.nb_remote(node)] if who == "agent"
                      else ["--kubernetes-only"])  # fmt: skip
            if command == "plan" and cli_main(["apply", str(manifests), *flags]) != 0:
                raise SystemExit("the apply before the plan failed")
            sink = io.StringIO()
            t0, c0 = time.perf_counter(), _cpu()
            prof.enable()
            try:
                with contextlib.redirect_stdout(sink):
                    code = cli_main([command, str(manifests), *flags])
            finally:
                prof.disable()
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            if code not in (0, 2):
                raise SystemExit(f"osc-gitops {command} exited {code}")
    return wall, cpu


def _profile_cli(
    command: str,
    prof: AllThreads,
    sb: SandboxProcess,
    manifests: Path,
    options: CompileOptions,
    extra: list[str],
) -> tuple[float, float]:
    from reconciler.cli.app import main as cli_main

    # Default flags, as the benchmark's fresh processes (text output: -o json renders every
    # change of a 40,000-row plan with the pure-Python indenting encoder).
    argv = ["--ovn-nb", sb.info.nb_remote, "--kubeconfig", sb.info.kubeconfig,
            "--steering", options.steering or "network-function"]  # fmt: skip
    if command == "plan":  # against the converged NB
        import contextlib as quiet

        from bench.health import wait_healthy

        # Twice: the first apply holds the steering until OVN reports the VNFs healthy
        # (issue 22), the second switches it on once they are.
        for _ in range(2):
            with quiet.redirect_stdout(io.StringIO()):
                code = cli_main(["apply", str(manifests), *argv, "--ovn-timeout", "300"])
            if code != 0:
                raise SystemExit(f"the apply before the plan failed ({code})")
            wait_healthy(sb.info.nb_remote)
    else:
        reset_owned(sb.info.nb_remote)
        sb.call("delete_owned_kube")
    import contextlib

    sink = io.StringIO()
    t0, c0 = time.perf_counter(), _cpu()
    prof.enable()
    try:
        with contextlib.redirect_stdout(sink):
            code = cli_main([command, str(manifests), *argv, *extra])
    finally:
        prof.disable()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if code != 0:
        raise SystemExit(f"osc-gitops {command} exited {code}")
    return wall, cpu


def _profile_phase(
    phase: str,
    prof: AllThreads,
    remote: str,
    sb: SandboxProcess,
    manifests: Path,
    options: CompileOptions,
    args: argparse.Namespace,
) -> tuple[float, float]:
    desired = load_path(manifests)
    settings = OvnSettings(remote=remote, timeout=300)
    kube = KubeCluster(KubeSettings(kubeconfig=sb.info.kubeconfig, timeout=120))
    prof.enable() if phase in ("connect", "apply") else None  # threads start at connect
    t0, c0 = time.perf_counter(), _cpu()
    ovn = OvnNorthbound.connect(settings)
    if phase == "connect":
        prof.disable()
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
    try:
        if phase in ("noop", "observe", "plan"):
            reconcile(desired, kube, ovn, options)
            wait_adapter(ovn, len(ovn.read().owned))
        if phase == "apply":
            prof.disable()
            reset_owned(remote)
            wait_adapter(ovn, 0)
            the_plan = make_plan(desired, observe(kube, ovn, options.instance), options)
            t0, c0 = time.perf_counter(), _cpu()
            prof.main.enable()
            ovn.apply(the_plan.ovn_changes())
            prof.main.disable()
        elif phase == "noop":
            t0, c0 = time.perf_counter(), _cpu()
            prof.enable()
            reconcile(desired, kube, ovn, options)
            prof.disable()
        elif phase == "observe":
            t0, c0 = time.perf_counter(), _cpu()
            prof.enable()
            observe(kube, ovn, options.instance)
            prof.disable()
        elif phase == "plan":
            observed = observe(kube, ovn, options.instance)
            if args.gc_freeze:
                gc.freeze()
            t0, c0 = time.perf_counter(), _cpu()
            prof.enable()
            make_plan(desired, observed, options)
            prof.disable()
        if phase != "connect":
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
    finally:
        ovn.close()
        kube.close()
    return wall, cpu


if __name__ == "__main__":
    main()
