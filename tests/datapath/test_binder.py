"""Who binds a VNF's OVN ports, proved with packets.

Every other packet test runs the released parts: ovs-cni v0.39.0 (no ``iface-id`` on the VNF
NICs) and the product's node binder on every node (``Datapath(binder=True)``, the default).
Here the two cases the default hides:

- the newer ovs-cni (main since 42291151: ``iface-id`` from the NAD's ``args.cni.ovnPort``)
  without any binder: steered all the same;
- the released ovs-cni without a binder: the ports are never bound, and every command says so
  with its exit code (``apply --wait`` 1, ``status`` 1, ``explain`` 3 with the cause; with
  ``--ovn-sb``, that the Southbound Port_Binding has no chassis); once the binder runs, the same
  world is steered.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from osc_gitops_sandbox.datapath.world import VNF_NAMESPACE, World, run_cli, world
from osc_gitops_sandbox.ovn import ovs_cni, ovsdb_rpc

pytestmark = pytest.mark.datapath

FW1 = f"{VNF_NAMESPACE}/firewall-node-1"
IN1 = "nf_firewall_node-1_in"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if os.geteuid() != 0:
        pytest.skip("the data path needs root (network namespaces, veths, ovs-vswitchd)")
    monkeypatch.setenv("OSC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OSC_EMPTY_GRACE", "0")
    return tmp_path


def _vnf_iface_ids(w: World) -> dict[str, str | None]:
    """The iface-id of every ovs-cni interface on the chassis (by its contIface)."""
    out: dict[str, str | None] = {}
    for chassis in w.dp.chassis.values():
        dump = ovsdb_rpc.dump(chassis.ovs_remote, "Open_vSwitch", ["Port", "Interface"])
        ifaces = {r["_uuid"]: r for r in dump["Interface"]}
        for port in dump["Port"]:
            if port["external_ids"].get("owner") != ovs_cni.OWNER:
                continue
            for uuid in (
                port["interfaces"] if isinstance(port["interfaces"], list) else [port["interfaces"]]
            ):
                out[ifaces[uuid]["name"]] = ifaces[uuid]["external_ids"].get("iface-id")
    return out


def test_newer_ovs_cni_without_a_binder_is_steered(env: Path) -> None:
    with world("26.03", workdir=env / "w", ovs_cni=ovs_cni.NEWER, binder=False) as w:
        assert w.dp.binders == {}
        w.apply()
        assert sorted(v for v in _vnf_iface_ids(w).values() if v) == [
            "nf_firewall_node-1_in", "nf_firewall_node-1_out",
            "nf_firewall_node-2_in", "nf_firewall_node-2_out",
        ]  # fmt: skip
        w.label("web-a", "web")
        w.apply()
        probe = w.dp.probe(w.pod("client-c"), w.pod("web-a"))
        assert probe.replies == 3 and probe.forwarded[FW1] == 6


def test_released_ovs_cni_without_a_binder_is_never_silent(env: Path) -> None:
    with world("26.03", workdir=env / "w", binder=False) as w:
        w.label("web-a", "web")
        w.applier.apply(w.manifests)  # VMs, NADs and rows are written: exit 0
        w.dp.sync_vnfs(wait=False)  # the guests' NICs, as ovs-cni v0.39.0 makes them
        assert set(_vnf_iface_ids(w).values()) == {None}
        conn = [str(w.manifests), *w.apply_args[2:]]

        code, _out, err = run_cli(["apply", *conn, "--wait", "--wait-timeout", "3"])
        assert code == 1
        assert "not ready after 3 s" in err
        assert f"port {IN1}: not bound (in)" in err

        code, out, _err = run_cli(["plan", *conn, "-o", "json"])
        # nothing to write, but held steering is pending, not converged (issue 33): exit 2
        assert code == 2 and json.loads(out)["changes"] == [], "the steering is held"
        unbound = json.loads(out)["meta"]["unbound"]
        assert {(u["vm"], u["port"], u["side"]) for u in unbound} >= {(FW1, IN1, "in")}
        code, out, _err = run_cli(["plan", *conn])
        assert code == 2 and "Unbound VNF ports" in out and f"port {IN1} (in)" in out
        # with the Southbound: its Port_Binding has no chassis, said first
        sb = ["--ovn-sb", str(w.dp.stack_of("node-1").sb_remote)]
        code, out, _err = run_cli(["plan", *conn, *sb, "-o", "json"])
        causes = {u["port"]: u["cause"] for u in json.loads(out)["meta"]["unbound"]}
        assert causes[IN1].startswith("its Southbound Port_Binding has no chassis; "), causes
        code, _out, err = run_cli(["apply", *conn, *sb, "--wait", "--wait-timeout", "2"])
        assert code == 1
        assert f"port {IN1}: not bound (in): its Southbound Port_Binding has no chassis" in err
        code, out, _err = run_cli(["plan", *conn, "-o", "markdown"])
        assert "**Unbound VNF ports**" in out and f"`{IN1}` (in)" in out

        code, out, _err = run_cli(["status"])
        assert code == 1
        assert f"port {IN1} on node-1" in out and "Unbound VNF ports" in out
        code, out, _err = run_cli(["status", "-o", "json"])
        unbound = json.loads(out)["unbound"]
        assert {u["port"] for u in unbound} >= {IN1, "nf_firewall_node-1_out"}

        code, out, _err = run_cli(["explain", "shop/web-a", *conn])
        assert code == 3
        assert (
            "the CNI did not set iface-id: ovs-cni older than commit 42291151" in out
            and "and no binder runs on node-1" in out
        ), out
        code, out, _err = run_cli(["explain", "shop/web-a", *conn, "-o", "json"])
        hop = json.loads(out)["bindings"][0]["hops"][0]
        assert any(IN1 in line and "no binder runs on node-1" in line for line in hop["unbound"])
        code, out, _err = run_cli(["explain", "shop/web-a", *conn, *sb])
        assert code == 3
        assert "is not bound: its Southbound Port_Binding has no chassis; the CNI did not" in out

        # The binder starts: the ports are bound, and the same world is steered.
        w.dp.start_binders()
        w.dp.wait_ports_up([IN1, "nf_firewall_node-1_out"])
        w.wait_all_active()
        w.switch_on(w.applier.apply(w.manifests))
        w.dp.wait_hv()
        probe = w.dp.probe(w.pod("client-c"), w.pod("web-a"))
        assert probe.replies == 3 and probe.forwarded[FW1] == 6
        code, out, _err = run_cli(["status"])
        assert code == 0, out
        code, out, _err = run_cli(["explain", "shop/web-a", *conn])
        assert code == 0, out
        code, out, _err = run_cli(["plan", *conn, *sb, "-o", "json"])  # chassis there too
        assert code == 0 and "unbound" not in json.loads(out)["meta"], out


def test_traffic_per_instance_is_counted_and_told_apart(env: Path) -> None:
    """The binder counts what crosses each instance; explain says it crossed, and a VNF that
    saw nothing while its steered pods talked is named first among the warnings."""
    with world("26.03", workdir=env / "w") as w:
        w.label("web-a", "web")
        w.apply()
        conn = [str(w.manifests), *w.apply_args[2:]]
        w.dp.probe(w.pod("client-c"), w.pod("web-a"), count=5)
        deadline = time.monotonic() + 15  # ovs-vswitchd writes statistics every 5 s
        crossed = None
        while time.monotonic() < deadline:
            traffic = w.dp.binders["node-1"].record()["traffic"]
            crossed = next((t for t in traffic if t["instance"] == "firewall-node-1"), None)
            if crossed is not None and crossed["crossed_last_minute"]:
                break
            time.sleep(0.5)
        assert crossed is not None and crossed["crossed_last_minute"] >= 5
        assert crossed["ports"]["out"]["tx_packets"] >= 5
        time.sleep(1.5)  # the next publish into the Lease
        _code, out, _err = run_cli(["explain", "shop/web-a", *conn, "-o", "json"])
        hop = json.loads(out)["bindings"][0]["hops"][0]
        assert hop["traffic"] == "crossed", hop


def test_a_vnf_that_saw_nothing_while_its_pods_talked_is_named(env: Path) -> None:
    """fail-open, and the VNF stops forwarding: OVN's probe fails and the pods' traffic bypasses
    it. The pods talk (their interfaces count packets), the VNF's out port gets none: explain
    names it among the warnings. The binders look back 4 s instead of a minute here."""
    from osc_gitops_sandbox.datapath.world import binding, security_group, vnf_deployment

    with world("26.03", workdir=env / "w") as w:
        w.dp.stop_binders()
        w.dp.start_binders(window=4.0)
        w.write_manifests(security_group(), vnf_deployment(), binding(failure_policy="fail-open"))
        w.label("web-a", "web")
        w.apply()
        conn = [str(w.manifests), *w.apply_args[2:]]
        w.dp.set_forwarding(w.vnf("node-1"), False)
        deadline = time.monotonic() + 30
        hop: dict = {}
        while time.monotonic() < deadline:
            w.dp.probe(w.pod("client-c"), w.pod("web-a"), count=2, timeout=0.2)
            _code, out, _err = run_cli(["explain", "shop/web-a", *conn, "-o", "json"])
            data = json.loads(out)
            hop = data["bindings"][0]["hops"][0]
            if hop["traffic"] == "silent-while-pods-talked":
                break
            time.sleep(0.5)
        assert hop["traffic"] == "silent-while-pods-talked", hop
        assert "shop_web-a" in hop["trafficDetail"]
        assert any("NOTHING crossed it" in warning for warning in data["warnings"])
        # status (the central owner's, from the binders' Leases) and status --all-nodes say it
        # too, before anything else, with their exit codes unchanged by it
        at = conn.index("--kubeconfig")
        kube = conn[at : at + 2]
        code, out = _while_pods_talk(w, ["status", *kube], "! firewall-node-1 on node-1: "
                                     "silent-while-pods-talked: NOTHING crossed it")  # fmt: skip
        assert code == 0 and out.index("Traffic per VNF instance") < out.index("VNF instances")
        code, out = _while_pods_talk(w, ["status", *kube, "-o", "json"], '"verdict": "silent')
        (silent,) = [t for t in json.loads(out)["traffic"] if t["instance"] == "firewall-node-1"]
        assert silent["crossed_last_minute"] == 0 and silent["pods_talked"] > 0
        code, out = _while_pods_talk(w, ["status", "--all-nodes", *kube],
                                     "! firewall-node-1 on node-1: NOTHING crossed it")  # fmt: skip
        assert out.index("saw NOTHING while pods") < out.index("NODE ")
        assert code == 1, "no node agent runs in this central-NB world: every node is missing"
        w.dp.set_forwarding(w.vnf("node-1"), True)


def _while_pods_talk(w: World, argv: list[str], wanted: str) -> tuple[int, str]:
    """``osc-gitops argv`` while the pods talk, until its output shows ``wanted`` (the binders
    publish every second or so, and judge a 4 s window)."""
    deadline = time.monotonic() + 30
    while True:
        w.dp.probe(w.pod("client-c"), w.pod("web-a"), count=2, timeout=0.2)
        code, out, err = run_cli(argv)
        if wanted in out or time.monotonic() > deadline:
            assert wanted in out, out + err
            return code, out
        time.sleep(0.5)


def test_interconnect_agents_publish_unbound_ports_and_all_nodes_names_them(env: Path) -> None:
    """Released ovs-cni, no binder, one NB per node: each agent's pass publishes its zone's
    unbound VNF ports in its status Lease, and ``status --all-nodes`` names them and exits 1;
    once the binders run, the next passes publish none and it exits 0."""
    from osc_gitops_sandbox.datapath.world import ZoneApply

    with world("26.03", workdir=env / "w", topology="zones", binder=False) as w:
        zone = w.applier
        assert isinstance(zone, ZoneApply)
        w.label("web-a", "web")
        zone.apply(w.manifests)
        w.dp.sync_vnfs(wait=False)
        code, _out, err = zone.run_once(w.manifests, None, "r1")
        assert code == 0, err
        for node in ("node-1", "node-2"):  # node-1's agent also reads its zone's Southbound
            sb = ["--ovn-sb", str(w.dp.stack_of(node).sb_remote)] if node == "node-1" else []
            code, _out, err = zone.run_once(w.manifests, node, "r1", *sb)
            assert code == 0, err
        code, report = zone.status()
        assert code == 1, report
        assert {n["state"] for n in report["nodes"]} == {"ok"}, "each node applied r1"
        unbound = {(u["node"], u["port"]): u["cause"] for u in report["unbound"]}
        assert {("node-1", IN1), ("node-2", "nf_firewall_node-2_in")} <= set(unbound)
        assert unbound[("node-1", IN1)].startswith("its Southbound Port_Binding has no chassis")
        assert unbound[("node-2", "nf_firewall_node-2_in")].startswith("OVN has not bound it")

        w.dp.start_binders()
        w.dp.wait_ports_up([IN1, "nf_firewall_node-1_out"])
        w.dp.wait_ports_up(["nf_firewall_node-2_in", "nf_firewall_node-2_out"])
        for node in ("node-1", "node-2"):
            code, _out, err = zone.run_once(w.manifests, node, "r1")
            assert code == 0, err
        code, report = zone.status()
        assert code == 0 and report["unbound"] == [], report
