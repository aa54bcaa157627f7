"""Rolling VNF upgrades (``reconciler.core.transitions.rollout``): held template updates, node by
node, standby first with a drain, health after the detection window, halting past the deadline; all
state in VM annotations, so a new process continues where the last stopped."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model import naming
from reconciler.core.model.desired import Desired
from reconciler.core.model.facts import HEALTHY, NOT_HEALTHY, UNKNOWN, Finding, Pending
from reconciler.core.model.observed import KubeObject, Observed
from reconciler.core.model.plan import Plan
from reconciler.core.planning.full import make_plan
from reconciler.core.planning.incremental import IncrementalPlanner
from reconciler.core.steering import HealthIndex, MemberHealth
from reconciler.core.transitions.rollout import (
    BOOTING,
    DRAINING,
    HALTED,
    IMAGE,
    OWNER,
    OWNER_SINCE,
    PHASE,
    RENEW,
    RENEWED,
    RESTARTING,
    SINCE,
    TEMPLATE,
    LiveRollout,
    LiveVm,
    Step,
    Steps,
    format_time,
    live_rollouts,
    next_steps,
    owners_of,
    parse_time,
    template_change,
    template_hash,
    vm_image,
    why_unready,
)
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.clock import local_time_zone
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


def fw_and_ids(image: str) -> Desired:
    """Two VnfDeployments of ``image``, each bound to the web pods."""
    return desired(
        sg("web", "app=web"),
        vnf("fw", image=image),
        vnf("ids", image=image),
        binding("web-fw", "web", "fw", 10),
        binding("web-ids", "web", "ids", 20),
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

    def step(self, now: float, owner: str | None = None) -> Steps:
        """One pass: apply, then the rollout's steps (taken by ``owner``)."""
        plan = self.apply()
        steps = next_steps(plan.rollouts, self.obs, now, owner=owner)
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
    (line,) = steps.waiting  # what OVN says of it
    assert line.startswith("fw-node-1: booting for 2 s (probe failing")
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
    w.obs = northd_healthy(w.obs, sorted(w.down))
    # booting: the next decision is due just past the deadline, 30 s after the restart
    steps = w.step(T0 + 2)
    assert steps.steps == () and steps.recheck_at == T0 + 1 + 30 + 0.001
    assert w.step(T0 + 31).steps == ()  # the deadline itself: not past it yet
    steps = w.step(T0 + 31.5)
    ((halt, message),) = [(s, s.annotations[HALTED]) for s in steps.steps]
    assert halt == Step("security/fw-node-1", "annotate", {HALTED: message}, "deadline passed")
    assert message.startswith("fw-node-1 not healthy 30 s after its booting began (probe failing")
    assert "VnfDeployment/fw: halted" in steps.waiting
    rollout = w.plan().meta["rollout"][0]
    assert rollout["halted"] and "halted: fw-node-1 not healthy" in rollout["summary"]
    steps = w.step(T0 + 50)  # said once; no next node
    assert steps.steps == () and "VnfDeployment/fw: halted" in steps.waiting
    # a longer deadline does not resume it by itself (the VM's health or a new spec does)
    w.want = manifests("fw:2.0-broken", updateStrategy={"progressDeadlineSeconds": 600})
    steps = w.step(T0 + 60)
    assert steps.steps == () and "VnfDeployment/fw: halted" in steps.waiting
    # the fix: a new image rolls the halted VM again first
    w.want = manifests("fw:2.1", **spec)
    steps = w.step(T0 + 70)
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-1", RESTARTING)
    ]
    # rolled to the fix's template and image from where it is, the halt cleared
    (vm,) = [v for v in w.plan().rollouts[0].vms if v.key == "security/fw-node-1"]
    restart = {PHASE: RESTARTING, SINCE: format_time(T0 + 70), TEMPLATE: vm.template,
               HALTED: None, IMAGE: "fw:2.1"}  # fmt: skip
    assert steps.steps == (
        Step("security/fw-node-1", "annotate", restart, "new template: goes on from here"),
    )


