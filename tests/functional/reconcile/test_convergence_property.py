"""Property: from whatever state the previous example left, ONE apply of random manifests over
random pod labels converges (the next plan is empty) on a real ovsdb-server (``--wait``: the
steering onto new VNF instances is switched on once the sandbox's VNFs answer OVN's probe)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.manifests.load import load_path
from tests.support.cli import POLICIES, cli, conn

ALL = load_path(POLICIES)
BINDINGS = sorted(ALL.bindings)
POD_NAMES = [("shop-frontend", "web-1"), ("shop-frontend", "static-1"),
             ("shop-backend", "api-1"), ("shop-backend", "db-0")]  # fmt: skip
LABELS = [{"app": "web"}, {"tier": "frontend"}, {"role": "database"},
          {"app.kubernetes.io/name": "api"}, {"app": "none"}]  # fmt: skip


def _write(folder: Path, keep: set[str]) -> None:
    """A copy of the example policies with only the bindings in ``keep``."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(POLICIES, folder)
    for path in (folder / "bindings").glob("*.yaml"):
        dropped = set(BINDINGS) - keep
        docs = path.read_text().split("\n---")
        kept = [d for d in docs if not any(f"name: {b}\n" in d for b in dropped)]
        path.write_text("\n---".join(kept))


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    keep=st.sets(st.sampled_from(BINDINGS)),
    relabel=st.lists(st.tuples(st.sampled_from(POD_NAMES), st.sampled_from(LABELS)), max_size=3),
    steering=st.sampled_from(["network-function", "router-policy"]),
)
def test_random_states_converge_in_one_apply(nf_cluster, tmp_path, keep, relabel, steering):
    folder = tmp_path / "p"
    _write(folder, keep)
    for (namespace, name), labels in relabel:
        nf_cluster.label_pod(namespace, name, labels)
    args = [*conn(nf_cluster), "--steering", steering, "--allow-empty"]
    applied = cli("apply", folder, *args, "--wait", "--wait-timeout", "30s")
    assert applied.code == 0, applied.err
    after = cli("plan", folder, *args[:-1])
    assert after.code == 0, after.out
