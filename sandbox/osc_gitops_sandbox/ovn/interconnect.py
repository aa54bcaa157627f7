"""What OVN-Kubernetes writes to interconnect the zones of a cluster (one zone per node).

ovnkube-controller's zone interconnect handler (``go-controller/pkg/ovn/zone_interconnect``)
writes, in every node's own NB and SB, the rows that make the other nodes reachable; there is no
``ovn-ic`` daemon and no interconnect database:

- NB: the transit switch ``transit_switch`` (``other_config:interconn-ts``, ``requested-tnl-key``
  16711683 = ``BaseTransitSwitchTunnelKey`` + network id 0, the multicast options), its port
  ``tstor-<local>`` (type ``router``, ``requested-tnl-key`` = the node id) to ``rtots-<local>`` on
  ``ovn_cluster_router`` (``100.88.0.<id>/16``, MAC ``0a:58:`` + the IPv4 bytes), and per other
  node a ``tstor-<remote>`` of type ``remote`` (``requested-chassis`` = that node,
  ``requested-tnl-key`` = its id, its transit address) and a static route
  ``<remote subnet> via <remote transit IP>`` (``external_ids:ic-node``) on the cluster router;
- SB (``ZoneChassisHandler``): per other node a ``Chassis`` (name = its chassis id, hostname =
  the node, ``other_config:is-remote=true``) with a Geneve ``Encap`` to its node IP
  (``options:csum=true``). northd binds each remote port to its remote chassis, and an
  ``ovn-controller`` with ``ovn-is-interconn=true`` tunnels to it.

Node objects carry the annotations those come from: ``node-subnets``, ``zone-name``, ``node-id``,
``node-transit-switch-port-ifaddr``, ``node-chassis-id``, ``node-primary-ifaddr`` and an
``InternalIP`` (its address on the nodes' network, :data:`NODE_NETWORK`).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import NODE_SUBNETS
from osc_gitops_sandbox.ovn.stack import CLUSTER_ROUTER, SeedNode

TRANSIT_SWITCH = "transit_switch"
"""The default network's transit switch (OVN-Kubernetes' ``types.TransitSwitch``)."""
TRANSIT_SWITCH_TUNNEL_KEY = 16711683
"""``BaseTransitSwitchTunnelKey`` + network id 0 (the default network)."""
TRANSIT_SUBNET = ipaddress.ip_network("100.88.0.0/16")
"""OVN-Kubernetes' default ``v4TransitSwitchSubnet``: node ``id`` has its ``id``-th address."""
POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")
"""Node subnets handed out by :meth:`ZonedCluster.add_node`: ``10.244.<k>.0/24``, k >= 1."""

ZONE_NAME = "k8s.ovn.org/zone-name"
NODE_ID = "k8s.ovn.org/node-id"
TRANSIT_PORT_ADDRESS = "k8s.ovn.org/node-transit-switch-port-ifaddr"
CHASSIS_ID = "k8s.ovn.org/node-chassis-id"
PRIMARY_ADDRESS = "k8s.ovn.org/node-primary-ifaddr"
NODE_NETWORK = ipaddress.ip_network("172.31.0.0/24")
"""The nodes' own network: node ``id`` has its ``id``-th address (the Geneve endpoints)."""


@dataclass(frozen=True)
class ZoneNode:
    """A node as the zones see it: its name, pod subnet and the id OVN-Kubernetes' cluster
    manager gives it (its transit switch tunnel key and transit port address derive from it)."""

    name: str
    subnet: str
    node_id: int

    @property
    def transit_ip(self) -> ipaddress.IPv4Address:
        return ipaddress.IPv4Address(int(TRANSIT_SUBNET.network_address) + self.node_id)

    @property
    def transit_network(self) -> str:
        """The ``rtots-<node>`` router port's address, e.g. ``100.88.0.3/16``."""
        return f"{self.transit_ip}/{TRANSIT_SUBNET.prefixlen}"

    @property
    def transit_mac(self) -> str:
        """``util.IPAddrToHWAddr``: ``0a:58:`` followed by the IPv4 bytes."""
        return "0a:58:" + ":".join(f"{b:02x}" for b in self.transit_ip.packed)

    @property
    def seed(self) -> SeedNode:
        return SeedNode(self.name, self.subnet)

    @property
    def ip(self) -> str:
        """The node's InternalIP on :data:`NODE_NETWORK` (its tunnel endpoint)."""
        return str(NODE_NETWORK.network_address + self.node_id)

    @property
    def chassis(self) -> str:
        """Its chassis id (OVN-Kubernetes: the OVS ``system-id``; here the node name)."""
        return self.name