def test_two_instances_standby_first_drained_then_the_active_one() -> None:
    two = {"instancesPerNode": 2}
    w = World(manifests(**two))
    active = w.obs.nf_active["osc.fw.node_1.fail_close"]
    assert active == "osc.fw.node_1"  # northd's pick (the first healthy member)
    w.want = manifests("fw:2.0", **two)
    # each VM of a node, its slot and the other instance that carries the traffic meanwhile
    assert [(vm.key, vm.slot, vm.peer) for vm in w.plan().rollouts[0].vms][:2] == [
        ("security/fw-node-1", "", "osc.fw.node_1._b"),
        ("security/fw-node-1-b", "b", "osc.fw.node_1"),
    ]
    steps = w.step(T0)
    # the standby (b) first, drained before anything restarts
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-1-b", DRAINING)
    ]
    # until the drain is written, the node's group still holds it: nothing restarts yet
    early = next_steps(w.plan().rollouts, w.obs, T0 + 0.5)
    assert early.steps == ()
    assert early.waiting == (
        "fw-node-1-b: draining (northd has not moved its traffic to the other instance yet)",
    )
    plan = w.plan()
    drain = {c.key: c for c in plan.changes if c.kind == "Network_Function_Group"}
    group = drain["osc.fw.node_1.fail_close"]
    assert group.after["network_function"] == ["osc.fw.node_1"]
    # an update of the live group, standby out (not a group written anew)
    assert group.action == "update"
    assert group.before["network_function"] == ["osc.fw.node_1", "osc.fw.node_1._b"]
    assert "osc.fw.node_1._b.probe" not in drain  # its probe group keeps it: health stays known
    steps = w.step(T0 + 1)  # drained: northd no longer names it
    (standby,) = [v for v in w.plan().rollouts[0].vms if v.key == "security/fw-node-1-b"]
    drained = {PHASE: RESTARTING, SINCE: format_time(T0 + 1), TEMPLATE: standby.template,
               HALTED: None, IMAGE: "fw:2.0"}  # fmt: skip
    assert steps.steps == (Step("security/fw-node-1-b", "annotate", drained, "drained"),)
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
    target = vm.template
    w.step(T0 + 1)  # its template written (no longer outdated) and restarted: booting
    (vm,) = [v for v in make_plan(w.want, w.obs, NF).rollouts[0].vms if v.phase]
    assert (vm.outdated, vm.phase, vm.template, vm.image) == (False, BOOTING, target, "fw:2.0")
    assert (vm.change, vm.peer) == ("", None)  # nothing left to change; one instance: no peer


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
    (finding,) = [f for f in world.plan().findings if "rolling update" in f.text]
    assert finding == Finding(
        "transition",
        "VnfDeployment/fw",
        None,
        "VnfDeployment fw: its rolling update interrupts Binding web-chain's chain fw -> ids on "
        "each node while the first instance there restarts (a chain crosses the first instance "
        "of each hop only; the standby takes over the VNF's own bindings): its failure policy "
        "acts meanwhile",
    )

    # only chains through it: one warning, also beside a one-instance VNF rolled with it
    def three(version: str) -> Desired:
        return desired(
            sg("web", "app=web"),
            vnf("av", image=f"av:{version}"),
            vnf("fw", image=f"fw:{version}", instancesPerNode=2),
            vnf("ids"),
            binding("web-av", "web", "av", 5),
            binding("web-fw", "web", "fw", 7),
            binding("web-chain", "web", ["fw", "ids"], 10),
        )

    world = World(three("1.0"))
    world.want = three("2.0")
    plan = world.plan()
    assert [r.vnf for r in plan.rollouts] == ["av", "fw"]
    assert [f.text for f in plan.findings if "rolling update" in f.text] == [finding.text]


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
    (rolled,) = [p for p in w.plan().pending if p.name == "security/fw-node-1"]
    assert rolled == Pending(
        "VirtualMachine",
        "security/fw-node-1",
        "node-1",
        "image fw:1.0 → fw:1.1, cpu 1 → 2, restarting (rolled node by node)",
        "",
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


def live_vm(
    name: str,
    node: str,
    image: str,
    vnf_name: str = "fw",
    state: dict[str, str] | None = None,
    **status: Any,
) -> KubeObject:
    """One of our VirtualMachines as the cluster shows it (labels, template, rollout
    annotations, KubeVirt's status)."""
    body = {
        "metadata": {"labels": {"osc.io/vnf": vnf_name, "osc.io/node": node}},
        "spec": {"template": {"spec": {"volumes": [{"containerDisk": {"image": image}}]}}},
    }
    return KubeObject("VirtualMachine", "security", name, body, state or {}, status)


RUNS = {"desiredGeneration": 2, "observedGeneration": 2}
"""KubeVirt's status of a VM that runs its current template."""
LAGS = {"desiredGeneration": 3, "observedGeneration": 2}
"""... of a VM whose running instance is older than its template (a restart is due)."""


def test_status_reads_a_rollout_from_the_vms_alone() -> None:
    """``osc-gitops status`` says where a rollout is from the cluster's VirtualMachines:
    which nodes run the new image, which VM is being rolled since when, which wait for a
    restart, who rolls it and why it halted."""
    since, owned = format_time(T0), format_time(T0 - 60)
    rolling = {PHASE: BOOTING, SINCE: since, IMAGE: "fw:2.0", OWNER: "osc on box (pid 1)",
               OWNER_SINCE: owned, HALTED: "fw-node-2 not healthy"}  # fmt: skip
    nodeless = live_vm("fw-node-9", "node-9", "fw:1.0")
    del nodeless.body["metadata"]["labels"]["osc.io/node"]
    objects = [
        KubeObject("VirtualMachine", "shop", "stranger", {"metadata": {"labels": {}}}),
        KubeObject("NetworkAttachmentDefinition", "security", "fw-node-1", {}),
        nodeless,
        live_vm("fw-node-3", "node-3", "fw:1.0", **RUNS),
        live_vm("fw-node-2", "node-2", "fw:2.0", state=rolling, **LAGS),
        live_vm("ids-node-1", "node-1", "ids:1.0", vnf_name="ids"),  # no status: no KubeVirt
        live_vm("fw-node-4", "node-4", "fw:1.0", **LAGS),  # someone bumped it: restart due
        live_vm("fw-node-1", "node-1", "fw:2.0", **RUNS),
    ]
    fw, ids = live_rollouts(objects)
    assert [(vm.name, vm.node, vm.image, vm.runs_template) for vm in fw.vms] == [
        ("fw-node-1", "node-1", "fw:2.0", True),
        ("fw-node-2", "node-2", "fw:2.0", False),
        ("fw-node-3", "node-3", "fw:1.0", True),
        ("fw-node-4", "node-4", "fw:1.0", False),
    ]
    assert fw.vms[1] == LiveVm("fw-node-2", "node-2", "fw:2.0", False, BOOTING, since,
                               "fw-node-2 not healthy", "fw:2.0")  # fmt: skip
    assert (fw.owner, fw.owner_since, fw.target) == ("osc on box (pid 1)", owned, "fw:2.0")
    assert fw.images == {"fw:1.0": ["node-3", "node-4"], "fw:2.0": ["node-1", "node-2"]}
    assert fw.in_progress and fw.halted == "fw-node-2 not healthy"
    assert fw.summary == (
        "VnfDeployment/fw (live): 1 of 4 nodes done, rolling to fw:2.0; "
        f"fw-node-2 booting since {since}; restart pending: fw-node-4; "
        "images: fw:1.0 on node-3, node-4; fw:2.0 on node-1, node-2; "
        f"rolled by osc on box (pid 1) since {owned}; halted: fw-node-2 not healthy"
    )
    data = fw.to_json()
    assert data == {
        "vnf": "fw", "in_progress": True, "halted": "fw-node-2 not healthy",
        "owner": "osc on box (pid 1)", "owner_since": owned, "images": fw.images,
        "vms": [vm.to_json() for vm in fw.vms], "summary": fw.summary,
    }  # fmt: skip
    assert data["vms"][0] == {
        "name": "fw-node-1", "node": "node-1", "image": "fw:2.0", "runs_template": True,
        "phase": None, "since": None, "halted": None, "rolling_to": None,
    }  # fmt: skip
    # one VM on its template, nothing rolled: nothing in progress, the summary lists images
    assert (ids.vnf, ids.vms[0].runs_template, ids.in_progress) == ("ids", True, False)
    assert (ids.owner, ids.target, ids.halted) == (None, None, None)
    assert ids.summary == "VnfDeployment/ids (live): images: ids:1.0 on node-1"


def test_a_rollout_is_in_progress_while_any_sign_of_one_is_left() -> None:
    """In progress: a VM being rolled, an owner still named, VMs on two images, or a VM
    waiting for the restart that applies its template; otherwise not."""
    done = LiveVm("fw-node-1", "node-1", "fw:2.0", True)
    assert not LiveRollout("fw", (done, replace(done, name="fw-node-2"))).in_progress
    assert LiveRollout("fw", (done,), owner="osc on box (pid 1)").in_progress
    assert LiveRollout("fw", (replace(done, phase=RESTARTING),)).in_progress
    assert LiveRollout("fw", (done, replace(done, image="fw:1.0"))).in_progress
    assert LiveRollout("fw", (replace(done, runs_template=False),)).in_progress
    # a VM being rolled without its image written yet names no target; a VM no longer being
    # rolled names none either
    unnamed = replace(done, phase=DRAINING, since=None)
    assert LiveRollout("fw", (unnamed, replace(done, rolling_to="fw:3.0"))).target is None
    assert LiveRollout("fw", (unnamed,)).summary == (
        "VnfDeployment/fw (live): fw-node-1 draining; images: fw:2.0 on node-1"
    )
    owned = LiveRollout("fw", (done,), owner="osc on box (pid 1)")
    assert owned.summary.endswith("; rolled by osc on box (pid 1)")


def test_where_ovn_cannot_report_health_a_new_template_is_written_at_once_and_said_so() -> None:
    """Without Network Function tables nothing tells when a restarted VM is back: no rollout,
    every VM's new template is written now (KubeVirt applies it at the next start), and the
    plan says so once, naming every VnfDeployment concerned."""
    rp = CompileOptions(steering="router-policy")
    obs = converge(fw_and_ids("fw:1.0"), cluster(PODS, nodes=NODES, nf=False), rp)
    plan = make_plan(fw_and_ids("fw:2.0"), obs, rp)
    assert sorted((c.action, c.key) for c in plan.changes if c.kind == "VirtualMachine") == [
        ("update", f"security/{v}-{n}") for v in ("fw", "ids") for n in NODES
    ]
    assert plan.rollouts == ()
    (finding,) = [f for f in plan.findings if f.code == "transition"]
    assert finding == Finding(
        "transition", "VnfDeployment/fw", None,
        "VnfDeployment fw, ids: the new VM template is written now and takes effect at each "
        "VM's next restart (KubeVirt does not restart a running VM for it); osc-gitops rolls "
        "restarts node by node only where it reads OVN's health of each instance (Network "
        "Function steering, not --kubernetes-only): restart them one node at a time (virtctl "
        "restart)",
    )  # fmt: skip


def test_the_owner_names_itself_on_the_vm_it_rolls_renews_it_and_is_taken_over_when_silent() -> (
    None
):
    """The process rolling a VM names itself on it (``owner``, ``owner-since``, ``renewed``),
    renews ``renewed`` every RENEW seconds and no more often (and says when to come back for
    it); another process finding the VM named by an owner it does not know alive takes over,
    saying from whom."""
    w = World(manifests())
    w.want = manifests("fw:2.0")
    w.step(T0)
    w.step(T0 + 1)  # fw-node-1 restarted, booting
    w.obs = northd_healthy(w.obs, sorted(w.down))  # its guest is down: no time limit but ours
    key = "security/fw-node-1"

    def take(steps: Steps) -> None:
        for step in steps.steps:
            objs = []
            for o in w.obs.kube_objects:
                if f"{o.namespace}/{o.name}" == step.vm:
                    merged = {**o.state, **step.annotations}
                    o = dataclasses.replace(o, state={k: v for k, v in merged.items() if v})
                objs.append(o)
            w.obs = dataclasses.replace(w.obs, kube_objects=tuple(objs))

    rollouts = w.plan().rollouts
    steps = next_steps(rollouts, w.obs, T0 + 2, owner="me")
    claim = {OWNER: "me", OWNER_SINCE: format_time(T0 + 2), RENEWED: format_time(T0 + 2)}
    assert steps.steps == (Step(key, "annotate", claim, "rolled by this process"),)
    assert steps.recheck_at == T0 + 2 + RENEW
    take(steps)
    assert w.plan().rollouts[0].summary == (
        f"VnfDeployment/fw: 0 of 3 nodes updated (fw-node-1 booting, rolled by me since "
        f"{format_time(T0 + 2)})"
    )
    steps = next_steps(rollouts, w.obs, T0 + 2 + RENEW - 1, owner="me")
    assert (steps.steps, steps.recheck_at) == ((), T0 + 2 + RENEW)  # renewed recently enough
    steps = next_steps(rollouts, w.obs, T0 + 2 + RENEW, owner="me")
    assert steps.steps == (
        Step(key, "annotate", {RENEWED: format_time(T0 + 2 + RENEW)}, "renewed"),
    )
    assert steps.recheck_at == T0 + 2 + 2 * RENEW
    take(steps)
    # "me" fell silent: "you" (who does not count it alive) takes the VM over where it is
    steps = next_steps(rollouts, w.obs, T0 + 100, owner="you")
    took = {OWNER: "you", OWNER_SINCE: format_time(T0 + 100), RENEWED: format_time(T0 + 100)}
    assert steps.steps == (Step(key, "annotate", took, "took over from me (silent)"),)
    # while "me" is alive, "you" takes no step and says whose rollout it is
    steps = next_steps(rollouts, w.obs, T0 + 100, owner="you", alive=["me"])
    assert steps.steps == () and steps.owned_by == (("fw", "me", format_time(T0 + 2)),)
    assert steps.waiting == (
        f"VnfDeployment/fw: its rolling update is owned by me since {format_time(T0 + 2)}: this "
        "process restarts none of its VMs; it waits until that one finishes (or is silent for "
        "30 s, then takes it over from where it is)",
    )
    unsaid = dataclasses.replace(w.obs, kube_objects=tuple(
        dataclasses.replace(o, state={k: v for k, v in o.state.items() if k != OWNER_SINCE})
        for o in w.obs.kube_objects
    ))  # fmt: skip
    (line,) = next_steps(rollouts, unsaid, T0 + 100, owner="you", alive=["me"]).waiting
    assert line.startswith("VnfDeployment/fw: its rolling update is owned by me: this process")
    # upgraded: its phase is cleared, and it keeps naming its owner (since it took it over)
    w.boot(key)
    # taken over in the pass that upgrades it: the new owner's name, since now
    took, done = next_steps(rollouts, w.obs, T0 + 20, owner="you").steps
    assert took.why == "took over from me (silent)"
    assert (done.annotations[OWNER], done.annotations[OWNER_SINCE]) == ("you", format_time(T0 + 20))
    steps = next_steps(rollouts, w.obs, T0 + 20, owner="me")
    done = {PHASE: None, SINCE: None, TEMPLATE: None, HALTED: None, IMAGE: None, OWNER: "me",
            OWNER_SINCE: format_time(T0 + 2), RENEWED: format_time(T0 + 20)}  # fmt: skip
    assert steps.steps == (Step(key, "annotate", done, "upgraded and healthy"),)


def test_a_process_tells_an_owner_alive_by_the_newest_renewal_on_any_of_its_vms() -> None:
    def vm(name: str, **state: str) -> KubeObject:
        return live_vm(name, "node-1", "fw:2.0", state=state)

    objects = Observed(kube_objects=(
        vm("fw-node-1", **{OWNER: "me", RENEWED: format_time(T0 + 10)}),
        vm("fw-node-2", **{OWNER: "me", RENEWED: format_time(T0)}),
        vm("fw-node-3", **{OWNER: "me"}),  # named before its first renewal
        vm("fw-node-4", **{OWNER: "you"}),
        vm("fw-node-5"),
        KubeObject("NetworkAttachmentDefinition", "security", "fw-node-1", {}, {OWNER: "nad"}),
    ))  # fmt: skip
    assert owners_of(objects) == {"me": format_time(T0 + 10), "you": ""}


def test_why_a_vm_is_not_counted_healthy_yet() -> None:
    """What ``apply --wait`` and a halted rollout say of a VM being rolled, first reason
    first: the VM itself (missing, not running, not ready), then OVN's word on it."""
    member = MemberHealth("fw", "node-1", "", "osc.fw.node_1", NOT_HEALTHY, "probe timed out")
    running = live_vm("fw-node-1", "node-1", "fw:2.0", printableStatus="Running", ready=True)
    assert why_unready(member, None) == "VM not found"
    stopped = live_vm("fw-node-1", "node-1", "fw:2.0", printableStatus="Starting", ready=False)
    assert why_unready(member, stopped) == "VM Starting"
    unready = live_vm("fw-node-1", "node-1", "fw:2.0", printableStatus="Running", ready=False)
    assert why_unready(member, unready) == "VM not ready"
    assert why_unready(None, running) == "no Network_Function in the NB yet"
    assert why_unready(member, running) == "probe timed out"
    assert why_unready(replace(member, detail=""), running) == "probe failing"
    assert why_unready(replace(member, health=HEALTHY), running) == (
        "waiting out the health check's detection time"
    )
    unjudged = replace(member, health=UNKNOWN, checkable=False)  # OVN will never say
    assert why_unready(unjudged, running) == "waiting out the health check's detection time"
    assert why_unready(replace(member, health=UNKNOWN), running) == "probe timed out"


def test_the_owner_of_the_last_vm_keeps_its_name_until_it_is_upgraded_then_clears_it() -> None:
    """A rollout names its owner until it is over, also while its last VM boots; in the pass
    that upgrades its last VM, the owner's name leaves every VM of the VnfDeployment."""
    w = World(manifests())
    w.obs = converge(w.want, cluster(PODS[:1], nodes=NODES[:1]), NF)
    w.want = manifests("fw:2.0")
    key = "security/fw-node-1"
    w.step(T0, owner="me")
    w.step(T0 + 1, owner="me")  # restarted, booting
    w.obs = northd_healthy(w.obs, sorted(w.down))
    assert w.step(T0 + 3, owner="me").steps == ()  # the last VM boots: nothing is cleared
    w.boot(key)
    done, over = w.step(T0 + 1 + WINDOW, owner="me").steps
    assert done.why == "upgraded and healthy" and done.annotations[OWNER] == "me"
    names = {OWNER: None, OWNER_SINCE: None, RENEWED: None}
    assert over == Step(key, "annotate", names, "rollout done")
    assert w.step(T0 + 8, owner="me").steps == ()


def test_a_steering_group_created_while_a_vm_is_drained_is_created_without_it() -> None:
    """A new Binding's function group on a node where a VM is being drained is written
    without that VM's function (the other instance carries the traffic meanwhile)."""
    two = {"instancesPerNode": 2}
    w = World(manifests(**two))
    w.want = manifests("fw:2.0", **two)
    w.step(T0)  # node-1's standby is drained
    w.want = desired(
        sg("web", "app=web"),
        vnf("fw", image="fw:2.0", **two),
        binding("web-fw", "web", "fw", 10),
        binding("web-fw-open", "web", "fw", 20, failurePolicy="fail-open"),
    )
    plan = w.plan()
    groups = {c.key: c for c in plan.changes if c.kind == "Network_Function_Group"}
    created = groups["osc.fw.node_1.fail_open"]
    assert created.action == "create"
    assert created.after["network_function"] == ["osc.fw.node_1"]


def test_what_a_new_template_changes_is_said_for_people() -> None:
    """``image a → b``, ``cpu``, ``memory``, each that changed, in that order; ``template``
    when something else changed; the first containerDisk image, ``?`` without one."""

    def body(image: str | None = "fw:1.0", cpu: int = 1, memory: str = "1Gi", **more: Any) -> Any:
        volumes = [{"name": "cloudinit", "cloudInitNoCloud": {}}]
        if image is not None:
            volumes.append({"name": "disk", "containerDisk": {"image": image}})
        domain = {"cpu": {"cores": cpu}, "resources": {"requests": {"memory": memory}}, **more}
        return {"spec": {"template": {"spec": {"domain": domain, "volumes": volumes}}}}

    assert template_change(body(), body("fw:1.1", 2, "2Gi")) == (
        "image fw:1.0 → fw:1.1, cpu 1 → 2, memory 1Gi → 2Gi"
    )
    assert template_change(body(), body(memory="4Gi")) == "memory 1Gi → 4Gi"
    assert template_change(body(), body(cpu=4)) == "cpu 1 → 4"
    assert template_change(body(), body(machine={"type": "q35"})) == "template"
    assert vm_image(body()) == "fw:1.0"
    assert vm_image(body(image=None)) == "?"
    assert vm_image(None) == "?"


def test_each_rollout_counts_the_nodes_of_its_own_vnf_and_carries_its_strategy() -> None:
    """``n of m nodes``: m counts the nodes of that VnfDeployment's VMs only; the rollout
    carries its update strategy and the health check's detection window."""
    check = {"failureCount": 3, "interval": 2, "timeout": 4}
    strategy = {"maxUnavailable": 2, "progressDeadlineSeconds": 99}

    def two(image: str) -> Desired:
        return desired(
            sg("web", "app=web"),
            vnf("fw", image=image, healthCheck=check, updateStrategy=strategy),
            vnf("ips", image=image, nodeSelector={"zone": "a"}, healthCheck={"enabled": False}),
            binding("web-fw", "web", "fw", 10),
            binding("web-ips", "web", "ips", 20),
        )

    labels = {"node-1": {"zone": "a"}}
    obs = converge(two("fw:1.0"), cluster(PODS, nodes=NODES, node_labels=labels), NF)
    fw, ips = make_plan(two("fw:2.0"), obs, NF).rollouts
    assert (fw.vnf, fw.nodes_total, len(fw.vms), ips.vnf, ips.nodes_total) == ("fw", 3, 3, "ips", 1)
    assert (fw.max_unavailable, fw.deadline, fw.window, fw.instances_per_node) == (2, 99.0, 20.0, 1)
    assert (ips.max_unavailable, ips.deadline, ips.window) == (1, 600.0, 0.0)


def test_a_vm_being_rolled_of_a_vnfdeployment_removed_from_the_manifests_is_just_deleted() -> None:
    w = World(manifests())
    w.want = manifests("fw:2.0")
    w.step(T0)  # fw-node-1 restarting
    # (its namespace is still ours: --vnf-namespaces, where removed VNFs are pruned from)
    pruning = dataclasses.replace(NF, vnf_namespaces=("security",))
    plan = make_plan(desired(sg("web", "app=web")), w.obs, pruning)
    assert plan.rollouts == ()
    assert {c.key for c in plan.changes if c.kind == "VirtualMachine"} == {
        f"security/fw-{n}" for n in NODES
    }
    assert {c.action for c in plan.changes if c.kind == "VirtualMachine"} == {"delete"}


def test_a_halted_vm_is_pending_with_the_reason_it_halted() -> None:
    spec = {"updateStrategy": {"progressDeadlineSeconds": 30}}
    w = World(manifests(**spec))
    w.want = manifests("fw:2.0", **spec)
    w.step(T0)
    w.step(T0 + 1)
    w.obs = northd_healthy(w.obs, sorted(w.down))
    w.step(T0 + 40)
    (pending,) = [p for p in w.plan().pending if p.name == "security/fw-node-1"]
    assert pending.change == "booting (rolled node by node)"
    assert pending.why.startswith("halted: fw-node-1 not healthy 30 s after its booting began")
    waiting = {p.name: p.why for p in w.plan().pending if p.name != "security/fw-node-1"}
    assert {p.name: p.node for p in w.plan().pending} == {f"security/fw-{n}": n for n in NODES}
    assert set(waiting.values()) == {
        "waits for its turn: KubeVirt applies a new template at a restart"
    }


def test_a_chain_through_one_instance_vnfs_gets_no_rolling_update_warning() -> None:
    """With one instance per node every binding through it is interrupted while it restarts,
    as documented: the plan says nothing more for a chain."""
    want = desired(sg("web", "app=web"), vnf("fw", image="fw:1.0"), vnf("ids"),
                   binding("web-chain", "web", ["fw", "ids"], 10))  # fmt: skip
    world = World(want)
    world.want = desired(sg("web", "app=web"), vnf("fw", image="fw:2.0"), vnf("ids"),
                         binding("web-chain", "web", ["fw", "ids"], 10))  # fmt: skip
    plan = world.plan()
    assert plan.rollouts and not [w for w in plan.warnings if "rolling update" in w]


def with_status(w: World, vm: str, **status: Any) -> None:
    """KubeVirt's status of ``vm`` (``namespace/name``) in the world."""
    w.obs = dataclasses.replace(w.obs, kube_objects=tuple(
        dataclasses.replace(o, status=dict(status)) if f"{o.namespace}/{o.name}" == vm else o
        for o in w.obs.kube_objects
    ))  # fmt: skip


def test_each_step_of_a_vm_is_written_whole() -> None:
    """The annotations of each phase a VM enters (its template's hash and image, since
    when), the restart once its template is written, and what each waiting VM waits for."""
    w = World(manifests())
    w.want = manifests("fw:2.0")
    before = w.plan()  # the plan of the pass that selects it
    key = "security/fw-node-1"
    (vm,) = [v for v in before.rollouts[0].vms if v.key == key]
    enter = {PHASE: RESTARTING, SINCE: format_time(T0), TEMPLATE: vm.template, HALTED: None,
             IMAGE: "fw:2.0"}  # fmt: skip
    assert w.step(T0).steps == (Step(key, "annotate", enter, "node node-1"),)
    # the plan that selected it did not write its template: it waits for the next pass's
    waits = next_steps(before.rollouts, w.obs, T0 + 0.5)
    assert waits.steps == () and waits.waiting == (
        "fw-node-1: restarting (its new template is not written yet)",
    )
    # written, but KubeVirt has not seen the new generation yet: ask again later
    w.apply()
    with_status(w, key, generation=2, desiredGeneration=1, observedGeneration=1)
    rollouts = w.plan().rollouts
    waits = next_steps(rollouts, w.obs, T0 + 1)
    assert waits.steps == () and waits.waiting == (
        "fw-node-1: restarting (KubeVirt has not seen its new template yet)",
    )
    boot = {**enter, PHASE: BOOTING, SINCE: format_time(T0 + 1)}
    with_status(w, key, generation=2, desiredGeneration=2, observedGeneration=1)
    assert next_steps(rollouts, w.obs, T0 + 1).steps == (
        Step(key, "restart", why="its new template is written"),
        Step(key, "annotate", boot),
    )
    # restarted already (by someone, or before a crash of ours): booting, no second restart
    with_status(w, key, generation=2, desiredGeneration=2, observedGeneration=1,
                stateChangeRequests=[{"action": "Start"}])  # fmt: skip
    assert next_steps(rollouts, w.obs, T0 + 1).steps == (Step(key, "annotate", boot),)


def test_a_booting_vm_is_upgraded_only_once_ovn_reports_its_function() -> None:
    """No Network_Function in the NB (the health index the caller passes knows none): the VM
    is never counted upgraded, however long it boots, and the wait says why."""
    w = World(manifests())
    w.want = manifests("fw:2.0")
    w.step(T0)
    w.step(T0 + 1)  # booting; northd still has its function healthy
    rollouts = w.plan().rollouts
    blind = HealthIndex(dataclasses.replace(w.obs, ovn_rows=()))
    steps = next_steps(rollouts, w.obs, T0 + 100, health=blind)
    assert steps.steps == ()
    assert steps.waiting == ("fw-node-1: booting for 99 s (no Network_Function in the NB yet)",)
    (done,) = next_steps(rollouts, w.obs, T0 + 100).steps  # with the NB's own index: upgraded
    assert done.why == "upgraded and healthy"


def test_a_process_that_names_no_owner_waits_for_nobody() -> None:
    w = World(manifests())
    w.want = manifests("fw:2.0")
    w.step(T0, owner="me")
    plan = w.apply()
    steps = next_steps(plan.rollouts, w.obs, T0 + 1, alive=["me"])
    assert [s.action for s in steps.steps] == ["restart", "annotate"] and steps.owned_by == ()


def test_every_rollout_takes_its_steps_in_one_pass() -> None:
    w = World(fw_and_ids("fw:1.0"))
    w.want = fw_and_ids("fw:2.0")
    assert [s.vm for s in w.step(T0).steps] == ["security/fw-node-1", "security/ids-node-1"]


def test_the_template_hash_is_stable_across_key_order_and_releases() -> None:
    """A rollout's target is the hash in the VMs' annotations, compared by the next process
    (maybe a newer release): it must not depend on key order, nor change between releases
    (a VM being rolled would be restarted again)."""
    template = {"spec": {"domain": {"cpu": {"cores": 1}}}, "metadata": {"labels": {"a": "b"}}}
    shuffled = {"metadata": {"labels": {"a": "b"}}, "spec": {"domain": {"cpu": {"cores": 1}}}}
    assert template_hash(template) == template_hash(shuffled) == "1b44e9c73755790a"


def test_rollout_times_are_written_in_utc_whatever_the_machines_zone() -> None:
    with local_time_zone("America/New_York"):
        assert format_time(T0) == "2027-01-15T08:00:00Z"
        assert parse_time("2027-01-15T08:00:00Z") == T0


def only_nodes(obs: Observed, kept: Sequence[str]) -> Observed:
    """``obs`` after every other node left the cluster, with its switch, pods and ports."""
    return dataclasses.replace(
        obs,
        nodes=tuple(n for n in obs.nodes if n.name in kept),
        switches=tuple(s for s in obs.switches if s.name in kept),
        pods=tuple(p for p in obs.pods if p.node in kept),
        pod_ports=tuple(p for p in obs.pod_ports if p.switch in kept),
    )


def test_a_node_gone_while_its_vm_is_rolled_leaves_the_rollout_to_the_other_nodes() -> None:
    w = World(manifests())
    w.want = manifests("fw:2.0")
    w.step(T0)  # fw-node-1 restarting
    w.obs = only_nodes(w.obs, NODES[1:])
    steps = w.step(T0 + 1)  # its VM is deleted with the node's rows
    assert "fw-node-1" not in {o.name for o in w.obs.kube_objects}
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-2", RESTARTING)
    ]


