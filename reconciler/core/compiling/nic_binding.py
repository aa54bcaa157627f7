"""The node binder's decision: which OVS interface of a node is which VNF NIC, and the
``external_ids:iface-id`` each must carry so that ovn-controller binds it to its OVN port.

Why a binder at all: released ovs-cni (v0.39.0 and every release before it) reads the OVN port
only from the ``CNI_ARGS`` environment (``pkg/plugin/plugin.go`` ``EnvArgs``), which neither
Multus nor KubeVirt fills with it, so it creates the OVS port of a VNF NIC without ``iface-id``;
ovn-controller then never binds our ``nf_<vnf>_<node>_<in|out>`` port. ovs-cni does mark the
OVS *Port* it made (``external_ids`` ``contPodUid``, ``contNetns``, ``contIface``, ``owner``:
``pkg/ovsdb/ovsdb.go`` ``createPortOperation``), and Multus reports per network the pod-side
interface name and MAC in the pod's ``k8s.v1.cni.cncf.io/network-status`` annotation. That is
enough to tell, on one node, which OVS interface is which NIC of which of our VMs:

1. our VM on this node names, per data NIC (``domain.devices.interfaces[]``), a Multus
   network (``networks[].multus.networkName``: one of our NADs) and a ``macAddress``; its OVN
   port is what the VM's ``osc.io/ports`` annotation names for the NIC's side, the very value
   the compiler writes into that NAD's ``args.cni.ovnPort`` (which a newer ovs-cni reads);
2. the VM's current ``virt-launcher`` pod on this node (owned by its VMI, not terminating)
   carries the ``network-status`` entry of that NAD (``name`` = ``<namespace>/<nad>``), which
   names the pod-side interface (``interface``: KubeVirt's ``pod<hash>``) and its MAC; the MAC
   must be the VM's ``macAddress`` (KubeVirt requests it as the network's ``mac``, Multus
   passes it to ovs-cni as ``CNI_ARGS`` ``MAC``);
3. the OVS interface whose Port says ``contPodUid`` = that pod's UID and ``contIface`` = that
   interface name is the NIC.

The binder then sets exactly ``iface-id`` on that Interface and nothing else; an interface
already carrying the right value (a newer ovs-cni, which reads the NAD's ``args.cni.ovnPort``)
is left alone. It takes ``iface-id`` away from an ovs-cni interface that carries one of this
node's VNF port names (``nf_<vnf>_<node>_[b_]<in|out>``: no other port is ever touched) but is
no longer that port's NIC: its VM is gone, or its pod was replaced (a restarted VM's old pod, so
two interfaces never claim one port). Anything doubtful is named, skipped and counted, never
guessed: a pod whose ``network-status`` is missing or malformed, a MAC that does not match,
two NICs (or two interfaces) claiming one OVN port.

Pure: plain data in (:mod:`reconciler.core.model.observed`), a :class:`BindPlan` out. The
node's VMs only are looked at, so the work is proportional to them, never to the cluster.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.model import ownership as own
from reconciler.core.model.observed import KubeObject, LauncherPod, OvsInterface

__all__ = [
    "CONT_IFACE",
    "CONT_NETNS",
    "CONT_POD_UID",
    "IFACE_ID",
    "NETWORK_STATUS",
    "OVS_CNI_OWNER",
    "PORTS_ANNOTATION",
    "SKIP_REASONS",
    "BindPlan",
    "Bound",
    "Skip",
    "VnfNic",
    "Write",
    "is_node_vnf_port",
    "normalize_mac",
    "parse_network_status",
    "plan_bindings",
    "vnf_nics",
]

NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"
"""Multus' pod annotation: one entry per attached network (``name`` ``<namespace>/<nad>``,
``interface``, ``mac``, ``ips``, ``default``), written after the CNI ADD of every network."""
IFACE_ID = "iface-id"
CONT_POD_UID = "contPodUid"
CONT_IFACE = "contIface"
CONT_NETNS = "contNetns"
OVS_CNI_OWNER = "ovs-cni.network.kubevirt.io"
"""ovs-cni's ``Port.external_ids:owner`` (``pkg/ovsdb/ovsdb.go`` ``ovsPortOwner``)."""

