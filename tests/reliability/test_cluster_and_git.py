"""Issue #8, the remaining faults: a clustered (Raft) NB losing its leader, a member, and all
members; and a git source that force-pushes, deletes every manifest, commits invalid manifests
or goes away. Each scenario asserts the end state on the real NB."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.kubeapi.server import KubeApiServer
from osc_gitops_sandbox.ovn.cluster import load_items, node_subnet, seed_pod_of
from osc_gitops_sandbox.ovn.stack import (
    OvnCluster,
    SeedNode,
    seed_ovn_kubernetes,
)

from tests.reliability import nbstate
from tests.reliability.figures import record
from tests.reliability.harness import WAIT, cli, conn
from tests.support.cli import nothing_to_write
from tests.support.gitops import Remote, git
from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import CLUSTER


class RaftWorld:
    """A 3-member clustered NB (OVN 26.03, sid) + the API emulator, seeded like examples/cluster."""

    def __init__(self, root: Path) -> None:
        self.nb = OvnCluster(root / "raft", nb_schema="26.03")
        self.kube = KubeApiServer()
        self.kubeconfig = str(root / "kubeconfig")

    def __enter__(self) -> RaftWorld:
        self.nb.start_all()
        self.nb.wait_healthy()
        self.kube.start()
        self.kube.write_kubeconfig(self.kubeconfig)
        nodes = load_items(CLUSTER / "nodes.yaml")
        pods = load_items(CLUSTER / "pods.yaml")
        self.kube.add_objects([*load_items(CLUSTER / "namespaces.yaml"), *nodes, *pods])
        leader = self.nb.wait_healthy()
        seed_ovn_kubernetes(
            self.nb.remote(leader),
            [SeedNode(n["metadata"]["name"], node_subnet(n)) for n in nodes],
            [seed_pod_of(p) for p in pods],
        )
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.kube.stop()
        finally:
            self.nb.stop()

    def args(self) -> list[str]:
        return ["--ovn-nb", self.nb.remotes, "--kubeconfig", self.kubeconfig, "--ovn-timeout", "20"]

    def apply_until_converged(self, policies: Path, attempts: int = 8) -> int:
        """Apply (retrying while the cluster elects a leader) until a plan is empty; returns
        the number of failed attempts (each a fault the reconciler had to survive)."""
        failures = 0
        for _ in range(attempts):
            if cli("apply", policies, *self.args()).code == 0:
                break
            failures += 1
            time.sleep(0.5)
        assert nothing_to_write(policies, *self.args())  # the VNFs' steering stays held
        leader = self.nb.wait_healthy()
        assert nbstate.problems(self.nb.remote(leader)) == []
        return failures


@pytest.fixture
def raft(tmp_path: Path) -> Iterator[RaftWorld]:
    require_ovn_or_fail(northd=False)
    with RaftWorld(tmp_path) as world:
        yield world


def test_clustered_nb_leader_member_and_full_restart(raft, policy_sets):
    a, b = policy_sets
    raft.apply_until_converged(a)
    faults = 0
    # 1. the leader is killed in the middle of a sequence of applies
    for i, policies in enumerate((b, a, b)):
        leader = raft.nb.wait_healthy()
        raft.nb.kill(leader)
        faults += 1
        raft.apply_until_converged(policies)
        raft.nb.start(leader)
        raft.nb.wait_healthy()
        assert nbstate.owned(raft.nb.remote(leader)) is not None, i
    state_b = nbstate.owned(raft.nb.remote(raft.nb.wait_healthy()))
    # 2. a follower is stopped, changes are applied without it, and it catches up on return
    leader = raft.nb.wait_healthy()
    follower = (leader + 1) % 3
    raft.nb.kill(follower)
    faults += 1
    raft.apply_until_converged(a)
    state_a = nbstate.owned(raft.nb.remote(raft.nb.wait_healthy()))
    assert state_a != state_b
    raft.nb.start(follower)
    raft.nb.wait_healthy()
    deadline = time.monotonic() + 20
    while nbstate.owned(raft.nb.remote(follower)) != state_a:
        assert time.monotonic() < deadline, "the returning member did not catch up"
        time.sleep(0.2)
    # 3. every member restarts: the applied state survives and the reconciler carries on
    for i in range(3):
        raft.nb.kill(i)
    faults += 3
    for i in range(3):
        raft.nb.start(i, wait=False)
    leader = raft.nb.wait_healthy()
    assert nbstate.owned(raft.nb.remote(leader)) == state_a
    assert nothing_to_write(a, *raft.args())
    raft.apply_until_converged(b)
    record("clustered NB (Raft)", faults=faults, converged=True)


# --------------------------------------------------------------------------- git


@pytest.fixture
def gitworld(tmp_path: Path, nf_cluster):
    remote = Remote(tmp_path / "git")
    remote.copy_examples()
    first = remote.commit("policies")
    return remote, first, nf_cluster, tmp_path / "cache"


def _apply_repo(remote: Remote, cluster, cache: Path, *extra: str):
    return cli("apply", "--repo", remote.url, "--ref", "main", "--path", "policies",
               "--cache-dir", cache, *conn(cluster), *extra)  # fmt: skip


def test_git_force_push_empty_commit_invalid_commit_and_unreachable_remote(gitworld):
    remote, _, cluster, cache = gitworld
    before_foreign = nbstate.foreign(cluster.nb_remote)
    first = _apply_repo(remote, cluster, cache, *WAIT)  # the new VNFs' steering switched on
    assert first.code == 0, first.err
    good = nbstate.owned(cluster.nb_remote)
    faults = 0

    # force-pushed history: a rewritten main without the web bindings is applied as it is
    git(remote.work, "checkout", "-q", "--orphan", "rewritten")
    (remote.policies() / "bindings" / "web.yaml").unlink()
    git(remote.work, "add", "-A")
    git(remote.work, "commit", "-q", "-m", "rewritten history")
    git(remote.work, "push", "-q", "--force", "origin", "HEAD:main")
    faults += 1
    rewritten = _apply_repo(remote, cluster, cache)
    assert rewritten.code == 0, rewritten.err
    after_rewrite = nbstate.owned(cluster.nb_remote)
    assert after_rewrite != good
    assert not [k for rows in after_rewrite.values() for k in rows if "web_" in k]

    # a commit deleting every manifest is refused unless explicitly allowed ...
    shutil.rmtree(remote.policies())
    remote.policies().mkdir()
    (remote.policies() / "README.md").write_text("policies moved\n")
    remote.commit("delete every manifest")
    faults += 1
    refused = _apply_repo(remote, cluster, cache)
    assert refused.code == 1 and "--allow-empty" in refused.err
    assert nbstate.owned(cluster.nb_remote) == after_rewrite
    # ... and a commit that removes the --path folder itself is an error, not an empty set
    shutil.rmtree(remote.policies())
    remote.commit("delete the folder")
    faults += 1
    missing = _apply_repo(remote, cluster, cache)
    assert missing.code == 1 and "no such file or directory" in missing.err
    assert nbstate.owned(cluster.nb_remote) == after_rewrite

    # a commit with invalid manifests is refused whole: nothing of it is applied
    remote.copy_examples()
    broken = remote.policies() / "groups" / "frontend.yaml"
    broken.write_text(broken.read_text().replace("app=web", "app=we b"))
    remote.commit("invalid label")
    faults += 1
    invalid = _apply_repo(remote, cluster, cache)
    assert invalid.code == 1
    assert "policies/groups/frontend.yaml:" in invalid.err
    assert nbstate.owned(cluster.nb_remote) == after_rewrite

    # the remote goes away: a clear error naming it, nothing changed
    shutil.move(str(remote.bare), str(remote.bare) + ".gone")
    faults += 1
    gone = _apply_repo(remote, cluster, cache)
    assert gone.code == 1 and "Traceback" not in gone.err
    assert nbstate.owned(cluster.nb_remote) == after_rewrite

    # back, with a valid commit: converges to it
    shutil.move(str(remote.bare) + ".gone", str(remote.bare))
    remote.copy_examples()
    remote.commit("fixed")
    fixed = _apply_repo(remote, cluster, cache, *WAIT)
    assert fixed.code == 0, fixed.err
    assert nbstate.owned(cluster.nb_remote) == good
    assert nbstate.problems(cluster.nb_remote) == []
    foreign_changed = nbstate.foreign_changes(before_foreign, nbstate.foreign(cluster.nb_remote))
    assert foreign_changed == 0
    record("git source", faults=faults, converged=True, foreign_changed=foreign_changed)
