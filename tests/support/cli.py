"""Run the real ``osc-gitops`` CLI in-process and capture what it prints."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Protocol

from reconciler.cli.app import main
from tests.support.paths import CLUSTER, POLICIES

__all__ = ["CLUSTER", "POLICIES", "CliResult", "cli", "conn", "nothing_to_write"]


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


def nothing_to_write(*plan_args: object) -> bool:
    """``osc-gitops plan ARGS -o json`` has no change to write, and nothing pending but steering
    held until a VNF instance is healthy (where nothing plays the VNFs' answers to OVN's probe,
    e.g. an NB without northd, that is all a converged apply can reach: ``plan`` exits 2 for
    it, issue 33)."""
    import json

    result = cli("plan", *plan_args, "-o", "json")
    assert result.code in (0, 2), result.out + result.err
    data = json.loads(result.out)
    held = all(p["kind"] == "Binding" for p in data["meta"].get("pending") or ())
    return not data["changes"] and held
