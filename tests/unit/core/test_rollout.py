"""Rolling VNF upgrades (``reconciler.core.transitions.rollout``): held template updates, node by
node, standby first with a drain, health after the detection window, halting past the deadline; all
state in VM annotations, so a new process continues where the last stopped."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed
from reconciler.core.model.plan import Plan
from reconciler.core.planning.full import make_plan
from reconciler.core.transitions.rollout import (
    BOOTING,
    DRAINING,
    HALTED,
    IMAGE,
    PHASE,
    RESTARTING,
    SINCE,
    TEMPLATE,
    Steps,
    format_time,
    next_steps,
)
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to, converge, live_of, northd_healthy, with_live

NF = CompileOptions(steering="network-function")
NODES = ("node-1", "node-2", "node-3")
PODS = [("shop", f"web-{i}", n, {"app": "web"}) for i, n in enumerate(NODES)]
T0 = 1_800_000_000.0
WINDOW = 2 * (1 + 1) + 1  # failureCount * (interval + timeout) + interval, the defaults


def manifests(image: str = "fw:1.0", **spec: Any) -> Desired:
    return desired(
        sg("web", "app=web"),
        vnf("fw", image=image, **spec),
        binding("web-fw", "web", "fw", 10),
    )


def steady(want: Desired) -> Observed:
    return converge(want, cluster(PODS, nodes=NODES), NF)


class World:
    """A cluster in simulation: plans applied as a pass would, steps taken as the engine
    would (annotations merged into the VMs' state, restarts recorded)."""

    def __init__(self, want: Desired, **spec: Any) -> None:
        self.want = want
        self.obs = steady(want)
        self.restarts: list[str] = []
        self.down: set[str] = set()
        """Functions whose guest is down (a restart takes it down until ``boot``)."""

    def plan(self) -> Plan:
        return make_plan(self.want, self.obs, NF)

    def apply(self) -> Plan:
        plan = self.plan()
        state = {(o.namespace, o.name): o.state for o in self.obs.kube_objects}
        obs = with_live(self.obs, apply_to(live_of(self.obs), plan))
        objs = tuple(
            dataclasses.replace(o, state=state.get((o.namespace, o.name), {}))
            for o in obs.kube_objects
        )
        self.obs = northd_healthy(dataclasses.replace(obs, kube_objects=objs), sorted(self.down))
        return plan

    def step(self, now: float) -> Steps:
        """One pass: apply, then the rollout's steps."""
        plan = self.apply()
        steps = next_steps(plan.rollouts, self.obs, now)
        for step in steps.steps:
            key = tuple(step.vm.split("/"))
            if step.action == "restart":
                self.restarts.append(step.vm)
                self.down.add(self.function(step.vm))
                continue
            objs = []
            for o in self.obs.kube_objects:
                if (o.namespace, o.name) == key:
                    merged = {**o.state, **step.annotations}
                    o = dataclasses.replace(o, state={k: v for k, v in merged.items() if v})
                objs.append(o)
            self.obs = dataclasses.replace(self.obs, kube_objects=tuple(objs))
        return steps

    def boot(self, vm: str) -> None:
        self.down.discard(self.function(vm))
        self.obs = northd_healthy(self.obs, sorted(self.down))

    @staticmethod
    def function(vm: str) -> str:
        name = vm.partition("/")[2]  # fw-node-1 / fw-node-1-b
        node = name.removeprefix("fw-").removesuffix("-b")
        return f"osc.fw.{node.replace('-', '_')}" + ("._b" if name.endswith("-b") else "")

    def phases(self) -> dict[str, str]:
        return {
            f"{o.namespace}/{o.name}": o.state[PHASE]
            for o in self.obs.kube_objects
            if o.kind == "VirtualMachine" and o.state.get(PHASE)
        }

    def image(self, vm: str) -> str:
        for o in self.obs.kube_objects:
            if f"{o.namespace}/{o.name}" == vm:
                return str(
                    o.body["spec"]["template"]["spec"]["volumes"][0]["containerDisk"]["image"]
                )
        raise KeyError(vm)


def test_a_template_change_is_held_and_reported_until_the_rollout_selects_a_vm() -> None:
    w = World(manifests())
    w.want = manifests("fw:2.0")
    plan = w.plan()
    assert not [c for c in plan.changes if c.kind == "VirtualMachine"]  # nothing restarts itself
    (rollout,) = plan.meta["rollout"]
    assert rollout["summary"] == "VnfDeployment/fw: 0 of 3 nodes updated"
    assert (rollout["nodes_updated"], rollout["nodes_total"]) == (0, 3)
    assert [vm["outdated"] for vm in rollout["vms"]] == [True, True, True]


def test_one_node_at_a_time_each_after_ovn_saw_it_healthy_past_the_detection_window() -> None:
    w = World(manifests())
    w.want = manifests("fw:2.0")
    steps = w.step(T0)
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-1", RESTARTING)
    ]
    # the next pass writes fw-node-1's new template only, then restarts it
    steps = w.step(T0 + 1)
    assert w.image("security/fw-node-1") == "fw:2.0" and w.image("security/fw-node-2") == "fw:1.0"
    assert [s.action for s in steps.steps] == ["restart", "annotate"]
    assert w.restarts == ["security/fw-node-1"] and w.phases() == {"security/fw-node-1": BOOTING}
    # booting: the guest is down, OVN says so; nothing else is selected
    steps = w.step(T0 + 3)
    assert not steps.steps and steps.recheck_at is not None
    assert any("booting for 2 s" in line for line in steps.waiting)
    w.boot("security/fw-node-1")
    steps = w.step(T0 + 4)  # healthy, but inside the detection window: not trusted yet
    assert not steps.steps and steps.recheck_at == T0 + 1 + WINDOW
    steps = w.step(T0 + 1 + WINDOW)
    assert [(s.vm, s.annotations) for s in steps.steps] == [
        (
            "security/fw-node-1",
            {PHASE: None, SINCE: None, TEMPLATE: None, HALTED: None, IMAGE: None},
        )
    ]
    assert w.plan().meta["rollout"][0]["summary"].startswith("VnfDeployment/fw: 1 of 3 nodes")
    steps = w.step(T0 + 10)
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-2", RESTARTING)
    ]


