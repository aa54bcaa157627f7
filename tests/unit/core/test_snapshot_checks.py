"""A snapshot file read back (``Observed.from_json``, ``plan --observed``, a zone's slice): every
field as it was written, what an older snapshot leaves out, and the names Kubernetes would
never accept refused where they are read, naming the field (``check_snapshot``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.core.model.observed import (
    KubeObject,
    NbGlobal,
    NetworkPolicy,
    Node,
    Observed,
    OvnCapabilities,
    OvnRow,
    Pod,
    PodPort,
    SnapshotRefused,
    Switch,
    check_node_name,
    check_snapshot,
    check_text,
)
from reconciler.core.model.ovn_kubernetes import OvnKubernetesRows

EVERYTHING = Observed(
    pods=(Pod("shop", "web-1", "uid-1", "node-1", {"app": "web"}),),
    nodes=(Node("node-1", {"zone": "a"}, ("10.244.1.0/24",)),),
    kube_objects=(KubeObject("VirtualMachine", "vnfs", "fw-node-1", {"spec": {}}, {"a": "b"},
                             {"printableStatus": "Running"}),),
    pod_ports=(PodPort("shop_web-1", "node-1", "shop", "web-1", "uid-1", "0a:58:00:00:00:01",
                       ("10.244.1.5",)),),
    switches=(Switch("node-1", "10.244.1.0/24", True),),
    routers=("ovn_cluster_router",),
    ovn_rows=(OvnRow("ACL", "k", {"priority": 1}),),
    used_ids={"Network_Function": (1, 2)},
    network_policies=(NetworkPolicy("shop", "deny", {"app": "web"}, ("Ingress", "Egress")),),
    capabilities=OvnCapabilities("7.18.0", True),
    nb_global=NbGlobal({"svc_monitor_ip": "169.254.254.1"}, {"osc.io/x": "y"}),
    nf_active={"g": "f", "h": None},
    ports_up={"p": True},
    ports_chassis={"p": True, "q": False},
    ovn_kubernetes=OvnKubernetesRows(3, ("pg",), 1, ("m",)),
    observed_at=1_800_000_000.0,
)  # fmt: skip


def test_a_snapshot_reads_back_as_it_was_taken() -> None:
    data = json.loads(json.dumps(EVERYTHING.to_json()))
    assert data["format_version"] == 1
    assert Observed.from_json(data) == EVERYTHING


def test_what_an_older_snapshot_leaves_out_is_empty() -> None:
    bare = Observed.from_json({"format_version": 1, "nodes": [{"name": "node-1"}],
                               "pod_ports": [{"name": "a_b", "switch": "n", "namespace": "a",
                                              "pod": "b", "pod_uid": None, "mac": None}],
                               "network_policies": [{"namespace": "a", "name": "p"}]})  # fmt: skip
    assert bare == Observed(
        nodes=(Node("node-1"),), pod_ports=(PodPort("a_b", "n", "a", "b", None, None),),
        network_policies=(NetworkPolicy("a", "p"),),
    )  # fmt: skip
    assert bare.network_policies[0].policy_types == ("Ingress",)
    assert bare.capabilities == OvnCapabilities("", False)
    assert Observed.from_json({"format_version": 1}) == Observed()


@pytest.mark.parametrize("version", [None, 2, "1"])
def test_a_snapshot_of_another_format_is_refused(version: Any) -> None:
    with pytest.raises(ValueError) as refused:
        Observed.from_json({"format_version": version})
    assert str(refused.value) == (
        f"unsupported snapshot format_version {version!r} (this osc-gitops reads 1)"
    )


def pod(**fields: Any) -> dict[str, Any]:
    return {"namespace": "shop", "name": "web-1", "uid": "uid-1", "node": "node-1",
            "labels": {"app": "web"}, **fields}  # fmt: skip


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(SnapshotRefused) as refused:
        check_snapshot(data)
    return str(refused.value)


@pytest.mark.parametrize(
    "fields",
    [
        {}, {"node": None, "uid": None}, {"labels": None}, {"labels": {}},
        {"namespace": "a" * 63}, {"name": "a" * 253}, {"name": "web-1.shop.v2"},
        {"node": "node-1.example.com"}, {"uid": "u" * 128}, {"uid": "0:a_b.c-d"},
        {"labels": {"example.com/app": "web", "a": "", "b": "x" * 63, "c" * 63: "v",
                    "A.b_c-D": "V.w_x-Y"}},
    ],
)  # fmt: skip
def test_names_kubernetes_accepts_are_read(fields: dict[str, Any]) -> None:
    check_snapshot({"pods": [pod(**fields)]})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"namespace": "a" * 64}, f"pods[0].namespace: '{'a' * 64}' is not a namespace (a "
                                  "DNS-1123 label)"),
        ({"namespace": "shop.v2"}, "pods[0].namespace: 'shop.v2' is not a namespace (a DNS-1123 "
                                   "label)"),
        ({"namespace": "-shop"}, "pods[0].namespace: '-shop' is not a namespace (a DNS-1123 "
                                 "label)"),
        ({"namespace": None}, "pods[0].namespace: None is not a namespace (a DNS-1123 label)"),
        ({"name": "a" * 254}, f"pods[0].name: '{'a' * 76}... is not a Kubernetes object name "
                              "(a DNS-1123 subdomain)"),
        ({"name": "Web"}, "pods[0].name: 'Web' is not a Kubernetes object name (a DNS-1123 "
                          "subdomain)"),
        ({"node": "node_1"}, "pods[0].node: 'node_1' is not a node name (a DNS-1123 subdomain)"),
        ({"uid": "u" * 129}, f"pods[0].uid: '{'u' * 76}... is not a Kubernetes uid"),
        ({"uid": "-u"}, "pods[0].uid: '-u' is not a Kubernetes uid"),
        ({"labels": ["app=web"]}, "pods[0].labels: ['app=web'] is not a map of labels"),
        ({"labels": {"/app": "web"}}, "pods[0].labels (a key): '/app' is not a Kubernetes label "
                                      "key"),
        ({"labels": {"Example.com/app": "web"}}, "pods[0].labels (a key): 'Example.com/app' is "
                                                 "not a Kubernetes label key"),
        ({"labels": {"a" * 64: "web"}}, f"pods[0].labels (a key): '{'a' * 64}' is not a "
                                        "Kubernetes label key"),
        ({"labels": {"-app": "web"}}, "pods[0].labels (a key): '-app' is not a Kubernetes label "
                                      "key"),
        ({"labels": {"app": "w" * 64}}, f"pods[0].labels['app']: '{'w' * 64}' is not a Kubernetes "
                                        "label value"),
        ({"labels": {"app": "web-"}}, "pods[0].labels['app']: 'web-' is not a Kubernetes label "
                                      "value"),
        ({"labels": {"app": 1}}, "pods[0].labels['app']: 1 is not a Kubernetes label value"),
        ({"labels": {1: "web"}}, "pods[0].labels (a key): 1 is not a Kubernetes label key"),
    ],
)  # fmt: skip
def test_a_pod_named_as_kubernetes_never_would_is_refused_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    assert refusal({"pods": [pod(), pod(**fields)]}) == message.replace("pods[0]", "pods[1]")


def test_a_shown_value_is_cut_at_80_characters() -> None:
    exactly = "a" * 78  # its repr is 80 characters long
    assert refusal({"pods": [pod(namespace=exactly)]}) == (
        f"pods[0].namespace: '{exactly}' is not a namespace (a DNS-1123 label)"
    )


def test_a_value_shown_81_characters_long_is_cut() -> None:
    assert refusal({"pods": [pod(namespace="a" * 79)]}) == (
        f"pods[0].namespace: '{'a' * 76}... is not a namespace (a DNS-1123 label)"
    )


def test_a_pod_not_scheduled_yet_still_has_its_uid_checked() -> None:
    assert refusal({"pods": [pod(node=None, uid="-u")]}) == (
        "pods[0].uid: '-u' is not a Kubernetes uid"
    )


def test_every_part_of_a_snapshot_is_checked() -> None:
    assert refusal({"pods": ["web-1"]}) == "pods[0]: 'web-1' is not an object"
    assert refusal({"nodes": [{"name": "n"}, {"name": "N"}]}) == (
        "nodes[1].name: 'N' is not a node name (a DNS-1123 subdomain)"
    )
    assert refusal({"nodes": [{"name": "n", "labels": {"a": "-"}}]}) == (
        "nodes[0].labels['a']: '-' is not a Kubernetes label value"
    )
    assert refusal({"pod_ports": [{"namespace": "shop", "pod": "Web"}]}) == (
        "pod_ports[0].pod: 'Web' is not a Kubernetes object name (a DNS-1123 subdomain)"
    )
    assert refusal({"pod_ports": [{"namespace": "Shop", "pod": "web"}]}) == (
        "pod_ports[0].namespace: 'Shop' is not a namespace (a DNS-1123 label)"
    )
    obj = {"kind": "VirtualMachine", "namespace": "vnfs", "name": "fw",
           "body": {"metadata": {"labels": {"a": "b c"}}}}  # fmt: skip
    assert refusal({"kube_objects": [obj]}) == (
        "kube_objects[0].body.metadata.labels['a']: 'b c' is not a Kubernetes label value"
    )
    assert refusal({"kube_objects": [{**obj, "name": "Fw", "body": {}}]}) == (
        "kube_objects[0].name: 'Fw' is not a Kubernetes object name (a DNS-1123 subdomain)"
    )
    assert refusal({"kube_objects": [{**obj, "namespace": "V"}]}) == (
        "kube_objects[0].namespace: 'V' is not a namespace (a DNS-1123 label)"
    )
    check_snapshot({"kube_objects": [{**obj, "body": {"metadata": {"labels": None}}}]})
    check_snapshot({"kube_objects": [{**obj, "body": "raw"}]})
    check_snapshot({"kube_objects": [{**obj, "body": {"metadata": "raw"}}]})
    assert refusal({"network_policies": [{"namespace": "shop", "name": "Deny"}]}) == (
        "network_policies[0].name: 'Deny' is not a Kubernetes object name (a DNS-1123 subdomain)"
    )
    assert refusal({"network_policies": [{"namespace": "S", "name": "deny"}]}) == (
        "network_policies[0].namespace: 'S' is not a namespace (a DNS-1123 label)"
    )


def test_no_string_of_a_snapshot_holds_a_control_character_keys_included() -> None:
    assert refusal({"ovn_rows": [{"table": "ACL", "key": "k", "fields": {"match": "a\nb"}}]}) == (
        "ovn_rows[0].fields.match: 'a\\nb' is not printable text (it holds a control character)"
    )
    assert refusal({"nf_active": {"g\u202e": None}}) == (
        "nf_active (a key): 'g\\u202e' is not printable text (it holds a control character)"
    )
    assert refusal({"routers": ["r", ("x", "y\x9b")]}) == (
        "routers[1][1]: 'y\\x9b' is not printable text (it holds a control character)"
    )
    for char in ("\x00", "\x1f", "\x7f", "\u061c", "\u200e", "\u200f", "\u2028", "\u2066"):
        with pytest.raises(SnapshotRefused):
            check_text({"a": [f"x{char}"]}, "snapshot")
    check_text({"a": ["é ü 日本 → ✓"], "b": 1, "c": None, 2: [3.5, True]}, "snapshot")
    with pytest.raises(SnapshotRefused) as refused:
        check_text("a\tb", "zones.node-1")
    assert str(refused.value).startswith("zones.node-1: 'a\\tb' is not printable text")


def test_a_zone_is_keyed_by_a_node_name() -> None:
    check_node_name("node-1.example.com", "zones")
    with pytest.raises(SnapshotRefused) as refused:
        check_node_name("Node-1", "zones")
    assert str(refused.value) == "zones: 'Node-1' is not a node name (a DNS-1123 subdomain)"
    for bad in ("Node-1", "", 7, None, "a" * 254):
        with pytest.raises(SnapshotRefused, match=r"^zones: .* is not a node name"):
            check_node_name(bad, "zones")


def test_a_pod_s_port_is_named_namespace_underscore_pod() -> None:
    assert Pod("shop", "web-1", "u", None).lsp_name == "shop_web-1"
