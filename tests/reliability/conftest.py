"""Fixtures and the figures of the reliability suite (issue #8).

Every scenario runs the real ``osc-gitops`` against real ``ovsdb-server`` processes and the
Kubernetes API emulator, injects faults, and records what happened with :func:`record`. At the
end of the run :func:`pytest_terminal_summary` prints one table: scenarios run, faults injected,
converged, data lost (must be 0) and foreign rows changed (must be 0). The table is the figure
the issue asks for; the assertions in each test are what make it trustworthy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.cluster import SandboxCluster

from tests.reliability.figures import FIGURES
from tests.reliability.harness import CLUSTER, SET_A, SET_B, Worker, skip_without_nf


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES:
        return
    tr = terminalreporter
    head = ("area", "scenarios", "faults injected", "converged", "data lost", "foreign changed")
    rows = [
        (a, f.scenarios, f.faults, f.converged, f.data_lost, f.foreign_changed)
        for a, f in sorted(FIGURES.items())
    ]
    total = tuple(sum(int(r[i]) for r in rows) for i in range(1, 6))
    rows.append(("TOTAL", *total))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    tr.write_sep("=", "reliability summary")
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |"
    tr.write_line(line)
    tr.write_line("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in
                 enumerate(zip(row, widths, strict=True))]  # fmt: skip
        tr.write_line("| " + " | ".join(cells) + " |")


@pytest.fixture
def policy_sets(tmp_path: Path) -> tuple[Path, Path]:
    """Two small policy sets that differ in OVN rows only (same VNF, same VMs)."""
    out = []
    for name, text in (("a", SET_A), ("b", SET_B)):
        d = tmp_path / f"policies-{name}"
        d.mkdir()
        (d / "all.yaml").write_text(text)
        out.append(d)
    return out[0], out[1]


@pytest.fixture
def nf_cluster(tmp_path: Path) -> Iterator[SandboxCluster]:
    """Real ovsdb-server with OVN 26.03's NB schema + the API emulator, seeded with
    examples/cluster (2 nodes, 12 pods) and foreign rows that look like ours."""
    skip_without_nf()
    with SandboxCluster(tmp_path / "sb", nb_schema="26.03", northd=False) as cluster:
        cluster.seed_dir(CLUSTER)
        yield cluster


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    w = Worker(tmp_path / "worker")
    try:
        yield w
    finally:
        w.close()
