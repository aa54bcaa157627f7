"""A plain, immutable snapshot of the live world.

The adapters (``reconciler.adapters.kube.client`` and ``reconciler.adapters.ovn.northbound``)
produce these values; ``compile`` and ``diff`` consume them. Nothing here does I/O, so the whole
core can be tested, snapshotted to a file (``osc-gitops snapshot``) and replayed offline
(``osc-gitops plan --observed FILE``).

Conventions:
- Every container is a tuple or a ``dict`` that nobody mutates after construction.
- OVN references are already resolved to *names* (LSP names, our ``osc.io/key`` values),
  never UUIDs, so a snapshot taken from one NB compares equal to the target compiled for it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from reconciler.core.model.ovn_kubernetes import OvnKubernetesRows

SNAPSHOT_FORMAT_VERSION = 1
REPORT_ONLY_FIELDS: frozenset[str] = frozenset({"ports_up", "ports_chassis"})
"""``Observed`` fields read for reports only, never by compile or the diff (none since a chain
that may fail open reads its hops' health, ``nf_active``: the incremental planner compiles
again only when a group compile read changes, ``TargetBuilder.health_read``)."""


@dataclass(frozen=True, slots=True)
class Pod:
    """A Kubernetes pod as the reconciler needs it (membership and placement only)."""

    namespace: str
    name: str
    uid: str
    node: str | None
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def lsp_name(self) -> str:
        """OVN-Kubernetes names a pod's logical switch port ``<namespace>_<pod>``."""
        return f"{self.namespace}_{self.name}"


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    subnets: tuple[str, ...] = ()
    """Its default-network pod subnets as OVN-Kubernetes' ``k8s.ovn.org/node-subnets``
    annotation gives them (one per IP family; empty until OVN-Kubernetes set it), as written:
    whatever reaches a match is parsed and checked first
    (``reconciler.core.steering.node_traffic``)."""


@dataclass(frozen=True, slots=True)
class KubeObject:
    """A Kubernetes object owned by us (VirtualMachine, NetworkAttachmentDefinition).

    ``body`` holds only the fields the reconciler manages (``metadata.labels``,
    ``metadata.annotations`` restricted to ``osc.io/*`` keys, and ``spec``), so the diff never
    sees server-set fields (uid, resourceVersion, status).
    """

    kind: str
    namespace: str
    name: str
    body: dict[str, Any]
    state: dict[str, str] = field(default_factory=dict)
    """Annotations the rollout keeps its state in (``rollout.osc.io/*``, see
    ``reconciler.core.transitions.rollout``): never part of ``body``, so the diff never sees them
    and an update of the managed fields never removes them."""
    status: dict[str, Any] = field(default_factory=dict)
    """What a VirtualMachine's ``status`` says of it, when the API has one (empty otherwise):
    ``printableStatus``, ``ready``, ``desiredGeneration`` (the VM's generation KubeVirt has
    seen), ``observedGeneration`` (the one its running instance was started from: lower while
    a restart is required), ``stateChangeRequests`` (how many are pending) and the VM's
    ``metadata.generation`` as ``generation``. For rollouts and for explaining health only."""


@dataclass(frozen=True, slots=True)
class PodPort:
    """An OVN-Kubernetes pod LSP (owned by OVN-Kubernetes, only read by us)."""

    name: str
    switch: str
    namespace: str
    pod: str
    pod_uid: str | None
    mac: str | None
    ips: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Switch:
    """A logical switch; ``subnet`` is OVN-Kubernetes' ``other_config:subnet`` if any."""

    name: str
    subnet: str | None = None
    load_balancers: bool = False
    """The switch has load balancers or a load-balancer group (OVN-Kubernetes puts its Service
    group on every node switch); Network Function insertion is unsupported there."""


