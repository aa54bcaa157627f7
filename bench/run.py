"""Measure one backend at one scale: the three ways side by side, cold apply and plan as fresh
processes, and the warm loop (in a process of its own: :mod:`bench.warm`).

Why the measurements are taken the way they are (details in ``docs/benchmarks.md``):

- The sandbox runs in a child process (:mod:`bench.sandbox_proc`), the warm loop in another,
  so each measured process holds only what osc-gitops itself holds.
- Between runs our rows are removed with a raw transaction (:func:`reset_owned`); the three
  ways then write the same change set, and a plan against what (a) and (b) wrote must be empty.
- Cold figures are fresh ``osc-gitops`` processes with default flags (only ``--ovn-nb`` and
  ``--kubeconfig``; the steering backend is passed for router-policy, whose NB also has the
  Network Function tables); their peak RSS is the child's own ``VmHWM``. The cold apply
  starts from an NB without our rows and a cluster without our VMs/NADs: a first apply.
- Every timing is stored with the 1-minute load average taken just before it (the machine may
  be shared), and every run is kept, not only the medians.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import distribution

from bench import ways
from bench.health import converge, full_creates, wait_healthy
from bench.sandbox_proc import SandboxProcess
from bench.scenario import Scale, write_manifests
from bench.warm import measure_warm
from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.ovn.oneshot import OvnOneShot
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.plan import Change
from reconciler.core.model.target import SVC_MONITOR_MARKER_PREFIX
from reconciler.core.planning.full import compile_plan
from reconciler.engine.pipeline import observe, reconcile
from reconciler.manifests.load import load_path

OWNER = "osc-gitops"
Log = Callable[[str], None]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load1() -> float:
    return os.getloadavg()[0]


def reset_owned(remote: str) -> None:
    """Remove every row we own (raw JSON-RPC), as if the NB had never seen osc-gitops: our
    ports, policies, groups (their ACLs go with them), functions (their health checks go with
    them) and the NB_Global options our marker claims."""
    owned = ["external_ids", "includes", ["map", [["osc.io/owner", OWNER]]]]
    schema_tables = ovsdb_rpc.get_schema(remote, "OVN_Northbound")["tables"]
    network_function = "Network_Function" in schema_tables
    sel = ovsdb_rpc.transact(
        remote,
        "OVN_Northbound",
        [
            {"op": "select", "table": t, "where": [owned], "columns": ["_uuid"]}
            for t in ("Logical_Switch_Port", "Logical_Router_Policy")
        ]
        + [{"op": "select", "table": "NB_Global", "where": [], "columns": ["_uuid", "options",
                                                                          "external_ids"]}],
    )  # fmt: skip
    lsps = [r["_uuid"] for r in sel[0]["rows"]]
    lrps = [r["_uuid"] for r in sel[1]["rows"]]
    ops: list[dict[str, Any]] = []
    if network_function:
        # An ACL still naming a group would keep the group referenced until the ACL is
        # collected, which the server checks only after the delete: clear it first.
        ops.append({"op": "update", "table": "ACL", "where": [owned],
                    "row": {"network_function_group": ["set", []]}})  # fmt: skip
    ops.append({"op": "delete", "table": "Port_Group", "where": [owned]})
    if lrps:
        ops.append(
            {
                "op": "mutate",
                "table": "Logical_Router",
                "where": [],
                "mutations": [["policies", "delete", ["set", lrps]]],
            }
        )
    if lsps:
        ops.append(
            {
                "op": "mutate",
                "table": "Logical_Switch",
                "where": [],
                "mutations": [["ports", "delete", ["set", lsps]]],
            }
        )
        ops.append({"op": "delete", "table": "Logical_Switch_Port", "where": [owned]})
    if network_function:
        for table in ("Network_Function_Group", "Network_Function"):
            ops.append({"op": "delete", "table": table, "where": [owned]})
    for row in sel[2]["rows"]:
        ext = dict(ovsdb_rpc.from_atom(row["external_ids"]))
        marker = f"{SVC_MONITOR_MARKER_PREFIX}{OWNER}"
        if marker in ext:
            claimed = [k for k in ext[marker].split(",") if k]
            ops.append({"op": "mutate", "table": "NB_Global", "where": [],
                        "mutations": [["options", "delete", ["set", claimed]],
                                      ["external_ids", "delete", ["set", [marker]]]]})  # fmt: skip
    ovsdb_rpc.transact(remote, "OVN_Northbound", ops, timeout=600)


def wait_adapter(ovn: Any, owned_rows: int, timeout: float = 120.0) -> None:
    """Poll until the warm adapter's cache holds exactly ``owned_rows`` rows of ours."""
    deadline = time.monotonic() + timeout
    while True:
        count = len(ovn.read().owned)
        if count == owned_rows:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the OVN adapter still sees {count} owned rows, want {owned_rows}")
        time.sleep(0.01)


