"""Zone mode at scale (issue #14): node agents on an interconnect cluster of 100 zones.

    .venv/bin/python -m bench.zones                          # 10k pods, 100 zones
    .venv/bin/python -m bench.zones --pods 1000 --nodes 10 --sample 3 --labels 10   # quick

The scenario is the central-NB benchmark's (``bench.scenario``: 200 groups, 200 bindings,
3 VNFs, pods round-robin over the nodes), but every node is its own zone
(``osc_gitops_sandbox.zones.ZonedCluster``: one ovsdb-server per node, OVN 26.03 from the sid
root, northd off) and steering is Network Function insertion, so each zone holds its node's
Port_Groups, ACLs and 3 Network_Functions with their own ids.

What is measured, and how (every process measured is a fresh ``osc-gitops`` process, as a pod
would be; the API emulator and the zones live in this process):

- the central owner's cold ``apply --kubernetes-only`` (300 VMs and 600 NADs): wall time and
  peak RSS (``wait4``);
- per-agent cold ``apply --node N --ovn-nb <zone>`` for ``--sample`` zones: wall time, peak
  RSS and rows written; then every other zone is applied the same way (one at a time, as the
  issue allows: in a cluster they run in parallel, one per node), and the sum is given;
- a cold ``plan --node N`` on a converged zone;
- one long-running agent (``run --node node-000 --debounce 0``, so the figure is the work, as
  the central-NB figure is): "pod labelled -> committed" from just before
  the PATCH until the zone's NB sends the Port_Group update to a raw OVSDB ``monitor`` (so the
  figure is the commit as another client sees it, with no polling), and its RSS afterwards.

Results go to ``bench/results-zones.json`` and are printed as the Markdown table of
``docs/benchmarks.md``, "Interconnect clusters".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.zones import ZonedCluster

from bench.scenario import Scale, kube_objects, node_name, pod_labels, write_manifests

RESULTS = Path(__file__).with_name("results-zones.json")
CLI = [sys.executable, "-m", "reconciler.cli"]


def timed(argv: list[str]) -> dict[str, Any]:
    """One fresh ``osc-gitops`` process: exit code, wall seconds, peak RSS (MiB), stderr."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*CLI, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "code": proc.returncode,
        "seconds": seconds,
        "rss_mib": usage.ru_maxrss / 1024,
        "err": err[-2000:],
    }


def changes_applied(err: str) -> int:
    """``Apply complete: N change(s) applied`` -> N (0 when nothing was to do)."""
    marker = "Apply complete: "
    if marker not in err:
        return 0
    return int(err.split(marker, 1)[1].split(" ", 1)[0])