SKIP_REASONS: tuple[str, ...] = (
    "network-status-missing",
    "network-status-malformed",
    "mac-mismatch",
    "port-claimed-twice",
    "vm-unreadable",
    "launcher-pods-ambiguous",
    "pod-uid-missing",
)
"""Why a NIC was left alone (the ``reason`` label of the binder's skip metrics)."""


@dataclass(frozen=True, slots=True)
class VnfNic:
    """One data NIC of one of our VMs, and the OVN port it belongs on."""

    namespace: str
    vm: str
    nic: str
    """The NIC's name in the VM (``data-in``, ``data-out``)."""
    network: str
    """The Multus network as ``network-status`` names it: ``<namespace>/<nad>``."""
    mac: str
    """The VM's ``macAddress`` of the NIC (normalized: lower case, ``:``)."""
    port: str
    """The OVN logical switch port (the NAD's ``args.cni.ovnPort``)."""
    vnf: str
    node: str

    @property
    def where(self) -> str:
        return f"VirtualMachine {self.namespace}/{self.vm} NIC {self.nic}"

    @property
    def side(self) -> str:
        """``in`` or ``out`` (from the port name), else the NIC's name."""
        return self.port.rsplit("_", 1)[-1] if self.port.endswith(("_in", "_out")) else self.nic


@dataclass(frozen=True, slots=True)
class Skip:
    """A NIC (or a pod's NICs) the binder left alone, and why."""

    reason: str
    """One of :data:`SKIP_REASONS`."""
    subject: str
    """What it concerns: ``VirtualMachine ns/vm NIC data-in``, ``pod ns/name``, a port."""
    detail: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Write:
    """Set (``iface_id`` a port name) or remove (``None``) one Interface's ``iface-id``."""

    interface: str
    """The Interface's UUID."""
    name: str
    iface_id: str | None
    was: str | None
    why: str


@dataclass(frozen=True, slots=True)
class Bound:
    """A NIC found on its OVS interface (bound once the plan's writes are done)."""

    nic: VnfNic
    interface: OvsInterface


@dataclass(frozen=True)
class BindPlan:
    """What one binder pass decided for its node."""

    writes: tuple[Write, ...] = ()
    bound: tuple[Bound, ...] = ()
    skipped: tuple[Skip, ...] = ()
    waiting: tuple[VnfNic, ...] = ()
    """NICs of our running VMs whose pod or OVS interface is not there (yet)."""
    nics: tuple[VnfNic, ...] = ()
    """Every data NIC of our VMs on the node."""
    node_ports: dict[str, VnfNic] = field(default_factory=dict)
    """OVN port -> its NIC, for the ports claimed once."""


def normalize_mac(mac: Any) -> str:
    return str(mac).strip().lower().replace("-", ":")


def is_node_vnf_port(name: str, node: str) -> bool:
    """Whether ``name`` is a VNF data port of ``node``: ``nf_<vnf>_<node>_[b_]<in|out>``
    (``reconciler.core.model.naming.vnf_port``; a VnfDeployment name has no ``_``)."""
    return re.fullmatch(rf"nf_[a-z0-9-]+_{re.escape(node)}_(?:b_)?(?:in|out)", name) is not None


