"""Whether OVN bound the data ports of our VNF VMs, whatever the steering backend.

A VNF VM's NICs reach OVN only once something set ``external_ids:iface-id`` on their OVS
interfaces (newer ovs-cni from the NAD, else the node binder, ``reconciler.engine.binder``) and
ovn-controller bound the logical port: it writes its chassis into the port's Southbound
``Port_Binding``, and northd then reports the Logical_Switch_Port ``up``. Two readings:

- the NB's ``up`` (``Observed.ports_up``), always;
- where a Southbound DB is configured (``--ovn-sb``/``OSC_OVN_SB``), the Port_Binding's
  ``chassis`` too (``Observed.ports_chassis``): a port whose Port_Binding has no chassis is
  unbound even while the NB still says ``up`` (northd has not caught up, or the chassis that
  claimed it went away). Without a Southbound the NB's ``up`` alone decides, as before.

A running VM whose port is unbound never passes a health check, and the steering onto it stays
held: :func:`unbound_ports` names each such port, and the health index hands it out
(:attr:`reconciler.core.steering.HealthIndex.unbound`) to the plan (``Plan.unbound``),
``status``, ``explain``, ``apply --wait`` and the metrics.

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

NO_CHASSIS = "its Southbound Port_Binding has no chassis"
"""Said first where the Southbound showed it (``Observed.ports_chassis``)."""
NO_CHASSIS_YET_UP = (
    "its Southbound Port_Binding has no chassis although northd still reports the "
    "Logical_Switch_Port up (the chassis that claimed it released it, or northd lags): nothing "
    "on {node} holds external_ids:iface-id={port} now; see ovn-controller and the binder there"
)


def unbound_ports(observed: Observed) -> list[UnboundPort]:
    """Every data port (``osc.io/ports`` of our VMs) whose VM runs (KubeVirt's
    ``printableStatus`` ``Running``) and whose LSP northd does not report ``up``, or whose
    Southbound Port_Binding has no chassis (where the Southbound was read). A port neither
    database says anything about (not in the NB yet, an NB without the ``up`` column and no
    Southbound) tells nothing: not listed."""
    if not observed.ports_up and not observed.ports_chassis:
        return []
    out = []
    for obj in observed.kube_objects:
        if obj.kind != "VirtualMachine" or obj.status.get("printableStatus") != "Running":
            continue
        meta = obj.body.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        node = own.node_of(labels, annotations) or ""
        for pair in str(annotations.get("osc.io/ports", "")).split(","):
            side, _, port = pair.partition("=")
            cause = _cause(observed, port, node) if port else None
            if cause is None:
                continue
            out.append(UnboundPort(
                vnf=str(labels.get(own.VNF_LABEL, "")), node=node,
                vm=f"{obj.namespace}/{obj.name}", port=port, side=side, cause=cause,
            ))  # fmt: skip
    return sorted(out, key=lambda u: (u.vnf, u.node, u.vm, u.port))


def _cause(observed: Observed, port: str, node: str) -> str | None:
    """Why ``port`` is unbound, ``None`` when neither database says it is."""
    up = observed.ports_up.get(port)
    chassis = observed.ports_chassis.get(port)
    if chassis is False:
        if up:
            return NO_CHASSIS_YET_UP.format(port=port, node=node)
        return f"{NO_CHASSIS}; " + UNBOUND_CAUSE.format(port=port, node=node)
    if up is False:
        return UNBOUND_CAUSE.format(port=port, node=node)
    return None
