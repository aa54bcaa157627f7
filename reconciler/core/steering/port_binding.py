"""Whether OVN bound the data ports of our VNF VMs, whatever the steering backend.

A VNF VM's NICs reach OVN only once something set ``external_ids:iface-id`` on their OVS
interfaces (newer ovs-cni from the NAD, else the node binder, ``reconciler.engine.binder``) and
ovn-controller bound the logical port; northd then reports the Logical_Switch_Port ``up``
(``Observed.ports_up``). A running VM whose port is not up never passes a health check, and
the steering onto it stays held: :func:`unbound_ports` names each such port, and the health
index hands it out (:attr:`reconciler.core.steering.HealthIndex.unbound`) to the plan
(``Plan.unbound``), ``status``, ``explain``, ``apply --wait`` and the metrics.

Report only: nothing here feeds compile or the diff. Pure, no I/O.
"""

from __future__ import annotations

from reconciler.core.model import ownership as own
from reconciler.core.model.facts import UnboundPort
from reconciler.core.model.observed import Observed

__all__ = ["UNBOUND_CAUSE", "unbound_ports"]

UNBOUND_CAUSE = (
    "OVN has not bound it (its Logical_Switch_Port is not up): nothing set "
    "external_ids:iface-id={port} on the NIC's OVS interface on {node}. ovs-cni up to v0.39.0 "
    "never does (it reads the OVN port only from CNI_ARGS); run the node binder there "
    "(`osc-gitops bind`, or the node agent's `run --ovs-db`)"
)
"""Why a data port of a running VNF VM is unbound, as far as the NB can tell (``explain``
adds what the node's binder reports: ``reconciler.core.views.traffic.unbound_cause``)."""


def unbound_ports(observed: Observed) -> list[UnboundPort]:
    """Every data port (``osc.io/ports`` of our VMs) whose VM runs (KubeVirt's
    ``printableStatus`` ``Running``) and whose LSP northd does not report ``up``. A port the NB
    does not hold (yet), or an NB without the ``up`` column, tells nothing: not listed."""
    if not observed.ports_up:
        return []
    out = []
    for obj in observed.kube_objects:
        if obj.kind != "VirtualMachine" or obj.status.get("printableStatus") != "Running":
            continue
        meta = obj.body.get("metadata") or {}
        labels = meta.get("labels") or {}
        raw = str((meta.get("annotations") or {}).get("osc.io/ports", ""))
        for pair in raw.split(","):
            side, _, port = pair.partition("=")
            if not port or observed.ports_up.get(port, True):
                continue
            node = own.node_of(labels, meta.get("annotations") or {}) or ""
            out.append(UnboundPort(
                vnf=str(labels.get(own.VNF_LABEL, "")), node=node,
                vm=f"{obj.namespace}/{obj.name}", port=port, side=side,
                cause=UNBOUND_CAUSE.format(port=port, node=node),
            ))  # fmt: skip
    return sorted(out, key=lambda u: (u.vnf, u.node, u.vm, u.port))
