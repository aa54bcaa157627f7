"""Zoned snapshots (``reconciler.core.planning.zoned``): an agent's published view survives the
trip, and a zoned plan is the union of what each zone's agent and the central owner would plan."""

from __future__ import annotations

import json

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.observed import Node
from reconciler.core.planning.full import compile_plan
from reconciler.core.planning.slicing import KubernetesScope, NodeScope, kubernetes_observed
from reconciler.core.planning.zoned import ZonedSnapshot, decode_slice, encode_slice, zoned_plan
from tests.support.builders import binding, cluster, desired, sg, vnf

WANT = desired(sg("web", "app=web"), vnf("firewall"), binding("web-fw", "web", "firewall", 10))
OPTIONS = CompileOptions()


def world():  # type: ignore[no-untyped-def]
    return cluster([("shop", "web-1", "node-1", {"app": "web"}),
                    ("shop", "web-2", "node-2", {"app": "web"})])  # fmt: skip


def test_an_agents_view_survives_encoding_and_leaves_the_kubernetes_side_out() -> None:
    view = NodeScope("node-1").view(world()).observed
    text = encode_slice(view)
    back = decode_slice(text)
    assert back.pods == view.pods and back.pod_ports == view.pod_ports
    assert back.switches == view.switches and back.capabilities == view.capabilities
    assert back.nodes == () and back.kube_objects == ()
    assert encode_slice(view) == text, "deterministic: an unchanged zone is not published again"
    with pytest.raises(ValueError):
        decode_slice("not base64 gzip")


def test_a_zoned_plan_is_each_zone_as_its_agent_plans_it_plus_the_central_side() -> None:
    observed = world()
    central = kubernetes_observed([(Node("node-1"), "10.244.1.0/24"),
                                   (Node("node-2"), "10.244.2.0/24")], ())  # fmt: skip
    slices = {
        node: (NodeScope(node).view(observed).observed, "2026-11-20T10:00:00Z", "r1")
        for node in ("node-1", "node-2")
    }
    snapshot = ZonedSnapshot.from_json(
        json.loads(json.dumps(ZonedSnapshot.assemble(central, slices, ("node-3",)).to_json()))
    )
    plan = zoned_plan(WANT, snapshot, OPTIONS)
    expected = set()
    for node in ("node-1", "node-2"):
        scope = NodeScope(node)
        view = scope.view(observed)
        own = compile_plan(WANT, view.observed, scope.options(OPTIONS)).plan
        expected |= {(c.action, c.kind, c.key) for c in scope.restrict(own, view).changes}
    kube = KubernetesScope()
    kube_plan = compile_plan(kube.desired(WANT), central, OPTIONS).plan
    expected |= {
        (c.action, c.kind, c.key) for c in kube.restrict(kube_plan, kube.view(central)).changes
    }
    assert {(c.action, c.kind, c.key) for c in plan.changes} == expected
    assert any("node-3" in w for w in plan.warnings)
    assert plan.meta["zones"] == {
        "node-1": "2026-11-20T10:00:00Z",
        "node-2": "2026-11-20T10:00:00Z",
    }
    with pytest.raises(ValueError):
        ZonedSnapshot.from_json({"kind": "zoned", "format_version": 99})