class Monitor:
    """A raw OVSDB ``monitor`` of one zone's Port_Group table: :meth:`wait_update` returns when
    the server sends the next change (answering the server's echo requests meanwhile)."""

    def __init__(self, remote: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(remote.removeprefix("unix:"))
        self.buffer = ""
        self.decoder = json.JSONDecoder()
        request = {
            "method": "monitor",
            "id": 1,
            "params": ["OVN_Northbound", None, {"Port_Group": {"columns": ["name", "ports"]}}],
        }
        self.sock.sendall(json.dumps(request).encode())
        while self._next().get("id") != 1:
            pass

    def _next(self) -> dict[str, Any]:
        while True:
            text = self.buffer.lstrip()
            if text:
                try:
                    message, end = self.decoder.raw_decode(text)
                    self.buffer = text[end:]
                    if message.get("method") == "echo":
                        reply = {
                            "result": message.get("params"),
                            "error": None,
                            "id": message.get("id"),
                        }
                        self.sock.sendall(json.dumps(reply).encode())
                        continue
                    return dict(message)
                except ValueError:
                    pass
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the NB closed the monitor")
            self.buffer += chunk.decode()

    def wait_update(self, timeout: float = 10.0) -> float:
        self.sock.settimeout(timeout)
        while True:
            message = self._next()
            if message.get("method") == "update":
                return time.perf_counter()

    def close(self) -> None:
        self.sock.close()


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a running process, MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def label_latency(
    zones: ZonedCluster, manifests: Path, scale: Scale, events: int, log: Any
) -> dict[str, Any]:
    """A running agent on node-000; ``events`` pods of that node relabelled one by one."""
    node = node_name(0)
    proc = subprocess.Popen(
        [
            *CLI,
            "run",
            str(manifests),
            "--node",
            node,
            "--ovn-nb",
            zones.nb_remote(node),
            "--kubeconfig",
            zones.kubeconfig,
            "--metrics-addr",
            "off",
            "--debounce",
            "0",
            "--interval",
            "600",
            "--log-format",
            "text",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    monitor = Monitor(zones.nb_remote(node))
    try:
        deadline = time.monotonic() + 120
        while (
            zones.kube.get_object("Lease", "osc-gitops-agents", f"osc-gitops-agent-{node}") is None
        ):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the agent did not finish its first pass")
            time.sleep(0.05)
        time.sleep(1.0)  # its first pass is over and published
        idle_rss = rss_mib(proc.pid)
        seconds: list[float] = []
        for k in range(events):
            n = scale.nodes * (k + 1)  # pods n with n % nodes == 0 run on node-000
            # the label of a bound group it is not in: it joins that group's Port_Group
            current = pod_labels(n)["app"]
            group = (k * 37 + 11) % scale.groups
            if f"app-{group}" == current:
                group = (group + 1) % scale.groups
            app = f"app-{group}"
            started = time.perf_counter()
            zones.label_pod(f"ns-{n % 20:02d}", f"pod-{n:06d}", {"app": app})
            seconds.append(monitor.wait_update() - started)
            time.sleep(0.15)  # let the pass end before the next event
        rss, hwm = rss_mib(proc.pid)
        log(f"label -> committed: p50 {statistics.median(seconds) * 1000:.0f} ms")
        return {
            "label_seconds": seconds,
            "agent_rss_mib": rss,
            "agent_hwm_mib": hwm,
            "agent_idle_rss_mib": idle_rss[0],
        }
    finally:
        monitor.close()
        proc.terminate()
        proc.wait(15)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.zones",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--sample", type=int, default=10, help="agents measured cold")
    parser.add_argument("--labels", type=int, default=30, help="label events")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    scale = Scale(pods=args.pods, nodes=args.nodes)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    result: dict[str, Any] = {
        "scale": {
            "pods": scale.pods,
            "nodes": scale.nodes,
            "groups": scale.groups,
            "bindings": scale.bindings,
            "vnfs": scale.vnfs,
        },
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    with tempfile.TemporaryDirectory(prefix="oscz-bench-") as tmp:
        work = Path(tmp)
        manifests = write_manifests(scale, work / "policies").parent
        started = time.perf_counter()
        with ZonedCluster(work / "z", distribution="sid") as zones:
            namespaces, nodes, pods = kube_objects(scale)
            zones.seed(nodes, pods, namespaces)
            zones.kube.add_objects(
                [
                    {"kind": "Namespace", "metadata": {"name": ns}}
                    for ns in ("osc-gitops", "osc-gitops-agents")
                ]
            )
            result["seed_seconds"] = time.perf_counter() - started
            log(f"{scale.nodes} zones, {scale.pods} pods seeded in {result['seed_seconds']:.1f} s")
            kube = ["--kubeconfig", zones.kubeconfig]

            central = timed(["apply", str(manifests), "--kubernetes-only", *kube])
            assert central["code"] == 0, central["err"]
            result["central_apply"] = {
                "seconds": central["seconds"],
                "rss_mib": central["rss_mib"],
                "vms": len(zones.kube.objects("VirtualMachine")),
                "nads": len(zones.kube.objects("NetworkAttachmentDefinition")),
            }
            log(f"central owner: {result['central_apply']}")

            agents = []
            for i, node in enumerate(zones.nodes):
                run = timed(
                    [
                        "apply",
                        str(manifests),
                        "--node",
                        node,
                        "--ovn-nb",
                        zones.nb_remote(node),
                        *kube,
                    ]
                )
                assert run["code"] == 0, f"{node}: {run['err']}"
                agents.append(
                    {
                        "node": node,
                        "seconds": run["seconds"],
                        "rss_mib": run["rss_mib"],
                        "rows": changes_applied(run["err"]),
                        "sampled": i < args.sample,
                    }
                )
                if i < args.sample:
                    log(
                        f"agent {node}: {run['seconds']:.2f} s, {run['rss_mib']:.0f} MiB, "
                        f"{agents[-1]['rows']} rows"
                    )
            result["agents"] = agents
            plan = timed(
                [
                    "plan",
                    str(manifests),
                    "--node",
                    zones.nodes[0],
                    "--ovn-nb",
                    zones.nb_remote(zones.nodes[0]),
                    *kube,
                ]
            )
            assert plan["code"] == 0, plan["err"]
            result["agent_plan"] = {"seconds": plan["seconds"], "rss_mib": plan["rss_mib"]}
            plan_all = timed(["plan", str(manifests), "--kubernetes-only", *kube])
            result["central_plan"] = {
                "seconds": plan_all["seconds"],
                "rss_mib": plan_all["rss_mib"],
            }
            result.update(label_latency(zones, manifests, scale, args.labels, log))
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(report(result))
    return 0


def report(result: dict[str, Any]) -> str:
    """The Markdown table of ``docs/benchmarks.md`` from one result."""
    sampled = [a for a in result["agents"] if a["sampled"]]
    labels = sorted(result["label_seconds"])
    p99 = labels[min(len(labels) - 1, round(0.99 * len(labels) + 0.5) - 1)]
    med = statistics.median
    times = [a["seconds"] for a in sampled]
    total = sum(a["seconds"] for a in result["agents"])
    scale = result["scale"]
    lines = [
        f"{scale['pods']} pods over {scale['nodes']} zones ({result['machine']}, "
        f"{result['started']}); medians; every process a fresh `osc-gitops`.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| zones seeded (one ovsdb-server each) + API objects | {result['seed_seconds']:.1f} s |",
        f"| central owner, cold `apply --kubernetes-only` ({result['central_apply']['vms']} VMs, "
        f"{result['central_apply']['nads']} NADs) | {result['central_apply']['seconds']:.2f} s, "
        f"peak RSS {result['central_apply']['rss_mib']:.0f} MiB |",
        f"| central owner, cold `plan --kubernetes-only` (converged) | "
        f"{result['central_plan']['seconds']:.2f} s, {result['central_plan']['rss_mib']:.0f} MiB |",
        f"| one agent, cold `apply --node` (median of {len(sampled)}; rows written) | "
        f"{med(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}); "
        f"{med(a['rows'] for a in sampled):.0f} rows |",
        f"| one agent, peak RSS of that apply | {med(a['rss_mib'] for a in sampled):.0f} MiB |",
        f"| every agent applied one after the other (in a cluster: in parallel) | {total:.0f} s "
        f"for {len(result['agents'])} zones |",
        f"| one agent, cold `plan --node` (converged) | {result['agent_plan']['seconds']:.2f} s, "
        f"{result['agent_plan']['rss_mib']:.0f} MiB |",
        f"| running agent: pod labelled → committed, p50 / p99 ({len(labels)} events) | "
        f"{med(labels) * 1000:.0f} ms / {p99 * 1000:.0f} ms |",
        f"| running agent: RSS after its first pass / after the label events (peak) | "
        f"{result['agent_idle_rss_mib']:.0f} MiB / {result['agent_rss_mib']:.0f} MiB "
        f"({result['agent_hwm_mib']:.0f} MiB) |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