def test_with_neither_instance_active_the_second_one_goes_first() -> None:
    two = {"instancesPerNode": 2}
    w = World(manifests(**two))
    w.want = manifests("fw:2.0", **two)
    w.down |= {"osc.fw.node_1", "osc.fw.node_1._b"}  # northd names no active one on node-1
    w.obs = northd_healthy(w.obs, sorted(w.down))
    assert [s.vm for s in w.step(T0).steps] == ["security/fw-node-1-b"]


def test_a_busy_node_is_passed_over_for_the_next_free_one() -> None:
    """maxUnavailable 2, two instances: node-1's standby still boots while node-2's is done;
    the next VM selected is node-2's active one (node-1 stays busy until its standby is)."""
    two = {"instancesPerNode": 2, "updateStrategy": {"maxUnavailable": 2}}
    w = World(manifests(**two))
    w.want = manifests("fw:2.0", **two)
    assert [s.vm for s in w.step(T0).steps] == ["security/fw-node-1-b", "security/fw-node-2-b"]
    w.step(T0 + 1)  # both drained: restarting
    w.step(T0 + 2)  # both restarted: booting
    w.boot("security/fw-node-2-b")
    w.step(T0 + 2 + WINDOW)  # node-2's standby upgraded
    steps = w.step(T0 + 3 + WINDOW)
    assert [(s.vm, s.annotations.get(PHASE)) for s in steps.steps] == [
        ("security/fw-node-2", DRAINING)
    ]


