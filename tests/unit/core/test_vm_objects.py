"""VirtualMachines as KubeVirt keeps them (issue 29): pinned by node affinity on
``metadata.name``, a deliberate evictionStrategy, label values valid for node names of up to
253 characters (a stable shortening; the full name in an annotation), object names that fit."""

from __future__ import annotations

import hashlib
import re

from reconciler.core.compiling.compile import compile_target
from reconciler.core.compiling.diff import diff
from reconciler.core.model import naming
from reconciler.core.model import ownership as own
from reconciler.core.model.observed import KubeObject
from reconciler.core.model.target import Target
from reconciler.core.planning.slicing import object_node
from tests.support.builders import binding, cluster, desired, sg, vnf

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LONG = ("n" + "-abcdefghi" * 26)[:253]  # a valid node name of 253 characters
WANT = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))


def kube(target, kind: str) -> dict:
    return {r.key: r.fields for r in target if r.kind == kind}


def test_vms_are_pinned_by_node_affinity_on_the_node_name_and_evicted_on_drain() -> None:
    vms = kube(compile_target(WANT, cluster([("shop", "w", "node-1", {"app": "web"})])),
               "VirtualMachine")  # fmt: skip
    spec = vms["security/fw-node-1"]["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec  # kubernetes.io/hostname is not the node name everywhere
    assert spec["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}}  # fmt: skip
    assert spec["evictionStrategy"] == "None"
    # fields KubeVirt's webhook sets are not ours to state (server-side apply keeps them)
    assert "firmware" not in spec["domain"] and "machine" not in spec["domain"]
    assert "architecture" not in spec


def test_a_253_character_node_name_gives_valid_labels_and_names() -> None:
    assert len(LONG) == 253
    target = compile_target(WANT, cluster([("shop", "w", LONG, {"app": "web"})], nodes=(LONG,)))
    vms, nads = kube(target, "VirtualMachine"), kube(target, "NetworkAttachmentDefinition")
    assert len(vms) == 1 and len(nads) == 2
    for key, fields in [*vms.items(), *nads.items()]:
        name = key.partition("/")[2]
        assert len(name) <= 253
        labels = fields["metadata"]["labels"]
        for value in labels.values():
            assert len(value) <= 63 and LABEL_VALUE.match(value), value
        assert labels[own.NODE_LABEL] == own.node_label_value(LONG) != LONG
        assert fields["metadata"]["annotations"][own.NODE_NAME_ANNOTATION] == LONG
    (vm_key, vm), = vms.items()  # fmt: skip
    assert len(vm_key.partition("/")[2]) <= 253 - naming.LAUNCHER_ROOM  # virt-launcher-<vm>-xxxxx
    template = vm["spec"]["template"]
    assert template["metadata"]["labels"][own.NODE_LABEL] == own.node_label_value(LONG)
    terms = template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]  # fmt: skip
    assert terms[0]["matchFields"][0]["values"] == [LONG]  # the full name where it matters
    # the full name comes back from the objects: slicing, the diff's node
    live = KubeObject("VirtualMachine", "osc-vnfs", vm_key.partition("/")[2], vm)
    assert object_node(live) == LONG
    gone = diff(Target(), {("VirtualMachine", vm_key): vm})
    assert gone.changes[0].node == LONG


def test_the_shortening_is_stable_and_distinct() -> None:
    other = LONG[:-1] + "x"
    assert own.node_label_value(LONG) == own.node_label_value(LONG)
    assert own.node_label_value(LONG) != own.node_label_value(other)
    assert own.node_label_value("node-1") == "node-1"
    assert own.node_annotations("node-1") == {}
    sixty_three = "n" * 63
    assert own.node_label_value(sixty_three) == sixty_three


def test_cloud_init_user_data_becomes_a_no_cloud_volume() -> None:
    user_data = "#cloud-config\nruncmd:\n  - [ip, link, add, br0, type, bridge]\n"
    want = desired(sg("web", "app=web"), vnf("fw", cloudInitUserData=user_data),
                   binding("web-fw", "web", "fw", 10))  # fmt: skip
    vms = kube(compile_target(want, cluster([("shop", "w", "node-1", {"app": "web"})])),
               "VirtualMachine")  # fmt: skip
    spec = vms["security/fw-node-1"]["spec"]["template"]["spec"]
    assert [d["name"] for d in spec["domain"]["devices"]["disks"]] == [
        "containerdisk", "cloudinitdisk"]  # fmt: skip
    assert spec["volumes"][1] == {"name": "cloudinitdisk",
                                  "cloudInitNoCloud": {"userData": user_data}}  # fmt: skip
    plain = kube(compile_target(WANT, cluster([("shop", "w", "node-1", {"app": "web"})])),
                 "VirtualMachine")["security/fw-node-1"]["spec"]["template"]["spec"]  # fmt: skip
    assert [v["name"] for v in plain["volumes"]] == ["containerdisk"]  # unchanged without it


def test_a_long_node_name_becomes_its_head_and_ten_hex_of_its_sha256() -> None:
    """63 characters: the name's first 52 without a trailing ``-`` or ``.``, ``-``, then the
    first 10 hex digits of the SHA-256 of the whole name."""

    def ten_hex(node: str) -> str:
        return hashlib.sha256(node.encode()).hexdigest()[:10]

    plain = "a" * 100
    assert own.node_label_value(plain) == "a" * 52 + "-" + ten_hex(plain)
    assert len(own.node_label_value(plain)) == 63
    assert own.node_label_value(LONG) == f"{LONG[:51]}-{ten_hex(LONG)}"  # its 52nd is a dash
    dotted = "a" * 51 + "." + "b" * 20  # the 52nd character is a dot
    assert own.node_label_value(dotted) == "a" * 51 + "-" + ten_hex(dotted)
    dashed = "c" * 50 + "-." + "d" * 20
    assert own.node_label_value(dashed) == "c" * 50 + "-" + ten_hex(dashed)
