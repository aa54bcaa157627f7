"""Names osc-gitops generates must never collide (issue 31, item 11).

VM ``<vnf>-<node>``: VNF ``fw`` on ``edge-node-1`` and VNF ``fw-edge`` on ``node-1`` are both
``fw-edge-node-1``. On main ``validate`` passed and ``plan`` died with a ``ValueError``
traceback. ``validate`` now refuses such names with ``file:line:column``; what only the
cluster's node names decide (``n`` and ``n-b`` with two instances per node) is a one-line
error of ``plan``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.security.hostile import osc
from tests.support.paths import REPO

HEADER = "apiVersion: osc.io/v1alpha1\n"
GROUP = HEADER + "kind: SecurityGroup\nmetadata: {name: web}\nspec: {labels: [app=web]}\n"


def vnf(name: str, namespace: str = "osc-vnfs", extra: str = "") -> str:
    return (f"{HEADER}kind: VnfDeployment\nmetadata: {{name: {name}}}\n"
            f"spec: {{namespace: {namespace}, image: quay.io/example/fw:1{extra}}}\n")  # fmt: skip


def binding(name: str, target: str, order: int) -> str:
    return (f"{HEADER}kind: Binding\nmetadata: {{name: {name}}}\n"
            f"spec: {{securityGroup: web, vnf: {target}, order: {order}}}\n")  # fmt: skip


def manifests(tmp_path: Path, *docs: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text("---\n".join(docs))
    return path


def test_vnf_names_that_can_collide_are_refused_at_their_line(tmp_path: Path) -> None:
    path = manifests(tmp_path, GROUP, vnf("fw"), vnf("fw-edge"), binding("a", "fw", 1),
                     binding("b", "fw-edge", 2))  # fmt: skip
    run = osc("validate", path)
    assert run.code == 1 and "Traceback" not in run.err  # main: valid, then plan's traceback
    assert run.err.splitlines()[0].startswith(
        f"{path}:13:18: VnfDeployment/fw-edge metadata.name: its VirtualMachines can take the "
        f"names of those of VnfDeployment/fw at {path}:8:18 in namespace osc-vnfs: fw on a node "
        "named edge-<node> and fw-edge on <node> are both VirtualMachine fw-edge-<node>"
    )


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (
            vnf("ips", extra=", dataNetwork: fw"),
            "would have the names of those of VnfDeployment/fw",
        ),
        (
            vnf("ips", extra=", dataNetwork: fw-x"),
            "can take the names of those of VnfDeployment/fw",
        ),
    ],
)
def test_data_network_prefixes_that_collide_are_refused(
    tmp_path: Path, second: str, message: str
) -> None:
    run = osc("validate", manifests(tmp_path, GROUP, vnf("fw"), second))
    assert run.code == 1 and message in run.err and "spec.dataNetwork" in run.err


def test_the_same_names_in_other_namespaces_are_fine(tmp_path: Path) -> None:
    path = manifests(tmp_path, GROUP, vnf("fw"), vnf("fw-edge", "other"),
                     binding("a", "fw", 1), binding("b", "fw-edge", 2))  # fmt: skip
    assert osc("validate", path).code == 0


def test_what_only_node_names_decide_is_a_clear_plan_error(tmp_path: Path) -> None:
    """``fw`` with two instances per node: the second on ``node-2`` is ``fw-node-2-b``, the
    first on a node named ``node-2-b`` too."""
    snapshot = json.loads((REPO / "deploy/ci/observed-snapshot.json").read_text())
    observed = tmp_path / "observed.json"
    observed.write_text(json.dumps(snapshot).replace('"node-1"', '"node-2-b"'))
    path = manifests(tmp_path, GROUP, vnf("fw", extra=", instancesPerNode: 2"),
                     binding("a", "fw", 1))  # fmt: skip
    assert osc("validate", path).code == 0
    run = osc("plan", path, "--observed", observed)
    assert run.code == 1 and "Traceback" not in run.err
    assert run.err.startswith(
        "error: VnfDeployment/fw on node node-2 and VnfDeployment/fw on node node-2-b would "
        "both be "
    ), run.err
