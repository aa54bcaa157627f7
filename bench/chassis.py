"""One OVN chassis for counting OpenFlow flows: ``ovs-vswitchd`` with dummy devices and
``ovn-controller``, bound to one node's pod ports.

Why not the sandbox's :class:`~osc_gitops_sandbox.datapath.network.Datapath`: that one carries
packets (network namespaces, veths, at most two nodes), which a flow count does not need and which
does not scale to the 500 pods a node holds at 50k. Here ``ovs-vswitchd --enable-dummy=override``
makes every datapath and port a dummy (no kernel device, no namespace), exactly what OVN's own
test suite does; ``ovn-controller`` binds the ports all the same (an OVS ``Interface`` with
``external_ids:iface-id=<lsp>`` and the pod UID in ``iface-id-ver``, as OVN-Kubernetes' CNI
writes them) and installs every OpenFlow flow the logical flows ask for.

The chassis is named after its node (``system-id``): OVN-Kubernetes pins each pod port to its
node with ``options:requested-chassis=<node>``, so only that node's ports bind here, as on a
real node. Daemons are owned children (stopped by :meth:`Chassis.stop`, the context manager,
the sandbox's ``atexit`` hook and ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from osc_gitops_sandbox.lifecycle import Lifecycle
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import Distribution, distribution
from osc_gitops_sandbox.ovn.stack import Daemon, OvnSandboxError, child_env, run_tool, wait_until

BRIDGE = "br-int"


class Chassis(Lifecycle):
    """``with Chassis(sb_remote, "node-000", [(lsp, uid), ...]) as ch: ch.openflow_flows()``"""

    def __init__(
        self,
        sb_remote: str,
        node: str,
        ports: Sequence[tuple[str, str]],
        *,
        dist: str | Distribution = "sid",
        workdir: str | Path | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.sb_remote = sb_remote
        self.node = node
        self.ports = list(ports)
        self.dist = distribution(dist)
        self.workdir = self._own_workdir(workdir, "oscc-")
        self.timeout = timeout
        self.daemons: list[Daemon] = []

    @property
    def ovs_remote(self) -> str:
        return f"unix:{self.workdir / 'db.sock'}"

    @property
    def pids(self) -> list[int]:
        return [d.pid for d in self.daemons if d.alive()]

    def _daemon(self, name: str, args: list[str]) -> Daemon:
        stem = name.split()[0]
        log, ctl = self.workdir / f"{stem}.log", self.workdir / f"{stem}.ctl"
        daemon = Daemon(
            name,
            [*args, "--no-chdir", f"--unixctl={ctl}", f"--log-file={log}", "-vconsole:off",
             "-vfile:info"],
            log, ctl, child_env(self.workdir, self.dist),
        )  # fmt: skip
        self.daemons.append(daemon)
        return daemon

    def _vsctl(self, *args: str, timeout: float = 60.0) -> str:
        return run_tool(self.dist, "ovs-vsctl", f"--db={self.ovs_remote}", "--timeout=60", *args,
                        timeout=timeout)  # fmt: skip

    def appctl(self, daemon: Daemon, *args: str, timeout: float = 60.0) -> str:
        return run_tool(self.dist, "ovs-appctl", "-t", str(daemon.ctl), *args, timeout=timeout)

    def _start(self) -> None:
        db = self.workdir / "conf.db"
        run_tool(self.dist, "ovsdb-tool", "create", str(db), str(self.dist.vswitch_schema))
        ovsdb = self._daemon(
            "ovsdb-server (chassis conf.db)",
            [*self.dist.command("ovsdb-server"), f"--remote=punix:{self.workdir / 'db.sock'}",
             str(db)],
        )  # fmt: skip
        remote = self.ovs_remote
        wait_until(lambda: ovsdb_rpc.list_dbs(remote, 1.0), ovsdb, "conf.db", self.timeout)
        self._vsctl(
            "--no-wait", "init", "--",
            "set", "Open_vSwitch", ".",
            f"external_ids:system-id={self.node}",
            f"external_ids:hostname={self.node}",
            f"external_ids:ovn-remote={self.sb_remote}",
            "external_ids:ovn-encap-type=geneve",
            "external_ids:ovn-encap-ip=127.0.0.1", "--",
            "add-br", BRIDGE, "--",
            "set", "Bridge", BRIDGE, "fail-mode=secure", "other_config:disable-in-band=true",
        )  # fmt: skip
        self.vswitchd = self._daemon(
            "ovs-vswitchd (dummy devices)",
            [*self.dist.command("ovs-vswitchd"), "--enable-dummy=override", remote],
        )
        wait_until(
            lambda: BRIDGE in self.appctl(self.vswitchd, "dpif/show", timeout=5),
            self.vswitchd, f"{BRIDGE} in the dummy datapath", self.timeout,
        )  # fmt: skip
        self.controller = self._daemon(
            "ovn-controller", [*self.dist.command("ovn-controller"), remote]
        )
        words: list[str] = []
        for i, (lsp, uid) in enumerate(self.ports):
            name = f"p{i}"
            words += ["--", "add-port", BRIDGE, name, "--", "set", "Interface", name]
            words += [f"external_ids:iface-id={lsp}", f"external_ids:iface-id-ver={uid}"]
        if words:
            self._vsctl("--no-wait", *words[1:], timeout=120)
        wait_until(self._chassis_registered, self.controller, "the chassis in the SB",
                   self.timeout)  # fmt: skip

    def _chassis_registered(self) -> bool:
        rows = ovsdb_rpc.transact(self.sb_remote, "OVN_Southbound", [
            {"op": "select", "table": "Chassis", "where": [["name", "==", self.node]],
             "columns": ["name"]},
        ], timeout=5)[0]["rows"]  # fmt: skip
        return bool(rows)

    def wait_bound(self, timeout: float | None = None) -> None:
        """Until the SB binds every port to this chassis and ovn-controller reports it up."""
        names = {lsp for lsp, _uid in self.ports}
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            self._check_alive()
            rows = ovsdb_rpc.transact(self.sb_remote, "OVN_Southbound", [
                {"op": "select", "table": "Port_Binding", "where": [["up", "==", True]],
                 "columns": ["logical_port"]},
            ], timeout=60)[0]["rows"]  # fmt: skip
            missing = names - {r["logical_port"] for r in rows}
            if not missing:
                return
            if time.monotonic() > deadline:
                raise OvnSandboxError(
                    f"{len(missing)} port(s) not bound on chassis {self.node} after "
                    f"{timeout or self.timeout} s, e.g. {sorted(missing)[:3]}"
                )
            time.sleep(0.1)

    def openflow_flows(self) -> int:
        """The OpenFlow flows on ``br-int`` (``ovs-ofctl dump-flows br-int | wc -l`` without
        the reply header), read through vswitchd's ``bridge/dump-flows`` (the same flows plus
        hidden ones, none of which exist with in-band control off: checked by the caller's
        baseline)."""
        text = self.appctl(self.vswitchd, "bridge/dump-flows", BRIDGE, timeout=300)
        return sum(1 for line in text.splitlines() if "priority=" in line)

    def openflow_by_table(self) -> dict[str, int]:
        """The OpenFlow flows on ``br-int`` per table (keys are strings: JSON-ready)."""
        text = self.appctl(self.vswitchd, "bridge/dump-flows", BRIDGE, timeout=300)
        counts: dict[str, int] = {}
        for line in text.splitlines():
            if "priority=" not in line:
                continue
            match = re.search(r"\btable_id=(\d+)", line)
            table = match.group(1) if match else "0"
            counts[table] = counts.get(table, 0) + 1
        return counts

    def _check_alive(self) -> None:
        for daemon in self.daemons:
            if not daemon.alive():
                raise daemon.failure("died")

    def _stop(self) -> None:
        for daemon in reversed(self.daemons):
            daemon.stop()
        self.daemons.clear()
