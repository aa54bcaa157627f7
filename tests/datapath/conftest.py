"""Data-path fixtures: one real OVN stack + OVS + ovn-controller per module, pods and VNF guests
as network namespaces, the reconciler driven only through ``osc-gitops apply``.

Everything here needs root, ``ip netns`` and Debian's ovn-central/ovn-host/openvswitch-switch;
without them every test is skipped with the reason. Processes and namespaces are removed by the
fixtures' ``with`` blocks (and by atexit hooks if pytest itself dies).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.sandbox.cluster import SandboxCluster
from reconciler.sandbox.datapath import Datapath, Endpoint, Vnf, datapath_unavailable_reason

NODES = {"node-1": "10.244.1.0/24", "node-2": "10.244.2.0/24"}
PODS = {
    # name: node. Only "web-a" is ever labelled app=web (the SecurityGroup below).
    "web-a": "node-1",
    "other-b": "node-1",
    "client-c": "node-2",
    "client-d": "node-2",
}
NAMESPACE = "shop"
VNF_NAMESPACE = "osc-vnfs"

SECURITY_GROUP = """\
apiVersion: osc.io/v1alpha1
kind: SecurityGroup
metadata: {name: web}
spec:
  labels: [app=web]
"""
VNF = """\
apiVersion: osc.io/v1alpha1
kind: VnfDeployment
metadata: {name: firewall}
spec:
  namespace: osc-vnfs
  image: quay.io/example/vnf-firewall:1.4.2
"""
BINDING = """\
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: web-firewall}
spec:
  securityGroup: web
  vnf: firewall
  order: 10
  redirection: both
  failurePolicy: fail-close
"""


def node_object(name: str, subnet: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": {"k8s.ovn.org/node-subnets": json.dumps({"default": [subnet]})},
        },
        "spec": {"podCIDR": subnet},
    }


@dataclass
class World:
    """The sandbox cluster, its data path and the manifest folder ``osc-gitops`` applies."""

    cluster: SandboxCluster
    dp: Datapath
    manifests: Path
    outputs: list[str] = field(default_factory=list)

    def pod(self, name: str) -> Endpoint:
        return self.dp.pods[f"{NAMESPACE}_{name}"]

    def vnf(self, node: str) -> Vnf:
        return self.dp.vnf_on(node, "firewall")

    def write_manifests(self, *, binding: bool = True) -> None:
        (self.manifests / "groups.yaml").write_text(SECURITY_GROUP)
        (self.manifests / "vnfs.yaml").write_text(VNF)
        path = self.manifests / "bindings.yaml"
        if binding:
            path.write_text(BINDING)
        else:
            path.unlink(missing_ok=True)

    def apply(self) -> None:
        """``osc-gitops apply`` in-process, then play KubeVirt and wait for the chassis.

        ``wait_hv`` = ``ovn-nbctl --wait=hv sync``: returns once ovn-controller installed the
        flows for everything apply committed, so probes right after see the new steering.
        """
        out, err = io.StringIO(), io.StringIO()
        args = [
            "apply", str(self.manifests), "--ovn-nb", self.cluster.nb_remote,
            "--kubeconfig", self.cluster.kubeconfig, "--steering", "router-policy",
        ]  # fmt: skip
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
        assert code == 0, f"osc-gitops apply failed ({code}):\n{out.getvalue()}{err.getvalue()}"
        self.outputs.append(out.getvalue())
        self.dp.sync_vnfs()
        self.dp.wait_hv()

    def label(self, pod: str, value: str | None) -> None:
        self.cluster.label_pod(NAMESPACE, pod, {"app": value})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    reason = datapath_unavailable_reason()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("dp")
    manifests = tmp / "manifests"
    manifests.mkdir()
    # SandboxCluster/Datapath make short temp dirs themselves (unix socket paths <= 107 bytes).
    with SandboxCluster(nb_schema="installed") as cluster:
        cluster.seed(
            [node_object(n, s) for n, s in NODES.items()],
            [],
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
             for ns in (NAMESPACE, VNF_NAMESPACE)],
        )  # fmt: skip
        for name, node in PODS.items():
            cluster.add_pod(NAMESPACE, name, node, {"tier": "shop"})
        with Datapath(cluster) as dp:
            dp.plug_pods()
            yield World(cluster, dp, manifests)


@pytest.fixture
def fresh(world: World) -> World:
    """Baseline before each test: manifests with the binding, nobody labelled app=web, every
    VNF guest running and forwarding, steering applied and installed on the chassis."""
    world.write_manifests(binding=True)
    for name in PODS:
        world.label(name, None)
    world.apply()
    for vnf in world.dp.vnfs.values():
        world.dp.set_forwarding(vnf, True)
    assert set(world.dp.vnfs) == {f"{VNF_NAMESPACE}/firewall-{n}" for n in NODES}
    return world
