"""Zone mode of the sandbox: one Kubernetes API, one NB per node, seeded the way OVN-Kubernetes
interconnect seeds each node's zone. The node agents' tests stand on these guarantees."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.stack import OvnSandbox, OvnSandboxError
from osc_gitops_sandbox.ovn.zones import (
    NODE_ID,
    TRANSIT_PORT_ADDRESS,
    TRANSIT_SWITCH,
    ZONE_NAME,
    ZonedCluster,
)

from tests.support.ovn import OVN_MARKS
from tests.support.paths import REPO

pytestmark = OVN_MARKS

EXAMPLE_CLUSTER = REPO / "examples" / "cluster"
ROW_TABLES = ["Logical_Switch", "Logical_Switch_Port", "Logical_Router", "NB_Global"]


def rows(cluster: ZonedCluster, node: str) -> dict[str, list[dict[str, Any]]]:
    return cluster.zone(node).dump(ROW_TABLES)


def names(table: list[dict[str, Any]]) -> set[str]:
    return {row["name"] for row in table}


def pod_ports(cluster: ZonedCluster, node: str) -> dict[str, dict[str, Any]]:
    """``{lsp name: row}`` of the pod LSPs in ``node``'s NB."""
    return {
        row["name"]: row
        for row in rows(cluster, node)["Logical_Switch_Port"]
        if row["external_ids"].get("pod") == "true"
    }


def api_pods_on(cluster: ZonedCluster, node: str) -> dict[str, dict[str, Any]]:
    return {
        f"{p['metadata']['namespace']}_{p['metadata']['name']}": p
        for p in cluster.kube.objects("Pod")
        if p["spec"]["nodeName"] == node
    }


def answers(remote: str) -> bool:
    try:
        return "OVN_Northbound" in ovsdb_rpc.list_dbs(remote, 1.0)
    except (OSError, ovsdb_rpc.OvsdbRpcError):
        return False


@pytest.fixture
def zoned(tmp_path: Path) -> Iterator[ZonedCluster]:
    """The example cluster (node-1, node-2 and their pods) plus an empty node-3."""
    with ZonedCluster(tmp_path / "z") as cluster:
        cluster.seed_dir(EXAMPLE_CLUSTER)
        cluster.add_node("node-3")
        yield cluster


@pytest.mark.parametrize("distribution", ["host", "sid"])
def test_each_zone_holds_only_its_node_switch_and_its_pods(
    tmp_path: Path, distribution: str
) -> None:
    with ZonedCluster(tmp_path / "z", distribution=distribution) as cluster:
        assert cluster.distribution.name == distribution
        cluster.seed_dir(EXAMPLE_CLUSTER)
        cluster.add_node("node-3", labels={"osc.io/vnf-capable": "true"})
        cluster.add_pod("shop-backend", "late-1", "node-3", {"app": "api"})
        assert cluster.nodes == ["node-1", "node-2", "node-3"]
        remotes = cluster.nb_remotes
        assert len(set(remotes.values())) == 3
        assert all(r.startswith("unix:") and r.endswith("/nb.sock") for r in remotes.values())
        for node in cluster.nodes:
            assert cluster.nb_remote(node) == remotes[node]
            zone = rows(cluster, node)
            assert names(zone["Logical_Switch"]) == {node, TRANSIT_SWITCH}
            # its pods, and nothing of other nodes' pods
            api = api_pods_on(cluster, node)
            ports = pod_ports(cluster, node)
            assert set(ports) == set(api) and ports
            for lsp, row in ports.items():
                pod = api[lsp]["metadata"]
                assert row["external_ids"] == {"namespace": pod["namespace"], "pod": "true"}
                assert row["options"]["iface-id-ver"] == pod["uid"]
                assert row["options"]["requested-chassis"] == node
            switch = next(s for s in zone["Logical_Switch"] if s["name"] == node)
            assert switch["other_config"]["subnet"] == cluster.zone(node).node.subnet
            # the other nodes appear only as remote transit ports
            others = set(cluster.nodes) - {node}
            transit = {
                r["name"]: r for r in zone["Logical_Switch_Port"] if r["name"].startswith("tstor-")
            }
            assert transit[f"tstor-{node}"]["type"] == "router"
            assert {n for n in others if transit[f"tstor-{n}"]["type"] == "remote"} == others
            assert names(zone["Logical_Router"]) == {"ovn_cluster_router"}
            assert zone["NB_Global"][0]["name"] == node
            assert zone["NB_Global"][0]["options"] == {"name": node}
        node3 = cluster.kube.get_object("Node", None, "node-3")
        assert node3 is not None
        annotations = node3["metadata"]["annotations"]
        assert annotations[ZONE_NAME] == "node-3"
        assert json.loads(annotations["k8s.ovn.org/node-subnets"]) == {"default": ["10.244.3.0/24"]}
        assert node3["metadata"]["labels"]["osc.io/vnf-capable"] == "true"
        node_ids = {n["metadata"]["annotations"][NODE_ID] for n in cluster.kube.objects("Node")}
        assert len(node_ids) == 3
        transit_ip = json.loads(annotations[TRANSIT_PORT_ADDRESS])["ipv4"]
        assert transit_ip == cluster.zone("node-3").node.transit_network


