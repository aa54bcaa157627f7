"""Several writers on one NB: two agents of one node during a rolling update serialise on the
OVSDB write lock, and a central-NB run and node agents on a shared NB never fight over a row."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from osc_gitops_sandbox.ovn.zones import ZonedCluster

from reconciler.adapters.ovn import write_lock_name
from reconciler.core.model import ownership as own
from tests.functional.zones.support import WAIT, LockHolder, acl_keys, agent, dump, owned
from tests.reliability.harness import Worker
from tests.support.cli import cli
from tests.support.ovn import OVN_MARKS
from tests.support.paths import CLUSTER

pytestmark = OVN_MARKS


@pytest.fixture
def fewer(policies: Path, tmp_path: Path) -> Path:
    """The example policies without the backend bindings (a later commit)."""
    copy = tmp_path / "fewer"
    shutil.copytree(policies, copy)
    (copy / "bindings" / "backend.yaml").unlink()
    return copy


def test_two_agents_of_one_node_serialise_on_the_nb_write_lock(
    zones: ZonedCluster, policies: Path, fewer: Path, tmp_path: Path
) -> None:
    before = dump(zones, "node-1")
    holder = LockHolder(zones.nb_remote("node-1"), write_lock_name("osc-gitops"))
    try:
        refused = agent(zones, "apply", policies, "node-1")
        assert refused.code == 1
        assert "another osc-gitops process holds the write lock" in refused.err
        assert "Nothing was written" in refused.err and "Traceback" not in refused.err
        assert dump(zones, "node-1") == before
        assert agent(zones, "plan", policies, "node-1").code == 2  # a plan needs no lock
    finally:
        holder.close()
    # the old and the new pod apply at the same moment, again and again
    flags = ["--node", "node-1", "--ovn-nb", zones.nb_remote("node-1"),
             "--kubeconfig", zones.kubeconfig]  # fmt: skip
    old, new = Worker(tmp_path / "old"), Worker(tmp_path / "new")
    refusals = 0
    try:
        for i in range(6):
            path = policies if i % 2 == 0 else fewer
            started = [old.start("apply", path, *flags), new.start("apply", path, *flags)]
            for worker, pid in zip((old, new), started, strict=True):
                result = worker.wait(pid)
                assert "Traceback" not in result.err
                if result.code != 0:
                    refusals += 1
                    # the lock refuses, or, granted after the other's commit, the stale plan
                    # is refused whole ("re-run plan"): never an interleaving
                    reasons = ("write lock", "re-run plan", "did not converge")
                    assert any(reason in result.err for reason in reasons), result.err
            keys = acl_keys(dump(zones, "node-1"))
            assert len(keys) == len(set(keys)), f"duplicate ACLs: {sorted(keys)}"
            assert agent(zones, "apply", path, "node-1").code == 0
            assert agent(zones, "plan", path, "node-1").code == 0
    finally:
        old.close()
        new.close()
    print(f"\n6 concurrent pairs of agents on node-1: {refusals} refusals")


@pytest.fixture
def central_nb(tmp_path: Path) -> Iterator[SandboxCluster]:
    """One central NB (OVN 26.03) holding both nodes of the example cluster."""
    with SandboxCluster(tmp_path / "c", distribution="sid", northd=False) as cluster:
        cluster.seed_dir(CLUSTER)
        yield cluster


def test_a_central_nb_run_and_agents_on_that_nb_never_fight(
    central_nb: SandboxCluster, policies: Path, fewer: Path
) -> None:
    nb = ["--ovn-nb", central_nb.nb_remote, "--kubeconfig", central_nb.kubeconfig]
    nodes = ("node-1", "node-2")

    def whole(path: Path, command: str = "plan") -> int:
        return cli(command, path, *nb, *(WAIT if command == "apply" else ())).code

    def node(name: str, path: Path, command: str = "plan") -> int:
        return cli(command, path, "--node", name, *nb, *(WAIT if command == "apply" else ())).code

    assert whole(policies, "apply") == 0
    central_rows = owned(central_nb.nb_remote)
    for name in nodes:  # agents arrive: they adopt their node's rows, recreate nothing
        assert node(name, policies, "apply") == 0
    rows = owned(central_nb.nb_remote)
    assert rows.keys() == central_rows.keys()
    held = {k for k, f in rows.items() if f["external_ids"].get(own.AGENT)}
    assert {rows[k]["external_ids"][own.AGENT] for k in held} == set(nodes)
    assert whole(policies) == 0 and all(node(n, policies) == 0 for n in nodes)

    # the central run moves on to a new commit first: it leaves the agents' rows alone...
    assert whole(fewer, "apply") == 0
    assert owned(central_nb.nb_remote) == rows
    assert whole(fewer) == 0 and all(node(n, policies) == 0 for n in nodes)
    # ...and the agents follow on their own
    for name in nodes:
        assert node(name, fewer) == 2
        assert node(name, fewer, "apply") == 0
    after = owned(central_nb.nb_remote)
    assert set(after) < set(rows)
    assert whole(fewer) == 0 and all(node(n, fewer) == 0 for n in nodes)
    keys = acl_keys(central_nb.ovn.dump(["ACL"]))
    assert len(keys) == len(set(keys)), f"duplicate ACLs: {sorted(keys)}"