def run_child(argv: list[str], out: Path) -> tuple[float, int, float]:
    """Run a fresh process; returns (wall seconds, exit code, peak RSS MiB)."""
    measured = run_measured(argv, out)
    return measured["seconds"], measured["code"], measured["rss_mib"]


def run_measured(argv: list[str], out: Path) -> dict[str, Any]:
    """Run a fresh process; returns its wall seconds, exit code, peak RSS (MiB) and CPU seconds
    (user + system: on a loaded machine the wall time stretches, the CPU time much less).

    The peak RSS is the child's own ``VmHWM`` (written by :func:`_cli`'s wrapper at exit):
    ``ru_maxrss`` from ``wait4`` keeps the high-water mark from before ``exec``, i.e. this
    big benchmark process's, and reported ~860 MiB for every child whatever it did."""
    hwm = out.with_suffix(".hwm")
    hwm.unlink(missing_ok=True)
    with out.open("wb") as sink:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT,
                                env={**os.environ, "OSC_BENCH_HWM": str(hwm)})  # fmt: skip
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        peak = int(hwm.read_text().split()[1]) / 1024.0  # "VmHWM:  123456 kB"
    except (OSError, IndexError, ValueError):
        peak = float("nan")
    return {"seconds": wall, "code": proc.returncode, "rss_mib": peak,
            "cpu_seconds": usage.ru_utime + usage.ru_stime}  # fmt: skip


_CHILD = """
import os, sys
from reconciler.cli.app import main
try:
    code = main(sys.argv[1:])
finally:
    target = os.environ.get("OSC_BENCH_HWM")
    if target:
        with open("/proc/self/status") as status, open(target, "w") as sink:
            sink.write(next(line for line in status if line.startswith("VmHWM:")))
sys.exit(code)
"""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", _CHILD, *args]


