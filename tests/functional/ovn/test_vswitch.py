"""The Open_vSwitch DB adapter (``reconciler.adapters.ovn.vswitch``) against a real
``ovsdb-server``: the conditional monitor follows exactly ovs-cni's ports and their
interfaces through inserts, map changes and deletes; a write changes ``iface-id`` only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.ovn import ovs_cni, ovsdb_rpc
from osc_gitops_sandbox.ovn.vswitch_db import VswitchDb

from reconciler.adapters.ovn.vswitch import OvsDb
from reconciler.core.compiling.nic_binding import Write

CONFIG = {"cniVersion": "0.4.0", "type": "ovs", "bridge": "br-int",
          "args": {"cni": {"ovnPort": "nf_fw_node-1_in"}}}  # fmt: skip


@pytest.fixture
def ovs(tmp_path) -> Iterator[tuple[VswitchDb, OvsDb]]:
    with VswitchDb(tmp_path / "ovs") as db:
        adapter = OvsDb(db.remote, timeout=5)
        adapter.connect()
        try:
            yield db, adapter
        finally:
            adapter.close()


def _add(db: VswitchDb, veth: str, version: str = ovs_cni.RELEASED) -> None:
    args = "K8S_POD_UID=uid-1;MAC=0a:00:00:00:00:01"
    ovs_cni.cni_add(db.remote, version, config=CONFIG, cni_args=args, host_iface=veth,
                    cont_iface="podabc", netns="/var/run/netns/n")  # fmt: skip


def _settle(adapter: OvsDb) -> None:
    while adapter.wait(0.2):
        adapter.interfaces()


def test_monitor_follows_ovs_cni_ports_only(ovs: tuple[VswitchDb, OvsDb]) -> None:
    db, adapter = ovs
    _add(db, "veth1")
    ovsdb_rpc.transact(db.remote, "Open_vSwitch", [
        {"op": "insert", "table": "Interface", "uuid-name": "i",
         "row": {"name": "pod1", "external_ids": ["map", [["iface-id", "shop_web-a"]]]}},
        {"op": "insert", "table": "Port", "uuid-name": "p",
         "row": {"name": "pod1", "interfaces": ["named-uuid", "i"]}},
        {"op": "mutate", "table": "Bridge", "where": [["name", "==", "br-int"]],
         "mutations": [["ports", "insert", ["set", [["named-uuid", "p"]]]]]},
    ])  # fmt: skip
    _settle(adapter)
    seen = adapter.interfaces()
    assert [(i.name, i.iface_id, i.port_ids["contIface"]) for i in seen] == [
        ("veth1", None, "podabc")
    ]
    # A map change on the Interface (someone sets, then changes, then removes a key).
    for value in ("x", "y", None):
        mutations: list = [["external_ids", "delete", ["set", ["iface-id"]]]]
        if value:
            mutations.append(["external_ids", "insert", ["map", [["iface-id", value]]]])
        ovsdb_rpc.transact(db.remote, "Open_vSwitch", [
            {"op": "mutate", "table": "Interface", "where": [["name", "==", "veth1"]],
             "mutations": mutations},
        ])  # fmt: skip
        _settle(adapter)
        assert adapter.interfaces()[0].iface_id == value
    ovs_cni.delete_port(db.remote, "veth1")
    _settle(adapter)
    assert adapter.interfaces() == []


def test_write_sets_and_removes_iface_id_only(ovs: tuple[VswitchDb, OvsDb]) -> None:
    db, adapter = ovs
    _add(db, "veth1")
    ovsdb_rpc.transact(db.remote, "Open_vSwitch", [
        {"op": "mutate", "table": "Interface", "where": [["name", "==", "veth1"]],
         "mutations": [["external_ids", "insert",
                        ["map", [["attached-mac", "0a:00:00:00:00:01"]]]]]},
    ])  # fmt: skip
    _settle(adapter)
    iface = adapter.interfaces()[0]
    adapter.write([Write(iface.uuid, iface.name, "nf_fw_node-1_in", None, "test")])
    row = ovsdb_rpc.dump(db.remote, "Open_vSwitch", ["Interface"])["Interface"][0]
    assert row["external_ids"] == {
        "attached-mac": "0a:00:00:00:00:01",
        "iface-id": "nf_fw_node-1_in",
    }
    adapter.write([Write(iface.uuid, iface.name, None, "nf_fw_node-1_in", "test")])
    row = ovsdb_rpc.dump(db.remote, "Open_vSwitch", ["Interface"])["Interface"][0]
    assert row["external_ids"] == {"attached-mac": "0a:00:00:00:00:01"}
    # An interface deleted meanwhile: the write finds nothing, and fails nothing.
    ovs_cni.delete_port(db.remote, "veth1")
    adapter.write([Write(iface.uuid, iface.name, "nf_fw_node-1_in", None, "test")])


def test_newer_ovs_cni_writes_the_nad_port_released_does_not(tmp_path) -> None:
    with VswitchDb(tmp_path / "ovs") as db:
        _add(db, "veth1", ovs_cni.RELEASED)
        _add(db, "veth2", ovs_cni.NEWER)
        rows = {
            r["name"]: r
            for r in ovsdb_rpc.dump(db.remote, "Open_vSwitch", ["Interface"])["Interface"]
        }
        assert rows["veth1"]["external_ids"] == {}
        assert rows["veth2"]["external_ids"] == {"iface-id": "nf_fw_node-1_in"}
        ports = {r["name"]: r for r in ovsdb_rpc.dump(db.remote, "Open_vSwitch", ["Port"])["Port"]}
        assert ports["veth1"]["external_ids"] == {
            "contIface": "podabc", "contNetns": "/var/run/netns/n", "contPodUid": "uid-1",
            "owner": "ovs-cni.network.kubevirt.io",
        }  # fmt: skip
