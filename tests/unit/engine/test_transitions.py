"""The loop carries transitions out with the in-memory fakes: held steering switched on by the
pass after northd's verdict, a rolling update node by node through KubeVirt's restart (only
after the previous VM is healthy again), a halt, reports (metrics, status) and a new loop that
continues a rollout from the VMs' annotations."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.transitions.rollout import HALTED, PHASE
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.reporting import status
from reconciler.engine.reporting.metrics import Metrics, PrometheusReporter
from tests.support.builders import cluster
from tests.support.fakes import FakeClock, FakeSource, RecordingReporter, world
from tests.unit.engine.scenario import POLICIES, write_policies

FUNCTIONS = {"osc.firewall.node_1", "osc.firewall.node_2"}
PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]
"""A web pod on each node: steering on both (rows only where a group has members, issue 20)."""
V2 = POLICIES.replace("vnf-firewall:1.4.2", "vnf-firewall:2.0")


class World:
    """Fakes, a wall clock the test moves, a loop; VMs restarted by the rollout go dark to
    northd until :meth:`boot`."""

    def __init__(self, tmp: Path, policies: str = POLICIES, **config: Any) -> None:
        self.tmp = tmp
        self.kube, self.ovn = world(cluster(PODS))
        self.source = FakeSource()
        self.source.publish("c1", write_policies(tmp / "c1", policies))
        self.wall = FakeClock(1_800_000_000.0)
        self.reporter = RecordingReporter()
        self.down: set[str] = set()
        self.kube.on_restart.append(self._restarted)
        self.loop = self.new_loop(**config)

    def new_loop(self, reporter: Any = None, **config: Any) -> Loop:
        settings: dict[str, Any] = {
            "options": CompileOptions(),
            "status_file": self.tmp / "status.json",
            "watch": False,
            "lag_retries": (),
            **config,
        }
        loop = Loop(LoopConfig(**settings), self.source, self.kube, self.ovn,
                    reporter=reporter or self.reporter, clock=FakeClock(),
                    rng=random.Random(7), settle=lambda: None, wall_clock=self.wall)  # fmt: skip
        loop.refresh_source()
        return loop

    def _restarted(self, vm: str) -> None:
        node = vm.partition("/")[2].removeprefix("firewall-")
        self.down.add(f"osc.firewall.{node.replace('-', '_')}")
        self.ovn.set_healthy(FUNCTIONS - self.down)

    def boot(self, node: str) -> None:
        self.down.discard(f"osc.firewall.{node.replace('-', '_')}")
        self.ovn.set_healthy(FUNCTIONS - self.down)

    def publish(self, revision: str, text: str) -> None:
        self.source.publish(revision, write_policies(self.tmp / revision, text))
        self.loop.refresh_source()

    def passes(self, n: int = 1, seconds: float = 0.0) -> None:
        for _ in range(n):
            self.wall.advance(seconds)
            result = self.loop.reconcile_pass("test")
            assert result.ok, result.error

    def restarts(self) -> list[str]:
        return [e[3] for e in self.kube.journal.entries if e[1] == "restart"]

    def phases(self) -> dict[str, str]:
        return {
            key: (obj["metadata"].get("annotations") or {}).get(PHASE, "")
            for key, obj in self.kube.objects("VirtualMachine").items()
        }

    def image(self, vm: str) -> str:
        spec = self.kube.objects("VirtualMachine")[vm]["spec"]["template"]["spec"]
        return str(spec["volumes"][0]["containerDisk"]["image"])

    def status(self) -> status.Status:
        return status.read(self.tmp / "status.json")


def test_held_steering_is_switched_on_by_the_pass_after_northd_reports_health(
    tmp_path: Path,
) -> None:
    w = World(tmp_path)
    w.passes()
    assert not [r for r in w.ovn.rows if r[0] == "ACL"]  # held: nothing healthy yet
    assert {h["node"] for h in w.status().held} == {"node-1", "node-2"}
    held = [("firewall", "node-1"), ("firewall", "node-2")]
    assert w.reporter.of("transitions")[-1][0] == held
    # northd says healthy: the loop is asked for a pass (it was waiting for this)
    requests: list[str] = []
    w.loop.request = requests.append  # type: ignore[method-assign]
    w.ovn.watch_health(w.loop._on_ovn_health)
    w.ovn.set_healthy(FUNCTIONS)
    assert requests == ["ovn-health"]
    w.passes()
    assert sorted(r[1] for r in w.ovn.rows if r[0] == "ACL") == [
        "osc.web_firewall.node_1.to",
        "osc.web_firewall.node_2.to",
    ]
    assert w.status().held == [] and w.reporter.of("transitions")[-1][0] == []


def test_an_image_change_rolls_node_by_node_each_after_health(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.ovn.set_healthy(FUNCTIONS)
    w.passes(2)
    w.publish("c2", V2)
    w.passes()  # the new template is held, node-1 selected
    assert w.image("osc-vnfs/firewall-node-1") == "quay.io/example/vnf-firewall:1.4.2"
    assert w.phases()["osc-vnfs/firewall-node-1"] == "restarting"
    assert w.status().rollouts[0]["summary"].startswith("VnfDeployment/firewall: 0 of 2 nodes")
    w.passes()  # its template is written, then KubeVirt's restart
    assert w.image("osc-vnfs/firewall-node-1").endswith(":2.0")
    assert w.image("osc-vnfs/firewall-node-2").endswith(":1.4.2")
    assert w.restarts() == ["osc-vnfs/firewall-node-1"]
    w.passes(3, seconds=1)  # booting: node-2 waits
    assert w.restarts() == ["osc-vnfs/firewall-node-1"]
    assert w.phases()["osc-vnfs/firewall-node-2"] == ""
    w.boot("node-1")
    w.passes(1, seconds=10)  # healthy past the detection window: done
    assert w.phases()["osc-vnfs/firewall-node-1"] == ""
    w.passes(2)
    assert w.restarts() == ["osc-vnfs/firewall-node-1", "osc-vnfs/firewall-node-2"]
    w.boot("node-2")
    w.passes(2, seconds=10)
    assert w.image("osc-vnfs/firewall-node-2").endswith(":2.0")
    assert w.status().rollouts == [] and set(w.phases().values()) == {""}


def test_a_rollout_halts_reports_and_a_new_loop_continues_from_the_annotations(
    tmp_path: Path,
) -> None:
    image = "  image: quay.io/example/vnf-firewall:1.4.2"
    deadline = POLICIES.replace(
        image, f"{image}\n  updateStrategy: {{progressDeadlineSeconds: 30}}"
    )
    w = World(tmp_path, deadline)
    w.ovn.set_healthy(FUNCTIONS)
    w.passes(2)
    w.publish("c2", deadline.replace(":1.4.2", ":2.0-broken"))
    w.passes(2)  # node-1 restarted, and it never comes back
    w.passes(1, seconds=40)
    w.passes(1)
    vm = w.kube.objects("VirtualMachine")["osc-vnfs/firewall-node-1"]
    assert "not healthy 30 s after its booting began" in vm["metadata"]["annotations"][HALTED]
    assert w.status().rollouts[0]["halted"]
    assert status.halted(w.status())
    assert w.restarts() == ["osc-vnfs/firewall-node-1"]  # node-2 untouched
    metrics = Metrics()
    # a new process (a restarted reconciler): it knows the halt from the cluster alone
    fresh = w.new_loop(reporter=PrometheusReporter(metrics))
    assert fresh.reconcile_pass("start").ok
    text = metrics.exposition().decode()
    assert 'osc_gitops_rollout_halted{vnf="firewall"} 1.0' in text
    assert 'osc_gitops_rollout_nodes_updated{vnf="firewall"} 0.0' in text
    assert w.restarts() == ["osc-vnfs/firewall-node-1"]
    # the VM comes up after all: the rollout resumes by itself
    w.loop = fresh
    w.boot("node-1")
    w.passes(3, seconds=1)
    assert w.restarts() == ["osc-vnfs/firewall-node-1", "osc-vnfs/firewall-node-2"]


def test_a_scope_without_ovn_health_writes_the_template_and_restarts_nothing(
    tmp_path: Path,
) -> None:
    from reconciler.core.planning.slicing import KubernetesScope

    w = World(tmp_path)
    w.ovn.set_healthy(FUNCTIONS)
    w.passes(2)
    w.publish("c2", V2)
    subnets = [(n, f"10.244.{i + 1}.0/24") for i, n in enumerate(w.kube.list_nodes())]
    w.kube.list_node_subnets = lambda: subnets  # type: ignore[attr-defined]
    central = w.new_loop(scope=KubernetesScope())
    assert central.reconcile_pass("test").ok
    # it cannot tell when a restarted VM is back: the template is written at once (KubeVirt
    # applies it at the next start), nothing is restarted, and the plan says so
    assert w.restarts() == [] and set(w.phases().values()) == {""}
    assert w.image("osc-vnfs/firewall-node-1").endswith(":2.0")
    assert central.last_transitions.rollouts == ()


def test_wait_timeout_durations() -> None:
    import argparse

    import pytest

    from reconciler.cli.apply import parse_duration

    assert [parse_duration(t) for t in ("90", "90s", "5m", "1h30m", "1.5m")] == [
        90.0, 90.0, 300.0, 5400.0, 90.0,
    ]  # fmt: skip
    for bad in ("", "5x", "m", "-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a duration"):
            parse_duration(bad)


def test_a_verdict_northd_changes_during_an_apply_is_new_input_not_divergence() -> None:
    """A chain whose fail-open hop northd finds dead while an apply writes: the verify plan
    rewires the chain around it. That is new input (the next pass writes it), not a failure to
    converge; rows that stay different whatever the health say NotConverged as before."""
    import pytest

    from reconciler.core.compiling.compile import CompileOptions as Options
    from reconciler.engine.pipeline import NotConverged, Pipeline
    from tests.support.builders import binding, desired, sg, vnf

    hop = {"name": "ids", "failurePolicy": "fail-open"}
    want = desired(sg("web", "app=web"), vnf("ngfw"), vnf("ids"),
                   binding("web-chain", "web", ["ngfw", "ids"], 10))  # fmt: skip
    kube, ovn = world(cluster(PODS))
    everyone = {"osc.ngfw.node_1", "osc.ngfw.node_2", "osc.ids.node_1", "osc.ids.node_2"}
    chains = {f"osc.chain2_exit.ngfw.ids.{n}" for n in ("node_1", "node_2")}
    ovn.set_healthy(everyone | chains)
    pipeline = Pipeline(kube, ovn, Options())
    for _ in range(2):
        pipeline.run(want)
    assert pipeline.run(want).report.plan.empty
    fail_open = desired(sg("web", "app=web"), vnf("ngfw"), vnf("ids"),
                        binding("web-chain", "web", ["ngfw", hop], 10))  # fmt: skip
    write = ovn.apply

    def northd_finds_ids_dead(changes: Any, revision: str | None = None) -> None:
        write(changes, revision)
        ovn.set_healthy((everyone | chains) - {"osc.ids.node_1"})

    ovn.apply = northd_finds_ids_dead  # type: ignore[method-assign]
    done = pipeline.run(fail_open)
    assert done.after is not None and ("update", "osc.web_chain.node_1.to") in {
        (c.action, c.key) for c in done.after.changes
    }
    ovn.apply = write  # type: ignore[method-assign]
    pipeline.run(fail_open)  # the next pass follows
    assert pipeline.run(fail_open).report.plan.empty

    def loses_a_row(changes: Any, revision: str | None = None) -> None:
        write(changes, revision)
        ovn.rows.pop(("Port_Group", "osc.web.node_1"), None)
        ovn._owned = None

    ovn.apply = loses_a_row  # type: ignore[method-assign]
    with pytest.raises(NotConverged):
        pipeline.run(want)


# --- one rollout at a time (issue 33 item 3) ------------------------------------------------

V3 = POLICIES.replace("vnf-firewall:1.4.2", "vnf-firewall:3.0")


def second_process(w: World, tmp: Path, text: str, owner: str) -> tuple[Loop, FakeClock]:
    """Another reconciler of the same instance (a second ``apply --wait``, the ``run`` loop
    beside a human) on the same cluster, with its own manifests and its own clock."""
    source = FakeSource()
    source.publish("other", write_policies(tmp / "other", text))
    loop = Loop(LoopConfig(options=CompileOptions(), status_file=tmp / "other.json",
                           watch=False, lag_retries=()),
                source, w.kube, w.ovn, reporter=RecordingReporter(), clock=FakeClock(),
                rng=random.Random(8), settle=lambda: None, wall_clock=w.wall)  # fmt: skip
    loop.refresh_source()
    local = FakeClock()
    loop.transitions.owner, loop.transitions.local_clock = owner, local
    return loop, local


def annotations(w: World, vm: str) -> dict[str, str]:
    return dict(w.kube.objects("VirtualMachine")[vm]["metadata"].get("annotations") or {})


def test_a_second_process_restarts_no_vm_of_a_rollout_it_does_not_own_and_names_the_owner(
    tmp_path: Path,
) -> None:
    from reconciler.core.transitions.rollout import OWNER, OWNER_SINCE

    w = World(tmp_path)
    w.loop.transitions.owner = "osc-gitops on host-a (pid 1)"
    w.ovn.set_healthy(FUNCTIONS)
    w.passes(2)
    w.publish("c2", V2)
    w.passes(2)  # A: node-1 selected, its 2.0 template written, restarted
    node1 = "osc-vnfs/firewall-node-1"
    assert annotations(w, node1)[OWNER] == "osc-gitops on host-a (pid 1)"
    since = annotations(w, node1)[OWNER_SINCE]
    b, _ = second_process(w, tmp_path, V3, "osc-gitops on host-b (pid 2)")
    for _ in range(5):  # B wants 3.0 and runs its passes meanwhile
        w.wall.advance(1)
        assert b.reconcile_pass("test").ok
    assert w.restarts() == [node1]  # B restarted nothing
    assert w.image(node1).endswith(":2.0")  # nor wrote its template over A's
    report = b.last_transitions
    assert report.owned_by == (("firewall", "osc-gitops on host-a (pid 1)", since),)
    assert any(
        f"VnfDeployment/firewall: its rolling update is owned by osc-gitops on host-a (pid 1) "
        f"since {since}: this process restarts none of its VMs" in line
        for line in report.waiting
    )
    assert "rolled by osc-gitops on host-a (pid 1)" in report.rollouts[0]["summary"]
    # A finishes its rollout undisturbed (B passing in between), each node restarted once
    for node in ("node-1", "node-2"):
        w.boot(node)
        for _ in range(3):
            w.passes(1, seconds=5)
            assert b.reconcile_pass("test").ok
    assert w.restarts()[:2] == [node1, "osc-vnfs/firewall-node-2"]
    assert w.image("osc-vnfs/firewall-node-2").endswith(":2.0")
    # then, A's rollout over, B's own (3.0) starts, owned by B
    w.wall.advance(1)
    assert b.reconcile_pass("test").ok
    assert w.restarts() == [node1, "osc-vnfs/firewall-node-2", node1]
    assert annotations(w, node1)[OWNER] == "osc-gitops on host-b (pid 2)"


def test_a_silent_owner_is_taken_over_and_a_released_one_at_once(tmp_path: Path) -> None:
    from reconciler.core.transitions.rollout import OWNER, PHASE, STALE

    w = World(tmp_path)
    w.loop.transitions.owner = "A"
    w.ovn.set_healthy(FUNCTIONS)
    w.passes(2)
    w.publish("c2", V2)
    w.passes(2)
    node1 = "osc-vnfs/firewall-node-1"
    b, local = second_process(w, tmp_path, V2, "B")  # same manifests: the same rollout
    assert b.reconcile_pass("test").ok
    assert annotations(w, node1)[OWNER] == "A"
    local.advance(STALE + 1)  # A is silent (it stopped without a word): B goes on
    w.wall.advance(1)
    assert b.reconcile_pass("test").ok
    assert annotations(w, node1)[OWNER] == "B" and annotations(w, node1)[PHASE] == "booting"
    assert w.restarts() == [node1]  # from where it was: not restarted again
    # B stops cleanly (apply --wait ends): its name leaves the VM, A takes over at once
    b.transitions.release()
    assert OWNER not in annotations(w, node1) and annotations(w, node1)[PHASE] == "booting"
    w.passes(1, seconds=1)
    assert annotations(w, node1)[OWNER] == "A"


def test_a_template_changed_mid_rollout_goes_on_from_the_vm_in_progress_and_says_so(
    tmp_path: Path,
) -> None:
    w = World(tmp_path)
    w.ovn.set_healthy(FUNCTIONS)
    w.passes(2)
    w.publish("c2", V2)
    w.passes(2)  # node-1 restarted to 2.0, booting
    node1, node2 = "osc-vnfs/firewall-node-1", "osc-vnfs/firewall-node-2"
    w.publish("c3", V3)  # a newer image before the rollout is done
    w.passes(1, seconds=1)
    summary = w.status().rollouts[0]["summary"]
    assert "0 of 2 nodes updated" in summary
    assert (
        "the template changed during the rollout: it goes on from firewall-node-1 with the new "
        "one" in summary
    )
    w.passes(2, seconds=1)
    assert w.image(node1).endswith(":3.0") and w.image(node2).endswith(":1.4.2")
    assert w.restarts() == [node1, node1]  # node-1 again, with 3.0; node-2 not yet
    w.boot("node-1")
    w.passes(2, seconds=10)
    w.passes(2)
    assert w.restarts() == [node1, node1, node2]  # node-2 straight to 3.0
    w.boot("node-2")
    w.passes(2, seconds=10)
    assert w.image(node2).endswith(":3.0") and w.status().rollouts == []


def test_held_steering_reports_the_boot_allowance_and_the_pods_it_leaves_unprotected(
    tmp_path: Path,
) -> None:
    """Issue 33 item 2: the alert compares how long steering is held with the instance's boot
    allowance (bootSeconds + the health check's detection time), not with a fixed 10 minutes;
    status names the pods held steering leaves NOT protected and exits 3."""
    metrics = Metrics()
    w = World(tmp_path, reporter=PrometheusReporter(metrics))
    w.passes()
    text = metrics.exposition().decode()
    assert 'osc_gitops_held_allowance_seconds{node="node-1",vnf="firewall"} 125.0' in text
    held = {h["node"]: h for h in w.status().held}
    assert held["node-1"]["allowance"] == 125.0
    assert held["node-1"]["unprotected"] == ["shop/web-1"]
    assert held["node-2"]["unprotected"] == ["shop/web-2"]
    assert status.pending(w.status()) == [
        "Binding/web-firewall on node-1 held (" + held["node-1"]["reason"] + "): shop/web-1 NOT "
        "protected",
        "Binding/web-firewall on node-2 held (" + held["node-2"]["reason"] + "): shop/web-2 NOT "
        "protected",
    ]
    assert "boot allowance" in status.render_text(w.status())
    w.ovn.set_healthy(FUNCTIONS)
    w.passes()
    assert "osc_gitops_held_allowance_seconds{" not in metrics.exposition().decode()
    assert status.pending(w.status()) == [] and status.failures(w.status()) == []
