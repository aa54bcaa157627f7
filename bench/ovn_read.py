"""Benchmark: OVN NB adapter connect + initial sync and read() at 10,000 pods.

Seeds NODES switches and PODS pod LSPs (what OVN-Kubernetes creates) with one raw transaction
into a local sandbox NB, then times ``OvnNorthbound.connect`` (returns after the initial sync)
and ``read()``, plus one apply of 100 Port_Groups with an ACL each. Numbers go to stdout.

    .venv/bin/python bench/ovn_read.py [--pods 10000] [--nodes 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import Any

from osc_gitops_sandbox.ovn.stack import OvnSandbox, SeedNode, make_pods, seed_ovn_kubernetes

from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings


@dataclass(frozen=True)
class _Change:
    action: str
    kind: str
    key: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    nodes = [SeedNode(f"node{i}", f"10.{128 + i // 256}.{i % 256}.0/24") for i in range(args.nodes)]
    pods = make_pods(nodes, args.pods, namespace="bench")
    with OvnSandbox(northd=False) as sandbox:
        t0 = time.perf_counter()
        seed_ovn_kubernetes(sandbox.nb_remote, nodes, pods)
        print(
            f"seed {args.pods} pods / {args.nodes} switches (raw transact): "
            f"{time.perf_counter() - t0:.3f} s"
        )
        connects, reads = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            nb = OvnNorthbound.connect(OvnSettings(remote=sandbox.nb_remote, timeout=30))
            connects.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            state = nb.read()
            reads.append(time.perf_counter() - t0)
            assert len(state.pod_ports) == args.pods
            nb.close()
        print(
            f"connect + initial sync: median {statistics.median(connects):.3f} s "
            f"(runs: {', '.join(f'{c:.3f}' for c in connects)})"
        )
        print(
            f"read(): median {statistics.median(reads):.3f} s "
            f"(runs: {', '.join(f'{r:.3f}' for r in reads)})"
        )

        with OvnNorthbound.connect(OvnSettings(remote=sandbox.nb_remote, timeout=60)) as nb:
            changes = []
            for i, node in enumerate(nodes):
                names = sorted(f"bench_{p.name}" for p in pods if p.node == node.name)[:50]
                ext = {
                    "osc.io/owner": "osc-gitops",
                    "osc.io/resource": "Binding/b",
                    "osc.io/key": f"pg{i}",
                }
                pg = {"name": f"osc_pg{i}", "ports": names, "external_ids": ext}
                acl = {
                    "port_group": f"osc_pg{i}",
                    "name": f"acl{i}",
                    "direction": "to-lport",
                    "priority": 2000,
                    "tier": 0,
                    "match": f"outport == @osc_pg{i} && ip4",
                    "action": "allow-related",
                    "network_function_group": None,
                    "external_ids": {**ext, "osc.io/key": f"acl{i}"},
                }
                changes.append(_Change("create", "Port_Group", f"osc_pg{i}", None, pg))
                changes.append(_Change("create", "ACL", f"acl{i}", None, acl))
            t0 = time.perf_counter()
            nb.apply(changes)
            print(
                f"apply {len(changes)} creates ({args.nodes} PGs x 50 ports + ACLs): "
                f"{time.perf_counter() - t0:.3f} s"
            )
            t0 = time.perf_counter()
            state = nb.read()
            print(f"read() with {len(state.owned)} owned rows: {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
