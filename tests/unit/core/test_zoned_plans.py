"""Zoned plans of one snapshot file: the whole cluster, one zone (``--node``) or the Kubernetes
side only (``--kubernetes-only``), what each says about itself, and the file's round trip."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.observed import KubeObject, NetworkPolicy, Node
from reconciler.core.planning.slicing import NodeScope, kubernetes_observed
from reconciler.core.planning.zoned import ZonedSnapshot, decode_slice, encode_slice, zoned_plan
from tests.support.builders import binding, cluster, desired, sg, vnf

WANT = desired(sg("web", "app=web"), vnf("firewall"), binding("web-fw", "web", "firewall", 10))
OPTIONS = CompileOptions()
AT = {"node-1": "2026-11-20T10:00:00Z", "node-2": "2026-11-20T10:05:00Z"}
POLICY = NetworkPolicy("shop", "deny", {})


def world():  # type: ignore[no-untyped-def]
    return cluster([("shop", "web-1", "node-1", {"app": "web"}),
                    ("shop", "web-2", "node-2", {"app": "web"})])  # fmt: skip


def snapshot(objects: tuple[KubeObject, ...] = (), missing: tuple[str, ...] = ("node-3",)):  # type: ignore[no-untyped-def]
    observed = world()
    central = kubernetes_observed(
        [(Node("node-1"), "10.244.1.0/24"), (Node("node-2"), "10.244.2.0/24")], objects, [POLICY]
    )
    slices = {
        node: (NodeScope(node).view(observed).observed, AT[node], f"rev-{node}")
        for node in ("node-2", "node-1")
    }
    return ZonedSnapshot.assemble(central, slices, missing)


def keys(plan: Any) -> set[tuple[str, str]]:
    return {(c.kind, c.key) for c in plan.changes}


def test_the_whole_cluster_plan_names_its_scope_zones_and_the_missing_ones() -> None:
    plan = zoned_plan(WANT, snapshot(missing=("node-4", "node-3")), OPTIONS)
    assert plan.meta["scope"] == "interconnect, 2 zone(s)"
    assert plan.meta["zones"] == AT
    assert plan.meta["instance"] == "osc-gitops"
    assert plan.meta["steering"] == "network-function"
    assert plan.meta["nb_schema"] == "7.18.0"
    assert [w for w in plan.warnings if "published no observed slice" in w] == [
        f"node {n}: its agent has published no observed slice, so its OVN changes are not in "
        "this plan"
        for n in ("node-3", "node-4")
    ]
    assert len(plan.warnings) == len(set(plan.warnings))  # each warning once
    assert [c.sort_key for c in plan.changes] == sorted(c.sort_key for c in plan.changes)
    assert {i["node"] for i in plan.meta["vnf_instances"]} == {"node-1", "node-2"}
    # an agent's note about Kubernetes objects it leaves to the central owner is no news here:
    # the central side's changes are in this plan
    assert not [w for w in plan.warnings if "Kubernetes objects are not yet" in w]
    # steering waits for northd in each zone: the zones' held entries, all of them
    held = plan.meta["held"]
    for node in ("node-1", "node-2"):
        mine = zoned_plan(WANT, snapshot(), OPTIONS, node=node).meta["held"]
        assert mine and all(entry in held for entry in mine)
    assert len(held) == sum(
        len(zoned_plan(WANT, snapshot(), OPTIONS, node=n).meta["held"]) for n in AT
    )
    kinds = {kind for kind, _ in keys(plan)}
    assert {"VirtualMachine", "NetworkAttachmentDefinition", "Port_Group"} <= kinds


def test_one_zone_is_its_agents_plan_without_the_kubernetes_side() -> None:
    whole = zoned_plan(WANT, snapshot(), OPTIONS)
    one = zoned_plan(WANT, snapshot(), OPTIONS, node="node-1")
    assert one.meta["scope"] == "node node-1"
    assert one.meta["zones"] == {"node-1": AT["node-1"]}
    assert keys(one) and keys(one) < keys(whole)
    assert not {k for k in keys(one) if k[0] in ("VirtualMachine", "NetworkAttachmentDefinition")}
    assert {c.node for c in one.changes} - {None} == {"node-1"}  # and rows of no node
    assert not [w for w in one.warnings if "published no observed slice" in w]
    assert {i["node"] for i in one.meta["vnf_instances"]} == {"node-1"}


def test_a_zone_not_in_the_snapshot_is_named() -> None:
    plan = zoned_plan(WANT, snapshot(), OPTIONS, node="node-9")
    assert plan.changes == ()
    assert plan.warnings == ("node node-9: not in this snapshot (no observed slice published)",)
    assert plan.meta["scope"] == "node node-9" and plan.meta["zones"] == {}
    assert plan.meta.get("steering") is None and plan.meta.get("nb_schema") is None
    assert "vnf_instances" not in plan.meta


def test_the_kubernetes_side_alone() -> None:
    plan = zoned_plan(WANT, snapshot(), OPTIONS, kubernetes_only=True)
    assert plan.meta["scope"] == "kubernetes-only" and plan.meta["zones"] == {}
    assert {kind for kind, _ in keys(plan)} == {"VirtualMachine", "NetworkAttachmentDefinition"}
    assert not [w for w in plan.warnings if "observed slice" in w]


def test_the_central_side_is_split_into_the_zones_it_belongs_to() -> None:
    """Each zone sees the cluster's nodes and NetworkPolicies and the objects of its node."""
    objects = tuple(
        KubeObject(r.kind, *r.key.split("/"), r.fields)
        for r in compile_target(WANT, world())
        if not r.is_ovn
    )
    snap = snapshot(objects)
    for node, zone in snap.zones.items():
        assert zone.observed.nodes == (Node("node-1"), Node("node-2"))
        assert zone.observed.network_policies == (POLICY,)
        mine = {o.name for o in zone.observed.kube_objects}
        assert mine and all(name.startswith("firewall-" + node) for name in mine), mine
        assert (zone.published_at, zone.revision) == (AT[node], f"rev-{node}")
    assert list(snap.zones) == ["node-1", "node-2"] and snap.missing == ("node-3",)


