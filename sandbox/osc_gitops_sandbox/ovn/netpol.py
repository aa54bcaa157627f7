"""Kubernetes NetworkPolicies as OVN-Kubernetes writes them into a Northbound DB.

The shapes are ovn-kubernetes main's (``github.com/ovn-kubernetes/ovn-kubernetes``,
``go-controller/pkg/ovn/base_network_controller_policy.go``, ``gress_policy.go``,
``pkg/libovsdb/util/acl.go``, ``pkg/libovsdb/ops/db_object_types.go``), reduced to what the
pipeline sees:

- a namespace's *default deny* per direction: a Port_Group (owner type ``NetpolNamespace``) of
  the selected pods, a ``drop`` ACL at priority 1000 and an ``allow`` ACL for ARP/ND at 1001,
  tier 2 (``DefaultACLTier``);
- the policy's own Port_Group (owner type ``NetworkPolicy``) and, per rule, an
  ``allow-related`` ACL at priority 1001, tier 2, matching the peer's address.

Ingress ACLs are ``to-lport`` (``outport == @pg``); egress ACLs are ``from-lport`` with
``options:apply-after-lb=true`` (``LportEgressAfterLB``: OVN evaluates them in
``ls_in_acl_after_lb_eval``, after the load balancer: a Service connection's destination there
is the backend pod). Every row carries OVN-Kubernetes' owner keys (``k8s.ovn.org/owner-controller``,
``…/owner-type``, ``…/name``, ``…/id``); Port_Group names are its hashes (``"a"`` + FNV-1a 64 of
the id, ``pkg/util/util.go`` ``HashForOVN``). The peer is written as an address rather than an
Address_Set: the same match once OVN expands the set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from osc_gitops_sandbox.ovn import ovsdb_rpc

__all__ = [
    "CONTROLLER",
    "GENERATIONS",
    "MANAGEMENT_PORT_PREFIX",
    "add_management_port",
    "add_network_policy",
    "hash_for_ovn",
    "owner_ids",
    "remove_network_policy",
    "seed_generation",
]

CONTROLLER = "default-network-controller"
MANAGEMENT_PORT_PREFIX = "k8s-"
"""The node's management port LSP is ``k8s-<node>`` (``types.K8sPrefix``); on the host it is
``ovn-k8s-mp0``."""
TIER = 2
DENY_PRIORITY, ALLOW_PRIORITY = 1000, 1001
PolicyType = Literal["Ingress", "Egress"]


def hash_for_ovn(text: str) -> str:
    """OVN-Kubernetes' ``HashForOVN``: ``"a"`` + the decimal FNV-1a 64-bit hash of ``text``."""
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value ^= byte
        value = (value * 0x100000001B3) % (1 << 64)
    return f"a{value}"


def owner_ids(owner_type: str, *values: str, **extra: str) -> dict[str, str]:
    """The external_ids of a DbObjectIDs row: owner keys, ``k8s.ovn.org/name`` (the first
    value), the un-prefixed extra keys, and ``k8s.ovn.org/id`` joining them all."""
    ids = {
        "k8s.ovn.org/owner-controller": CONTROLLER,
        "k8s.ovn.org/owner-type": owner_type,
        "k8s.ovn.org/name": values[0],
        **extra,
    }
    ids["k8s.ovn.org/id"] = ":".join((CONTROLLER, owner_type, *values, *extra.values()))
    return ids


def _acl(uuid_name: str, direction: PolicyType, priority: int, match: str, action: str,
         ids: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    row: dict[str, Any] = {
        "direction": "to-lport" if direction == "Ingress" else "from-lport",
        "priority": priority,
        "tier": TIER,
        "match": match,
        "action": action,
        "external_ids": ovsdb_rpc.to_datum(ids),
    }
    if direction == "Egress":
        row["options"] = ovsdb_rpc.to_datum({"apply-after-lb": "true"})
    return {"op": "insert", "table": "ACL", "uuid-name": uuid_name, "row": row}


def _port_uuids(nb_remote: str, ports: Sequence[str]) -> list[list[str]]:
    rows = ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Logical_Switch_Port", "where": [["name", "==", p]],
         "columns": ["_uuid"]} for p in ports
    ])  # fmt: skip
    out = []
    for port, result in zip(ports, rows, strict=True):
        if not result["rows"]:
            raise ValueError(f"no Logical_Switch_Port named {port!r}")
        out.append(result["rows"][0]["_uuid"])
    return out