def test_a_node_name_too_long_for_a_label_is_rolled_under_its_full_name() -> None:
    """A VM's ``osc.io/node`` label is shortened past 63 characters (the full name is an
    annotation): the rollout names and counts the node by its full name."""
    long_node = "worker-" + "x" * 70
    nodes = (long_node, "node-2")
    pods = [
        ("shop", "web-0", long_node, {"app": "web"}),
        ("shop", "web-1", "node-2", {"app": "web"}),
    ]
    w = World(manifests())
    w.obs = converge(w.want, cluster(pods, nodes=nodes), NF)
    w.want = manifests("fw:2.0")
    (rollout,) = w.plan().rollouts
    assert sorted(vm.node for vm in rollout.vms) == sorted(nodes)
    assert rollout.nodes_total == 2
    assert w.plan().meta["rollout"][0]["summary"] == "VnfDeployment/fw: 0 of 2 nodes updated"


def test_a_rollout_over_clears_its_owners_name_from_its_own_vms_only() -> None:
    w = World(fw_and_ids("fw:1.0"))
    w.obs = converge(w.want, cluster(PODS[:1], nodes=NODES[:1]), NF)
    w.want = fw_and_ids("fw:2.0")
    w.step(T0, owner="me")
    w.step(T0 + 1, owner="me")  # both restarted, booting
    w.boot("security/fw-node-1")
    w.down.add("osc.ids.node_1")  # ids' VM is still down
    steps = w.step(T0 + 1 + WINDOW, owner="me")
    assert [(s.vm, s.why) for s in steps.steps] == [
        ("security/fw-node-1", "upgraded and healthy"),
        ("security/fw-node-1", "rollout done"),
    ]


