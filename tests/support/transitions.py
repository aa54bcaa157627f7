"""Helpers for tests whose sandbox plays VNFs that answer OVN's health probe
(``osc_gitops_sandbox.ovn.vnf_health``): steering onto a VNF instance is switched on by the
reconcile after northd (or the sandbox playing it) reported the instance's group active."""

from __future__ import annotations

import time

from osc_gitops_sandbox.ovn import ovsdb_rpc


def groups_active(nb_remote: str) -> bool:
    """Every Network_Function_Group in the NB has an active function."""
    rows = ovsdb_rpc.transact(nb_remote, "OVN_Northbound", [
        {"op": "select", "table": "Network_Function_Group", "where": [],
         "columns": ["network_function_active"]},
    ])[0]["rows"]  # fmt: skip
    return all(ovsdb_rpc.from_atom(r["network_function_active"]) not in ([], None) for r in rows)


def wait_groups_active(nb_remote: str, timeout: float = 15.0) -> None:
    """Until every Network_Function_Group has an active function."""
    deadline = time.monotonic() + timeout
    while not groups_active(nb_remote):
        if time.monotonic() > deadline:
            raise AssertionError(f"function groups without an active function after {timeout}s")
        time.sleep(0.02)
