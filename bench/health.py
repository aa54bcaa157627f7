"""Steering that waits for VNF health (issue 22), as the benchmarks meet it.

Since issue 22 a first apply writes a VNF instance's VM, ports, Network_Function, health check
and groups at once, but *holds* the steering ACLs onto it until northd reports its
``Network_Function_Group`` active; the next apply after that switches them on. No chassis runs a
VNF in the benchmark worlds, so the sandbox plays the VNFs' answers to OVN's probe
(``osc_gitops_sandbox.ovn.vnf_health.ForwardingVnfs``: with northd it answers for
ovn-controller, without northd it writes northd's verdict), every VNF healthy: what a cluster
whose VNFs boot and forward looks like to the control plane. The benchmarks then measure the
first apply and the apply that switches the steering on, each a fresh process, and their sum is
what one apply wrote before issue 22. On a tree without health gating nothing is ever held:
the second apply finds nothing to do, and every helper here returns at once.
"""

from __future__ import annotations

import time
from typing import Any

from osc_gitops_sandbox.ovn import ovsdb_rpc

OWNED = ["external_ids", "includes", ["map", [["osc.io/owner", "osc-gitops"]]]]


def held(plan: Any) -> bool:
    """Whether a plan held steering back until a VNF instance is healthy
    (``reconciler.core.steering.network_function.gating``; a tree without it holds nothing)."""
    return bool(getattr(plan, "held", ()))


def full_creates(compiled_plan: Any) -> Any:
    """The plan before health gating (what one transaction wrote before issue 22, and what the
    raw and ``ovn-nbctl`` comparisons write), from a ``core.planning.CompiledPlan``."""
    return getattr(compiled_plan, "untransitioned", None) or compiled_plan.plan


def inactive_groups(nb_remote: str) -> list[str]:
    """Our Network_Function_Groups that northd (or its stand-in) has not reported active."""
    schema = ovsdb_rpc.get_schema(nb_remote, "OVN_Northbound")["tables"]
    if "Network_Function_Group" not in schema:
        return []
    rows = ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Network_Function_Group", "where": [OWNED],
         "columns": ["_uuid", "name", "network_function_active"]},
    ])[0]["rows"]  # fmt: skip
    return [r["name"] for r in rows if r["network_function_active"] == ["set", []]]


def wait_healthy(nb_remote: str, timeout: float = 300.0) -> float:
    """Until every group of ours is active; returns the seconds it took."""
    started = time.perf_counter()
    deadline = time.monotonic() + timeout
    while True:
        waiting = inactive_groups(nb_remote)
        if not waiting:
            return time.perf_counter() - started
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{len(waiting)} Network_Function_Group(s) never reported active, e.g. "
                f"{waiting[:3]}: is the sandbox playing the VNFs' health?"
            )
        time.sleep(0.02)


def converge(reconcile: Any, nb_remote: str, *, rounds: int = 5) -> list[Any]:
    """``reconcile()`` (an in-process apply) until it holds nothing, waiting for health in
    between; returns every round's report."""
    reports = [reconcile()]
    while held(reports[-1].plan):
        if len(reports) >= rounds:
            raise RuntimeError(f"steering still held after {rounds} applies")
        wait_healthy(nb_remote)
        reports.append(reconcile())
    return reports