def node_object(node: ZoneNode, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Node API object of ``node``, with OVN-Kubernetes' interconnect annotations."""
    return complete_node(
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": node.name, "labels": dict(labels or {})}},
        node,
    )  # fmt: skip


def complete_node(obj: Mapping[str, Any], node: ZoneNode) -> dict[str, Any]:
    """A copy of the Node object ``obj`` with what it lacks of the labels every node has, of
    ``spec.podCIDR`` and of OVN-Kubernetes' interconnect annotations; what it has wins."""
    meta = dict(obj.get("metadata") or {})
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        **dict(meta.get("labels") or {}),
    }
    annotations = {
        NODE_SUBNETS: json.dumps({"default": [node.subnet]}),
        ZONE_NAME: node.name,
        NODE_ID: str(node.node_id),
        TRANSIT_PORT_ADDRESS: json.dumps({"ipv4": node.transit_network}),
        CHASSIS_ID: node.chassis,
        PRIMARY_ADDRESS: json.dumps({"ipv4": f"{node.ip}/{NODE_NETWORK.prefixlen}"}),
        **dict(meta.get("annotations") or {}),
    }
    spec = {"podCIDR": node.subnet, **dict(obj.get("spec") or {})}
    status = {
        "addresses": [{"type": "InternalIP", "address": node.ip},
                      {"type": "Hostname", "address": node.name}],
        **dict(obj.get("status") or {}),
    }  # fmt: skip
    return {
        "apiVersion": "v1",
        **obj,
        "kind": "Node",
        "metadata": {**meta, "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": status,
    }


def _remote_port(remote: ZoneNode, uuid_name: str) -> dict[str, Any]:
    return {
        "op": "insert", "table": "Logical_Switch_Port", "uuid-name": uuid_name,
        "row": {"name": f"tstor-{remote.name}", "type": "remote",
                "addresses": f"{remote.transit_mac} {remote.transit_network}",
                "options": ovsdb_rpc.to_datum({"requested-tnl-key": str(remote.node_id),
                                               "requested-chassis": remote.name}),
                "external_ids": ovsdb_rpc.to_datum({"node": remote.name})},
    }  # fmt: skip


def _routes(remotes: Sequence[ZoneNode]) -> list[dict[str, Any]]:
    """``addRemoteNodeStaticRoutes``: each remote subnet via its transit port's address."""
    ops: list[dict[str, Any]] = [
        {"op": "insert", "table": "Logical_Router_Static_Route", "uuid-name": f"route{i}",
         "row": {"ip_prefix": r.subnet, "nexthop": str(r.transit_ip),
                 "external_ids": ovsdb_rpc.to_datum({"ic-node": r.name})}}
        for i, r in enumerate(remotes)
    ]  # fmt: skip
    names = [["named-uuid", f"route{i}"] for i in range(len(remotes))]
    if names:
        ops.append(
            {"op": "mutate", "table": "Logical_Router", "where": [["name", "==", CLUSTER_ROUTER]],
             "mutations": [["static_routes", "insert", ["set", names]]]},
        )  # fmt: skip
    return ops


def interconnect_ops(local: ZoneNode, remotes: Sequence[ZoneNode]) -> list[dict[str, Any]]:
    """The rows a fresh zone gets beside its node switch (see the module docstring): its name
    on NB_Global, the transit switch with ``tstor-<local>`` and the remote ports,
    ``rtots-<local>``, the routes to the remote subnets. The NB_Global row
    (:func:`ensure_nb_global`) and the cluster router
    (:func:`~osc_gitops_sandbox.ovn.stack.seed_ovn_kubernetes`) must already exist."""
    ports = [_remote_port(r, f"remote{i}") for i, r in enumerate(remotes)]
    names = [["named-uuid", f"remote{i}"] for i in range(len(remotes))]
    return [
        *_routes(remotes),
        {"op": "update", "table": "NB_Global", "where": [], "row": {"name": local.name}},
        {"op": "mutate", "table": "NB_Global", "where": [],
         "mutations": [["options", "insert", ovsdb_rpc.to_datum({"name": local.name})]]},
        {"op": "insert", "table": "Logical_Router_Port", "uuid-name": "rtots",
         "row": {"name": f"rtots-{local.name}", "mac": local.transit_mac,
                 "networks": local.transit_network,
                 "options": ovsdb_rpc.to_datum({"mcast_flood": "true"})}},
        {"op": "mutate", "table": "Logical_Router", "where": [["name", "==", CLUSTER_ROUTER]],
         "mutations": [["ports", "insert", ["set", [["named-uuid", "rtots"]]]]]},
        {"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "tstor",
         "row": {"name": f"tstor-{local.name}", "type": "router", "addresses": "router",
                 "options": ovsdb_rpc.to_datum({"router-port": f"rtots-{local.name}",
                                                "requested-tnl-key": str(local.node_id)}),
                 "external_ids": ovsdb_rpc.to_datum({"node": local.name})}},
        *ports,
        {"op": "insert", "table": "Logical_Switch",
         "row": {"name": TRANSIT_SWITCH,
                 "ports": ["set", [["named-uuid", "tstor"], *names]],
                 "other_config": ovsdb_rpc.to_datum({
                     "interconn-ts": TRANSIT_SWITCH,
                     "requested-tnl-key": str(TRANSIT_SWITCH_TUNNEL_KEY)})}},
    ]  # fmt: skip


def ensure_nb_global(nb_remote: str) -> None:
    """Create the NB's single NB_Global row unless it exists (``ovn-ctl`` runs ``ovn-nbctl
    init`` on a new NB; a zone's northd may also have created it already)."""
    select = {"op": "select", "table": "NB_Global", "where": [], "columns": ["_uuid"]}
    if ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [select])[0]["rows"]:
        return
    try:
        ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
            {"op": "insert", "table": "NB_Global", "row": {}}
        ])  # fmt: skip
    except ovsdb_rpc.OvsdbRpcError:
        # northd won the race (NB_Global holds at most one row): only a missing row is an error
        if not ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [select])[0]["rows"]:
            raise