@dataclass(frozen=True, slots=True)
class OvnRow:
    """A row we own, in the same symbolic form as ``reconciler.core.model.target.Resource.fields``.

    ``table`` is the OVN table name, ``key`` its ``osc.io/key``; references to other rows are
    names (see ``reconciler.core.model.target``), and ``external_ids`` are kept whole.
    """

    table: str
    key: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    """A Kubernetes NetworkPolicy, kept only to warn when it selects steered pods."""

    namespace: str
    name: str
    pod_selector: dict[str, Any] = field(default_factory=dict)
    policy_types: tuple[str, ...] = ("Ingress",)
    """Which traffic it governs (``Ingress``: towards its pods, to-lport; ``Egress``: from
    them, from-lport), as Kubernetes defaults an omitted ``spec.policyTypes``: always
    ``Ingress``, ``Egress`` too when the policy has egress rules."""


@dataclass(frozen=True, slots=True)
class LauncherPod:
    """A KubeVirt ``virt-launcher`` pod, as the node binder needs it: the pod that holds a
    VirtualMachineInstance's NICs (KubeVirt ``pkg/virt-controller/services/template.go``:
    ``GenerateName: virt-launcher-<vmi>-``, label ``kubevirt.io: virt-launcher``, an owner
    reference to its VMI, whose name is the VM's)."""

    namespace: str
    name: str
    uid: str
    """What ovs-cni records as the OVS Port's ``external_ids:contPodUid`` (Multus passes the
    pod UID in ``CNI_ARGS`` as ``K8S_POD_UID``)."""
    node: str | None
    vmi: str
    """The VirtualMachineInstance that owns the pod (its controller owner reference): the name
    of its VirtualMachine."""
    network_status: str | None = None
    """The raw ``k8s.v1.cni.cncf.io/network-status`` annotation Multus wrote after it plugged
    the pod's networks (``None``: not (yet) there)."""
    terminating: bool = False
    """The pod is being deleted or has ended (``deletionTimestamp``, phase ``Succeeded`` or
    ``Failed``): its NICs are no longer the VM's."""
    running: bool = True
    """Phase ``Running``: the kubelet started its containers, so its CNI ADD (every network
    Multus plugs, and then Multus' ``network-status``) is done. A pod still ``Pending`` may
    simply not have been reported yet."""


@dataclass(frozen=True, slots=True)
class OvsInterface:
    """One OVS ``Interface`` of a node's Open_vSwitch database, with what the binder reads of
    it and of its ``Port``."""

    uuid: str
    name: str
    iface_id: str | None
    """``Interface.external_ids:iface-id``: the OVN logical port ovn-controller binds it to."""
    port_ids: dict[str, str] = field(default_factory=dict)
    """``Port.external_ids``: ovs-cni (every release) writes ``contPodUid``, ``contNetns``,
    ``contIface`` and ``owner`` there (``pkg/ovsdb/ovsdb.go`` ``createPortOperation``)."""


@dataclass(frozen=True, slots=True)
class OvnCapabilities:
    schema_version: str
    network_function: bool
    """``Network_Function``, ``Network_Function_Group`` and ``ACL.network_function_group``
    all exist (OVN >= 26.03, NB schema >= 7.18)."""


