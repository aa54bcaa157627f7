"""The sandbox (ovsdb-server, optional ovn-northd, Kubernetes API emulator) in a child process.

Why a separate process: the API emulator is a Python HTTP server. Run inside the benchmark
process it would compete with the reconciler for the GIL (serialising 10,000 pods while the
client parses them) and inflate the reconciler's peak RSS with the emulator's object store.
In a child, the measured process holds only what ``osc-gitops`` itself holds, as in a cluster.

The child is stopped by :meth:`SandboxProcess.stop` (also on any failure, via ``with``); if the
parent dies, the child sees EOF on its pipe and stops its servers; ``SandboxCluster`` itself
kills ovsdb-server/northd when its process dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.scenario import VNF_NAMESPACE, Scale, kube_objects


@dataclass(frozen=True)
class SandboxInfo:
    nb_remote: str
    kubeconfig: str
    kube_url: str
    workdir: str
    seed_seconds: float
    sb_remote: str = ""
    """The Southbound DB (empty without one)."""
    northd_ctl: str = ""
    """ovn-northd's control socket (empty without northd)."""
    northd_pid: int = 0


def _serve(
    conn: multiprocessing.connection.Connection,
    scale: Scale,
    workdir: str,
    nb_schema: str,
    distribution: str,
    northd: bool,
) -> None:
    from osc_gitops_sandbox.ovn import ovsdb_rpc
    from osc_gitops_sandbox.ovn.cluster import SandboxCluster

    # Without the emulator's KubeVirt: its virt-controller makes a full pass over every VM on
    # each change while holding the API server's lock (a real one is incremental), which would
    # put O(VMs^2) of the test double into every first apply.
    cluster = SandboxCluster(
        workdir, nb_schema=nb_schema, distribution=distribution, northd=northd, kubevirt=False
    )
    try:
        cluster.start()
        namespaces, nodes, pods = kube_objects(scale)
        started = time.perf_counter()
        cluster.seed(nodes, pods, namespaces)
        seed_seconds = time.perf_counter() - started
        del pods
        ovn = cluster.ovn
        conn.send(
            SandboxInfo(
                cluster.nb_remote, cluster.kubeconfig, cluster.kube.url, workdir, seed_seconds,
                sb_remote=ovn.sb_remote if ovn.sb is not None else "",
                northd_ctl=str(ovn.northd.ctl) if ovn.northd is not None else "",
                northd_pid=ovn.northd.pid if ovn.northd is not None else 0,
            )
        )  # fmt: skip
        while True:
            try:
                cmd, args = conn.recv()
            except EOFError:
                return
            try:
                if cmd == "stop":
                    conn.send(("ok", None))
                    return
                if cmd == "delete_owned_kube":
                    removed = 0
                    for kind in ("VirtualMachine", "NetworkAttachmentDefinition"):
                        rt = cluster.kube.resource_type(kind)
                        for obj in cluster.kube.objects(kind, VNF_NAMESPACE):
                            cluster.kube.delete(rt, VNF_NAMESPACE, obj["metadata"]["name"])
                            removed += 1
                    conn.send(("ok", removed))
                elif cmd == "northd_sync":
                    started = time.perf_counter()
                    cluster.ovn.wait_northd_sync(timeout=600)
                    conn.send(("ok", time.perf_counter() - started))
                elif cmd == "transact":
                    conn.send(("ok", ovsdb_rpc.transact(cluster.nb_remote, "OVN_Northbound", args)))
                else:
                    conn.send(("error", f"unknown command {cmd!r}"))
            except Exception as exc:  # reported to the parent, which raises
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        cluster.stop()


class SandboxProcess:
    """``with SandboxProcess(scale, workdir) as sb: sb.info.nb_remote ...``"""

    def __init__(
        self,
        scale: Scale,
        workdir: Path,
        *,
        nb_schema: str = "auto",
        distribution: str = "host",
        northd: bool = False,
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve,
            args=(child, scale, str(workdir), nb_schema, distribution, northd),
            name="osc-bench-sandbox",
            daemon=True,
        )
        self._proc.start()
        child.close()
        if not self._conn.poll(900):
            self.stop()
            raise RuntimeError("the sandbox process did not come up within 900 s")
        try:
            self.info: SandboxInfo = self._conn.recv()
        except EOFError:
            self.stop()
            raise RuntimeError(
                f"the sandbox process failed to start (exit code {self._proc.exitcode}); "
                f"see the logs under {workdir}"
            ) from None

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def call(self, cmd: str, args: Any = None) -> Any:
        self._conn.send((cmd, args))
        status, value = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"sandbox {cmd}: {value}")
        return value

    def stop(self) -> None:
        try:
            if self._proc.is_alive():
                try:
                    self._conn.send(("stop", None))
                    self._conn.poll(30)
                except (BrokenPipeError, EOFError, OSError):
                    pass
            self._proc.join(30)
        finally:
            if self._proc.is_alive():
                self._proc.terminate()
                self._proc.join(10)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
            self._conn.close()

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
