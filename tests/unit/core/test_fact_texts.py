"""What the plan's facts say to people and how they read back (``reconciler.core.model.facts``):
each text whole (the plan, ``explain``, ``status`` and the metrics show them), and a saved
plan's facts with the keys an older or a hand-written plan leaves out."""

from __future__ import annotations

import dataclasses

from reconciler.core.model.facts import (
    Finding,
    Hold,
    InstanceHealth,
    Pending,
    ProtectionBasis,
    UnboundPort,
    VmRollout,
    VnfRollout,
    texts,
    unique,
)


def test_findings_are_listed_once_per_wording_sorted_by_it() -> None:
    b1 = Finding("tie", "Binding/b", "node-1", "b")
    a = Finding("shadowed", "Binding/a", None, "a")
    b2 = Finding("note", "", None, "b")
    assert unique([b1, a, b2]) == (a, b2)
    assert texts([b1, a]) == ("b", "a")


def test_an_instance_is_healthy_only_when_ovn_can_tell() -> None:
    assert InstanceHealth("fw", "node-1", "healthy").healthy is True
    assert InstanceHealth("fw", "node-1", "not healthy", "probe failing").healthy is False
    assert InstanceHealth("fw", "node-1", "unknown", "no health check").healthy is None
    read = InstanceHealth.from_json({"vnf": "fw", "node": "node-1", "health": "healthy"})
    assert read == InstanceHealth("fw", "node-1", "healthy", "")


def test_an_unbound_port_reads_as_one_line_and_reads_back_without_side_or_cause() -> None:
    port = UnboundPort("fw", "node-1", "vnfs/fw-node-1", "nf_fw_node-1_in", "in", "no iface-id")
    assert port.line() == (
        "VnfDeployment/fw on node-1: port nf_fw_node-1_in (in) of VirtualMachine vnfs/fw-node-1, "
        "which runs, is not bound: no iface-id"
    )
    bare = {"vnf": "fw", "node": "node-1", "vm": "vnfs/fw-node-1", "port": "p"}
    assert UnboundPort.from_json(bare) == UnboundPort("fw", "node-1", "vnfs/fw-node-1", "p", "", "")


HOLD = Hold(
    "web-fw",
    "node-2",
    ("fw-node-2", "fw-node-2-b"),
    ("osc.fw.node_2.fail_close",),
    (("ACL", "osc.web_fw.node_2.to"),),
    "new: OVN has not probed it yet",
    ("fw",),
)


def test_held_steering_says_what_it_waits_for() -> None:
    assert HOLD.reason == (
        "waiting for fw-node-2 or fw-node-2-b to become healthy (new: OVN has not probed it yet)"
    )
    chain = dataclasses.replace(HOLD, waiting_for=("ngfw-node-2", "ids-node-2"), chain=True,
                                why="")  # fmt: skip
    assert chain.reason == "waiting for ngfw-node-2 and ids-node-2 to become healthy"
    groups_only = dataclasses.replace(HOLD, waiting_for=(), groups=("g1", "g2"), why="")
    assert groups_only.reason == "waiting for g1, g2 to become healthy"


def test_held_steering_in_json_and_back() -> None:
    data = HOLD.to_json()
    assert data == {
        "binding": "web-fw", "node": "node-2", "waiting_for": ["fw-node-2", "fw-node-2-b"],
        "groups": ["osc.fw.node_2.fail_close"], "changes": [["ACL", "osc.web_fw.node_2.to"]],
        "why": "new: OVN has not probed it yet", "vnfs": ["fw"], "chain": False,
        "reason": HOLD.reason,
    }  # fmt: skip
    assert Hold.from_json(data) == HOLD
    chain = dataclasses.replace(HOLD, chain=True)
    assert Hold.from_json(chain.to_json()) == chain
    assert Hold.from_json({"binding": "b", "node": "n"}) == Hold("b", "n", (), (), ())


def vm(name: str, node: str, **fields: object) -> VmRollout:
    values: dict[str, object] = {"outdated": False, **fields}
    return VmRollout(f"vnfs/{name}", node, "", f"osc.{name}", template="t2", **values)  # type: ignore[arg-type]


def rollout(*vms: VmRollout) -> VnfRollout:
    return VnfRollout("fw", 1, 600.0, 5.0, 1, 3, vms)


