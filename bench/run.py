"""Measure one scale: the three ways side by side, cold plan, warm no-op, label latency, RSS.

Why the measurements are taken the way they are (details in ``docs/benchmarks.md``):

- The sandbox runs in a child process (:mod:`bench.sandbox_proc`); this process is the
  reconciler only, with its adapters connected once and kept open (the warm loop).
- Between runs our rows are removed with a raw transaction, then we poll the warm OVN adapter
  until its IDL cache has followed (it mirrors other writers asynchronously); that wait is not
  part of any figure, because in the real loop the next reconcile starts from a synced cache.
- Cold figures are fresh ``osc-gitops`` processes; their peak RSS comes from ``wait4``.
- "pod labelled -> committed": the label is PATCHed through the emulator's HTTP API, then the
  loop's pipeline (observe, plan, apply) runs and the clock stops when the OVN transaction has
  committed (the server answered); a raw ``select`` then checks the port is in its group.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from osc_gitops_sandbox import ovsdb_rpc

from bench import ways
from bench.sandbox_proc import SandboxProcess
from bench.scenario import Scale, pod_labels, write_manifests
from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compile import CompileOptions
from reconciler.core.model import Desired
from reconciler.core.plan import Change
from reconciler.core.planning import make_plan
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.pipeline import observe, reconcile
from reconciler.engine.sources import LocalSource
from reconciler.manifests.load import load_path

OWNER = "osc-gitops"
Log = Callable[[str], None]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def reset_owned(remote: str) -> None:
    """Remove every row we own (raw JSON-RPC), as if the NB had never seen osc-gitops."""
    owned = ["external_ids", "includes", ["map", [["osc.io/owner", OWNER]]]]
    sel = ovsdb_rpc.transact(
        remote,
        "OVN_Northbound",
        [
            {"op": "select", "table": t, "where": [owned], "columns": ["_uuid"]}
            for t in ("Logical_Switch_Port", "Logical_Router_Policy")
        ],
    )
    lsps = [r["_uuid"] for r in sel[0]["rows"]]
    lrps = [r["_uuid"] for r in sel[1]["rows"]]
    ops: list[dict[str, Any]] = [
        {"op": "delete", "table": "Port_Group", "where": [owned]},
    ]
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
    schema_tables = ovsdb_rpc.get_schema(remote, "OVN_Northbound")["tables"]
    for table in ("Network_Function_Group", "Network_Function"):
        if table in schema_tables:
            ops.append({"op": "delete", "table": table, "where": [owned]})
    ovsdb_rpc.transact(remote, "OVN_Northbound", ops, timeout=600)


def wait_adapter(ovn: OvnNorthbound, owned_rows: int, timeout: float = 120.0) -> None:
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
    """Run a fresh process; returns (wall seconds, exit code, peak RSS MiB).

    The peak RSS is the child's own ``VmHWM`` (written by :func:`_cli`'s wrapper at exit):
    ``ru_maxrss`` from ``wait4`` keeps the high-water mark from before ``exec``, i.e. this
    big benchmark process's, and reported ~860 MiB for every child whatever it did."""
    hwm = out.with_suffix(".hwm")
    hwm.unlink(missing_ok=True)
    with out.open("wb") as sink:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT,
                                env={**os.environ, "OSC_BENCH_HWM": str(hwm)})  # fmt: skip
        _pid, status, _usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        peak = int(hwm.read_text().split()[1]) / 1024.0  # "VmHWM:  123456 kB"
    except (OSError, IndexError, ValueError):
        peak = float("nan")
    return wall, proc.returncode, peak


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


def patch_labels(kube_url: str, namespace: str, name: str, labels: dict[str, str]) -> None:
    host, _, port = kube_url.removeprefix("http://").partition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            json.dumps({"metadata": {"labels": labels}}),
            {"Content-Type": "application/merge-patch+json"},
        )
        response = conn.getresponse()
        body = response.read()
        if response.status >= 300:
            raise RuntimeError(f"PATCH {namespace}/{name}: HTTP {response.status} {body[:200]!r}")
    finally:
        conn.close()


