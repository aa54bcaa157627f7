"""Helpers for the GitOps tests: a git remote made with plain git, owned rows, polling.

The remote is a bare repository on disk; commits are made in a work clone and pushed, exactly
as a user's ``git push`` would, so the loop under test only ever sees the remote.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tests.support.paths import POLICIES

T = TypeVar("T")


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return result.stdout.strip()


class Remote:
    """A bare remote plus a work clone to commit and push from."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "remote.git"
        self.work = root / "work"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.bare)], check=True)
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.work)], check=True)
        git(self.work, "remote", "add", "origin", str(self.bare))

    @property
    def url(self) -> str:
        return str(self.bare)

    def commit(self, message: str, branch: str = "main") -> str:
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        git(self.work, "push", "-q", "origin", f"HEAD:{branch}")
        return git(self.work, "rev-parse", "HEAD")

    def policies(self, sub: str = "policies") -> Path:
        return self.work / sub

    def copy_examples(self, sub: str = "policies") -> Path:
        dest = self.work / sub
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(POLICIES, dest)
        return dest


def owned_rows(remote_nb: str) -> dict[str, dict[str, str]]:
    """Every OVN row osc-gitops owns, by ``osc.io/key``: its ``external_ids`` (raw dump)."""
    from osc_gitops_sandbox.ovn import ovsdb_rpc

    from reconciler.core.model.ownership import KEY, OWNER
    from reconciler.core.model.target import OVN_TABLES

    tables = [t for t in OVN_TABLES if t != "Logical_Router_Policy"] + ["Logical_Router_Policy"]
    try:
        dump = ovsdb_rpc.dump(remote_nb, "OVN_Northbound", tables)
    except Exception:  # the 23.03 schema has no Network_Function tables
        tables = ["Logical_Switch_Port", "Port_Group", "ACL", "Logical_Router_Policy"]
        dump = ovsdb_rpc.dump(remote_nb, "OVN_Northbound", tables)
    rows: dict[str, dict[str, str]] = {}
    for table, found in dump.items():
        for row in found:
            ext = row.get("external_ids") or {}
            if isinstance(ext, dict) and ext.get(OWNER):
                rows[f"{table}:{ext.get(KEY)}"] = ext
    return rows


def wait_for(condition: Callable[[], T], timeout: float = 15.0, what: str = "condition") -> T:
    """Poll ``condition`` until it returns something truthy (no timing asserts, just a
    generous ceiling so a broken build fails instead of hanging)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)
