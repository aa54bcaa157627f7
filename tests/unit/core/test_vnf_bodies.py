"""The Kubernetes objects of a VNF instance: its KubeVirt ``VirtualMachine`` and the two Multus
``NetworkAttachmentDefinition`` of its data NICs.

Three checks, each catching what the others cannot:

- the VM body is valid against KubeVirt's published OpenAPI definitions
  (``data/kubevirt-virtualmachine.swagger.json``: source and commit inside), read strictly (an
  unknown field is an error, as kubectl's default server-side field validation makes it): a
  misspelt or misplaced field is refused by the API server;
- the NAD's CNI configuration has what the CNI spec and ovs-cni need, and the VM's networks
  name exactly these NADs;
- the bodies equal a golden file (``data/vnf-bodies.golden.json``): a change of any value
  (``cniVersion``, ``bus``, a template label the security manager selects on) is a reviewed
  change of that file. Regenerate it with ``python -m tests.unit.core.test_vnf_bodies``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft4Validator

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.target import Target
from tests.support.builders import binding, cluster, desired, sg, vnf

DATA = Path(__file__).parent / "data"
SWAGGER = DATA / "kubevirt-virtualmachine.swagger.json"
GOLDEN = DATA / "vnf-bodies.golden.json"

PODS = [("shop", "web-1", "node-1", {"app": "web"})]
DESIRED = desired(
    sg("web", "app=web"),
    vnf("fw", namespace="security", cpu=2, memory="2Gi", dataNetwork="fwnet"),
    vnf("ips", namespace="ids", image="quay.io/osc/ips:2.1", instancesPerNode=2),
    binding("web-fw", "web", "fw", 10),
    binding("web-ips", "web", "ips", 20),
)


def bodies(options: CompileOptions | None = None) -> dict[str, dict[str, Any]]:
    """``kind namespace/name`` -> body of every Kubernetes object compiled for node-1."""
    target: Target = compile_target(DESIRED, cluster(PODS, nodes=("node-1",)), options)
    return {f"{r.kind} {r.key}": r.fields for r in target if not r.is_ovn}


def _strict(schema: Any) -> Any:
    """Every object definition with properties refuses the others (strict field validation)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def vm_validator() -> Draft4Validator:
    spec = json.loads(SWAGGER.read_text())
    definitions = _strict(spec["definitions"])
    return Draft4Validator({"definitions": definitions, "$ref": f"#/definitions/{spec['root']}"})


def as_object(kind_key: str, body: dict[str, Any]) -> dict[str, Any]:
    """The object the adapter sends: the body with its identity."""
    kind, key = kind_key.split(" ")
    namespace, _, name = key.partition("/")
    obj = copy.deepcopy(body)
    obj["metadata"].update(name=name, namespace=namespace)
    return {"apiVersion": "kubevirt.io/v1", "kind": kind, **obj}


def test_the_swagger_is_kubevirts_with_its_source() -> None:
    spec = json.loads(SWAGGER.read_text())
    assert spec["source"].startswith("https://github.com/kubevirt/kubevirt/blob/")
    assert spec["commit"] in spec["source"] and len(spec["commit"]) == 40
    assert {"v1.VirtualMachine", "v1.Interface", "v1.Network", "v1.Disk"} <= spec[
        "definitions"
    ].keys()


@pytest.mark.parametrize("steering", ["network-function", "router-policy"])
def test_every_vm_body_is_valid_for_kubevirts_api(steering: str) -> None:
    validator = vm_validator()
    vms = {k: b for k, b in bodies(CompileOptions(steering=steering)).items() if "Machine " in k}
    assert len(vms) >= 2
    for key, body in vms.items():
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(as_object(key, body))
        ]
        assert errors == [], key


def test_the_strict_schema_refuses_what_the_api_server_would() -> None:
    """The check is not vacuous: a misspelt field, a field in the wrong place, a wrong type and
    a network without its name are each refused."""
    validator = vm_validator()
    key, body = next((k, b) for k, b in bodies().items() if k.startswith("VirtualMachine "))
    good = as_object(key, body)
    assert validator.is_valid(good)
    template = ["spec", "template", "spec"]

    def broken(path: list[Any], edit: Any) -> dict[str, Any]:
        obj = copy.deepcopy(good)
        node = obj
        for part in path:
            node = node[part]
        edit(node)
        return obj

    cases = [
        broken([*template, "domain", "devices", "interfaces", 1],
               lambda i: i.update(macAdress=i.pop("macAddress"))),
        broken([*template, "domain", "devices", "disks", 0], lambda d: d.update(bus="virtio")),
        broken([*template, "domain", "cpu"], lambda c: c.update(cores="2")),
        broken([*template, "networks", 1], lambda n: n.pop("name")),
        broken([*template, "networks", 1, "multus"], lambda m: m.pop("networkName")),
        broken(["spec"], lambda s: s.update(running="yes")),
    ]  # fmt: skip
    for obj in cases:
        assert not validator.is_valid(obj)


def test_each_vm_nic_has_its_network_and_its_nad() -> None:
    """KubeVirt pairs a VM's interfaces and networks by name; each data network names, through
    Multus, a NAD of the same namespace bound by ovs-cni to the instance's OVN port."""
    objects = bodies()
    for key, body in objects.items():
        if not key.startswith("VirtualMachine "):
            continue
        namespace = key.split(" ")[1].partition("/")[0]
        spec = body["spec"]["template"]["spec"]
        interfaces = [i["name"] for i in spec["domain"]["devices"]["interfaces"]]
        networks = [n["name"] for n in spec["networks"]]
        assert interfaces == networks == ["default", "data-in", "data-out"]
        ports = dict(
            p.split("=") for p in body["metadata"]["annotations"]["osc.io/ports"].split(",")
        )
        for network in spec["networks"][1:]:
            nad = objects[
                f"NetworkAttachmentDefinition {namespace}/{network['multus']['networkName']}"
            ]
            config = json.loads(nad["spec"]["config"])
            side = network["name"].removeprefix("data-")
            assert config["args"]["cni"]["ovnPort"] == ports[side]
            assert config["name"] == network["multus"]["networkName"]


def test_every_nad_config_is_a_cni_configuration_for_ovs_cni() -> None:
    nads = {k: b for k, b in bodies().items() if k.startswith("NetworkAttachmentDefinition ")}
    assert len(nads) == 6  # fw: in, out; ips: two instances, in and out each
    for key, body in nads.items():
        config = json.loads(body["spec"]["config"])
        assert config["cniVersion"] == "0.4.0"
        assert config["type"] == "ovs" and config["bridge"] == "br-int"
        assert config["name"] == key.partition("/")[2]
        assert set(config) == {"cniVersion", "name", "type", "bridge", "args"}


def test_the_bodies_are_the_golden_ones() -> None:
    assert bodies() == json.loads(GOLDEN.read_text())


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(bodies(), indent=2, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
