"""The node binder's engine (``reconciler.engine.binder``) on in-memory providers: an OVS
database and a node's VMs and virt-launcher pods as plain values, a clock of our own."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from reconciler.core.compiling.compile import compile_target
from reconciler.core.compiling.nic_binding import (
    CONT_IFACE,
    CONT_NETNS,
    CONT_POD_UID,
    OVS_CNI_OWNER,
    Write,
)
from reconciler.core.model.observed import KubeObject, LauncherPod, OvsInterface
from reconciler.engine.binder import Binder, BinderConfig
from reconciler.engine.providers import NodeVmProvider, OvsProvider
from reconciler.errors import EndpointError
from tests.support.builders import binding, cluster, desired, sg, vnf

NODE = "node-1"
IN, OUT = "nf_firewall_node-1_in", "nf_firewall_node-1_out"


class OvsDown(EndpointError):
    cause = "ovs"


@dataclass
class Counters:
    iface_id: str | None
    counters: dict[str, int]


@dataclass
class FakeOvs:
    remote: str = "unix:/run/openvswitch/db.sock"
    rows: dict[str, OvsInterface] = field(default_factory=dict)
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    up: bool = True
    connected: bool = False
    transactions: list[list[Write]] = field(default_factory=list)

    def connect(self) -> None:
        if not self.up:
            raise OvsDown(f"Open_vSwitch DB at {self.remote}: cannot connect: Permission denied")
        self.connected = True

    def close(self) -> None:
        self.connected = False

    def interfaces(self) -> Sequence[OvsInterface]:
        return sorted(self.rows.values(), key=lambda i: i.name)

    def wait(self, seconds: float) -> bool:
        return False

    def wake(self) -> None:
        pass

    def write(self, writes: Sequence[Write]) -> None:
        self.transactions.append(list(writes))
        for w in writes:
            row = self.rows.get(w.interface)
            if row is not None:
                self.rows[w.interface] = dataclasses.replace(row, iface_id=w.iface_id)

    def statistics(self) -> Mapping[str, Counters]:
        return {
            i.name: Counters(i.iface_id, dict(self.stats.get(i.name, {})))
            for i in self.rows.values()
            if i.iface_id
        }


@dataclass
class FakeVms:
    vms: list[KubeObject] = field(default_factory=list)
    pods: list[LauncherPod] = field(default_factory=list)

    def read(self) -> tuple[Sequence[KubeObject], Sequence[LauncherPod]]:
        return list(self.vms), list(self.pods)

    def relist(self) -> None:
        pass

    def start(self, stop: threading.Event, on_change: Callable[[], None]) -> None:
        pass


def vms() -> list[KubeObject]:
    target = compile_target(
        desired(sg("web", "app=web"), vnf("firewall"), binding("b", "web", "firewall", 10)),
        cluster([("shop", "web-1", "node-1", {"app": "web"})]),
    )
    return [
        KubeObject(r.kind, *r.key.split("/", 1), body=r.fields)
        for r in target.resources.values()
        if r.kind == "VirtualMachine"
    ]


def launcher(objs: list[KubeObject], uid: str = "pod-1") -> LauncherPod:
    vm = next(o for o in objs if o.name == "firewall-node-1")
    ifaces = vm.body["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]
    mac = {i["name"]: i["macAddress"] for i in ifaces if "macAddress" in i}
    status = [
        {"name": f"security/firewall-node-1-{s}", "interface": f"pod{s}", "mac": mac[f"data-{s}"]}
        for s in ("in", "out")
    ]  # fmt: skip
    return LauncherPod("security", "virt-launcher-firewall-node-1-x", uid, NODE, "firewall-node-1",
                       json.dumps(status), running=True)  # fmt: skip


def ovs_cni(name: str, pod: str, cont: str, iface_id: str | None = None) -> OvsInterface:
    return OvsInterface(f"u-{name}", name, iface_id, {
        CONT_POD_UID: pod, CONT_IFACE: cont, CONT_NETNS: "/x", "owner": OVS_CNI_OWNER,
    })  # fmt: skip


def pod_iface(name: str, lsp: str) -> OvsInterface:
    return OvsInterface(f"u-{name}", name, lsp, {})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(ovs: FakeOvs, kube: FakeVms, clock: Clock | None = None) -> Binder:
    fake_ovs: OvsProvider = ovs
    fake_kube: NodeVmProvider = kube
    return Binder(BinderConfig(node=NODE, instance="osc-gitops"), fake_kube, fake_ovs,
                  clock=clock or Clock())  # fmt: skip


def test_a_pass_binds_in_one_transaction_and_a_second_writes_nothing() -> None:
    objs = vms()
    ovs = FakeOvs(rows={
        "u-v1": ovs_cni("v1", "pod-1", "podin"), "u-v2": ovs_cni("v2", "pod-1", "podout"),
        "u-p1": pod_iface("p1", "shop_web-1"),
    })  # fmt: skip
    binder = make(ovs, FakeVms(objs, [launcher(objs)]))
    binder.pass_once()
    assert [[(w.name, w.iface_id) for w in t] for t in ovs.transactions] == [
        [("v1", IN), ("v2", OUT)]
    ]
    binder.pass_once()
    assert len(ovs.transactions) == 1
    record = binder.record()
    assert record["ok"] and [b["port"] for b in record["bound"]] == [IN, OUT]


def test_once_names_the_socket_and_raises_when_the_db_is_not_ours() -> None:
    ovs = FakeOvs(up=False)
    binder = make(ovs, FakeVms())
    with pytest.raises(EndpointError, match=r"db\.sock: cannot connect: Permission denied"):
        binder.run_once()
    assert not binder.record()["ok"]
    assert ovs.transactions == []


def test_the_loop_retries_an_unreachable_db_and_binds_once_it_is_back() -> None:
    objs = vms()
    ovs = FakeOvs(up=False, rows={"u-v1": ovs_cni("v1", "pod-1", "podin")})
    binder = make(ovs, FakeVms(objs, [launcher(objs)]))
    stop = threading.Event()
    attempts: list[float] = []

    original = stop.wait

    def wait(seconds: float | None = None) -> bool:
        attempts.append(seconds or 0.0)
        if len(attempts) == 3:
            ovs.up = True
        if len(attempts) >= 4:
            stop.set()
        return original(0)

    stop.wait = wait  # type: ignore[method-assign]
    ovs_wait = ovs.wait

    def ovs_waited(seconds: float) -> bool:
        stop.set()
        return ovs_wait(seconds)

    ovs.wait = ovs_waited  # type: ignore[method-assign]
    binder.run(stop)
    assert attempts[:3] == [0.5, 1.0, 2.0], "exponential backoff while the DB is unreachable"
    assert ovs.rows["u-v1"].iface_id == IN


def test_traffic_crossed_is_judged_on_the_out_port_over_a_minute() -> None:
    objs = vms()
    ovs = FakeOvs(rows={
        "u-v1": ovs_cni("v1", "pod-1", "podin"), "u-v2": ovs_cni("v2", "pod-1", "podout"),
        "u-p1": pod_iface("p1", "shop_web-1"),
    })  # fmt: skip
    clock = Clock()
    binder = make(ovs, FakeVms(objs, [launcher(objs)]), clock)
    binder.pass_once()
    probes = {"tx_packets": 0, "rx_packets": 0, "tx_bytes": 0, "rx_bytes": 0}
    for minute_tick in range(8):  # OVN's probes only: into "in", back out of "out"
        probes = {**probes, "tx_packets": minute_tick * 10}
        ovs.stats = {"v1": dict(probes), "v2": {"rx_packets": minute_tick * 10}}
        binder.sample(wall=clock.now)
        clock.now += 10
    traffic = binder.record()["traffic"]
    assert traffic[0]["instance"] == "firewall-node-1"
    assert traffic[0]["crossed_last_minute"] == 0, "probes alone are not traffic"
    ovs.stats["v2"] = {"tx_packets": 12, "rx_packets": 80}
    ovs.stats["p1"] = {"rx_packets": 6, "tx_packets": 6}
    binder.sample(wall=clock.now)
    record = binder.record()
    assert record["traffic"][0]["crossed_last_minute"] == 12
    assert record["traffic"][0]["ports"]["out"]["tx_packets"] == 12


def test_history_younger_than_a_minute_says_crossed_never_nothing() -> None:
    from reconciler.core.views.traffic import CounterHistory

    history = CounterHistory()
    history.add(0.0, {})  # before the interface existed
    history.add(1.0, {"p": 0})
    history.add(2.0, {"p": 0})
    assert history.delta("p") is None, "no traffic yet, but less than a minute seen"
    history.add(3.0, {"p": 5})
    assert history.delta("p") == 5
    history.add(70.0, {"p": 5})
    assert history.delta("p") == 0, "a whole minute without traffic"
    history.add(80.0, {"p": 9})
    assert history.delta("p") == 4


def test_skips_are_counted_once_each_and_shown_while_they_last() -> None:
    from reconciler.engine.reporting.metrics import Metrics

    objs = vms()
    pod = launcher(objs)
    status = json.loads(pod.network_status or "[]")
    status[0]["mac"] = "02:00:00:00:00:99"  # Multus reports another MAC on data-in
    bad = dataclasses.replace(pod, network_status=json.dumps(status))
    ovs = FakeOvs(rows={"u-v1": ovs_cni("v1", "pod-1", "podin"),
                        "u-v2": ovs_cni("v2", "pod-1", "podout")})  # fmt: skip
    metrics = Metrics({"node": NODE})
    kube = FakeVms(objs, [bad])
    binder = Binder(BinderConfig(node=NODE, instance="osc-gitops"), kube, ovs,
                    reporter=metrics.binder())  # fmt: skip
    binder.pass_once()
    binder.pass_once()
    text = metrics.exposition().decode()
    assert 'osc_gitops_binder_skips_total{node="node-1",reason="mac-mismatch"} 1.0' in text
    assert 'osc_gitops_binder_skipped_nics{node="node-1",reason="mac-mismatch"} 1.0' in text
    assert [s["reason"] for s in binder.record()["skipped"]] == ["mac-mismatch"]
    kube.pods = [pod]  # fixed
    binder.pass_once()
    text = metrics.exposition().decode()
    assert 'osc_gitops_binder_skipped_nics{node="node-1",reason="mac-mismatch"} 0.0' in text
    assert ovs.rows["u-v1"].iface_id == IN
