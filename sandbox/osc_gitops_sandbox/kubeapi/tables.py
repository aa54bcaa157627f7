"""Server-side printing: the ``meta.k8s.io`` ``Table`` that ``kubectl get`` asks for.

``kubectl get`` sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...,
application/json`` and prints the columns the server chose (``-o wide`` adds those of priority
1). Without a Table it can only show NAME and AGE. The columns and cells here follow the API
server's printers (``pkg/printers/internalversion/printers.go``) for the kinds the emulator
serves: pods (NAME, READY, STATUS, RESTARTS, AGE; wide: IP, NODE, NOMINATED NODE, READINESS
GATES), nodes (NAME, STATUS, ROLES, AGE, VERSION; wide: INTERNAL-IP, EXTERNAL-IP, OS-IMAGE,
KERNEL-VERSION, CONTAINER-RUNTIME), namespaces (NAME, STATUS, AGE), leases (NAME, HOLDER, AGE)
and network policies (NAME, POD-SELECTOR, AGE); KubeVirt's VMs (NAME, AGE, STATUS, READY) and
VMIs (NAME, AGE, PHASE, IP, NODENAME, READY) as its CRDs declare them. Other custom resources
get what a CRD without ``additionalPrinterColumns`` gets: NAME and AGE. The cells describe the
object as stored: a pod's READY counts what its ``containerStatuses`` say (in ``osc-gitops
sandbox up`` the session reports them, as a kubelet would).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from osc_gitops_sandbox.kubeapi.resources import ResourceType

__all__ = ["human_duration", "table", "wants_table"]

Column = dict[str, Any]
Row = Callable[[Mapping[str, Any]], list[Any]]

NAME_DOC = "Name must be unique within a namespace."
AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def _column(name: str, doc: str, *, kind: str = "string", priority: int = 0) -> Column:
    column: Column = {"name": name, "type": kind, "format": "", "description": doc}
    if name == "Name":
        column["format"] = "name"
    column["priority"] = priority
    return column


def wants_table(accept: str) -> str | None:
    """The Table version (``v1`` or ``v1beta1``) an ``Accept`` header asks for first, if any."""
    for media in accept.split(","):
        params = dict(
            p.strip().split("=", 1) for p in media.split(";")[1:] if "=" in p
        )  # fmt: skip
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return params.get("v") if params.get("v") in ("v1", "v1beta1") else None
    return None


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``: ``5s``, ``3m20s``, ``4h5m``, ``2d3h``..."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(obj: Mapping[str, Any]) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return human_duration((datetime.now(UTC) - created).total_seconds())


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


# -- pods ------------------------------------------------------------------------------------


def _pod_row(pod: Mapping[str, Any]) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = status.get("reason") or status.get("phase") or ""
    for container in reversed(statuses):  # the printer lets the last container's state win
        state = container.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
        elif "terminated" in state:
            terminated = state["terminated"]
            signal = terminated.get("signal")
            reason = (
                f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
            )  # fmt: skip
        break
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    gates = spec.get("readinessGates") or []
    true_conditions = {
        c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"
    }
    gates_cell = (
        f"{sum(1 for g in gates if g.get('conditionType') in true_conditions)}/{len(gates)}"
        if gates
        else "<none>"
    )
    return [
        _name(pod),
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        str(restarts),
        _age(pod),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_cell,
    ]


POD_COLUMNS = [
    _column("Name", NAME_DOC),
    _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "The aggregate status of the containers in this pod."),
    _column("Restarts", "The number of times the containers in this pod have been restarted."),
    _column("Age", AGE_DOC),
    _column("IP", "IP address allocated to the pod.", priority=1),
    _column("Node", "NodeName is the node the pod is scheduled on.", priority=1),
    _column("Nominated Node", "The node the scheduler nominated for the pod.", priority=1),
    _column("Readiness Gates", "The readiness gates of the pod.", priority=1),
]


# -- nodes -----------------------------------------------------------------------------------


def _node_row(node: Mapping[str, Any]) -> list[Any]:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = next(
        (c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    state = ["Unknown" if ready is None else "Ready" if ready == "True" else "NotReady"]
    if spec.get("unschedulable"):
        state.append("SchedulingDisabled")
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), "<none>")

    return [
        _name(node),
        ",".join(state),
        ",".join(roles) or "<none>",
        _age(node),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


NODE_COLUMNS = [
    _column("Name", NAME_DOC),
    _column("Status", "The status of the node"),
    _column("Roles", "The roles of the node"),
    _column("Age", AGE_DOC),
    _column("Version", "Kubelet Version reported by the node."),
    _column("Internal-IP", "List of addresses reachable to the node.", priority=1),
    _column("External-IP", "List of addresses reachable to the node.", priority=1),
    _column("OS-Image", "OS Image reported by the node.", priority=1),
    _column("Kernel-Version", "Kernel Version reported by the node.", priority=1),
    _column("Container-Runtime", "ContainerRuntime Version reported by the node.", priority=1),
]


# -- the others ------------------------------------------------------------------------------


def _selector(selector: Mapping[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: ``<none>`` for an empty selector."""
    selector = selector or {}
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), expr.get("values") or []
        if op in ("In", "NotIn"):
            terms.append(f"{key} {op.lower()} ({','.join(values)})")
        else:
            terms.append(key if op == "Exists" else f"!{key}")
    return ",".join(terms) or "<none>"


