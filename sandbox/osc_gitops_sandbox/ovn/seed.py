"""What OVN-Kubernetes writes into the Northbound DB, seeded in one raw transaction: node
switches and the cluster router (:func:`seed_ovn_kubernetes`), pods' ports (:class:`SeedPod`,
:func:`make_pods`), and foreign rows the reconciler must never touch (:func:`seed_foreign_rows`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc

__all__ = [
    "CLUSTER_ROUTER",
    "ForeignRows",
    "SeedNode",
    "SeedPod",
    "make_pods",
    "seed_foreign_rows",
    "seed_ovn_kubernetes",
]

CLUSTER_ROUTER = "ovn_cluster_router"


@dataclass(frozen=True)
class SeedNode:
    name: str
    subnet: str
    """Pod subnet of the node, e.g. ``10.244.1.0/24`` (``other_config:subnet``)."""


@dataclass(frozen=True)
class SeedPod:
    namespace: str
    name: str
    uid: str
    node: str
    mac: str
    ip: str

    @property
    def lsp_name(self) -> str:
        return f"{self.namespace}_{self.name}"


def make_pods(
    nodes: Sequence[SeedNode], count: int, namespace: str = "default", prefix: str = "pod"
) -> list[SeedPod]:
    """``count`` pods spread round-robin over ``nodes`` with unique MACs/IPs (for benchmarks)."""
    pods: list[SeedPod] = []
    per_node: dict[str, int] = {}
    for n in range(count):
        node = nodes[n % len(nodes)]
        k = per_node.get(node.name, 0)
        per_node[node.name] = k + 1
        net = ipaddress.ip_network(node.subnet)
        ip = net.network_address + 3 + k
        mac = "0a:58:" + ":".join(f"{b:02x}" for b in ip.packed[-4:])
        pods.append(
            SeedPod(namespace, f"{prefix}-{n}", f"uid-{namespace}-{n:06d}", node.name, mac, str(ip))
        )
    return pods


def _named(prefix: str, i: int) -> str:
    return f"{prefix}{i}"


def seed_ovn_kubernetes(
    nb_remote: str,
    nodes: Sequence[SeedNode],
    pods: Sequence[SeedPod] = (),
    *,
    router: bool = True,
) -> None:
    """Create what OVN-Kubernetes creates for ``nodes`` and ``pods`` in ONE raw transaction.

    Per node: switch ``<node>`` (``other_config:subnet``), router port ``rtos-<node>`` on
    ``ovn_cluster_router`` (subnet's ``.1``) and switch port ``stor-<node>``. Per pod: LSP
    ``<ns>_<pod>`` with ``addresses``/``port_security`` ``"<mac> <ip>"``,
    ``external_ids={namespace, pod: "true"}``, ``options:iface-id-ver=<uid>`` and
    ``options:requested-chassis=<node>``. Nodes must be new; pods must sit on given nodes.
    """
    index = {n.name: i for i, n in enumerate(nodes)}
    ports_of: dict[str, list[list[str]]] = {n.name: [] for n in nodes}
    ops: list[dict[str, Any]] = []
    for j, pod in enumerate(pods):
        if pod.node not in index:
            raise ValueError(f"pod {pod.namespace}/{pod.name} is on unknown node {pod.node!r}")
        addr = f"{pod.mac} {pod.ip}"
        ops.append(
            {
                "op": "insert",
                "table": "Logical_Switch_Port",
                "uuid-name": _named("p", j),
                "row": {
                    "name": pod.lsp_name,
                    "addresses": addr,
                    "port_security": addr,
                    "external_ids": ovsdb_rpc.to_datum({"namespace": pod.namespace, "pod": "true"}),
                    "options": ovsdb_rpc.to_datum(
                        {"iface-id-ver": pod.uid, "requested-chassis": pod.node}
                    ),
                },
            }
        )
        ports_of[pod.node].append(["named-uuid", _named("p", j)])
    lrps: list[list[str]] = []
    for i, node in enumerate(nodes):
        net = ipaddress.ip_network(node.subnet)
        gw = net.network_address + 1
        if router:
            mac = "0a:58:" + ":".join(f"{b:02x}" for b in gw.packed[-4:])
            ops.append(
                {
                    "op": "insert",
                    "table": "Logical_Router_Port",
                    "uuid-name": _named("rp", i),
                    "row": {
                        "name": f"rtos-{node.name}",
                        "mac": mac,
                        "networks": f"{gw}/{net.prefixlen}",
                    },
                }
            )
            lrps.append(["named-uuid", _named("rp", i)])
            ops.append(
                {
                    "op": "insert",
                    "table": "Logical_Switch_Port",
                    "uuid-name": _named("sp", i),
                    "row": {
                        "name": f"stor-{node.name}",
                        "type": "router",
                        "addresses": "router",
                        "options": ovsdb_rpc.to_datum({"router-port": f"rtos-{node.name}"}),
                    },
                }
            )
            ports_of[node.name].append(["named-uuid", _named("sp", i)])
        ops.append(
            {
                "op": "insert",
                "table": "Logical_Switch",
                "uuid-name": _named("s", i),
                "row": {
                    "name": node.name,
                    "ports": ["set", ports_of[node.name]],
                    "other_config": ovsdb_rpc.to_datum({"subnet": node.subnet}),
                },
            }
        )
    if router and nodes:
        (existing,) = _uuids_by_name(nb_remote, "Logical_Router", [CLUSTER_ROUTER])
        if existing:
            ops.append(
                {
                    "op": "mutate",
                    "table": "Logical_Router",
                    "where": [["name", "==", CLUSTER_ROUTER]],
                    "mutations": [["ports", "insert", ["set", lrps]]],
                }
            )
        else:
            ops.append(
                {
                    "op": "insert",
                    "table": "Logical_Router",
                    "row": {"name": CLUSTER_ROUTER, "ports": ["set", lrps]},
                }
            )
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)


def _uuids_by_name(nb_remote: str, table: str, names: Sequence[str]) -> list[list[Any]]:
    """The ``_uuid`` datums of the rows of ``table`` called each of ``names`` (one select
    each, in one transaction): an empty list where there is none."""
    selects = [
        {"op": "select", "table": table, "where": [["name", "==", n]], "columns": ["_uuid"]}
        for n in names
    ]
    results = ovsdb_rpc.transact(nb_remote, "OVN_Northbound", selects)
    return [[row["_uuid"] for row in result["rows"]] for result in results]


@dataclass(frozen=True)
class ForeignRows:
    """Names of the rows :func:`seed_foreign_rows` made (none of them is ours to touch)."""

    handmade_port_group: str = "osc_gitops_handmade"
    other_instance_port_group: str = "osc_gitops_other"
    netpol_port_group: str = "a13757631697825269621"
    acl_names: tuple[str, ...] = field(
        default=("osc-gitops-handmade", "osc-gitops-other", "NP:default:deny-web:Ingress:0")
    )


def seed_foreign_rows(
    nb_remote: str, ports: Sequence[str] = (), *, tier: bool | None = None
) -> ForeignRows:
    """Rows that look like ours but are not, for ownership tests (one raw transaction).

    - a hand-made Port_Group + ACL with an ``osc``-like name and no owner marker;
    - a Port_Group + ACL marked ``osc.io/owner=other-instance`` (another reconciler's rows);
    - an OVN-Kubernetes NetworkPolicy Port_Group + ACL (``k8s.ovn.org/*`` external_ids,
      priority 1001, tier 2 when the schema has ``ACL.tier``).

    ``ports``: LSP names to put in every foreign Port_Group (must exist).
    """
    names = ForeignRows()
    if tier is None:
        schema = ovsdb_rpc.get_schema(nb_remote, "OVN_Northbound")
        tier = "tier" in schema["tables"]["ACL"]["columns"]
    port_uuids: list[list[str]] = []
    if ports:
        found = _uuids_by_name(nb_remote, "Logical_Switch_Port", ports)
        for name, uuids in zip(ports, found, strict=True):
            if not uuids:
                raise ValueError(f"seed_foreign_rows: no Logical_Switch_Port named {name!r}")
            port_uuids.append(uuids[0])
    specs = [
        (
            names.handmade_port_group,
            names.acl_names[0],
            {"owner": "a human"},
            {"priority": 2000, "direction": "to-lport", "action": "allow-related"},
        ),
        (
            names.other_instance_port_group,
            names.acl_names[1],
            {"osc.io/owner": "other-instance", "osc.io/key": "other"},
            {"priority": 2001, "direction": "from-lport", "action": "allow"},
        ),
        (
            names.netpol_port_group,
            names.acl_names[2],
            {
                "k8s.ovn.org/owner-type": "NetworkPolicy",
                "k8s.ovn.org/name": "default:deny-web",
                "k8s.ovn.org/id": "default-network-controller:NetworkPolicy:default:deny-web",
            },
            {
                "priority": 1001,
                "direction": "to-lport",
                "action": "allow-related",
                **({"tier": 2} if tier else {}),
            },
        ),
    ]
    ops: list[dict[str, Any]] = []
    for i, (pg, acl, ext, cols) in enumerate(specs):
        pg_match = "@" + pg
        direction = cols["direction"]
        side = "outport" if direction == "to-lport" else "inport"
        ops.append(
            {
                "op": "insert",
                "table": "ACL",
                "uuid-name": _named("acl", i),
                "row": {
                    "name": acl,
                    "match": f"{side} == {pg_match} && ip4",
                    "external_ids": ovsdb_rpc.to_datum(ext),
                    **cols,
                },
            }
        )
        ops.append(
            {
                "op": "insert",
                "table": "Port_Group",
                "row": {
                    "name": pg,
                    "ports": ["set", port_uuids],
                    "acls": ["named-uuid", _named("acl", i)],
                    "external_ids": ovsdb_rpc.to_datum(ext),
                },
            }
        )
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)
    return names