def measure_scale(
    scale: Scale,
    *,
    runs: int,
    events: int,
    steering: str = "network-function",
    dist: str = "sid",
    nbctl_runs: int = 1,
    log: Log = print,
) -> dict[str, Any]:
    """Everything for one backend at one scale, in one sandbox; returns plain data."""
    result: dict[str, Any] = {
        "scale": scale.__dict__ | {"label": scale.label},
        "steering": steering,
        "distribution": dist,
        "runs": runs,
        "nbctl_runs": min(runs, nbctl_runs),
    }
    tag = f"[{steering} {scale.label}]"
    with tempfile.TemporaryDirectory(prefix="oscb-") as tmp:
        workdir = Path(tmp)
        manifests = write_manifests(scale, workdir / "policies")
        t0 = time.perf_counter()
        with SandboxProcess(scale, workdir / "sb", distribution=dist) as sb:
            log(f"{tag} sandbox up, seeded in {sb.info.seed_seconds:.1f} s "
                f"(total {time.perf_counter() - t0:.1f} s)")  # fmt: skip
            result["seed_seconds"] = sb.info.seed_seconds
            desired = load_path(manifests)
            options = CompileOptions(steering=steering)
            kube = KubeCluster(KubeSettings(kubeconfig=sb.info.kubeconfig, timeout=120))
            try:
                _measure(result, scale, desired, options, kube, sb, manifests, workdir,
                         runs, nbctl_runs, dist, tag, log)  # fmt: skip
                log(f"{tag} warm loop: {events} label events ...")
                warm = measure_warm(
                    scale,
                    manifests,
                    workdir,
                    nb_remote=sb.info.nb_remote,
                    kubeconfig=sb.info.kubeconfig,
                    kube_url=sb.info.kube_url,
                    steering=steering,
                    events=events,
                )
                result["warm"] = warm
                label, rss = warm["label"], warm["rss_samples"]
                log(
                    f"{tag} warm: no-op {median(warm['noop']) * 1000:.1f} ms, label p50 "
                    f"{label['p50'] * 1000:.0f} ms p99 {label['p99'] * 1000:.0f} ms, "
                    f"RSS {rss[0][1]:.0f} -> {warm['rss_end_mib']:.0f} MiB"
                )
                first = warm.get("label_first") or {}
                if first.get("events"):
                    log(
                        f"{tag} warm: {first['events']} of the label events made the pod its "
                        f"group's first member on its node: p50 {first['p50'] * 1000:.0f} ms "
                        f"p99 {first['p99'] * 1000:.0f} ms"
                    )
            finally:
                kube.close()
    return result


def measure_northd(scale: Scale, *, steering: str, dist: str, log: Log = print) -> dict[str, Any]:
    """Informative: a cold apply with ovn-northd running, then how long northd takes to turn
    the rows into the southbound's logical flows (``ovn-nbctl --wait=sb sync``)."""
    with tempfile.TemporaryDirectory(prefix="oscn-") as tmp:
        workdir = Path(tmp)
        manifests = write_manifests(scale, workdir / "policies")
        with SandboxProcess(scale, workdir / "sb", distribution=dist, northd=True) as sb:
            sb.call("northd_sync")
            loads = [load1()]
            cold = run_child(_cli("apply", str(manifests), *_flags(sb, steering)),
                             workdir / "apply.out")  # fmt: skip
            if cold[1] != 0:
                raise RuntimeError(f"apply with northd: {(workdir / 'apply.out').read_text()}")
            loads.append(load1())
            northd = sb.call("northd_sync")
            result = {
                "steering": steering,
                "distribution": dist,
                "scale": scale.label,
                "cold_apply_seconds": cold[0],
                "northd_seconds": northd,
                "loads": loads,
            }
            log(f"[northd {steering} {scale.label}] apply {cold[0]:.2f} s, then northd "
                f"{northd:.2f} s")  # fmt: skip
            return result


def _flags(sb: SandboxProcess, steering: str) -> list[str]:
    """Default flags: the NB and the kubeconfig; the backend only when it is not the
    default one (the 26.03 NB has both)."""
    flags = ["--ovn-nb", sb.info.nb_remote, "--kubeconfig", sb.info.kubeconfig]
    return flags if steering == "network-function" else [*flags, "--steering", steering]