def test_a_rollout_summary_counts_nodes_and_names_what_happens_now() -> None:
    done = rollout(vm("fw-node-1", "node-1"), vm("fw-node-2", "node-2", outdated=True),
                   vm("fw-node-3", "node-3", phase="booting"))  # fmt: skip
    assert done.nodes_updated == 1
    assert done.summary == "VnfDeployment/fw: 1 of 3 nodes updated (fw-node-3 booting)"
    quiet = rollout(vm("fw-node-1", "node-1", outdated=True))
    assert quiet.summary == "VnfDeployment/fw: 2 of 3 nodes updated"
    owned = rollout(vm("fw-node-1", "node-1", phase="restarting", owner="osc-gitops@h:1",
                       owner_since="2026-11-27T10:00:00Z"))  # fmt: skip
    assert owned.owner == ("osc-gitops@h:1", "2026-11-27T10:00:00Z")
    assert owned.summary == (
        "VnfDeployment/fw: 2 of 3 nodes updated (fw-node-1 restarting, rolled by osc-gitops@h:1 "
        "since 2026-11-27T10:00:00Z)"
    )
    no_since = rollout(vm("fw-node-1", "node-1", phase="draining", owner="o"))
    assert (
        no_since.summary
        == "VnfDeployment/fw: 2 of 3 nodes updated (fw-node-1 draining, rolled by o)"
    )
    assert rollout(vm("fw-node-1", "node-1", owner="o")).owner is None, "not being rolled"


def test_a_halted_rollout_says_why_and_nothing_else() -> None:
    halted = rollout(vm("fw-node-1", "node-1", phase="booting", halted="never healthy"),
                     vm("fw-node-2", "node-2", halted="second"))  # fmt: skip
    assert halted.halted == "never healthy"
    assert halted.summary == "VnfDeployment/fw: 2 of 3 nodes updated; halted: never healthy"
    assert rollout(vm("fw-node-1", "node-1")).halted is None


def test_a_template_changed_mid_rollout_is_said() -> None:
    moved = vm("fw-node-1", "node-1", phase="restarting", outdated=True, rolling_to="t1")
    assert moved.retargeted and moved.name == "fw-node-1"
    assert rollout(moved).summary == (
        "VnfDeployment/fw: 2 of 3 nodes updated (fw-node-1 restarting); the template changed "
        "during the rollout: it goes on from fw-node-1 with the new one (nodes already updated "
        "are rolled again after it)"
    )
    for same in (
        dataclasses.replace(moved, rolling_to="t2"), dataclasses.replace(moved, phase=None),
        dataclasses.replace(moved, outdated=False), dataclasses.replace(moved, rolling_to=None),
    ):  # fmt: skip
        assert not same.retargeted


def test_a_rollout_in_json_and_back() -> None:
    one = rollout(vm("fw-node-1", "node-1", phase="booting", halted="h"))
    data = one.to_json()
    assert (data["nodes_updated"], data["halted"], data["summary"]) == (2, "h", one.summary)
    assert data["vms"][0]["key"] == "vnfs/fw-node-1"
    assert VnfRollout.from_json(data) == one
    assert VnfRollout.from_json({k: v for k, v in data.items() if k != "vms"}).vms == ()


def test_a_pending_difference_reads_as_one_line() -> None:
    image = Pending("VirtualMachine", "vnfs/fw-node-1", "node-1", "image fw:1.0 → fw:1.1")
    assert image.line == "VirtualMachine vnfs/fw-node-1: image fw:1.0 → fw:1.1"
    held = Pending("Binding", "web-fw", "node-2", "steering held", "fw-node-2 is new")
    assert held.line == "Binding web-fw on node-2: steering held (fw-node-2 is new)"
    assert Pending("Binding", "web-fw", None, "x").line == "Binding web-fw: x"
    assert Pending.from_json({**held.to_json(), "extra": 1}) == held


def test_a_protection_basis_reads_back_without_its_keys() -> None:
    assert ProtectionBasis.from_json({}) == ProtectionBasis("", "")
    assert ProtectionBasis.from_json({"source": "live", "detail": None}).to_json() == {
        "source": "live", "detail": ""
    }  # fmt: skip
