"""Kill and restart the sandbox's NB ``ovsdb-server`` on the same database file.

``OvnSandbox`` has no restart of its own (nothing else needs one), so this reuses the daemon's
recorded command line: the same DB file, socket and log. The new process is registered with the
sandbox, so ``SandboxCluster.stop()`` (and the sandbox's atexit hook) reap it like the first.
"""

from __future__ import annotations

import signal
import time

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from osc_gitops_sandbox.ovn.stack import Daemon, child_env


def kill_nb(cluster: SandboxCluster, sig: int = signal.SIGKILL) -> None:
    daemon = cluster.ovn.nb
    assert daemon is not None
    daemon.stop(timeout=5, sig=sig)


def start_nb(cluster: SandboxCluster, timeout: float = 10.0) -> None:
    old = cluster.ovn.nb
    assert old is not None and not old.alive()
    cluster.ovn.nb = Daemon(old.name, old.args, old.log, old.ctl, child_env(cluster.ovn.workdir))
    deadline = time.monotonic() + timeout
    while True:
        try:
            ovsdb_rpc.list_dbs(cluster.nb_remote, 1.0)
            return
        except (OSError, ovsdb_rpc.OvsdbRpcError):
            if not cluster.ovn.nb.alive() or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