def _measure(
    result: dict[str, Any],
    scale: Scale,
    desired: Desired,
    options: CompileOptions,
    kube: KubeCluster,
    sb: SandboxProcess,
    manifests: Path,
    workdir: Path,
    runs: int,
    nbctl_runs: int,
    dist: str,
    tag: str,
    log: Log,
) -> None:
    remote = sb.info.nb_remote
    settings = OvnSettings(remote=remote, timeout=300)
    oneshot = OvnOneShot(settings)
    # First deploy (Kubernetes objects + OVN rows), once: not a target figure, reported. The
    # steering onto the new VNF instances waits for their health (bench.health): a second apply.
    reports = converge(lambda: reconcile(desired, kube, oneshot, options), remote)
    report = reports[0]
    gated = len(reports) > 1  # steering waits for health (issue 22): two cold processes
    changes = [c for rep in reports for c in rep.plan.changes]
    result["first_deploy"] = {"seconds": report.seconds, "changes": report.plan.summary(),
                              "kube_objects": len(report.plan.kube_changes()),
                              "applies": len(reports)}  # fmt: skip
    then = f", then {reports[-1].plan.summary()} once healthy" if len(reports) > 1 else ""
    log(f"{tag} first deploy: {report.plan.summary()} {_fmt(report.seconds)}{then}")
    counts: dict[str, int] = {}
    for change in changes:
        if change.is_ovn:
            counts[change.kind] = counts.get(change.kind, 0) + 1
    result["ovn_rows_by_table"] = counts
    result["owned_ovn_rows"] = len(oneshot.read().owned)
    result["port_refs"] = sum(len((c.after or {}).get("ports", ())) for c in changes if c.is_ovn)
    nbctl_tool = distribution(dist)

    def fresh() -> list[Change]:
        """Our rows gone; the creates of one transaction writing them all (before health
        gating: what one apply wrote before issue 22)."""
        reset_owned(remote)
        observed = observe(kube, oneshot, options.instance)
        return list(whole_plan(desired, observed, options).ovn_changes())

    raw: list[dict[str, float]] = []
    nbctl: list[dict[str, float]] = []
    inproc: list[dict[str, float]] = []
    cold_apply: list[dict[str, float]] = []
    cold_steering: list[dict[str, float]] = []
    cold_plan: list[dict[str, float]] = []
    for r in range(runs):
        creates = fresh()
        load = load1()
        raw.append({**ways.apply_raw(remote, creates), "load": load})
        _converged(desired, kube, oneshot, options, "raw JSON-RPC")

        if r < nbctl_runs:  # slow (minutes at 10k): fewer repeats, said in the table
            creates = fresh()
            load = load1()
            nbctl.append({**ways.apply_nbctl(remote, creates, nbctl_tool.command("ovn-nbctl"),
                                             nbctl_tool.env(workdir), options.steering or ""),
                          "load": load})  # fmt: skip
            _converged(desired, kube, oneshot, options, "ovn-nbctl")

        fresh()
        load = load1()
        t0 = time.perf_counter()
        rep = reconcile(desired, kube, oneshot, options)
        inproc.append({**rep.seconds, "total": time.perf_counter() - t0, "load": load})
        converge(lambda: reconcile(desired, kube, oneshot, options), remote)

        reset_owned(remote)
        sb.call("delete_owned_kube")
        flags = _flags(sb, options.steering or "")
        load = load1()
        run = run_measured(_cli("apply", str(manifests), *flags), workdir / "apply.out")
        if run.pop("code") != 0:
            raise RuntimeError(f"osc-gitops apply failed: {(workdir / 'apply.out').read_text()}")
        cold_apply.append({**run, "load": load})
        if gated:  # the steering held until OVN reports the new VNFs healthy: the next apply
            healthy = wait_healthy(remote)
            load = load1()
            run = run_measured(_cli("apply", str(manifests), *flags), workdir / "steer.out")
            if run.pop("code") != 0:
                raise RuntimeError(
                    f"osc-gitops apply failed: {(workdir / 'steer.out').read_text()}"
                )
            cold_steering.append({**run, "load": load, "health_wait_seconds": healthy,
                                  "changes": _changes_applied(workdir / "steer.out")})  # fmt: skip
        load = load1()
        run = run_measured(_cli("plan", str(manifests), *flags), workdir / "plan.out")
        if (code := run.pop("code")) != 0:
            raise RuntimeError(f"osc-gitops plan (exit {code}) on a converged NB: "
                               f"{(workdir / 'plan.out').read_text()[-2000:]}")  # fmt: skip
        cold_plan.append({**run, "load": load})
        last = nbctl[-1] if nbctl else {"total": float("nan"), "processes": 0.0}
        log(f"{tag} run {r + 1}/{runs} (load {load:.2f}): raw {raw[-1]['total']:.2f} s, "
            f"nbctl {last['total']:.2f} s ({last['processes']:.0f} proc), "
            f"apply in-process {inproc[-1]['total']:.2f} s "
            f"(txn {inproc[-1].get('ovn_transaction', 0):.2f}), "
            f"cold apply {cold_apply[-1]['seconds']:.2f} s ({cold_apply[-1]['rss_mib']:.0f} "
            f"MiB), cold plan {cold_plan[-1]['seconds']:.2f} s "
            f"({cold_plan[-1]['rss_mib']:.0f} MiB)")  # fmt: skip

    def med(items: list[dict[str, float]]) -> dict[str, float]:
        return {k: median([x.get(k, 0.0) for x in items]) for k in items[0]} if items else {}

    def cold(items: list[dict[str, float]]) -> dict[str, float]:
        return {
            "seconds": median([c["seconds"] for c in items]),
            "cpu_seconds": median([c["cpu_seconds"] for c in items]),
            "rss_mib": max(c["rss_mib"] for c in items),
        }

    result.update(
        raw=med(raw),
        nbctl=med(nbctl) if nbctl else {"total": float("nan"), "processes": 0.0},
        apply_inproc=med(inproc),
        cold_apply=cold(cold_apply),
        cold_steering={
            **cold(cold_steering),
            "changes": median([c["changes"] for c in cold_steering]),
        }
        if cold_steering
        else {},
        cold_plan=cold(cold_plan),
        raw_runs={
            "raw": raw,
            "nbctl": nbctl,
            "apply_inproc": inproc,
            "cold_apply": cold_apply,
            "cold_steering": cold_steering,
            "cold_plan": cold_plan,
        },
    )


