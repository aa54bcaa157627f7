"""A node's Open_vSwitch database alone: ``ovsdb-server`` on a private ``conf.db`` with
``br-int``, and no ``ovs-vswitchd``.

What the node binder reads and writes is this database only, so its functional tests, its
faults (socket gone, no permission, read-only) and its benchmark need no data path: ovs-cni's
rows are written by :mod:`osc_gitops_sandbox.ovn.ovs_cni` directly, as its CNI ADD would. A
data path's :class:`~osc_gitops_sandbox.datapath.chassis.Chassis` runs the same server beside
``ovs-vswitchd`` and ``ovn-controller``.
"""

from __future__ import annotations

import os
from pathlib import Path

from osc_gitops_sandbox.lifecycle import Lifecycle
from osc_gitops_sandbox.ovn import distributions, ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import HOST, Distribution
from osc_gitops_sandbox.ovn.processes import Daemon, child_env, run_tool, wait_until

__all__ = ["VswitchDb"]


class VswitchDb(Lifecycle):
    """``ovsdb-server`` serving ``Open_vSwitch`` on ``<workdir>/db.sock``, with one
    ``Open_vSwitch`` row and the bridge ``br-int`` (what ``ovs-vsctl init; add-br`` leaves)."""

    def __init__(
        self, workdir: str | os.PathLike[str] | None = None, *,
        distribution: str | Distribution = HOST, timeout: float = 10.0,
    ) -> None:  # fmt: skip
        self.workdir = self._own_workdir(workdir, "osc-ovs-")
        self.distribution = distributions.distribution(distribution)
        self.timeout = timeout
        self.daemon: Daemon | None = None

    @property
    def socket(self) -> Path:
        return self.workdir / "db.sock"

    @property
    def remote(self) -> str:
        return f"unix:{self.socket}"

    def _start(self) -> None:
        dist = self.distribution
        db = self.workdir / "conf.db"
        if not db.exists():
            run_tool(dist, "ovsdb-tool", "create", str(db), str(dist.vswitch_schema))
        log = self.workdir / "ovsdb-server.log"
        self.daemon = Daemon(
            "ovsdb-server (Open_vSwitch)",
            [
                *dist.command("ovsdb-server"), "--no-chdir", f"--remote=punix:{self.socket}",
                f"--unixctl={self.workdir / 'ovsdb-server.ctl'}", f"--log-file={log}",
                "-vconsole:off", "-vfile:info", str(db),
            ],
            log, self.workdir / "ovsdb-server.ctl", child_env(self.workdir, dist),
        )  # fmt: skip
        wait_until(lambda: ovsdb_rpc.list_dbs(self.remote, 1.0), self.daemon, "OVS db",
                   self.timeout)  # fmt: skip
        rows = ovsdb_rpc.transact(self.remote, "Open_vSwitch", [
            {"op": "select", "table": "Bridge", "where": [["name", "==", "br-int"]],
             "columns": ["name"]},
        ])[0]["rows"]  # fmt: skip
        if not rows:
            ovsdb_rpc.transact(self.remote, "Open_vSwitch", [
                {"op": "insert", "table": "Bridge", "uuid-name": "br",
                 "row": {"name": "br-int", "fail_mode": "secure"}},
                {"op": "insert", "table": "Open_vSwitch", "row": {
                    "bridges": ["named-uuid", "br"],
                    "external_ids": ["map", [["system-id", "node"]]]}},
            ])  # fmt: skip

    def _stop(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None

    def restart(self) -> None:
        """Stop the server and start it again on the same database (a new socket)."""
        self._stop()
        self._start()