def add_remote_ports(nb_remote: str, remotes: Sequence[ZoneNode]) -> None:
    """Other nodes joined: their ``tstor-<node>`` remote ports on this zone's transit switch
    and the routes to their subnets."""
    names = [["named-uuid", f"remote{i}"] for i in range(len(remotes))]
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        *_routes(remotes),
        *(_remote_port(r, f"remote{i}") for i, r in enumerate(remotes)),
        {"op": "mutate", "table": "Logical_Switch", "where": [["name", "==", TRANSIT_SWITCH]],
         "mutations": [["ports", "insert", ["set", names]]]},
    ])  # fmt: skip


def remove_remote(nb_remote: str, name: str) -> None:
    """A node left (``cleanupNode``): its remote port and its routes leave this zone's NB (by
    dropping the references to them: neither table is a root table)."""
    port, routes = ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Logical_Switch_Port",
         "where": [["name", "==", f"tstor-{name}"]], "columns": ["_uuid"]},
        {"op": "select", "table": "Logical_Router_Static_Route",
         "where": [["external_ids", "includes", ovsdb_rpc.to_datum({"ic-node": name})]],
         "columns": ["_uuid"]},
    ])  # fmt: skip
    ports = [r["_uuid"] for r in port["rows"]]
    gone = [r["_uuid"] for r in routes["rows"]]
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "mutate", "table": "Logical_Switch", "where": [["name", "==", TRANSIT_SWITCH]],
         "mutations": [["ports", "delete", ["set", ports]]]},
        {"op": "mutate", "table": "Logical_Router", "where": [["name", "==", CLUSTER_ROUTER]],
         "mutations": [["static_routes", "delete", ["set", gone]]]},
    ])  # fmt: skip


def add_remote_chassis(sb_remote: str, remotes: Sequence[ZoneNode]) -> None:
    """``ZoneChassisHandler.AddRemoteZoneNode``: a remote ``Chassis`` per node, with its Geneve
    encap to the node's IP (one transaction: ``Encap`` is not a root table)."""
    ops: list[dict[str, Any]] = []
    for i, remote in enumerate(remotes):
        ops += [
            {"op": "insert", "table": "Encap", "uuid-name": f"encap{i}",
             "row": {"type": "geneve", "ip": remote.ip, "chassis_name": remote.chassis,
                     "options": ovsdb_rpc.to_datum({"csum": "true"})}},
            {"op": "insert", "table": "Chassis",
             "row": {"name": remote.chassis, "hostname": remote.name,
                     "encaps": ["named-uuid", f"encap{i}"],
                     "other_config": ovsdb_rpc.to_datum({"is-remote": "true"})}},
        ]  # fmt: skip
    if ops:
        ovsdb_rpc.transact(sb_remote, "OVN_Southbound", ops)


def delete_remote_chassis(sb_remote: str, chassis: str) -> None:
    """``DeleteRemoteZoneNode``: the node's remote chassis leaves this zone's SB."""
    ovsdb_rpc.transact(sb_remote, "OVN_Southbound", [
        {"op": "delete", "table": "Chassis",
         "where": [["name", "==", chassis],
                   ["other_config", "includes", ovsdb_rpc.to_datum({"is-remote": "true"})]]},
    ])  # fmt: skip