def groups_active(remote: str) -> bool:
    """Wait until every Network_Function_Group of ours is active (northd's verdict, or the
    sandbox playing it); ``False`` when there is none (router-policy, an NB before 26.03)."""
    from bench.health import inactive_groups

    if not _owned_groups(remote):
        return False
    wait_healthy(remote)
    return not inactive_groups(remote)


def _owned_groups(remote: str) -> int:
    if "Network_Function_Group" not in ovsdb_rpc.get_schema(remote, "OVN_Northbound")["tables"]:
        return 0
    owned = ["external_ids", "includes", ["map", [["osc.io/owner", OWNER]]]]
    return len(ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "select", "table": "Network_Function_Group", "where": [owned],
         "columns": ["_uuid"]},
    ])[0]["rows"])  # fmt: skip


def whole_plan(desired: Desired, observed: Any, options: CompileOptions) -> Any:
    """The plan of every row, the steering held for health included (the raw and
    ``ovn-nbctl`` ways write all of it at once)."""
    return full_creates(compile_plan(desired, observed, options))


def _converged(
    desired: Desired, kube: KubeCluster, ovn: Any, options: CompileOptions, how: str
) -> None:
    """The rows written another way must be exactly ours: a plan against them is empty."""
    the_plan = whole_plan(desired, observe(kube, ovn, options.instance), options)
    if not the_plan.empty:
        first = the_plan.changes[0]
        raise RuntimeError(
            f"{how} wrote rows that differ from the target: {the_plan.summary()}, e.g. "
            f"{first.action} {first.kind} {first.key} {first.changed}"
        )


def _changes_applied(out: Path) -> float:
    """``Apply complete: N change(s) applied`` in an apply's output -> N (0: nothing to do)."""
    text = out.read_text(errors="replace")
    marker = "Apply complete: "
    return float(text.split(marker, 1)[1].split(" ", 1)[0]) if marker in text else 0.0


def _fmt(seconds: dict[str, float]) -> str:
    return "(" + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()) + ")"
