"""Status Leases of nodes with long names, against the API emulator (which refuses object
names over 253 characters, as kube-apiserver does): the agent's and the binder's Lease names
are shortened as VM names are, carry the full node name, and read back under it."""

from __future__ import annotations

import json
import subprocess

import pytest
from kubernetes import client
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from reconciler.adapters.kube.status_lease import (
    AGENT_LEASE_PREFIX,
    StatusLease,
    StatusLeaseError,
    StatusReader,
    agent_lease_name,
)
from reconciler.core.model import naming
from reconciler.engine.binder import binder_lease_name

NS = "osc-gitops-agents"
LONG = ".".join(["node-1", "a" * 63, "b" * 63, "c" * 63, "d" * 50])  # 249 characters
TWIN = LONG[:-1] + "e"  # same head: only the hash tells them apart
SHORT = "node-2"


def test_long_node_names_get_short_lease_names_and_read_back_in_full(
    kube_server: KubeApiServer, api_client: client.ApiClient, kubeconfig: str, kubectl: str
) -> None:
    assert len(LONG) == 249
    names = {node: (agent_lease_name(node), binder_lease_name(node)) for node in (LONG, TWIN)}
    for agent, binder in names.values():
        assert len(agent) <= 253 and len(binder) <= 253
        assert agent.startswith(AGENT_LEASE_PREFIX + LONG[:200])
        assert binder.startswith(naming.BINDER_LEASE_PREFIX + LONG[:200])
    assert len({n for pair in names.values() for n in pair}) == 4  # distinct, stable
    assert binder_lease_name(LONG) == binder_lease_name(LONG)
    assert binder_lease_name(SHORT) == "osc-gitops-binder-node-2"  # short names unchanged
    assert agent_lease_name(SHORT) == "osc-gitops-agent-node-2"

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    kube_server.create(kube_server.resource_type("Namespace"), "", namespace)
    # the premise: the unshortened name is refused
    with pytest.raises(StatusLeaseError, match="422"):
        StatusLease(api_client, NS, naming.BINDER_LEASE_PREFIX + LONG, identity="t",
                    duration=30).publish({})  # fmt: skip
    for node in (LONG, TWIN, SHORT):
        for name, role in ((agent_lease_name(node), "agent"), (binder_lease_name(node), "binder")):
            lease = StatusLease(api_client, NS, name, identity="t", duration=30, owner_node=node)
            lease.publish({"role": role, "node": node})
            lease.publish({"role": role, "node": node, "again": True})  # the update path

    reader = StatusReader(api_client)
    agents = reader.agents(NS)
    binders = reader.agents(NS, prefix=naming.BINDER_LEASE_PREFIX)
    assert set(agents) == set(binders) == {LONG, TWIN, SHORT}
    for node in (LONG, TWIN, SHORT):
        assert agents[node].status == {"role": "agent", "node": node, "again": True}
        assert binders[node].status == {"role": "binder", "node": node, "again": True}

    # what kubectl shows: the full name in the annotation, the label as VMs carry it
    out = subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "-n", NS, "get", "lease",
         binder_lease_name(LONG), "-o", "json"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    meta = json.loads(out)["metadata"]
    assert meta["annotations"]["osc.io/node-name"] == LONG
    assert meta["labels"]["osc.io/node"] != LONG and len(meta["labels"]["osc.io/node"]) == 63
