"""Measurement behind ``reconciler/adapters/ovn/southbound.py``: what ``--ovn-sb`` adds to every
read, one ``select`` per VNF port of ours in one transaction against the Southbound's
``Port_Binding`` (indexed on ``logical_port``), beside PODS pod ports that are not asked about.

Starts a local 26.03 NB, SB and northd, seeds PODS pod ports and PORTS VNF ports (as LSPs on
the node switches; northd makes their Port_Bindings), claims half of the VNF ports for a
chassis, then times ``read_port_chassis`` REPEAT times.

    .venv/bin/python bench/southbound.py [--ports 2000] [--pods 10000] [--repeat 10]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ports", type=int, default=2_000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()

    from osc_gitops_sandbox.ovn import ovsdb_rpc
    from osc_gitops_sandbox.ovn.stack import OvnSandbox, SeedNode, make_pods, seed_ovn_kubernetes

    from reconciler.adapters.ovn.settings import OvnSettings
    from reconciler.adapters.ovn.southbound import read_port_chassis

    with open("/proc/loadavg", encoding="ascii") as load:
        print(f"load average before: {load.read().strip()}")
    nodes = [SeedNode(f"node{i}", f"10.{128 + i // 256}.{i % 256}.0/24") for i in range(100)]
    ports = [f"nf_fw_node{i % 100}_{i // 100}_{side}"
             for i in range(args.ports // 2) for side in ("in", "out")]  # fmt: skip
    with OvnSandbox(northd=True, distribution="sid") as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, nodes, make_pods(nodes, args.pods, "bench"))
        switches = ovsdb_rpc.transact(sandbox.nb_remote, "OVN_Northbound", [
            {"op": "select", "table": "Logical_Switch", "where": [], "columns": ["_uuid", "name"]},
        ])[0]["rows"]  # fmt: skip
        by_name = {s["name"]: s["_uuid"] for s in switches}
        ops: list[dict[str, Any]] = []
        for n, port in enumerate(ports):
            node = port.split("_")[2]
            ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": f"p{n}",
                        "row": {"name": port}})  # fmt: skip
            ops.append(
                {
                    "op": "mutate",
                    "table": "Logical_Switch",
                    "where": [["_uuid", "==", by_name[node]]],
                    "mutations": [["ports", "insert", ["set", [["named-uuid", f"p{n}"]]]]],
                }
            )
        ovsdb_rpc.transact(sandbox.nb_remote, "OVN_Northbound", ops, timeout=300)
        sandbox.wait_northd_sync(timeout=300)
        sandbox.sbctl("chassis-add", "bench-chassis", "geneve", "127.0.0.1")
        (chassis,) = ovsdb_rpc.transact(sandbox.sb_remote, "OVN_Southbound", [
            {"op": "select", "table": "Chassis", "where": [], "columns": ["_uuid"]},
        ])[0]["rows"]  # fmt: skip
        ovsdb_rpc.transact(sandbox.sb_remote, "OVN_Southbound", [
            {"op": "update", "table": "Port_Binding", "where": [["logical_port", "==", port]],
             "row": {"chassis": chassis["_uuid"]}}
            for port in ports[::2]
        ], timeout=300)  # fmt: skip
        settings = OvnSettings(remote=sandbox.sb_remote, timeout=60)
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            found = read_port_chassis(settings, ports)
            times.append(time.perf_counter() - started)
        bound = sum(found.values())
    print(f"{len(ports)} VNF ports asked ({len(found)} found, {bound} with a chassis) beside "
          f"{args.pods} pod ports: median {statistics.median(times) * 1000:.1f} ms, "
          f"max {max(times) * 1000:.1f} ms over {args.repeat} reads")  # fmt: skip
    with open("/proc/loadavg", encoding="ascii") as load:
        print(f"load average after: {load.read().strip()}")


if __name__ == "__main__":
    main()