@dataclass(frozen=True, slots=True)
class NbGlobal:
    """What we read of the NB's one ``NB_Global`` row, which belongs to the cluster: the
    service-monitor options (``reconciler.core.model.target.SVC_MONITOR_OPTIONS``) whoever set them,
    and every ``osc.io/`` key of its ``external_ids`` (the instances' markers)."""

    options: dict[str, str] = field(default_factory=dict)
    external_ids: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OvnState:
    """One consistent snapshot of what the reconciler needs from the NB (plain data): what
    every OVN reader (the IDL mirror, the one-shot snapshot, a fake) returns."""

    switches: tuple[Switch, ...]
    routers: tuple[str, ...]
    pod_ports: tuple[PodPort, ...]
    owned: tuple[OvnRow, ...]
    capabilities: OvnCapabilities
    used_ids: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """``Network_Function``/``Network_Function_Group`` ids taken by rows we do not own."""
    nb_global: NbGlobal = field(default_factory=NbGlobal)
    nf_active: dict[str, str | None] = field(default_factory=dict)
    """Our Network_Function_Groups by name -> the Network_Function northd made active
    (``network_function_active``), ``None`` when it found none healthy."""
    ports_up: dict[str, bool] = field(default_factory=dict)
    """Our Logical_Switch_Ports by name -> whether northd reports them ``up`` (bound on a
    chassis whose ovn-controller installed them); a port northd has not judged (no northd, an
    NB without the column) is not in it."""
    ports_chassis: dict[str, bool] = field(default_factory=dict)
    """Our Logical_Switch_Ports by name -> whether their Southbound ``Port_Binding`` has a
    ``chassis`` (an ovn-controller claimed the port); filled only where a Southbound DB is
    configured (``--ovn-sb``: ``reconciler.adapters.ovn.southbound``), and only for ports that
    have a Port_Binding row. Empty: the Southbound was not read."""
    ovn_kubernetes: OvnKubernetesRows = field(default_factory=OvnKubernetesRows)
    """What OVN-Kubernetes' own rows look like (its generation:
    ``reconciler.core.model.ovn_kubernetes``), read once per connection."""


@dataclass(frozen=True, slots=True)
class Observed:
    """Everything the reconciler read in one pass."""

    pods: tuple[Pod, ...] = ()
    nodes: tuple[Node, ...] = ()
    kube_objects: tuple[KubeObject, ...] = ()
    pod_ports: tuple[PodPort, ...] = ()
    switches: tuple[Switch, ...] = ()
    routers: tuple[str, ...] = ()
    ovn_rows: tuple[OvnRow, ...] = ()
    used_ids: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Per table (``Network_Function``, ``Network_Function_Group``): ids taken by rows we do
    not own, so id allocation never collides with them."""
    network_policies: tuple[NetworkPolicy, ...] = ()
    capabilities: OvnCapabilities = field(
        default_factory=lambda: OvnCapabilities(schema_version="", network_function=False)
    )
    nb_global: NbGlobal = field(default_factory=NbGlobal)
    """The NB_Global options and markers compile decides the service-monitor options from."""
    nf_active: dict[str, str | None] = field(default_factory=dict)
    """What northd reports about our Network_Function_Groups (``OvnState.nf_active``). Read for
    reports (VNF instance health), and by compile only for the hops of a chain that may fail
    open (``reconciler.core.steering.chains.paths``): a change of any other group never
    changes a plan, and the incremental planner follows only the groups compile read."""
    ports_up: dict[str, bool] = field(default_factory=dict)
    """What northd reports about our Logical_Switch_Ports (``OvnState.ports_up``): read for
    reports only (a VNF VM whose ports OVN has not bound, ``reconciler.core.steering.
    port_binding.unbound_ports``), never by compile or the diff."""
    ports_chassis: dict[str, bool] = field(default_factory=dict)
    """What the Southbound says of our Logical_Switch_Ports (``OvnState.ports_chassis``: a
    chassis in their Port_Binding or not; empty when no Southbound was read): read for reports
    only, as :attr:`ports_up`."""
    ovn_kubernetes: OvnKubernetesRows = field(default_factory=OvnKubernetesRows)
    """``OvnState.ovn_kubernetes``: compile refuses an NB whose OVN-Kubernetes would break
    beside our rows."""
    observed_at: float | None = None
    """When this was read (epoch seconds, wall clock: it is compared with moments recorded in
    OVN by other processes). Compile judges the grace period of emptied (group, node) pairs
    against it (``reconciler.core.steering.presence``); ``None``: no clock, no grace."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, for ``osc-gitops snapshot``."""
        data = asdict(self)
        data["format_version"] = SNAPSHOT_FORMAT_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Observed:
        """Inverse of :meth:`to_json`; raises ``ValueError`` on an unknown format version, and
        on a snapshot that names things as Kubernetes never would (:func:`check_snapshot`)."""
        version = data.get("format_version")
        if version != SNAPSHOT_FORMAT_VERSION:
            raise ValueError(
                f"unsupported snapshot format_version {version!r} "
                f"(this osc-gitops reads {SNAPSHOT_FORMAT_VERSION})"
            )
        check_snapshot(data)
        return cls(
            pods=tuple(Pod(**p) for p in data.get("pods", ())),
            nodes=tuple(
                Node(**{**n, "subnets": tuple(n.get("subnets", ()))}) for n in data.get("nodes", ())
            ),
            kube_objects=tuple(KubeObject(**o) for o in data.get("kube_objects", ())),
            pod_ports=tuple(
                PodPort(**{**p, "ips": tuple(p.get("ips", ()))}) for p in data.get("pod_ports", ())
            ),
            switches=tuple(Switch(**s) for s in data.get("switches", ())),
            routers=tuple(data.get("routers", ())),
            ovn_rows=tuple(OvnRow(**r) for r in data.get("ovn_rows", ())),
            used_ids={k: tuple(v) for k, v in data.get("used_ids", {}).items()},
            network_policies=tuple(
                NetworkPolicy(**{**n, "policy_types": tuple(n.get("policy_types", ("Ingress",)))})
                for n in data.get("network_policies", ())
            ),
            capabilities=OvnCapabilities(**data["capabilities"])
            if "capabilities" in data
            else OvnCapabilities(schema_version="", network_function=False),
            nb_global=NbGlobal(**data["nb_global"]) if "nb_global" in data else NbGlobal(),
            nf_active=dict(data.get("nf_active", {})),
            ports_up={str(k): bool(v) for k, v in data.get("ports_up", {}).items()},
            ports_chassis={str(k): bool(v) for k, v in data.get("ports_chassis", {}).items()},
            ovn_kubernetes=_ovn_kubernetes(data.get("ovn_kubernetes") or {}),
            observed_at=data.get("observed_at"),
        )