def measure_scale(
    scale: Scale,
    *,
    runs: int,
    events: int,
    northd: bool = False,
    steering: str = "router-policy",
    nb_schema: str = "installed",
    nbctl_runs: int = 2,
    log: Log = print,
) -> dict[str, Any]:
    """Everything for one scale, in one sandbox; returns plain data (medians and raw runs)."""
    result: dict[str, Any] = {
        "scale": scale.__dict__ | {"label": scale.label},
        "runs": runs,
        "events": events,
        "northd": northd,
        "steering": steering,
        "nb_schema": nb_schema,
        "nbctl_runs": min(runs, nbctl_runs),
    }
    with tempfile.TemporaryDirectory(prefix="oscb-") as tmp:
        workdir = Path(tmp)
        manifests = write_manifests(scale, workdir / "policies")
        t0 = time.perf_counter()
        with SandboxProcess(scale, workdir / "sb", nb_schema=nb_schema, northd=northd) as sb:
            info = sb.info
            log(f"[{scale.label}] sandbox up, seeded in {info.seed_seconds:.1f} s "
                f"(total {time.perf_counter() - t0:.1f} s)")  # fmt: skip
            result["seed_seconds"] = info.seed_seconds
            desired = load_path(manifests)
            options = CompileOptions(steering=steering)
            t0 = time.perf_counter()
            kube = KubeCluster(KubeSettings(kubeconfig=info.kubeconfig, timeout=120))
            ovn = OvnNorthbound.connect(OvnSettings(remote=info.nb_remote, timeout=300))
            result["connect_sync_seconds"] = time.perf_counter() - t0
            try:
                _measure(result, scale, desired, options, kube, ovn, sb, manifests, workdir,
                         runs, events, nbctl_runs, log)  # fmt: skip
            finally:
                ovn.close()
                kube.close()
    return result


def _measure(
    result: dict[str, Any],
    scale: Scale,
    desired: Desired,
    options: CompileOptions,
    kube: KubeCluster,
    ovn: OvnNorthbound,
    sb: SandboxProcess,
    manifests: Path,
    workdir: Path,
    runs: int,
    events: int,
    nbctl_runs: int,
    log: Log,
) -> None:
    remote = sb.info.nb_remote
    # First deploy (Kubernetes objects + OVN rows), once: not a target figure, reported.
    report = reconcile(desired, kube, ovn, options)
    result["first_deploy"] = {
        "seconds": report.seconds,
        "changes": report.plan.summary(),
        "kube_objects": len(report.plan.kube_changes()),
    }
    log(f"[{scale.label}] first deploy: {report.plan.summary()} {_fmt(report.seconds)}")
    owned_rows = len(ovn.read().owned)
    result["owned_ovn_rows"] = owned_rows
    counts: dict[str, int] = {}
    for change in report.plan.ovn_changes():
        counts[change.kind] = counts.get(change.kind, 0) + 1
    result["ovn_rows_by_table"] = counts
    result["port_refs"] = sum(
        len((c.after or {}).get("ports", ())) for c in report.plan.ovn_changes()
    )

    def fresh() -> list[Change]:
        reset_owned(remote)
        wait_adapter(ovn, 0)
        creates = make_plan(desired, observe(kube, ovn, options.instance), options).ovn_changes()
        return creates

    raw: list[dict[str, float]] = []
    nbctl: list[dict[str, float]] = []
    inproc: list[dict[str, float]] = []
    cold_apply: list[tuple[float, int, float]] = []
    cold_plan: list[tuple[float, int, float]] = []
    common = ["--ovn-nb", remote, "--kubeconfig", sb.info.kubeconfig, "--ovn-timeout", "300",
              "--steering", options.steering or "router-policy"]  # fmt: skip
    for r in range(runs):
        creates = fresh()
        raw.append(ways.apply_raw(remote, creates))
        wait_adapter(ovn, owned_rows)
        _converged(desired, kube, ovn, options, "raw JSON-RPC")

        if r < nbctl_runs:  # slow (minutes at 10k): fewer repeats, said in the table
            creates = fresh()
            nbctl.append(ways.apply_nbctl(remote, creates))
            wait_adapter(ovn, owned_rows)
            _converged(desired, kube, ovn, options, "ovn-nbctl")

        fresh()
        t0 = time.perf_counter()
        rep = reconcile(desired, kube, ovn, options)
        inproc.append({**rep.seconds, "total": time.perf_counter() - t0})

        reset_owned(remote)
        wait_adapter(ovn, 0)
        cold_apply.append(
            run_child(_cli("apply", str(manifests), *common, "-o", "json"), workdir / "apply.out")
        )
        if cold_apply[-1][1] != 0:
            raise RuntimeError(f"osc-gitops apply failed: {(workdir / 'apply.out').read_text()}")
        wait_adapter(ovn, owned_rows)
        cold_plan.append(
            run_child(_cli("plan", str(manifests), *common, "-o", "json"), workdir / "plan.out")
        )
        if cold_plan[-1][1] != 0:
            raise RuntimeError(f"osc-gitops plan (exit {cold_plan[-1][1]}) on a converged NB: "
                               f"{(workdir / 'plan.out').read_text()[:2000]}")  # fmt: skip
        last = nbctl[-1] if nbctl else {"total": float("nan"), "processes": 0.0}
        log(f"[{scale.label}] run {r + 1}/{runs}: raw {raw[-1]['total']:.2f} s, "
            f"nbctl {last['total']:.2f} s ({last['processes']:.0f} proc), "
            f"apply in-process {inproc[-1]['total']:.2f} s "
            f"(txn {inproc[-1].get('ovn_transaction', 0):.2f}), "
            f"cold apply {cold_apply[-1][0]:.2f} s, cold plan {cold_plan[-1][0]:.2f} s "
            f"({cold_plan[-1][2]:.0f} MiB)")  # fmt: skip

    warm = _warm_loop(scale, desired, kube, ovn, options, sb, manifests, workdir, runs,
                      events, log)  # fmt: skip
    noop, noop_parts = warm["noop"], warm["noop_parts"]
    latencies, phases = warm["latencies"], warm["phases"]
    result.update(
        raw={k: _median([x[k] for x in raw]) for k in raw[0]},
        nbctl={k: _median([x[k] for x in nbctl]) for k in nbctl[0]}
        if nbctl
        else {"total": float("nan"), "processes": 0.0},
        apply_inproc={k: _median([x.get(k, 0.0) for x in inproc]) for k in inproc[0]},
        cold_apply={
            "seconds": _median([c[0] for c in cold_apply]),
            "rss_mib": max(c[2] for c in cold_apply),
        },
        cold_plan={
            "seconds": _median([c[0] for c in cold_plan]),
            "rss_mib": max(c[2] for c in cold_plan),
        },
        noop={"seconds": _median(noop), "parts": noop_parts},
        label={
            "p50": _pct(latencies, 0.5),
            "p99": _pct(latencies, 0.99),
            "events": len(latencies),
            "phases_median": {k: _median([p[k] for p in phases]) for k in phases[0]},
        },
        raw_runs={
            "raw": [x["total"] for x in raw],
            "nbctl": [x["total"] for x in nbctl],
            "apply_inproc": [x["total"] for x in inproc],
            "apply_txn": [x.get("ovn_transaction", 0.0) for x in inproc],
            "cold_apply": [c[0] for c in cold_apply],
            "cold_plan": [c[0] for c in cold_plan],
            "noop": noop,
            "label": latencies,
        },
        noop_full={"seconds": _median(warm["noop_full"]), "runs": warm["noop_full"]},
        warm_process_rss_mib=_rss_now(),
    )