def add_network_policy(
    nb_remote: str, namespace: str, name: str, pods: Sequence[str], policy_type: PolicyType,
    allow_peer: str | None = None,
) -> None:  # fmt: skip
    """A NetworkPolicy ``namespace/name`` selecting the pods whose LSPs are ``pods``, of one
    ``policy_type``: with ``allow_peer`` (an IPv4 address) one rule allowing that peer (from
    it for Ingress, to it for Egress), without it no rule (the pods are isolated: deny all)."""
    ports = ["set", _port_uuids(nb_remote, pods)]
    side = "outport" if policy_type == "Ingress" else "inport"
    deny_ids = owner_ids("NetpolNamespace", namespace, direction=policy_type)
    deny_pg = hash_for_ovn(deny_ids["k8s.ovn.org/id"])
    policy_ids = owner_ids("NetworkPolicy", f"{namespace}:{name}")
    policy_pg = hash_for_ovn(policy_ids["k8s.ovn.org/id"])
    ops: list[dict[str, Any]] = [
        _acl("deny", policy_type, DENY_PRIORITY, f"{side} == @{deny_pg}", "drop",
             {**deny_ids, "type": "defaultDeny"}),
        _acl("arp", policy_type, ALLOW_PRIORITY, f"{side} == @{deny_pg} && (arp || nd)", "allow",
             {**deny_ids, "type": "arpAllow"}),
        {"op": "insert", "table": "Port_Group",
         "row": {"name": deny_pg, "ports": ports, "external_ids": ovsdb_rpc.to_datum(deny_ids),
                 "acls": ["set", [["named-uuid", "deny"], ["named-uuid", "arp"]]]}},
    ]  # fmt: skip
    acls: list[list[str]] = []
    if allow_peer is not None:
        field = "ip4.src" if policy_type == "Ingress" else "ip4.dst"
        gress = owner_ids("NetworkPolicy", f"{namespace}:{name}", direction=policy_type,
                          **{"gress-index": "0", "ip-block-index": "-1",
                             "port-policy-protocol": "None"})  # fmt: skip
        ops.append(_acl("rule", policy_type, ALLOW_PRIORITY,
                        f"{field} == {{{allow_peer}}} && {side} == @{policy_pg}",
                        "allow-related", gress))  # fmt: skip
        acls.append(["named-uuid", "rule"])
    ops.append(
        {
            "op": "insert",
            "table": "Port_Group",
            "row": {
                "name": policy_pg,
                "ports": ports,
                "acls": ["set", acls],
                "external_ids": ovsdb_rpc.to_datum(policy_ids),
            },
        }
    )
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)


def remove_network_policy(
    nb_remote: str, namespace: str, name: str, policy_type: PolicyType
) -> None:
    """Remove what :func:`add_network_policy` wrote (the Port_Groups; their ACLs go with
    them, ACL is not a root table)."""
    names = [
        hash_for_ovn(owner_ids("NetpolNamespace", namespace, direction=policy_type)[
            "k8s.ovn.org/id"]),
        hash_for_ovn(owner_ids("NetworkPolicy", f"{namespace}:{name}")["k8s.ovn.org/id"]),
    ]  # fmt: skip
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "delete", "table": "Port_Group", "where": [["name", "==", n]]} for n in names
    ])  # fmt: skip


def add_management_port(nb_remote: str, node: str, mac: str, address: str) -> str:
    """The node's management port as OVN-Kubernetes sets it up (``pkg/ovn/
    base_network_controller.go``, ``base_network_controller_policy.go`` ``addAllowACLFromNode``):
    LSP ``k8s-<node>`` with ``address`` (the node subnet's .2) on the node switch, and the
    ACL allowing everything from it to the node's pods, on the node *switch* (not a port
    group): to-lport, tier 2, priority 1001, ``allow-related``, ``ip4.src==<address>``, owner
    type ``NetpolNode``. Kubelet probes come from this port. Returns the LSP name."""
    lsp = f"{MANAGEMENT_PORT_PREFIX}{node}"
    ids = owner_ids("NetpolNode", node, ip=address)
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "mp",
         "row": {"name": lsp, "addresses": f"{mac} {address}"}},
        {"op": "insert", "table": "ACL", "uuid-name": "node",
         "row": {"direction": "to-lport", "priority": ALLOW_PRIORITY, "tier": TIER,
                 "match": f"ip4.src=={address}", "action": "allow-related",
                 "external_ids": ovsdb_rpc.to_datum(ids)}},
        {"op": "mutate", "table": "Logical_Switch", "where": [["name", "==", node]],
         "mutations": [["ports", "insert", ["named-uuid", "mp"]],
                       ["acls", "insert", ["named-uuid", "node"]]]},
    ])  # fmt: skip
    return lsp


