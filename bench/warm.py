"""The warm loop, measured in a process of its own (so its RSS is the loop's, not the bench's).

``osc-gitops run`` as it builds itself: :class:`KubeCache` (list, then watch) in front of the
API server, the IDL-backed :class:`OvnNorthbound`, the incremental planner, a local folder
(``--full-resync`` out of reach so the figures show the event path). In order:

- start: connect + initial sync of a converged NB, and the first pass (a full compile);
- no-op: ``reconcile_pass("periodic")`` on a converged world, which must be "unchanged";
- a pass with a full compile (``planner.reset()`` first: what each ``--full-resync`` costs);
- pod labelled -> committed: the label is PATCHed at t0 (the pod joins a group it was not
  in); the watch delivers it to the cache; ``reconcile_pass("pod")`` runs at once (debounce
  excluded); the clock stops at ``OvnNorthbound.last_commit``; a raw ``select`` checks the
  member; the labels are put back (not timed). Events where the pod is its group's first
  member on its node (no Port_Group there yet: the pass creates it and its ACLs, issue 20) are
  also reported apart (``label_first``). The process's RSS is sampled every 100 events,
  so growth over the events shows.

:func:`measure_warm` runs all of it in a spawned child and returns plain data.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc

from bench.scenario import Scale


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def measure_warm(
    scale: Scale,
    manifests: Path,
    workdir: Path,
    *,
    nb_remote: str,
    kubeconfig: str,
    kube_url: str,
    steering: str,
    events: int,
    noops: int = 20,
    fulls: int = 3,
) -> dict[str, Any]:
    """Run :func:`_child` in a spawned process; returns its results."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    args = (child, scale, str(manifests), str(workdir), nb_remote, kubeconfig, kube_url,
            steering, events, noops, fulls)  # fmt: skip
    proc = ctx.Process(target=_child, args=args, name="osc-bench-warm")
    proc.start()
    child.close()
    try:
        if not parent.poll(3600):
            raise RuntimeError("the warm-loop process gave no result within an hour")
        status, value = parent.recv()
    except EOFError:
        raise RuntimeError(f"the warm-loop process died (exit code {proc.exitcode})") from None
    finally:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
    if status != "ok":
        raise RuntimeError(f"warm loop: {value}")
    result: dict[str, Any] = value
    return result


def _child(conn: Any, *args: Any) -> None:
    try:
        conn.send(("ok", _measure(*args)))
    except Exception as exc:  # reported to the parent, which raises
        import traceback

        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