def halted(obs: Observed, vm: str) -> Observed:
    """``obs`` with a user's edit of VM ``vm``'s run strategy (a field outside its template)."""
    objs = []
    for o in obs.kube_objects:
        if o.name == vm:
            spec = {**o.body["spec"], "runStrategy": "Halted"}
            o = dataclasses.replace(o, body={**o.body, "spec": spec})
        objs.append(o)
    return dataclasses.replace(obs, kube_objects=tuple(objs))


def test_a_vm_update_that_leaves_its_template_alone_is_written_at_once() -> None:
    """Only a template change waits for a restart: a user's edit of another field (here the
    run strategy) is repaired by the plan at once, with no rollout."""
    w = World(manifests())
    w.obs = halted(w.obs, "fw-node-1")
    plan = w.plan()
    assert [(c.action, c.key) for c in plan.changes if c.kind == "VirtualMachine"] == [
        ("update", "security/fw-node-1")
    ]
    assert plan.rollouts == ()


def test_the_functions_a_rollout_drains_are_named_for_its_instance() -> None:
    blue = CompileOptions(steering="network-function", instance="blue")
    obs = converge(manifests(), cluster(PODS, nodes=NODES), blue)
    (rollout,) = make_plan(manifests("fw:2.0"), obs, blue).rollouts
    assert rollout.vms[0].function == naming.network_function("blue", "fw", "node-1", "")
    assert rollout.vms[0].function == "osc_blue.fw.node_1"