GENERATIONS = ("pre-1.0", "1.0", "1.1", "main")
"""OVN-Kubernetes generations :func:`seed_generation` writes the rows of."""


def seed_generation(nb_remote: str, generation: str, node: str = "node-1") -> None:
    """What an OVN-Kubernetes ``generation`` leaves in an NB beside its switches and pods, the
    rows that tell the generations apart (ovnk = github.com/ovn-kubernetes/ovn-kubernetes):

    - ``pre-1.0``: Port_Groups keyed by ``external_ids:name`` only (the cluster port group and a
      NetworkPolicy's ``<ns>_<policy>``) and an ACL with the old keys (``policy``,
      ``policy_type``), tier 0: what ovnk@v1.0.0's ``external_ids_syncer`` converts;
    - ``1.0``: owner-keyed Port_Groups, and EgressIP's no-reroute router policies on
      ``ovn_cluster_router`` at priority 102 with no external_ids (ovnk@v1.0.0
      ``pkg/ovn/egressip.go`` ``createDefaultNoReroute…``);
    - ``1.1`` (to v1.3.x): the same policies with owner keys and ``k8s.ovn.org/name``
      (``EIP-No-Reroute-Pod-To-Pod`` …);
    - ``main``: as ``1.1``, and the zone's ``NB_Global.name`` = the node (``ovnkube.sh``
      ``local-nb-ovsdb``).

    The cluster router must exist (``seed.seed_ovn_kubernetes``)."""
    if generation not in GENERATIONS:
        raise ValueError(f"unknown OVN-Kubernetes generation {generation!r}")
    ops: list[dict[str, Any]] = []
    if generation == "pre-1.0":
        ops += [
            {"op": "insert", "table": "ACL", "uuid-name": "legacy",
             "row": {"direction": "to-lport", "priority": 1000,
                     "match": "outport == @a4996089729916711663", "action": "drop",
                     "external_ids": ovsdb_rpc.to_datum({
                         "namespace": "demo", "policy": "deny-all", "policy_type": "Ingress",
                         "Ingress_num": "0", "l4Match": "None", "ipblock_cidr": "false"})}},
            {"op": "insert", "table": "Port_Group",
             "row": {"name": "a4996089729916711663", "acls": ["named-uuid", "legacy"],
                     "external_ids": ovsdb_rpc.to_datum({"name": "demo_deny-all"})}},
            {"op": "insert", "table": "Port_Group",
             "row": {"name": "clusterPortGroup",
                     "external_ids": ovsdb_rpc.to_datum({"name": "clusterPortGroup"})}},
        ]  # fmt: skip
        ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)
        return
    for base in ("clusterPortGroup", "clusterRtrPortGroup"):
        ids = owner_ids("Cluster", base)
        ops.append({"op": "insert", "table": "Port_Group",
                    "row": {"name": hash_for_ovn(ids["k8s.ovn.org/id"]),
                            "external_ids": ovsdb_rpc.to_datum(ids)}})  # fmt: skip
    policies = {
        "EIP-No-Reroute-Pod-To-Pod": "ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16",
        "EIP-No-Reroute-Pod-To-Join": "ip4.src == 10.244.0.0/16 && ip4.dst == 100.64.0.0/16",
    }
    uuids = []
    for i, (name, match) in enumerate(policies.items()):
        ids = (
            {}
            if generation == "1.0"
            else owner_ids("EgressIP", name, priority="102", **{"ip-family": "ip4",
                                                                 "network": "default"})
        )  # fmt: skip
        ops.append({"op": "insert", "table": "Logical_Router_Policy", "uuid-name": f"lrp{i}",
                    "row": {"priority": 102, "match": match, "action": "allow",
                            "external_ids": ovsdb_rpc.to_datum(ids)}})  # fmt: skip
        uuids.append(["named-uuid", f"lrp{i}"])
    ops.append({"op": "mutate", "table": "Logical_Router",
                "where": [["name", "==", "ovn_cluster_router"]],
                "mutations": [["policies", "insert", ["set", uuids]]]})  # fmt: skip
    if generation == "main":
        ops.append({"op": "update", "table": "NB_Global", "where": [],
                    "row": {"name": node}})  # fmt: skip
    ovsdb_rpc.transact(nb_remote, "OVN_Northbound", ops)