def parse_network_status(raw: str) -> list[dict[str, Any]]:
    """The entries of a ``network-status`` annotation; raises ``ValueError`` saying what is
    wrong when it is not a JSON list of objects with a string ``name``."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, list):
        raise ValueError(f"a JSON {type(data).__name__}, not a list")
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ValueError(f"entry {i} is not an object with a name")
    return data


PORTS_ANNOTATION = "osc.io/ports"
"""On each VM the compiler writes (``in=<port>,out=<port>``): the OVN port of each data NIC,
the same value it writes into the NIC's NAD as ``args.cni.ovnPort`` (one compile writes both).
The binder reads it from the VM so that it needs no read of NADs."""


def _ports_of(vm: KubeObject) -> dict[str, str]:
    """``osc.io/ports`` of one of our VMs as ``{side: port}``; raises ``ValueError``."""
    raw = str(((vm.body.get("metadata") or {}).get("annotations") or {}).get(PORTS_ANNOTATION, ""))
    ports = dict(p.split("=", 1) for p in raw.split(",") if "=" in p)
    if not ports or not all(ports.values()):
        raise ValueError(f"its {PORTS_ANNOTATION} annotation ({raw!r}) names no OVN port")
    return ports


def vnf_nics(node: str, vms: Iterable[KubeObject]) -> tuple[list[VnfNic], list[Skip]]:
    """The data NICs (``data-<side>``, a Multus network) of our VMs on ``node`` (the full
    node name of ``osc.io/node-name`` where the ``osc.io/node`` label had to be shortened, else
    the label: ``ownership.node_of``), each with the OVN port the VM's ``osc.io/ports`` names
    for its side; a VM without a readable annotation is skipped."""
    nics: list[VnfNic] = []
    skipped: list[Skip] = []
    for vm in sorted(vms, key=lambda o: (o.namespace, o.name)):
        meta = vm.body.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (
            vm.kind != "VirtualMachine"
            or own.node_of(labels, meta.get("annotations") or {}) != node
        ):
            continue
        where = f"VirtualMachine {vm.namespace}/{vm.name}"
        try:
            ports = _ports_of(vm)
        except ValueError as exc:
            skipped.append(Skip("vm-unreadable", where, str(exc)))
            continue
        spec = ((vm.body.get("spec") or {}).get("template") or {}).get("spec") or {}
        interfaces = ((spec.get("domain") or {}).get("devices") or {}).get("interfaces") or []
        networks = {n.get("name"): n for n in spec.get("networks") or [] if isinstance(n, dict)}
        for iface in interfaces:
            name = str(iface.get("name") or "")
            side = name.removeprefix("data-")
            multus = (networks.get(name) or {}).get("multus") or {}
            target = str(multus.get("networkName") or "")
            if not name.startswith("data-") or side not in ports or not target:
                continue
            ns, _, nad = target.rpartition("/")
            nics.append(VnfNic(
                namespace=vm.namespace, vm=vm.name, nic=name, network=f"{ns or vm.namespace}/{nad}",
                mac=normalize_mac(iface.get("macAddress") or ""), port=ports[side],
                vnf=str(labels.get(own.VNF_LABEL, "")), node=node,
            ))  # fmt: skip
    return nics, skipped


def plan_bindings(
    node: str,
    vms: Sequence[KubeObject],
    pods: Sequence[LauncherPod],
    interfaces: Sequence[OvsInterface],
) -> BindPlan:
    """One pass of the binder of ``node`` (see the module docstring)."""
    nics, skipped = vnf_nics(node, vms)
    found = _Pass(node, interfaces, skipped)
    node_ports = found.claims(nics)
    for pod in pods:
        if pod.node == node and not pod.terminating:
            found.current[(pod.namespace, pod.vmi)].append(pod)
    nics_by_vm: dict[tuple[str, str], list[VnfNic]] = defaultdict(list)
    for nic in nics:
        if nic.port in node_ports:
            nics_by_vm[(nic.namespace, nic.vm)].append(nic)
    for (namespace, vm), vm_nics in sorted(nics_by_vm.items()):
        found.match_vm(namespace, vm, vm_nics)
    return BindPlan(
        writes=tuple(found.writes(node_ports)),
        bound=tuple(found.bound),
        skipped=tuple(found.skipped),
        waiting=tuple(found.waiting),
        nics=tuple(nics),
        node_ports=node_ports,
    )


class _Pass:
    """What one pass finds, NIC by NIC (:func:`plan_bindings` drives it)."""

    def __init__(self, node: str, interfaces: Sequence[OvsInterface], skipped: list[Skip]):
        self.node = node
        self.interfaces = interfaces
        self.skipped = skipped
        self.by_port: dict[str, list[VnfNic]] = defaultdict(list)
        self.current: dict[tuple[str, str], list[LauncherPod]] = defaultdict(list)
        """The live virt-launcher pods of the node by (namespace, VMI name)."""
        self.by_pod_iface: dict[tuple[str, str], list[OvsInterface]] = defaultdict(list)
        """ovs-cni's interfaces by (contPodUid, contIface)."""
        for iface in interfaces:
            if CONT_POD_UID in iface.port_ids:
                key = (iface.port_ids[CONT_POD_UID], iface.port_ids.get(CONT_IFACE, ""))
                self.by_pod_iface[key].append(iface)
        self.desired: dict[str, tuple[str, VnfNic]] = {}
        """Interface UUID -> (the OVN port it must carry, its NIC)."""
        self.bound: list[Bound] = []
        self.waiting: list[VnfNic] = []
        self.left_alone: set[str] = set()
        """Pod UIDs whose interfaces are in doubt: never written."""

    def skip(self, reason: str, subject: str, detail: str, pod: str | None = None) -> None:
        self.skipped.append(Skip(reason, subject, detail))
        if pod is not None:
            self.left_alone.add(pod)

    def claims(self, nics: Sequence[VnfNic]) -> dict[str, VnfNic]:
        """OVN port -> its NIC, for the ports one NIC claims (the others are skipped)."""
        for nic in nics:
            self.by_port[nic.port].append(nic)
        for port, held in sorted(self.by_port.items()):
            if len(held) > 1:
                names = ", ".join(n.where for n in held)
                for nic in held:
                    self.skip("port-claimed-twice", nic.where,
                              f"OVN port {port} is claimed by {names}")  # fmt: skip
        return {port: held[0] for port, held in self.by_port.items() if len(held) == 1}

    def match_vm(self, namespace: str, vm: str, vm_nics: list[VnfNic]) -> None:
        """Each NIC of one VM on its OVS interface, through its virt-launcher pod."""
        launchers = self.current.get((namespace, vm), [])
        if not launchers:
            self.waiting.extend(vm_nics)
            return
        if len(launchers) > 1:
            self.left_alone.update(p.uid for p in launchers)
            names = ", ".join(f"{p.namespace}/{p.name}" for p in launchers)
            detail = f"{len(launchers)} live virt-launcher pods on {self.node}: {names}"
            self.skip("launcher-pods-ambiguous", f"VirtualMachine {namespace}/{vm}", detail)
            return
        pod = launchers[0]
        subject = f"pod {pod.namespace}/{pod.name}"
        if pod.network_status is None:
            if pod.running:  # its CNI ADD is over, yet Multus reported nothing
                self.skip("network-status-missing", subject,
                          f"has no {NETWORK_STATUS} annotation", pod.uid)  # fmt: skip
            else:
                self.waiting.extend(vm_nics)
            return
        try:
            entries = parse_network_status(pod.network_status)
        except ValueError as exc:
            self.skip("network-status-malformed", subject,
                      f"its {NETWORK_STATUS} annotation is {exc}", pod.uid)  # fmt: skip
            return
        for nic in vm_nics:
            self.match_nic(nic, pod, subject, entries)

    def match_nic(
        self, nic: VnfNic, pod: LauncherPod, subject: str, entries: list[dict[str, Any]]
    ) -> None:
        """One NIC: its ``network-status`` entry, its MAC, its OVS interface."""
        found = [e for e in entries if e.get("name") == nic.network]
        if not found:
            if not pod.running:
                self.waiting.append(nic)
                return
            detail = f"{subject}'s {NETWORK_STATUS} has no entry for {nic.network}"
            self.skip("network-status-missing", nic.where, detail, pod.uid)
            return
        if len(found) > 1:
            names = ", ".join(str(e.get("interface")) for e in found)
            self.skip("port-claimed-twice", nic.where,
                      f"{subject} has {len(found)} interfaces ({names}) on {nic.network}, for "
                      f"one OVN port {nic.port}", pod.uid)  # fmt: skip
            return
        entry = found[0]
        mac = normalize_mac(entry.get("mac") or "")
        if mac != nic.mac:
            self.skip("mac-mismatch", nic.where,
                      f"{subject} reports MAC {mac or '(none)'} on {entry.get('interface')}, "
                      f"the VM says {nic.mac}", pod.uid)  # fmt: skip
            return
        cont_iface = str(entry.get("interface") or "")
        candidates = self.by_pod_iface.get((pod.uid, cont_iface), [])
        anonymous = self.by_pod_iface.get(("", cont_iface), [])
        if not candidates and anonymous:  # ovs-cni got no K8S_POD_UID: which pod's is it?
            names = ", ".join(i.name for i in anonymous)
            self.skip("pod-uid-missing", nic.where,
                      f"OVS interface(s) {names} carry contIface={cont_iface} but an empty "
                      "contPodUid: the container runtime passed no K8S_POD_UID to the CNI "
                      "(containerd < 1.5, CRI-O < 1.20), so they cannot be told apart")  # fmt: skip
        elif not candidates:
            self.waiting.append(nic)
        elif len(candidates) > 1:
            names = ", ".join(i.name for i in candidates)
            self.skip("port-claimed-twice", nic.where,
                      f"{len(candidates)} OVS interfaces ({names}) are {subject}'s "
                      f"{cont_iface}", pod.uid)  # fmt: skip
        else:
            self.desired[candidates[0].uuid] = (nic.port, nic)
            self.bound.append(Bound(nic, candidates[0]))

    def writes(self, node_ports: dict[str, VnfNic]) -> list[Write]:
        """The ``iface-id`` to set where a NIC was found, and to take away from an ovs-cni
        interface that carries one of this node's VNF ports but is no longer its NIC."""
        names = {i.uuid: i.name for i in self.interfaces}
        holders = {port: names[uuid] for uuid, (port, _nic) in self.desired.items()}
        writes: list[Write] = []
        for iface in sorted(self.interfaces, key=lambda i: i.name):
            want = self.desired.get(iface.uuid)
            if want is not None:
                port, nic = want
                if iface.iface_id != port:
                    writes.append(Write(iface.uuid, iface.name, port, iface.iface_id,
                                        f"{nic.where} -> {port}"))  # fmt: skip
                continue
            why = self._stale(iface, holders, node_ports)
            if why:
                writes.append(Write(iface.uuid, iface.name, None, iface.iface_id, why))
        return writes

    def _stale(
        self, iface: OvsInterface, holders: dict[str, str], node_ports: dict[str, VnfNic]
    ) -> str:
        """Why ``iface``'s ``iface-id`` must go ("" when it stays, or is none of ours)."""
        pod_uid = iface.port_ids.get(CONT_POD_UID)
        held = iface.iface_id
        if not pod_uid or held is None or not is_node_vnf_port(held, self.node):
            return ""  # not an ovs-cni NIC on one of this node's VNF ports: never ours to touch
        if held in holders:
            return f"OVN port {held} belongs on {holders[held]}, this is a stale interface"
        if pod_uid in self.left_alone:
            return ""  # the pod's NICs are in doubt (skipped): leave them as they are
        nic = node_ports.get(held)
        if nic is not None and any(
            p.uid == pod_uid for p in self.current.get((nic.namespace, nic.vm), [])
        ):
            return ""  # the VM's current pod, not matched yet (waiting): leave it
        if held in self.by_port:
            return f"OVN port {held} is no longer this interface's: its pod {pod_uid} was replaced"
        return f"OVN port {held} has no VM any more"