def test_a_snapshot_file_round_trips() -> None:
    snap = snapshot()
    data = json.loads(json.dumps(snap.to_json()))
    assert (data["kind"], data["format_version"], data["missing"]) == ("zoned", 1, ["node-3"])
    assert data["zones"]["node-2"]["published_at"] == AT["node-2"]
    assert data["zones"]["node-2"]["revision"] == "rev-node-2"
    back = ZonedSnapshot.from_json(data)
    assert back.to_json() == snap.to_json()
    assert back.central == snap.central


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "zoned", "format_version": 99},
         "not a zoned snapshot of format_version 1 (kind 'zoned', format_version 99)"),
        ({"format_version": 1}, "not a zoned snapshot of format_version 1 (kind None, "
                                "format_version 1)"),
    ],
)  # fmt: skip
def test_anything_else_is_refused_by_name(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ZonedSnapshot.from_json(data)
    assert str(caught.value) == message


def test_a_snapshot_without_zones_or_missing_nodes_reads_as_empty() -> None:
    data = snapshot().to_json()
    data["zones"], data["missing"] = None, None
    back = ZonedSnapshot.from_json(data)
    assert back.zones == {} and back.missing == ()


def test_a_slice_that_is_no_encoded_json_object_is_refused() -> None:
    not_an_object = base64.b64encode(gzip.compress(b"[1, 2]")).decode()
    with pytest.raises(ValueError, match=r"^not an encoded observed slice$"):
        decode_slice(not_an_object)
    with pytest.raises(ValueError, match=r"^not an encoded observed slice: "):
        decode_slice("@@@")
    view = NodeScope("node-1").view(world()).observed
    assert (
        json.loads(
            __import__("gzip").decompress(__import__("base64").b64decode(encode_slice(view)))
        )["format_version"]
        == 1
    )


def test_zones_of_different_ovn_releases_are_each_named() -> None:
    """node-2's NB has no Network Function tables: with nothing to steer yet (no binding), its
    agent deploys the VNF with the backend that OVN supports; the plan names both backends and
    both schemas."""
    observed = world()
    old = cluster([("shop", "web-2", "node-2", {"app": "web"})], nf=False)
    central = kubernetes_observed(
        [(Node("node-1"), "10.244.1.0/24"), (Node("node-2"), "10.244.2.0/24")], ()
    )
    slices = {
        "node-1": (NodeScope("node-1").view(observed).observed, AT["node-1"], None),
        "node-2": (NodeScope("node-2").view(old).observed, AT["node-2"], None),
    }
    unbound = desired(sg("web", "app=web"), vnf("firewall"))
    plan = zoned_plan(unbound, ZonedSnapshot.assemble(central, slices), OPTIONS)
    assert plan.meta["steering"] == "network-function, router-policy"
    assert plan.meta["nb_schema"] == "7.0.0, 7.18.0"


def test_a_missing_zone_is_a_finding_about_that_node() -> None:
    plan = zoned_plan(WANT, snapshot(), OPTIONS, node="node-9")
    (finding,) = plan.findings
    assert (finding.code, finding.subject, finding.node) == ("scope", "Node/node-9", "node-9")


def test_an_unchanged_zone_encodes_to_the_same_bytes_whenever_and_wherever() -> None:
    """The agent publishes a slice only when its encoding changes: the encoding carries no
    time (gzip's mtime is 0) and its JSON has one form (compact, keys sorted)."""
    view = NodeScope("node-1").view(world()).observed
    raw = base64.b64decode(encode_slice(view))
    assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\x00\x00\x00\x00"  # gzip, mtime 0
    text = gzip.decompress(raw).decode()
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert list(data) == sorted(data)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(instance="osc\x1b[2Jgitops"),
         "instance: 'osc\\x1b[2Jgitops' is not printable text (it holds a control character)"),
        (lambda d: d["zones"]["node-1"].update(revision="rev\r\n"),
         "zones.node-1.revision: 'rev\\r\\n' is not printable text (it holds a control "
         "character)"),
        (lambda d: d["central"].update(observed_at="2026\x1b[2J"),
         "central.observed_at: '2026\\x1b[2J' is not printable text (it holds a control "
         "character)"),
        (lambda d: d["zones"]["node-1"]["observed"].update(observed_at="2026\x1b[2J"),
         "zones.node-1.observed.observed_at: '2026\\x1b[2J' is not printable text (it holds a "
         "control character)"),
        (lambda d: d["zones"].update({"Node_1/..": d["zones"].pop("node-1")}),
         "zones['Node_1/..']: 'Node_1/..' is not a node name (a DNS-1123 subdomain)"),
        (lambda d: d.update(missing=["node-3", "../etc"]),
         "missing[]: '../etc' is not a node name (a DNS-1123 subdomain)"),
    ],
)  # fmt: skip
def test_hostile_text_or_node_names_in_a_zoned_snapshot_are_refused_by_place(
    edit: Any, message: str
) -> None:
    """A zoned snapshot comes from a pull request (plan --observed): no control character
    reaches a terminal and no node name a path, and the error says where in the file it
    stood, also inside the central and the zones' observed states."""
    from reconciler.core.model.observed import SnapshotRefused

    data = json.loads(json.dumps(snapshot().to_json()))
    edit(data)
    with pytest.raises(SnapshotRefused) as caught:
        ZonedSnapshot.from_json(data)
    assert str(caught.value) == message