def _warm_loop(
    scale: Scale,
    desired: Desired,
    kube: KubeCluster,
    ovn: OvnNorthbound,
    options: CompileOptions,
    sb: SandboxProcess,
    manifests: Path,
    workdir: Path,
    runs: int,
    events: int,
    log: Log,
) -> dict[str, Any]:
    """The long-running loop as ``osc-gitops run`` builds it: :class:`KubeCache` (list+watch)
    in front of the API server, the warm OVN adapter, the incremental planner, a local folder.

    - no-op: ``reconcile_pass("periodic")`` on a converged world (must be "unchanged");
    - no-op with a full compile: the same after ``planner.reset()`` (what every
      ``--full-resync`` period costs);
    - pod labelled -> committed: the label is PATCHed at t0; the watch delivers it to the
      cache; ``reconcile_pass("pod")`` runs at once (no debounce); the clock stops at the OVN
      commit (``OvnNorthbound.last_commit``); a raw ``select`` checks the member.
    """
    from reconciler.adapters.kube.cache import KubeCache

    stop = threading.Event()
    cache = KubeCache(kube)
    cache.start(stop, options.instance)
    try:
        if not cache.wait_synced(300):
            raise RuntimeError("the Kubernetes cache did not sync")
        config = LoopConfig(options=options, status_file=workdir / "status.json",
                            full_resync=1e9, lag_retries=())  # fmt: skip
        loop = Loop(config, LocalSource(manifests), cache, ovn)
        first = loop.reconcile_pass("start")
        if first.result not in ("applied", "unchanged"):
            raise RuntimeError(f"warm loop start: {first.result} {first.error}")
        noop: list[float] = []
        for _ in range(max(runs, 5) * 4):
            t0 = time.perf_counter()
            res = loop.reconcile_pass("periodic")
            noop.append(time.perf_counter() - t0)
            if res.result != "unchanged":
                raise RuntimeError(f"no-op pass: {res.result} {res.changes} {res.error}")
        parts = {"cached_passes": float(loop.planner.last_mode == "cached")}
        noop_full: list[float] = []
        for _ in range(max(runs, 3)):
            loop.planner.reset()
            t0 = time.perf_counter()
            res = loop.reconcile_pass("periodic")
            noop_full.append(time.perf_counter() - t0)
            if res.result != "unchanged":
                raise RuntimeError(f"no-op full pass: {res.result} {res.error}")
        log(f"[{scale.label}] no-op warm: median {_median(noop) * 1000:.1f} ms, with a full "
            f"compile {_median(noop_full):.2f} s")  # fmt: skip

        latencies: list[float] = []
        phases: list[dict[str, float]] = []
        groups = desired.security_groups
        for k in range(events):
            n = (k * 7919 + 13) % scale.pods
            namespace, name = f"ns-{n % 20:02d}", f"pod-{n:06d}"
            node = f"node-{n % scale.nodes:03d}"
            group = _group_without(groups, pod_labels(n), (k * 31) % scale.groups, scale.groups)
            key, value = next(iter(dict(groups[group].spec.label_pairs()).items()))
            labels = {**pod_labels(n), key: value}
            t0 = time.perf_counter()
            patch_labels(sb.info.kube_url, namespace, name, labels)
            t1 = time.perf_counter()
            _wait_cache(cache, namespace, name, labels)
            t2 = time.perf_counter()
            res = loop.reconcile_pass("pod")
            if res.result != "applied" or ovn.last_commit is None or ovn.last_commit < t2:
                raise RuntimeError(f"label event {k}: {res.result} {res.error}")
            committed = ovn.last_commit
            latencies.append(committed - t0)
            phases.append({"patch": t1 - t0, "watch": t2 - t1, "pass_to_commit": committed - t2})
            pg = f"osc.{group.replace('-', '_')}.{node.replace('-', '_')}"
            _check_member(sb.info.nb_remote, pg, f"{namespace}_{name}", res)
            # Put the labels back so the next event starts from the seeded state (not timed).
            patch_labels(sb.info.kube_url, namespace, name, pod_labels(n))
            _wait_cache(cache, namespace, name, pod_labels(n))
            if loop.reconcile_pass("pod").result != "applied":
                raise RuntimeError(f"label event {k}: restoring the labels did not apply")
        return {"noop": noop, "noop_parts": parts, "noop_full": noop_full,
                "latencies": latencies, "phases": phases}  # fmt: skip
    finally:
        stop.set()