def test_a_pod_moving_leaves_its_old_zone_and_joins_the_new_one(zoned: ZonedCluster) -> None:
    before = zoned.kube.get_object("Pod", "shop-frontend", "web-1")
    assert before is not None and before["spec"]["nodeName"] == "node-1"
    assert "shop-frontend_web-1" in pod_ports(zoned, "node-1")

    after = zoned.move_pod("shop-frontend", "web-1", "node-3")

    assert after["spec"]["nodeName"] == "node-3"
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert "shop-frontend_web-1" not in pod_ports(zoned, "node-1")
    moved = pod_ports(zoned, "node-3")["shop-frontend_web-1"]
    assert moved["options"]["iface-id-ver"] == after["metadata"]["uid"]
    address = json.loads(after["metadata"]["annotations"]["k8s.ovn.org/pod-networks"])
    assert address["default"]["ip_addresses"][0].startswith("10.244.3.")
    ip = address["default"]["ip_addresses"][0].split("/")[0]
    assert moved["addresses"] == f"{address['default']['mac_address']} {ip}"
    assert "shop-frontend_web-1" not in pod_ports(zoned, "node-2")


def test_a_zone_nb_stopped_and_restarted_keeps_its_data_and_catches_up(
    zoned: ZonedCluster,
) -> None:
    remote = zoned.nb_remote("node-2")
    before = pod_ports(zoned, "node-2")

    zoned.stop_nb("node-2")

    assert not answers(remote)
    assert answers(zoned.nb_remote("node-1")) and answers(zoned.nb_remote("node-3"))
    # the cluster goes on meanwhile: OVN-Kubernetes' writes for node-2 wait for its NB
    zoned.add_pod("shop-frontend", "web-3", "node-2", {"app": "web"})
    zoned.delete_pod("shop-backend", "db-1")
    zoned.add_pod("shop-frontend", "web-4", "node-1", {"app": "web"})
    assert zoned.zone("node-2").pending_writes == 2
    assert "shop-frontend_web-4" in pod_ports(zoned, "node-1")

    zoned.start_nb("node-2")

    assert zoned.nb_remote("node-2") == remote and answers(remote)
    after = pod_ports(zoned, "node-2")
    assert set(after) == (set(before) - {"shop-backend_db-1"}) | {"shop-frontend_web-3"}
    assert set(after) == set(api_pods_on(zoned, "node-2"))
    for lsp in set(before) & set(after):
        assert after[lsp]["_uuid"] == before[lsp]["_uuid"]  # the same rows, not re-seeded
    assert zoned.zone("node-2").pending_writes == 0


