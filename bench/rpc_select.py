"""Measurement behind ``reconciler/adapters/ovn/rpc.py``'s docstring: ONE ``select`` of about
30,000 NB rows, read through the project's stdlib JSON-RPC ``Session`` and through python-ovs'
``ovs.jsonrpc`` (with Debian's C JSON parser, as the venv has it), each in a fresh process: wall
time of the request and reply, the client's own CPU time (what differs: the server's is the same),
and how much the process's RSS grows (peak and after).

Seeds a local 26.03 NB with PODS pod ports (what OVN-Kubernetes creates) and GROUPS Port_Groups
holding four ACLs each, in raw transactions, then selects every row of the three tables (all
columns): 30,100 rows with the defaults.

    .venv/bin/python bench/rpc_select.py [--pods 10000] [--groups 4000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

TABLES = ("Logical_Switch_Port", "Port_Group", "ACL")


def _rss_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _params() -> list[Any]:
    return ["OVN_Northbound", *({"op": "select", "table": t, "where": []} for t in TABLES)]


def _select_rpc(remote: str) -> int:
    from reconciler.adapters.ovn.rpc import Session

    session = Session.open(remote, None, time.monotonic() + 60)
    reply = session.reply(session.send("transact", _params()))
    session.close()
    return sum(len(result["rows"]) for result in reply["result"])


def _select_ovs(remote: str) -> int:
    from ovs import jsonrpc, stream

    error, strm = stream.Stream.open_block(stream.Stream.open(remote), 10_000)
    assert not error, os.strerror(error)
    connection = jsonrpc.Connection(strm)
    request = jsonrpc.Message.create_request("transact", _params())
    assert not connection.send(request)
    error, reply = connection.recv_block()
    assert not error and reply is not None and reply.id == request.id
    connection.close()
    return sum(len(result["rows"]) for result in reply.result)


def child(way: str, remote: str) -> None:
    """One measurement in this (fresh) process; prints it as JSON."""
    import reconciler.adapters.ovn.rpc  # noqa: F401  (imports are not what is measured)

    if way == "ovs.jsonrpc":
        import ovs.jsonrpc  # noqa: F401
    before = _rss_kib("VmRSS")
    started, cpu = time.perf_counter(), time.process_time()
    rows = (_select_ovs if way == "ovs.jsonrpc" else _select_rpc)(remote)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak, after = (_rss_kib("VmHWM") - before) / 1024, (_rss_kib("VmRSS") - before) / 1024
    print(json.dumps({"rows": rows, "seconds": seconds, "cpu": cpu, "peak_mib": peak,
                      "after_mib": after}))  # fmt: skip


def _seed(remote: str, pods: int, groups: int) -> None:
    from osc_gitops_sandbox.ovn import ovsdb_rpc
    from osc_gitops_sandbox.ovn.stack import SeedNode, make_pods, seed_ovn_kubernetes

    nodes = [SeedNode(f"node{i}", f"10.{128 + i // 256}.{i % 256}.0/24") for i in range(100)]
    seed_ovn_kubernetes(remote, nodes, make_pods(nodes, pods, namespace="bench"))
    ops: list[dict[str, Any]] = []
    for g in range(groups):  # ACLs are not a root table: each group holds four
        acls = []
        for a in range(4):
            ext = [["osc.io/key", f"acl{g}-{a}"], ["osc.io/owner", "osc-gitops"]]
            ops.append({"op": "insert", "table": "ACL", "uuid-name": f"a{g}_{a}", "row": {
                "priority": 1000 + a, "direction": "to-lport", "action": "allow-related",
                "match": f"outport == @osc_pg{g} && tcp.dst == {a}",
                "external_ids": ["map", ext]}})  # fmt: skip
            acls.append(["named-uuid", f"a{g}_{a}"])
        ext = [["osc.io/key", f"pg{g}"], ["osc.io/owner", "osc-gitops"]]
        row = {"name": f"osc_pg{g}", "acls": ["set", acls], "external_ids": ["map", ext]}
        ops.append({"op": "insert", "table": "Port_Group", "row": row})
    ovsdb_rpc.transact(remote, "OVN_Northbound", ops, timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=4_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=("rpc.Session", "ovs.jsonrpc"), help=argparse.SUPPRESS)
    parser.add_argument("--remote", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.remote)
        return

    from osc_gitops_sandbox.ovn.stack import OvnSandbox

    with open("/proc/loadavg", encoding="ascii") as load:
        print(f"load average before: {load.read().strip()}")
    with OvnSandbox(northd=False, distribution="sid") as sandbox:
        _seed(sandbox.nb_remote, args.pods, args.groups)
        results: dict[str, list[dict[str, Any]]] = {"rpc.Session": [], "ovs.jsonrpc": []}
        for _ in range(args.repeat):
            for way, runs in results.items():
                out = subprocess.run(
                    [sys.executable, __file__, "--child", way, "--remote", sandbox.nb_remote],
                    capture_output=True, text=True, check=True, timeout=300,
                )  # fmt: skip
                runs.append(json.loads(out.stdout))
    for way, runs in results.items():
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        print(
            f"{way:12} {runs[0]['rows']} rows: "
            f"{statistics.median(r['seconds'] for r in runs):.2f} s (runs {each}; this process's "
            f"CPU {statistics.median(r['cpu'] for r in runs):.2f} s), RSS "
            f"+{statistics.median(r['peak_mib'] for r in runs):.0f} MiB at the peak, "
            f"+{statistics.median(r['after_mib'] for r in runs):.0f} MiB after"
        )
    with open("/proc/loadavg", encoding="ascii") as load:
        print(f"load average after: {load.read().strip()}")


if __name__ == "__main__":
    main()