# --- reading a snapshot someone else wrote -------------------------------------------------------
#
# A snapshot file comes with a pull request (``plan --observed``, the Action's ``observed``
# input) and a zone's slice from a status Lease: its text reaches plans, PR comments and logs.
# What the live adapters read was validated by the API server; a snapshot is checked here as the
# API server would have checked it (apimachinery/pkg/util/validation), so a pod "named" with a
# line break and a Markdown fence is refused where it is read instead of being rendered.

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_UID = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.:]*")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
"""Control characters (C0, DEL, C1), line/paragraph separators and bidirectional overrides:
no name, key or value a snapshot holds carries one."""


def _is_subdomain(text: str) -> bool:
    return len(text) <= 253 and _SUBDOMAIN.fullmatch(text) is not None


def _is_label(text: str) -> bool:
    return len(text) <= 63 and _LABEL.fullmatch(text) is not None


def _is_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (prefix and _is_subdomain(prefix)):
        return False
    return len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def _is_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


_RULES = {
    "namespace": (_is_label, "a namespace (a DNS-1123 label)"),
    "name": (_is_subdomain, "a Kubernetes object name (a DNS-1123 subdomain)"),
    "node": (_is_subdomain, "a node name (a DNS-1123 subdomain)"),
    "uid": (lambda t: len(t) <= 128 and _UID.fullmatch(t) is not None, "a Kubernetes uid"),
}


class SnapshotRefused(ValueError):
    """A snapshot that names things as Kubernetes never would (:func:`check_snapshot`)."""


def _refuse(path: str, value: Any, what: str) -> SnapshotRefused:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return SnapshotRefused(f"{path}: {shown} is not {what}")


