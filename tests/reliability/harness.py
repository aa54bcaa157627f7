"""The reliability suite's building blocks: two policy sets, the real-process worker client,
and the skip rule for the Network Function schema. Fixtures live in this folder's conftest."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from pathlib import Path

from tests.reliability.figures import FIGURES, record
from tests.support.cli import CliResult, cli, conn
from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import CLUSTER, REPO

__all__ = ["CLUSTER", "FIGURES", "SET_A", "SET_B", "CliResult", "Worker", "cli", "conn", "record",
           "skip_without_nf"]  # fmt: skip

WORKER = Path(__file__).with_name("worker.py")

VNF = """\
apiVersion: osc.io/v1alpha1
kind: VnfDeployment
metadata: {name: fw}
spec: {namespace: osc-vnfs, image: quay.io/example/fw:1, cpu: 1, memory: 1Gi}
"""
WAIT = ("--wait", "--wait-timeout", "30s")
"""``apply`` until the steering onto new VNF instances is switched on: the sandbox's VNFs
answer OVN's probe at once, so a first apply with it is one deterministic end state (later
applies onto the then healthy instances are switched on in their own transaction)."""

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


def skip_without_nf() -> None:
    require_ovn_or_fail(northd=False)


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
        # A child killed before its first line never created its files: nothing was printed.
        out, err = (_read_if_any(self.out_dir / f"{pid}{suffix}") for suffix in (".out", ".err"))
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


def _read_if_any(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