def _group_without(groups: Any, labels: dict[str, str], start: int, count: int) -> str:
    """The first group from ``start`` on that the pod is not yet a member of (at tiny scales
    a pod often is), so every event is a real membership change."""
    for i in range(count):
        name = f"sg-{(start + i) % count:03d}"
        if not set(groups[name].spec.label_pairs()) & set(labels.items()):
            return name
    raise RuntimeError("the pod is a member of every group")


def _wait_cache(cache: Any, namespace: str, name: str, labels: dict[str, str],
                timeout: float = 30.0) -> None:  # fmt: skip
    """Spin until the watch has delivered the change to the cache (part of the latency)."""
    deadline = time.perf_counter() + timeout
    while True:
        for pod in cache.list_pods():
            if pod.namespace == namespace and pod.name == name:
                if pod.labels == labels:
                    return
                break
        if time.perf_counter() > deadline:
            raise RuntimeError(f"the pod cache did not see {namespace}/{name} relabelled")
        time.sleep(0.0005)


def _check_member(remote: str, pg: str, lsp: str, the_plan: Any) -> None:
    res = ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "select", "table": "Port_Group", "where": [["name", "==", pg]],
         "columns": ["ports"]},
        {"op": "select", "table": "Logical_Switch_Port", "where": [["name", "==", lsp]],
         "columns": ["_uuid"]},
    ])  # fmt: skip
    ports = ovsdb_rpc.from_atom(res[0]["rows"][0]["ports"]) if res[0]["rows"] else []
    port_uuid = res[1]["rows"][0]["_uuid"][1]
    if port_uuid not in (ports if isinstance(ports, list) else [ports]):
        raise RuntimeError(
            f"after the labelled pod's reconcile, {lsp} is not in Port_Group {pg} ({the_plan})"
        )


def _converged(
    desired: Desired, kube: KubeCluster, ovn: OvnNorthbound, options: CompileOptions, how: str
) -> None:
    """The rows written another way must be exactly ours: a plan against them is empty."""
    the_plan = make_plan(desired, observe(kube, ovn, options.instance), options)
    if not the_plan.empty:
        first = the_plan.changes[0]
        raise RuntimeError(
            f"{how} wrote rows that differ from the target: {the_plan.summary()}, e.g. "
            f"{first.action} {first.kind} {first.key} {first.changed}"
        )


def _rss_now() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _fmt(seconds: dict[str, float]) -> str:
    return "(" + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()) + ")"