def test_a_node_leaving_during_a_bump_is_not_counted() -> None:
    w = World(manifests())
    w.obs = only_nodes(w.obs, NODES[:2])
    w.want = manifests("fw:2.0")
    (rollout,) = w.plan().rollouts
    assert (rollout.nodes_total, [vm.node for vm in rollout.vms]) == (2, ["node-1", "node-2"])


def test_a_removed_vnfdeployments_vm_being_rolled_does_not_stop_the_others_rollout() -> None:
    w = World(fw_and_ids("fw:1.0"))
    w.want = fw_and_ids("fw:2.0")
    w.step(T0)  # fw-node-1 and ids-node-1 restarting
    ids_only = desired(sg("web", "app=web"), vnf("ids", image="fw:2.0"),
                       binding("web-ids", "web", "ids", 20))  # fmt: skip
    pruning = dataclasses.replace(NF, vnf_namespaces=("security",))
    (rollout,) = make_plan(ids_only, w.obs, pruning).rollouts
    assert (rollout.vnf, len(rollout.vms)) == ("ids", 3)


def test_a_rolled_vm_repaired_while_the_others_wait_still_counts_among_the_nodes() -> None:
    """A VM already on the new template whose run strategy a user edited is repaired at once
    (an update, not a delete): its node stays one of the ``m`` in ``n of m nodes``."""
    w = World(manifests())
    w.want = manifests("fw:2.0")
    w.step(T0)  # fw-node-1 restarting
    w.step(T0 + 1)  # its new template written, restarted
    w.boot("security/fw-node-1")
    w.step(T0 + 1 + WINDOW)  # healthy past the window: fw-node-1 done
    w.obs = halted(w.obs, "fw-node-1")
    plan = w.plan()
    assert ("update", "security/fw-node-1") in [
        (c.action, c.key) for c in plan.changes if c.kind == "VirtualMachine"
    ]
    (rollout,) = plan.rollouts
    assert rollout.nodes_total == 3
    assert plan.meta["rollout"][0]["summary"].startswith("VnfDeployment/fw: 1 of 3 nodes")


def test_the_warm_loops_planner_holds_and_reports_a_rollout_on_every_kind_of_pass() -> None:
    """The long-running loop plans with the incremental planner: a pod event during a rollout
    is an incremental pass, a quiet one a cached pass; each holds the template updates and
    reports the rollout exactly as a full plan does."""
    w = World(manifests())
    w.want = manifests("fw:2.0")
    w.step(T0)  # fw-node-1 restarting
    planner = IncrementalPlanner()
    modes = []
    for labels in ({"app": "web"}, {"app": "web", "tier": "x"}, {"app": "web", "tier": "x"}):
        pods = (replace(w.obs.pods[0], labels=labels), *w.obs.pods[1:])
        w.obs = replace(w.obs, pods=pods)
        plan = planner.plan(w.want, w.obs, NF)
        modes.append(planner.last_mode)
        full = make_plan(w.want, w.obs, NF)
        assert (plan.changes, plan.rollouts) == (full.changes, full.rollouts)
        assert plan.rollouts[0].vms[0].phase == RESTARTING
    assert modes == ["full", "incremental", "cached"]