def test_max_unavailable_restarts_that_many_nodes_at_once() -> None:
    w = World(manifests(updateStrategy={"maxUnavailable": 2}))
    w.want = manifests("fw:2.0", updateStrategy={"maxUnavailable": 2})
    selected = [s.vm for s in w.step(T0).steps]
    assert selected == ["security/fw-node-1", "security/fw-node-2"]


def test_an_instance_never_healthy_halts_the_rollout_and_a_new_spec_rolls_again() -> None:
    spec = {"updateStrategy": {"progressDeadlineSeconds": 30}}
    w = World(manifests(**spec))
    w.want = manifests("fw:2.0-broken", **spec)
    w.step(T0)
    w.step(T0 + 1)  # restarted; it never comes back
    steps = w.step(T0 + 40)
    (halt,) = [s for s in steps.steps if HALTED in s.annotations]
    assert "fw-node-1 not healthy 30 s after its booting began" in str(halt.annotations[HALTED])
    assert "probe failing" in str(halt.annotations[HALTED])
    rollout = w.plan().meta["rollout"][0]
    assert rollout["halted"] and "halted: fw-node-1 not healthy" in rollout["summary"]
    assert not [s for s in w.step(T0 + 50).steps if s.annotations.get(PHASE)]  # no next node
    # the fix: a new image rolls the halted VM again first
    w.want = manifests("fw:2.1", **spec)
    steps = w.step(T0 + 60)
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-1", RESTARTING)
    ]


def test_two_instances_standby_first_drained_then_the_active_one() -> None:
    two = {"instancesPerNode": 2}
    w = World(manifests(**two))
    active = w.obs.nf_active["osc.fw.node_1.fail_close"]
    assert active == "osc.fw.node_1"  # northd's pick (the first healthy member)
    w.want = manifests("fw:2.0", **two)
    steps = w.step(T0)
    # the standby (b) first, drained before anything restarts
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-1-b", DRAINING)
    ]
    plan = w.plan()
    drain = {c.key: c for c in plan.changes if c.kind == "Network_Function_Group"}
    assert drain["osc.fw.node_1.fail_close"].after["network_function"] == ["osc.fw.node_1"]
    assert "osc.fw.node_1._b.probe" not in drain  # its probe group keeps it: health stays known
    steps = w.step(T0 + 1)  # drained: northd no longer names it
    assert [s.annotations.get(PHASE) for s in steps.steps] == [RESTARTING]
    w.step(T0 + 2)
    assert w.restarts == ["security/fw-node-1-b"]
    w.boot("security/fw-node-1-b")
    steps = w.step(T0 + 2 + WINDOW)
    assert [s.annotations.get(PHASE) for s in steps.steps] == [None]  # done: back in its groups
    # now the active one: the other is healthy, so it is drained and its traffic moves
    steps = w.step(T0 + 20)
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-1", DRAINING)
    ]
    w.step(T0 + 21)
    assert w.obs.nf_active["osc.fw.node_1.fail_close"] == "osc.fw.node_1._b"


