"""ovs-cni, played: what its CNI ADD and DEL write into a node's Open_vSwitch database.

Two behaviours, read from ovs-cni's source (``k8snetworkplumbingwg/ovs-cni``):

- :data:`RELEASED` (``v0.39.0``, the latest tag, and every release before it): the OVN port
  comes only from the ``CNI_ARGS`` environment (``pkg/plugin/plugin.go``: ``EnvArgs`` has
  ``OvnPort``, ``MAC`` and ``K8S_POD_UID``, loaded by ``cnitypes.LoadArgs(args.Args)`` in
  ``CmdAdd``). Multus puts ``K8S_POD_UID`` and, for a network selection element with a
  ``mac``, ``MAC`` there, never an ``OvnPort`` (``pkg/types/conf.go`` ``createRuntimeConf``,
  ``pkg/multus/multus.go`` ``DelegateAdd``); a NAD's ``args`` reach the plugin in its stdin
  config only. So the Interface gets no ``iface-id``;
- :data:`NEWER` (ovs-cni ``main`` since commit 42291151, PR #542, 2026-07-30, in no release
  yet): ``CNI_ARGS`` first, then ``args.cni.ovnPort`` (and ``mac``) of the stdin config, keys
  matched case-insensitively (``pkg/common/common.go`` ``ApplyConfArgsFallback``).

Both write the same rows (``pkg/ovsdb/ovsdb.go`` ``CreatePort``: ONE transaction): an
``Interface`` named after the host end of the veth (``external_ids:iface-id`` only when an
OVN port is known), a ``Port`` of that name with ``external_ids`` ``contPodUid`` (the pod UID
from ``CNI_ARGS``), ``contNetns`` (the netns path), ``contIface`` (the pod-side interface
name) and ``owner=ovs-cni.network.kubevirt.io``, ``vlan_mode`` ``trunk`` (no ``vlan`` in the
config), and the port added to the bridge. DEL removes the port (``DeletePort``).

Only the database side is played here (the veth itself is the data path's business), so the
benchmark and the functional tests can drive a node's OVS DB without ovs-vswitchd.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc

__all__ = [
    "NEWER",
    "OWNER",
    "RELEASED",
    "VERSIONS",
    "cni_add",
    "delete_port",
    "ovn_port_of",
]

RELEASED = "v0.39.0"
NEWER = "main"
VERSIONS = (RELEASED, NEWER)
OWNER = "ovs-cni.network.kubevirt.io"


def _cni_args(raw: str | Mapping[str, str]) -> dict[str, str]:
    """``CNI_ARGS`` (``K=V;K=V``) as a dict."""
    if isinstance(raw, Mapping):
        return dict(raw)
    return dict(p.split("=", 1) for p in raw.split(";") if "=" in p)


def ovn_port_of(version: str, config: Mapping[str, Any], cni_args: Mapping[str, str]) -> str:
    """The OVN port ovs-cni ``version`` would set as ``iface-id`` ("" for none)."""
    if version not in VERSIONS:
        raise ValueError(f"unknown ovs-cni behaviour {version!r} (one of {', '.join(VERSIONS)})")
    port = cni_args.get("OvnPort", "")
    if port or version == RELEASED:
        return port
    for key, value in (((config.get("args") or {}).get("cni")) or {}).items():
        if str(key).lower() == "ovnport" and isinstance(value, str):
            return value
    return ""


def cni_add(
    remote: str, version: str, *, config: Mapping[str, Any] | str,
    cni_args: str | Mapping[str, str], host_iface: str, cont_iface: str, netns: str,
) -> str:  # fmt: skip
    """The OVS side of ovs-cni's CNI ADD: returns the ``iface-id`` it set ("" for none)."""
    conf = json.loads(config) if isinstance(config, str) else dict(config)
    args = _cni_args(cni_args)
    ovn_port = ovn_port_of(version, conf, args)
    bridge = str(conf.get("bridge") or ("br-int" if ovn_port else ""))
    if not bridge:
        raise ValueError("ovs-cni: no bridge in the config and no OVN port")
    interface: dict[str, Any] = {"name": host_iface}
    if ovn_port:
        interface["external_ids"] = ["map", [["iface-id", ovn_port]]]
    port_ids = {
        "contPodUid": args.get("K8S_POD_UID", ""), "contNetns": netns,
        "contIface": cont_iface, "owner": OWNER,
    }  # fmt: skip
    ovsdb_rpc.transact(remote, "Open_vSwitch", [
        {"op": "insert", "table": "Interface", "row": interface, "uuid-name": "intf"},
        {"op": "insert", "table": "Port", "uuid-name": "port", "row": {
            "name": host_iface, "vlan_mode": "trunk", "interfaces": ["named-uuid", "intf"],
            "external_ids": ["map", sorted([k, v] for k, v in port_ids.items())],
        }},
        {"op": "mutate", "table": "Bridge", "where": [["name", "==", bridge]],
         "mutations": [["ports", "insert", ["set", [["named-uuid", "port"]]]]]},
    ])  # fmt: skip
    return ovn_port


def delete_port(remote: str, host_iface: str, bridge: str = "br-int") -> None:
    """ovs-cni's CNI DEL: the port (and its interface) leave the bridge and the database."""
    rows = ovsdb_rpc.transact(remote, "Open_vSwitch", [
        {"op": "select", "table": "Port", "where": [["name", "==", host_iface]],
         "columns": ["_uuid"]},
    ])[0]["rows"]  # fmt: skip
    for row in rows:
        ovsdb_rpc.transact(remote, "Open_vSwitch", [
            {"op": "mutate", "table": "Bridge", "where": [["name", "==", bridge]],
             "mutations": [["ports", "delete", ["set", [row["_uuid"]]]]]},
        ])  # fmt: skip
