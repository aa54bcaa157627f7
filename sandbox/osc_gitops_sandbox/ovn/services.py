"""Kubernetes Services as OVN-Kubernetes writes them: ClusterIP load balancers on every node
switch.

OVN-Kubernetes' services controller (``go-controller/pkg/ovn/controller/services``) turns a
ClusterIP Service into one ``Load_Balancer`` per protocol, ``Service_<ns>/<name>_TCP_cluster``
(``vips`` ``"<cluster IP>:<port>"`` -> ``"<endpoint>:<target port>,…"``, ``external_ids``
``k8s.ovn.org/kind=Service`` and ``k8s.ovn.org/owner=<ns>/<name>``, the options of
``servicesOptions()``: ``event=false``, ``reject=true``, ``skip_snat=false``,
``neighbor_responder=none``, ``hairpin_snat_ip="169.254.169.5 fd69::5"``), and puts it in the
cluster-wide ``Load_Balancer_Group`` ``clusterLBGroup`` that is attached to every node switch
(and gateway router; there is none here). In interconnect mode every zone's NB holds every
Service (each node's ovnkube-controller writes them all) with backends anywhere in the cluster.

This is the case OVN documents as unsupported together with Network Function insertion: a
load balancer on the switch of a steered port. :func:`add_cluster_ip` / :func:`remove_service`
write and remove exactly those rows, one raw transaction per NB.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc

__all__ = ["CLUSTER_LB_GROUP", "HAIRPIN_SNAT_IP", "SERVICE_OPTIONS", "add_cluster_ip",
           "remove_service", "service_lb_name"]  # fmt: skip

CLUSTER_LB_GROUP = "clusterLBGroup"
HAIRPIN_SNAT_IP = "169.254.169.5"
"""OVN-Kubernetes' ``V4OVNServiceHairpinMasqueradeIP``: the source of a pod's own connection
that the load balancer sent back to it."""
SERVICE_OPTIONS = {
    "event": "false", "reject": "true", "skip_snat": "false", "neighbor_responder": "none",
    "hairpin_snat_ip": f"{HAIRPIN_SNAT_IP} fd69::5",
}  # fmt: skip


def service_lb_name(namespace: str, name: str, protocol: str = "tcp") -> str:
    return f"Service_{namespace}/{name}_{protocol.upper()}_cluster"


def add_cluster_ip(
    nb_remote: str, switches: Sequence[str], namespace: str, name: str, cluster_ip: str,
    port: int, backends: Sequence[tuple[str, int]], protocol: str = "tcp",
) -> None:  # fmt: skip
    """The Service's load balancer in ``nb_remote``: in ``clusterLBGroup`` (created if
    missing), the group on each of ``switches`` (the NB's node switches)."""
    groups = ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Load_Balancer_Group",
         "where": [["name", "==", CLUSTER_LB_GROUP]], "columns": ["_uuid"]},
    ])[0]["rows"]  # fmt: skip
    group: list[Any] = groups[0]["_uuid"] if groups else ["named-uuid", "group"]
    ops: list[dict[str, Any]] = [
        {"op": "insert", "table": "Load_Balancer", "uuid-name": "lb",
         "row": {"name": service_lb_name(namespace, name, protocol), "protocol": protocol,
                 "vips": ovsdb_rpc.to_datum({
                     f"{cluster_ip}:{port}": ",".join(f"{ip}:{p}" for ip, p in backends)}),
                 "options": ovsdb_rpc.to_datum(SERVICE_OPTIONS),
                 "external_ids": ovsdb_rpc.to_datum({"k8s.ovn.org/kind": "Service",
                                                     "k8s.ovn.org/owner": f"{namespace}/{name}"})}},
    ]  # fmt: skip
    if not groups:
        ops.append({"op": "insert", "table": "Load_Balancer_Group", "uuid-name": "group",
                    "row": {"name": CLUSTER_LB_GROUP,
                            "load_balancer": ["named-uuid", "lb"]}})  # fmt: skip
    else:
        ops.append({"op": "mutate", "table": "Load_Balancer_Group",
                    "where": [["_uuid", "==", group]],
                    "mutations": [["load_balancer", "insert", ["named-uuid", "lb"]]]})  # fmt: skip
    for switch in switches:
        ops.append({"op": "mutate", "table": "Logical_Switch", "where": [["name", "==", switch]],
                    "mutations": [["load_balancer_group", "insert", group]]})  # fmt: skip
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)


def remove_service(
    nb_remote: str, namespace: str, name: str, protocol: str = "tcp", *,
    detach_from: Sequence[str] = (),
) -> None:  # fmt: skip
    """The Service's load balancer leaves the group and is deleted. With
    ``detach_from``, an empty ``clusterLBGroup`` also leaves those switches and is deleted
    (OVN-Kubernetes keeps it; tests that share a world put the switches back as they were)."""
    lbs, groups = ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Load_Balancer",
         "where": [["name", "==", service_lb_name(namespace, name, protocol)]],
         "columns": ["_uuid"]},
        {"op": "select", "table": "Load_Balancer_Group",
         "where": [["name", "==", CLUSTER_LB_GROUP]], "columns": ["_uuid", "load_balancer"]},
    ])  # fmt: skip
    if not groups["rows"]:
        return
    group = groups["rows"][0]
    gone = [r["_uuid"] for r in lbs["rows"]]
    ops: list[dict[str, Any]] = [
        {"op": "mutate", "table": "Load_Balancer_Group", "where": [["_uuid", "==", group["_uuid"]]],
         "mutations": [["load_balancer", "delete", ["set", gone]]]},
    ]  # fmt: skip
    ops += [{"op": "delete", "table": "Load_Balancer", "where": [["_uuid", "==", u]]} for u in gone]
    left = ovsdb_rpc.from_atom(group["load_balancer"])
    left = [left] if isinstance(left, str) else list(left)
    if detach_from and len(left) <= len(gone):
        ops += [
            {"op": "mutate", "table": "Logical_Switch", "where": [["name", "==", switch]],
             "mutations": [["load_balancer_group", "delete", group["_uuid"]]]}
            for switch in detach_from
        ]  # fmt: skip
        ops.append({"op": "delete", "table": "Load_Balancer_Group",
                    "where": [["_uuid", "==", group["_uuid"]]]})  # fmt: skip
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)
