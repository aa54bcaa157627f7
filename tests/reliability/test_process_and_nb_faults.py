"""Faults around the one OVN transaction: the reconciler or the NB dies at a random point.

The promise under test: an apply is all-or-nothing on OVN. After any fault the NB holds exactly
the owned rows it held before the run, or exactly those of the finished run (compared as raw
dumps with references resolved), never a mix, never a duplicate ``osc.io/key``, never an orphan;
the next run converges.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.reliability import nbstate
from tests.reliability.harness import WAIT, Worker, cli, conn, record
from tests.reliability.nbproc import kill_nb, start_nb

SEED = int(os.environ.get("OSC_FAULT_SEED", "20260508"))


def _targets(cluster: SandboxCluster, a, b) -> dict[str, dict[str, list[str]]]:
    """The owned NB state a finished apply of each set leaves (deterministic)."""
    states = {}
    for name, path in (("a", a), ("b", b), ("a2", a)):
        result = cli("apply", path, *conn(cluster), *WAIT)
        assert result.code == 0, result.err
        states[name] = nbstate.owned(cluster.nb_remote)
    assert states["a"] == states["a2"], "an apply of the same set must leave the same rows"
    assert nbstate.problems(cluster.nb_remote) == []
    return {"a": states["a"], "b": states["b"]}


def test_reconciler_killed_at_random_points_of_200_applies(
    nf_cluster: SandboxCluster, worker: Worker, policy_sets
) -> None:
    a, b = policy_sets
    rng = random.Random(SEED)
    foreign_before = nbstate.foreign(nf_cluster.nb_remote)
    targets = _targets(nf_cluster, a, b)
    current = "a"
    outcomes = {"before": 0, "after": 0}
    signals = {signal.SIGTERM: 0, signal.SIGKILL: 0}
    runs = int(os.environ.get("OSC_FAULT_RUNS", "200"))
    for i in range(runs):
        want = "b" if current == "a" else "a"
        sig = rng.choice((signal.SIGTERM, signal.SIGKILL))
        pid = worker.start("apply", b if want == "b" else a, *conn(nf_cluster))
        time.sleep(rng.uniform(0.0, 0.45))
        try:
            os.kill(pid, sig)
            signals[sig] += 1
        except ProcessLookupError:
            pass  # it finished first: also a valid point to "kill" at
        worker.wait(pid)
        state = nbstate.owned(nf_cluster.nb_remote)
        if state == targets[want]:
            outcomes["after"] += 1
            current = want
        else:
            assert state == targets[current], (
                f"run {i} (seed {SEED}, {sig.name}): NB is neither fully before nor fully after"
            )
            outcomes["before"] += 1
        assert nbstate.problems(nf_cluster.nb_remote) == [], f"run {i} (seed {SEED})"
    # both outcomes happened, so kills really landed before and after the commit
    assert outcomes["before"] > 0 and outcomes["after"] > 0, outcomes
    final = cli("apply", a, *conn(nf_cluster), *WAIT)
    assert final.code == 0, final.err
    assert cli("plan", a, *conn(nf_cluster)).code == 0
    assert nbstate.owned(nf_cluster.nb_remote) == targets["a"]
    changed = nbstate.foreign_changes(foreign_before, nbstate.foreign(nf_cluster.nb_remote))
    assert changed == 0
    record(
        "process SIGTERM/SIGKILL",
        scenarios=runs,
        faults=sum(signals.values()),
        converged=True,
        foreign_changed=changed,
    )
    print(f"\n{runs} runs: {outcomes}, signals {signals}, seed {SEED}")


@pytest.mark.parametrize("phase", ["before", "during", "after"])
def test_nb_killed_during_apply(
    nf_cluster: SandboxCluster, worker: Worker, policy_sets, phase: str
) -> None:
    """ovsdb-server SIGKILLed while ``osc-gitops apply`` runs, then restarted on the same DB.

    ``before``: killed right after the apply starts (before it connected or committed);
    ``during``: at a random point of the run; ``after``: just after the commit (the apply may
    be in its verification read).
    """
    a, b = policy_sets
    rng = random.Random(f"{SEED}-{phase}")
    targets = _targets(nf_cluster, a, b)
    current = "a"
    lost = 0
    rounds = 6
    for i in range(rounds):
        want = "b" if current == "a" else "a"
        pid = worker.start("apply", b if want == "b" else a, *conn(nf_cluster),
                           "--ovn-timeout", "3")  # fmt: skip
        delay = {"before": rng.uniform(0.0, 0.05), "during": rng.uniform(0.05, 0.3),
                 "after": rng.uniform(0.25, 0.45)}[phase]  # fmt: skip
        time.sleep(delay)
        kill_nb(nf_cluster)
        time.sleep(rng.uniform(0.0, 0.3))
        start_nb(nf_cluster)
        result = worker.wait(pid)
        assert "Traceback" not in result.err, result.err
        if result.code != 0:
            assert "error:" in result.err and "OVN NB" in result.err, result.err
        state = nbstate.owned(nf_cluster.nb_remote)
        assert state in (targets[current], targets[want]), (
            f"round {i} ({phase}, {delay:.3f}s): NB is neither fully before nor fully after"
        )
        if result.code == 0:
            assert state == targets[want], "apply said converged but the NB is not"
        assert nbstate.problems(nf_cluster.nb_remote) == []
        # the next run converges
        again = worker.run("apply", b if want == "b" else a, *conn(nf_cluster))
        assert again.code == 0, again.err
        if nbstate.owned(nf_cluster.nb_remote) != targets[want]:
            lost += 1
        current = want
    assert lost == 0
    record("OVN NB killed during apply", scenarios=rounds, faults=rounds, converged=True,
           data_lost=lost)  # fmt: skip