def test_the_active_instance_waits_while_the_other_is_not_healthy() -> None:
    two = {"instancesPerNode": 2}
    w = World(manifests(**two))
    w.want = manifests("fw:2.0", **two)
    for t in (T0, T0 + 1, T0 + 2):
        w.step(t)
    w.boot("security/fw-node-1-b")
    w.step(T0 + 2 + WINDOW)  # node-1's standby is upgraded
    w.down.add(World.function("security/fw-node-1-b"))  # and then fails its probe
    w.obs = northd_healthy(w.obs, sorted(w.down))
    steps = w.step(T0 + 20)
    # node-1's active one would leave the node without a healthy instance: node-2 goes first
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-2-b", DRAINING)
    ]
    assert "fw-node-1: waits until the other instance on node-1 is healthy" in steps.waiting


def test_state_is_read_from_annotations_only_a_new_process_continues() -> None:
    w = World(manifests())
    w.want = manifests("fw:2.0")
    w.step(T0)
    # "a new process": nothing but the observed cluster is carried over
    fresh = make_plan(w.want, w.obs, NF)
    (rollout,) = fresh.rollouts
    (vm,) = [v for v in rollout.vms if v.phase]
    assert (vm.key, vm.phase, vm.released) == ("security/fw-node-1", RESTARTING, True)
    assert vm.since == format_time(T0)


def test_a_new_vm_is_never_part_of_a_rollout() -> None:
    w = World(manifests())
    obs = dataclasses.replace(
        w.obs,
        kube_objects=tuple(o for o in w.obs.kube_objects if o.name != "fw-node-3"),
    )
    w.obs = obs
    w.want = manifests("fw:2.0")
    plan = w.plan()
    assert ("create", "security/fw-node-3") in {
        (c.action, c.key) for c in plan.changes if c.kind == "VirtualMachine"
    }
    assert plan.meta["rollout"][0]["nodes_total"] == 3


def test_a_chain_through_a_two_instance_vnf_is_said_to_be_interrupted() -> None:
    """A chain is wired through the first instance of each hop only (issue 21): the plan of a
    rolling update says the chain is interrupted while that VM restarts."""
    want = desired(
        sg("web", "app=web"),
        vnf("fw", image="fw:1.0", instancesPerNode=2),
        vnf("ids"),
        binding("web-chain", "web", ["fw", "ids"], 10),
    )
    world = World(want)
    world.want = desired(
        sg("web", "app=web"),
        vnf("fw", image="fw:2.0", instancesPerNode=2),
        vnf("ids"),
        binding("web-chain", "web", ["fw", "ids"], 10),
    )
    (warning,) = [w for w in world.plan().warnings if "rolling update" in w]
    assert warning.startswith(
        "VnfDeployment fw: its rolling update interrupts Binding web-chain's chain fw -> ids on "
        "each node while the first instance there restarts"
    )


def test_an_image_bump_is_pending_not_converged_until_every_node_is_rolled() -> None:
    """Issue 33 item 2: a template change the rollout holds is a pending change of each VM
    (``image fw:1.0 → fw:1.1, rolled node by node``), a VM being rolled is pending while it
    is, and only a plan with neither is converged."""
    w = World(manifests())
    assert w.plan().converged
    w.want = manifests("fw:1.1", cpu=2)
    plan = w.plan()
    assert plan.empty and not plan.converged
    bump = "image fw:1.0 → fw:1.1, cpu 1 → 2"
    assert [(p.kind, p.name, p.change) for p in plan.pending] == [
        ("VirtualMachine", f"security/fw-{n}", f"{bump}, rolled node by node") for n in NODES
    ]
    w.step(T0)  # node-1 selected: its template is written by the next pass
    pending = {p.name: p.change for p in w.plan().pending}
    assert (
        pending["security/fw-node-1"]
        == "image fw:1.0 → fw:1.1, cpu 1 → 2, restarting (rolled node by node)"
    )
    w.step(T0 + 1)  # written and restarted: still pending while it boots
    assert {p.name: p.change for p in w.plan().pending}["security/fw-node-1"] == (
        "booting (rolled node by node)"
    )
    for i, vm in enumerate(f"security/fw-{n}" for n in NODES):
        w.boot(vm)
        for s in range(4):
            w.step(T0 + 100 * (i + 1) + 10 * s)
            for restarted in w.restarts:
                w.boot(restarted)
    assert w.plan().converged and w.plan().pending == ()