def check_text(value: Any, path: str) -> None:
    """No string anywhere in ``value`` (keys included) carries a control character."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _UNPRINTABLE.search(item):
                raise _refuse(where.removeprefix("snapshot."), item,
                          "printable text (it holds a control character)")  # fmt: skip
        elif isinstance(item, dict):
            for key, sub in item.items():
                stack.append((key, f"{where} (a key)"))
                stack.append((sub, f"{where}.{key}"))
        elif isinstance(item, list | tuple):
            stack.extend((sub, f"{where}[{i}]") for i, sub in enumerate(item))


def check_node_name(name: Any, where: str) -> None:
    """A node name as a zoned snapshot keys its zones by."""
    if not isinstance(name, str) or not _is_subdomain(name):
        raise _refuse(where, name, _RULES["node"][1])


def _check_fields(item: Any, where: str, fields: dict[str, str]) -> None:
    """``fields``: name in ``item`` -> the rule of :data:`_RULES` it follows."""
    if not isinstance(item, dict):
        raise _refuse(where, item, "an object")
    for name, rule in fields.items():
        value = item.get(name)
        if value is None and name in ("node", "uid", "pod_uid"):
            continue
        test, what = _RULES[rule]
        if not isinstance(value, str) or not test(value):
            raise _refuse(f"{where}.{name}", value, what)


def _check_labels(labels: Any, where: str) -> None:
    if labels is None:
        return
    if not isinstance(labels, dict):
        raise _refuse(where, labels, "a map of labels")
    for key, value in labels.items():
        if not isinstance(key, str) or not _is_label_key(key):
            raise _refuse(f"{where} (a key)", key, "a Kubernetes label key")
        if not isinstance(value, str) or not _is_label_value(value):
            raise _refuse(f"{where}[{key!r}]", value, "a Kubernetes label value")


def check_snapshot(data: dict[str, Any]) -> None:
    """Refuse (:class:`SnapshotRefused` naming the field, e.g. ``pods[10].name: 'web-1\\n...'
    is not a Kubernetes object name``) a snapshot whose Kubernetes names, namespaces, node names,
    labels or uids break Kubernetes' own rules, or whose any string holds a control
    character. Pure, linear in the snapshot's size."""
    for i, pod in enumerate(data.get("pods") or ()):
        where = f"pods[{i}]"
        _check_fields(pod, where, {"namespace": "namespace", "name": "name", "node": "node",
                                   "uid": "uid"})  # fmt: skip
        _check_labels(pod.get("labels"), f"{where}.labels")
    for i, node in enumerate(data.get("nodes") or ()):
        _check_fields(node, f"nodes[{i}]", {"name": "node"})
        _check_labels(node.get("labels"), f"nodes[{i}].labels")
    for i, port in enumerate(data.get("pod_ports") or ()):
        _check_fields(port, f"pod_ports[{i}]", {"namespace": "namespace", "pod": "name"})
    for i, obj in enumerate(data.get("kube_objects") or ()):
        _check_fields(obj, f"kube_objects[{i}]", {"namespace": "namespace", "name": "name"})
        body = obj.get("body")
        metadata = body.get("metadata") if isinstance(body, dict) else None
        if isinstance(metadata, dict):
            _check_labels(metadata.get("labels"), f"kube_objects[{i}].body.metadata.labels")
    for i, policy in enumerate(data.get("network_policies") or ()):
        _check_fields(policy, f"network_policies[{i}]", {"namespace": "namespace", "name": "name"})
    check_text(data, "snapshot")


def _ovn_kubernetes(data: dict[str, Any]) -> OvnKubernetesRows:
    return OvnKubernetesRows(
        owner_keyed=int(data.get("owner_keyed", 0)),
        name_only=tuple(data.get("name_only", ())),
        name_only_count=int(data.get("name_only_count", 0)),
        ownerless_no_reroute=tuple(data.get("ownerless_no_reroute", ())),
    )