def test_nodes_join_and_leave(zoned: ZonedCluster) -> None:
    zone4 = zoned.add_node("node-4", subnet="10.244.40.0/24")
    assert names(rows(zoned, "node-4")["Logical_Switch"]) == {"node-4", TRANSIT_SWITCH}
    assert zone4.node.subnet == "10.244.40.0/24"
    for node in ["node-1", "node-2", "node-3"]:
        assert "tstor-node-4" in names(rows(zoned, node)["Logical_Switch_Port"])
    zoned.add_pod("shop-frontend", "web-9", "node-4", {"app": "web"})
    assert set(pod_ports(zoned, "node-4")) == {"shop-frontend_web-9"}

    gone = zoned.nb_remote("node-1")
    pods_of_node1 = set(api_pods_on(zoned, "node-1"))
    assert pods_of_node1

    zoned.remove_node("node-1")

    assert zoned.nodes == ["node-2", "node-3", "node-4"]
    assert zoned.kube.get_object("Node", None, "node-1") is None
    assert not api_pods_on(zoned, "node-1")  # the pod GC's part
    assert not answers(gone) and not Path(gone.removeprefix("unix:")).exists()
    for node in zoned.nodes:
        assert "tstor-node-1" not in names(rows(zoned, node)["Logical_Switch_Port"])
        assert not pods_of_node1 & set(pod_ports(zoned, node))
    with pytest.raises(KeyError, match="node-1"):
        zoned.nb_remote("node-1")
    # a node of the same name can join again, as a fresh zone
    zoned.add_node("node-1")
    assert pod_ports(zoned, "node-1") == {}


def test_nodes_given_twice_or_sharing_a_subnet_are_refused(zoned: ZonedCluster) -> None:
    with pytest.raises(ValueError, match="already in the cluster"):
        zoned.add_node("node-2")
    with pytest.raises(ValueError, match="already another node's"):
        zoned.add_node("node-5", subnet="10.244.1.0/24")
    assert zoned.nodes == ["node-1", "node-2", "node-3"]
    zoned.add_node("node-5")  # the refused attempt left nothing reserved


def test_zones_with_northd_turn_their_own_switches_into_datapaths(tmp_path: Path) -> None:
    with ZonedCluster(tmp_path / "z", nodes=["n1", "n2"], northd=True) as cluster:
        for node in cluster.nodes:
            zone = cluster.zone(node)
            assert len(zone.ovn.pids) == 3  # NB, SB, northd
            zone.ovn.wait_northd_sync()
            datapaths = zone.ovn.sbctl("--columns=external_ids", "list", "Datapath_Binding")
            assert f'name="{node}"' in datapaths or f"name={node}" in datapaths
            other = "n2" if node == "n1" else "n1"
            assert f'name="{other}"' not in datapaths and f"name={other}" not in datapaths


def test_a_socket_path_too_long_for_unix_sockets_is_a_clear_error(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 80)
    with pytest.raises(OvnSandboxError, match="longer than 107 bytes"):
        ZonedCluster(deep, nodes=["a-node-with-a-long-name"]).start()


def test_an_nb_only_sandbox_is_one_process_and_its_nb_restarts_alone(tmp_path: Path) -> None:
    with pytest.raises(OvnSandboxError, match="northd needs a Southbound DB"):
        OvnSandbox(tmp_path / "bad", northd=True, southbound=False)
    with OvnSandbox(tmp_path / "nb", northd=False, southbound=False) as alone:
        assert len(alone.pids) == 1 and answers(alone.nb_remote)
    with OvnSandbox(tmp_path / "full", northd=True, tcp=True) as full:
        full.nbctl("ls-add", "kept")
        sb, northd = full.sb, full.northd
        full.stop_nb()
        assert not full.nb_running and not answers(full.nb_remote)
        full.start_nb()
        assert full.nb_running and answers(full.nb_remote) and answers(full.nb_tcp_remote)
        assert "kept" in full.nbctl("ls-list")
        assert full.sb is sb and full.northd is northd and northd is not None and northd.alive()
        full.wait_northd_sync()  # northd found the NB again


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_hundred_zones_are_one_process_each(tmp_path: Path) -> None:
    nodes = [f"n{i}" for i in range(100)]
    with ZonedCluster(tmp_path / "z", nodes=nodes) as cluster:
        for i in range(300):
            cluster.add_pod("bulk", f"p{i}", nodes[i % 100])
        pids = [pid for node in nodes for pid in cluster.zone(node).ovn.pids]
        assert len(set(pids)) == 100
        for node in nodes:
            assert set(pod_ports(cluster, node)) == set(api_pods_on(cluster, node))
            assert len(pod_ports(cluster, node)) == 3
