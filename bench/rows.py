"""What a cold apply writes, compiled only (no OVN, no Kubernetes): the OVN rows by table for
the benchmark scenario (``bench.scenario``) at each scale, both backends, and the cost of a
service chain. Seconds, not minutes: ``python -m bench.rows``.

The full benchmark (``python -m bench``) measures the same rows written to a real NB; this
module is for the row model alone (issue 20: rows where a group has members; issue 21: what a
chain adds), e.g. ``--chain both`` gives every 20th binding the chain ``[firewall, ips]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.scenario import Scale, kube_objects, write_manifests


def observed(scale: Scale) -> Any:
    """The scenario's cluster as ``Observed`` (what the adapters would read), with OVN 26.03."""
    from reconciler.core.model.observed import Node, Observed, OvnCapabilities, Pod, PodPort, Switch

    _, nodes, pods = kube_objects(scale)
    pod_objs, ports = [], []
    for p in pods:
        meta, node = p["metadata"], p["spec"]["nodeName"]
        pod_objs.append(Pod(meta["namespace"], meta["name"], meta["uid"], node, meta["labels"]))
        net = json.loads(meta["annotations"]["k8s.ovn.org/pod-networks"])["default"]
        lsp = f"{meta['namespace']}_{meta['name']}"
        ports.append(PodPort(lsp, node, meta["namespace"], meta["name"], meta["uid"],
                             net["mac_address"], tuple(net["ip_addresses"])))  # fmt: skip
    return Observed(
        pods=tuple(pod_objs),
        nodes=tuple(Node(n["metadata"]["name"], n["metadata"]["labels"]) for n in nodes),
        pod_ports=tuple(ports),
        switches=tuple(Switch(n["metadata"]["name"], n["spec"]["podCIDR"]) for n in nodes),
        routers=("ovn_cluster_router",),
        capabilities=OvnCapabilities("7.18.0", True),
    )


IPS = (
    "apiVersion: osc.io/v1alpha1\nkind: VnfDeployment\nmetadata:\n  name: ips\n"
    "spec:\n  namespace: osc-vnfs\n  image: quay.io/example/ips:1.0\n"
)


def with_chains(text: str, chains: int, redirection: str) -> str:
    """The scenario's manifests (one VNF, ``firewall``) with a second VNF ``ips`` on every
    node and the first ``chains`` bindings through the chain ``[firewall, ips]``."""
    for b in range(chains):
        head = f"metadata:\n  name: bind-{b:03d}\n"
        start = text.index(head)
        end = text.find("---", start)
        end = len(text) if end < 0 else end
        doc = text[start:end].replace("  vnf: firewall\n", "  vnf: [firewall, ips]\n")
        for old in ("exit-lport", "both"):
            doc = doc.replace(f"  redirection: {old}\n", f"  redirection: {redirection}\n")
        text = text[:start] + doc + text[end:]
    return text + "---\n" + IPS


def rows(scale: Scale, steering: str, chains: int = 0, redirection: str = "both") -> dict[str, Any]:
    """OVN rows a cold apply writes, by table, and what every pair having rows would write."""
    from reconciler.core.compiling.compile import CompileOptions, compile_full
    from reconciler.manifests.load import load_path

    with tempfile.TemporaryDirectory() as tmp:
        path = write_manifests(scale, Path(tmp))
        if chains:
            path.write_text(with_chains(path.read_text(), chains, redirection))
        desired = load_path(path.parent)
    compiled = compile_full(desired, observed(scale), CompileOptions(steering=steering))
    ours = collections.Counter(r.kind for r in compiled.target if r.is_ovn)
    every = collections.Counter(r.kind for r in compiled.potential.values() if r.is_ovn)
    members = sum(len(r.fields["ports"]) for r in compiled.target if r.kind == "Port_Group")
    return {
        "rows": sum(ours.values()),
        "by_table": dict(sorted(ours.items())),
        "every_pair": sum(every.values()),
        "members": members,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rows", description=__doc__)
    parser.add_argument("--scales", default="1000,10000,50000")
    parser.add_argument("--vnfs", type=int, default=1)
    parser.add_argument("--both-every", type=int, default=0)
    parser.add_argument(
        "--chains", type=int, default=0,
        help="that many bindings through the chain [firewall, ips] (ips on every node)",
    )  # fmt: skip
    parser.add_argument("--chain-redirection", default="both")
    args = parser.parse_args(argv)
    from reconciler.errors import OscError

    for steering in ("network-function", "router-policy"):
        if args.chains and steering == "router-policy":
            continue  # router-policy refuses chains
        for pods in (int(s) for s in args.scales.split(",")):
            scale = Scale(pods=pods, vnfs=args.vnfs, both_every=args.both_every)
            try:
                r = rows(scale, steering, args.chains, args.chain_redirection)
            except OscError as exc:
                print(f"{steering} {scale.label}: refused: {exc}")
                continue
            print(
                f"{steering} {scale.label}: {r['rows']} rows (every pair: {r['every_pair']}); "
                f"{r['members']} members; {r['by_table']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
