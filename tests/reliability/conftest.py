"""Fixtures and the figures of the reliability suite (issue #8).

Every scenario runs the real ``osc-gitops`` against real ``ovsdb-server`` processes and the
Kubernetes API emulator, injects faults, and records what happened with :func:`record`. At the
end of the run :func:`pytest_terminal_summary` prints one table: scenarios run, faults injected,
converged, data lost (must be 0) and foreign rows changed (must be 0). The table is the figure
the issue asks for; the assertions in each test are what make it trustworthy.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from osc_gitops_sandbox.cluster import SandboxCluster
from osc_gitops_sandbox.ovn import nf_schema_path, ovn_unavailable_reason

from reconciler.cli.app import main

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "examples" / "cluster"
WORKER = Path(__file__).with_name("worker.py")

# --------------------------------------------------------------------------- figures


# The figures live in their own module, imported under one name by the hook and the tests
# (pytest may import this conftest under a different module name than ``tests.reliability``).
from tests.reliability.figures import FIGURES, record  # noqa: E402

__all__ = ["FIGURES", "record"]


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


# --------------------------------------------------------------------------- manifests

VNF = """\
apiVersion: osc.io/v1alpha1
kind: VnfDeployment
metadata: {name: fw}
spec: {namespace: osc-vnfs, image: quay.io/example/fw:1, cpu: 1, memory: 1Gi}
"""
SET_A = (
    VNF
    + """---
apiVersion: osc.io/v1alpha1
kind: SecurityGroup
metadata: {name: web}
spec: {labels: [app=web]}
---
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: web-fw}
spec: {securityGroup: web, vnf: fw, order: 10}
"""
)
SET_B = (
    VNF
    + """---
apiVersion: osc.io/v1alpha1
kind: SecurityGroup
metadata: {name: web}
spec: {labels: [app=web, app=cdn-edge]}
---
apiVersion: osc.io/v1alpha1
kind: SecurityGroup
metadata: {name: db}
spec: {labels: [app=postgres], namespaces: [shop-backend]}
---
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: web-fw}
spec: {securityGroup: web, vnf: fw, order: 10, redirection: both, failurePolicy: fail-open}
---
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: db-fw}
spec:
  securityGroup: db
  vnf: fw
  order: 20
  traffic: {protocol: tcp, ports: [5432]}
"""
)


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


# --------------------------------------------------------------------------- sandbox


def skip_without_nf() -> None:
    reason = ovn_unavailable_reason(northd=False)
    if reason:
        pytest.skip(reason)
    if nf_schema_path() is None:
        pytest.skip("OVN 26.03 NB schema not found (OSC_OVN_NB_SCHEMA_26 / ../shared/ovn)")


@pytest.fixture
def nf_cluster(tmp_path: Path) -> Iterator[SandboxCluster]:
    """Real ovsdb-server with OVN 26.03's NB schema + the API emulator, seeded with
    examples/cluster (2 nodes, 12 pods) and foreign rows that look like ours."""
    skip_without_nf()
    with SandboxCluster(tmp_path / "sb", nb_schema="26.03", northd=False) as cluster:
        cluster.seed_dir(CLUSTER)
        yield cluster


def conn(cluster: SandboxCluster) -> list[str]:
    return ["--ovn-nb", cluster.nb_remote, "--kubeconfig", cluster.kubeconfig]


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def cli(*args: object) -> CliResult:
    """The real CLI in-process (for steps that are not themselves under fault)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return CliResult(code, out.getvalue(), err.getvalue())


# --------------------------------------------------------------------------- worker


class Worker:
    """Client of ``worker.py``: each :meth:`start` forks one real ``osc-gitops`` process."""

    def __init__(self, out_dir: Path, env: dict[str, str] | None = None) -> None:
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(out_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=str(REPO),
        )

    def _read(self, timeout: float = 60.0) -> dict[str, int]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError(f"osc-gitops worker gave no answer within {timeout}s")
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("osc-gitops worker exited")
        data: dict[str, int] = json.loads(line)
        return data

    def start(self, *argv: object) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([str(a) for a in argv]) + "\n")
        self.proc.stdin.flush()
        return self._read()["pid"]

    def wait(self, pid: int, timeout: float = 60.0) -> CliResult:
        status = self._read(timeout)
        assert status["pid"] == pid
        code = os.waitstatus_to_exitcode(status["status"])
        out = (self.out_dir / f"{pid}.out").read_text(errors="replace")
        err = (self.out_dir / f"{pid}.err").read_text(errors="replace")
        for suffix in (".out", ".err"):
            (self.out_dir / f"{pid}{suffix}").unlink(missing_ok=True)
        return CliResult(code, out, err)

    def run(self, *argv: object, timeout: float = 60.0) -> CliResult:
        return self.wait(self.start(*argv), timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    w = Worker(tmp_path / "worker")
    try:
        yield w
    finally:
        w.close()
