"""Run the real ``osc-gitops`` CLI in-process and capture what it prints."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Protocol

from reconciler.cli.app import main
from tests.support.paths import CLUSTER, POLICIES

__all__ = ["CLUSTER", "POLICIES", "CliResult", "cli", "conn"]


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def cli(*args: object) -> CliResult:
    """``osc-gitops ARGS...`` in this process: exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return CliResult(code, out.getvalue(), err.getvalue())


class _Endpoints(Protocol):
    nb_remote: str
    kubeconfig: str


def conn(cluster: _Endpoints) -> list[str]:
    """The connection flags for a sandbox cluster."""
    return ["--ovn-nb", cluster.nb_remote, "--kubeconfig", cluster.kubeconfig]
