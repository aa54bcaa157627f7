"""``osc-gitops demo --policies DIR`` with a user's own manifests (issue #24, "Why"): flow-style
``metadata`` is handled when step 6 removes a binding, step 5 announces the VM it deletes, and
the demo leaves no temp folder behind."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.cli import cli
from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import POLICIES

pytestmark = pytest.mark.ovn


def test_the_demo_on_flow_style_manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_ovn_or_fail(northd=True)
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    for file in (policies / "bindings").glob("*.yaml"):
        file.write_text(re.sub(r"metadata:\n  name: ([a-z-]+)\n", r"metadata: {name: \1}\n",
                               file.read_text()))  # fmt: skip
    assert "metadata: {name: web-ips}" in (policies / "bindings" / "web.yaml").read_text()
    temp = tmp_path / "t"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    result = cli("demo", "--policies", policies)
    assert result.code == 0, result.err
    announced = re.search(r"=== 5\. Somebody deletes a VNF VM \(kubectl -n (\S+) delete vm (\S+)\)",
                          result.out)  # fmt: skip
    assert announced is not None
    step5 = result.out[announced.end() : result.out.index("=== 6.")]
    assert f"+ {announced.group(1)}/{announced.group(2)}" in step5  # the one deleted comes back
    assert "(removed Binding web-ips from the manifests)" in result.out
    assert list(temp.iterdir()) == []