def _measure(
    scale: Scale,
    manifests: str,
    workdir: str,
    nb_remote: str,
    kubeconfig: str,
    kube_url: str,
    steering: str,
    events: int,
    noops: int,
    fulls: int,
) -> dict[str, Any]:
    from bench.scenario import pod_labels
    from reconciler.adapters.kube.cache import KubeCache
    from reconciler.adapters.kube.client import KubeCluster, KubeSettings
    from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
    from reconciler.core.compiling.compile import CompileOptions
    from reconciler.engine.loop import Loop, LoopConfig
    from reconciler.engine.sources import LocalSource
    from reconciler.manifests.load import load_path

    out: dict[str, Any] = {"rss_start_mib": rss_mib()}
    options = CompileOptions(steering=steering)
    started = time.perf_counter()
    kube = KubeCluster(KubeSettings(kubeconfig=kubeconfig, timeout=120))
    ovn = OvnNorthbound.connect(OvnSettings(remote=nb_remote, timeout=300))
    out["connect_sync_seconds"] = time.perf_counter() - started
    stop = threading.Event()
    cache = KubeCache(kube)
    cache.start(stop, options.instance)
    try:
        if not cache.wait_synced(300):
            raise RuntimeError("the Kubernetes cache did not sync")
        config = LoopConfig(options=options, status_file=Path(workdir) / "status.json",
                            full_resync=1e9, lag_retries=())  # fmt: skip
        loop = Loop(config, LocalSource(Path(manifests)), cache, ovn)
        started = time.perf_counter()
        first = loop.reconcile_pass("start")
        out["first_pass_seconds"] = time.perf_counter() - started
        if first.result not in ("applied", "unchanged"):
            raise RuntimeError(f"warm loop start: {first.result} {first.error}")
        noop: list[float] = []
        for _ in range(noops):
            t0 = time.perf_counter()
            res = loop.reconcile_pass("periodic")
            noop.append(time.perf_counter() - t0)
            if res.result != "unchanged":
                raise RuntimeError(f"no-op pass: {res.result} {res.changes} {res.error}")
        full: list[float] = []
        for _ in range(fulls):
            loop.planner.reset()
            t0 = time.perf_counter()
            res = loop.reconcile_pass("periodic")
            full.append(time.perf_counter() - t0)
            if res.result != "unchanged":
                raise RuntimeError(f"no-op full pass: {res.result} {res.error}")
        desired_groups = load_path(Path(manifests)).security_groups  # to pick the labels
        out.update(noop=noop, noop_full=full, rss_before_events_mib=rss_mib())
        latencies: list[float] = []
        first_member: list[float] = []
        phases: list[dict[str, float]] = []
        rss_samples: list[tuple[int, float]] = [(0, rss_mib())]
        for k in range(events):
            n = (k * 7919 + 13) % scale.pods
            namespace, name = f"ns-{n % 20:02d}", f"pod-{n:06d}"
            node = f"node-{n % scale.nodes:03d}"
            group = group_without(desired_groups, pod_labels(n), (k * 31) % scale.groups,
                                  scale.groups)  # fmt: skip
            key, value = next(iter(dict(desired_groups[group].spec.label_pairs()).items()))
            labels = {**pod_labels(n), key: value}
            pg = f"osc.{group.replace('-', '_')}.{node.replace('-', '_')}"
            is_first = not port_group_exists(nb_remote, pg)
            t0 = time.perf_counter()
            patch_labels(kube_url, namespace, name, labels)
            t1 = time.perf_counter()
            wait_cache(cache, namespace, name, labels)
            t2 = time.perf_counter()
            res = loop.reconcile_pass("pod")
            if res.result != "applied" or ovn.last_commit is None or ovn.last_commit < t2:
                raise RuntimeError(f"label event {k}: {res.result} {res.error}")
            committed = ovn.last_commit
            latencies.append(committed - t0)
            if is_first:
                first_member.append(committed - t0)
            phases.append({"patch": t1 - t0, "watch": t2 - t1, "pass_to_commit": committed - t2})
            check_member(nb_remote, pg, f"{namespace}_{name}", res)
            patch_labels(kube_url, namespace, name, pod_labels(n))
            wait_cache(cache, namespace, name, pod_labels(n))
            if loop.reconcile_pass("pod").result != "applied":
                raise RuntimeError(f"label event {k}: restoring the labels did not apply")
            if (k + 1) % 100 == 0 or k + 1 == events:
                rss_samples.append((k + 1, rss_mib()))
        out.update(
            label={
                "p50": _pct(latencies, 0.5),
                "p99": _pct(latencies, 0.99),
                "events": len(latencies),
                "runs": latencies,
                "phases_median": {
                    key: statistics.median(p[key] for p in phases) for key in phases[0]
                }
                if phases
                else {},
            },
            label_first={
                "p50": _pct(first_member, 0.5) if first_member else None,
                "p99": _pct(first_member, 0.99) if first_member else None,
                "events": len(first_member),
            },
            rss_samples=rss_samples,
            rss_end_mib=rss_mib(),
            load=os.getloadavg(),
        )
        return out
    finally:
        stop.set()
        ovn.close()
        kube.close()


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


def group_without(groups: Any, labels: dict[str, str], start: int, count: int) -> str:
    """The first group from ``start`` on that the pod is not yet a member of (at tiny scales
    a pod often is), so every event is a real membership change."""
    for i in range(count):
        name = f"sg-{(start + i) % count:03d}"
        if not set(groups[name].spec.label_pairs()) & set(labels.items()):
            return name
    raise RuntimeError("the pod is a member of every group")


def wait_cache(cache: Any, namespace: str, name: str, labels: dict[str, str],
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


def port_group_exists(remote: str, pg: str) -> bool:
    """Whether the NB has a Port_Group of that name (a pod joining its group's rows on its
    node, or creating them as the first member there)."""
    res = ovsdb_rpc.transact(remote, "OVN_Northbound", [
        {"op": "select", "table": "Port_Group", "where": [["name", "==", pg]],
         "columns": ["name"]},
    ])  # fmt: skip
    return bool(res[0]["rows"])


def check_member(remote: str, pg: str, lsp: str, the_plan: Any) -> None:
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