TABLES: dict[str, tuple[list[Column], Row]] = {
    "Pod": (POD_COLUMNS, _pod_row),
    "Node": (NODE_COLUMNS, _node_row),
    "Namespace": (
        [_column("Name", NAME_DOC), _column("Status", "The status of the namespace"),
         _column("Age", AGE_DOC)],
        lambda o: [_name(o), (o.get("status") or {}).get("phase", ""), _age(o)],
    ),
    "Lease": (
        [_column("Name", NAME_DOC), _column("Holder", "The holder of the lease."),
         _column("Age", AGE_DOC)],
        lambda o: [_name(o), (o.get("spec") or {}).get("holderIdentity") or "<none>", _age(o)],
    ),
    "NetworkPolicy": (
        [_column("Name", NAME_DOC),
         _column("Pod-Selector", "The pods the policy selects.", priority=0),
         _column("Age", AGE_DOC)],
        lambda o: [_name(o), _selector((o.get("spec") or {}).get("podSelector")), _age(o)],
    ),
}  # fmt: skip


def _condition(obj: Mapping[str, Any], kind: str) -> str | None:
    """``.status.conditions[?(@.type=='<kind>')].status``; ``None`` (an empty cell) if absent."""
    return next(
        (c.get("status") for c in (obj.get("status") or {}).get("conditions") or []
         if c.get("type") == kind),
        None,
    )  # fmt: skip


def _status(obj: Mapping[str, Any], key: str) -> Any:
    return (obj.get("status") or {}).get(key)


def _vmi_ip(vmi: Mapping[str, Any]) -> Any:
    interfaces = _status(vmi, "interfaces") or [{}]
    return interfaces[0].get("ipAddress")


TABLES.update({  # the additionalPrinterColumns of KubeVirt's CRDs (virt-operator's crds.go)
    "VirtualMachine": (
        [_column("Name", NAME_DOC), _column("Age", AGE_DOC, kind="date"),
         _column("Status", "Human Readable Status"), _column("Ready", "")],
        lambda o: [_name(o), _age(o), _status(o, "printableStatus"), _condition(o, "Ready")],
    ),
    "VirtualMachineInstance": (
        [_column("Name", NAME_DOC), _column("Age", AGE_DOC, kind="date"), _column("Phase", ""),
         _column("IP", ""), _column("NodeName", ""), _column("Ready", ""),
         _column("Live-Migratable", "", priority=1), _column("Paused", "", priority=1)],
        lambda o: [_name(o), _age(o), _status(o, "phase"), _vmi_ip(o), _status(o, "nodeName"),
                   _condition(o, "Ready"), _condition(o, "LiveMigratable"),
                   _condition(o, "Paused")],
    ),
})  # fmt: skip
DEFAULT = ([_column("Name", NAME_DOC), _column("Age", AGE_DOC, kind="date")], lambda o: [
    _name(o), _age(o)])  # fmt: skip
"""A CRD without ``additionalPrinterColumns``: the API server adds an ``Age`` column."""


def _row_object(obj: Mapping[str, Any], include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return dict(obj)
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def table(
    rt: ResourceType, objects: Sequence[Mapping[str, Any]], list_meta: Mapping[str, Any],
    *, version: str = "v1", include_object: str = "Metadata", headers: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """The ``Table`` of ``objects`` (``includeObject``: ``None``, ``Metadata`` or ``Object``,
    as the request's query says). ``headers`` false leaves out the column definitions (watch
    events after the first, as the real server sends them)."""
    columns, row = TABLES.get(rt.kind, DEFAULT)
    rows = []
    for obj in objects:
        entry: dict[str, Any] = {"cells": row(obj)}
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            entry["object"] = embedded
        rows.append(entry)
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": dict(list_meta),
        "columnDefinitions": columns if headers else None,
        "rows": rows,
    }
