"""VNF guests: KubeVirt's virt-handler, Multus and ovs-cni, played for the data path.

Why a thread of its own: a real VM comes and goes without anybody asking the test harness. The
reconciler restarts one through KubeVirt's ``restart`` subresource, a user deletes its VMI, a
rollout waits (``apply --wait``) while new VMs boot. :class:`VirtHandler` follows the
``VirtualMachineInstance`` objects that :class:`~osc_gitops_sandbox.kubeapi.kubevirt.KubeVirt`
keeps, the way virt-handler follows the VMIs of its node. Starting one guest has three steps,
each in one place:

1. **the NICs** (:meth:`VirtHandler._plug_nics`: Multus + ovs-cni, the CNI ADD of the VMI's
   virt-launcher pod). Per Multus network of the VMI, a veth whose guest end is named as
   KubeVirt names the pod-side interface (``pod<hash>``) and carries the MAC KubeVirt requested
   (the VM's ``macAddress``); the host end is put on the node's ``br-int`` by
   :func:`osc_gitops_sandbox.ovn.ovs_cni.cni_add` with the NAD's config as stdin and the
   ``CNI_ARGS`` Multus passes (``K8S_POD_UID`` of the virt-launcher pod, ``MAC``). How ovs-cni
   then behaves is :attr:`VirtHandler.ovs_cni`: :data:`~osc_gitops_sandbox.ovn.ovs_cni.RELEASED`
   (v0.39.0, the default: the Port gets ``contPodUid``/``contNetns``/``contIface`` and the
   Interface no ``iface-id``, so nothing binds the OVN port until the node binder runs) or
   :data:`~osc_gitops_sandbox.ovn.ovs_cni.NEWER` (ovs-cni main: ``iface-id`` from the NAD's
   ``args.cni.ovnPort``). Then Multus' ``network-status`` goes on the virt-launcher pod (unless
   ``KubeVirt.multus_status`` is off);
2. **the guest's forwarding program** (:func:`start_program`, the one place it is chosen
   and started; every guest runs a :class:`ForwardingProgram`, whose ``forward`` switches it
   on and off: :func:`forwarding`). The OVN ports the reconciler wrote choose the kind: a
   *router* for a router-policy port (an address; one NIC, ``ip_forward=1``,
   :class:`RouterProgram`), a *bump in the wire* for Network Function ports (no address; two
   NICs). Which program a two-NIC guest runs is the data path's choice
   (:data:`GuestPrograms`, ``VirtHandler.programs``): the Linux bridge
   (:class:`BridgeProgram`) unless it hands one (Suricata inline,
   :mod:`osc_gitops_sandbox.datapath.suricata`, for a VM whose image names Suricata). A guest
   **boots** for ``boot delay`` seconds before its program forwards, then the VMI gets
   ``AgentConnected`` (what the QEMU guest agent reports once the OS is up). The delay is the
   VM's annotation :data:`~osc_gitops_sandbox.kubeapi.kubevirt.BOOT_DELAY_ANNOTATION` (on the
   VM or its template), else the data path's default (:attr:`VirtHandler.boot_delay`, 0);
3. **the VMI's status**: ``Running`` with its interfaces once plugged.

A VMI that is deleted or replaced (a restart: same name, new UID) takes its guest down: the
namespace goes and ovs-cni's DEL removes the ports, so its OVN ports go down until the new
guest is plugged, and the new guest boots again.

A guest that cannot be plugged yet (its VM exists before the OVN transaction that creates its
ports committed, or KubeVirt has not made its virt-launcher pod yet) is retried every
:data:`RETRY_INTERVAL`; :meth:`VirtHandler.sync` retries at once and raises what still fails.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from osc_gitops_sandbox.datapath.netns import (
    DatapathError,
    Endpoint,
    FrameCounter,
    delete_netns,
    ip,
    sysctl,
)
from osc_gitops_sandbox.kubeapi.kubevirt import (
    BOOT_DELAY_ANNOTATION,
    NETWORK_STATUS,
    KubeVirt,
    launcher_pods_of,
    multus_networks,
    network_status,
)
from osc_gitops_sandbox.kubeapi.placement import pinned_node
from osc_gitops_sandbox.lifecycle import Worker
from osc_gitops_sandbox.ovn import ovs_cni, ovsdb_rpc

__all__ = [
    "PORTS_ANNOTATION",
    "BridgeProgram",
    "ForwardingProgram",
    "GuestHost",
    "GuestPrograms",
    "RouterProgram",
    "VirtHandler",
    "Vnf",
    "forwarding",
    "start_program",
]

PORTS_ANNOTATION = "osc.io/ports"
VNF_BRIDGE = "br0"
ROUTER_GUEST_SYSCTLS = (
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
    "net.ipv4.conf.all.send_redirects=0",
    "net.ipv4.conf.default.send_redirects=0",
)
RETRY_INTERVAL = 0.2
"""Seconds between two attempts to plug a guest whose OVN port is not there yet."""
FINAL_PHASES = ("Succeeded", "Failed")


def ovs_cni_versions() -> tuple[str, ...]:
    return ovs_cni.VERSIONS


class ForwardingProgram(Protocol):
    """What a guest runs on its NICs: between data-in and data-out of a two-NIC guest (a bump
    in the wire: unchanged headers), IP forwarding on the one NIC of a router guest. It
    forwards while it runs."""

    name: str

    @property
    def running(self) -> bool:
        """Whether it forwards now."""
        ...

    def start(self, forward: bool) -> None:
        """Set up in the guest's namespace (its NICs are plugged); forward at once if
        ``forward``, else once :meth:`forward` says so (the guest boots)."""
        ...

    def forward(self, enabled: bool) -> None:
        """Pass traffic on, or stop (a dead VNF that swallows packets)."""
        ...

    def close(self) -> None: ...


GuestPrograms = Callable[
    [Mapping[str, Any], Mapping[str, Any], str, str, Sequence[str]], ForwardingProgram | None
]
"""``programs(vm, vmi, netns, node, nics)``: the program a two-NIC guest of ``vm`` runs between
its ``nics`` (data-in, data-out: the pod-side interface names KubeVirt gives them), ``None`` for
the Linux bridge."""


@dataclass
class Vnf:
    """A VNF instance as this harness runs it (the guest of one ``VirtualMachineInstance``)."""

    namespace: str
    """Kubernetes namespace of the VirtualMachine."""
    vm: str
    vm_uid: str
    endpoint: Endpoint
    """The ``data-in`` NIC."""
    out_endpoint: Endpoint | None = None
    """The ``data-out`` NIC of a bridge guest; ``None`` for a router guest."""
    counters: list[FrameCounter] = field(default_factory=list)
    """A bridge guest's frame counters, one per NIC (see :class:`FrameCounter`)."""
    vmi_uid: str = ""
    """The instance this guest runs: a restart gives the VM a new one (and a new guest)."""
    boots_at: float = 0.0
    """``time.monotonic()`` when the guest finishes booting and starts forwarding."""
    booted: bool = True
    """Whether the guest finished booting (forwarding is then only what
    :meth:`VirtHandler.set_forwarding` says)."""
    started_at: float = field(default_factory=time.monotonic)
    program: ForwardingProgram | None = None
    """What the guest runs (:func:`start_program`): the Linux bridge, Suricata, a router."""

    @property
    def bridge(self) -> bool:
        """A two-NIC bump in the wire (the Linux bridge or a program between the NICs)."""
        return self.out_endpoint is not None

    @property
    def endpoints(self) -> list[Endpoint]:
        return [self.endpoint] + ([self.out_endpoint] if self.out_endpoint else [])

    @property
    def forwarded(self) -> int:
        """Packets of pods this VNF passed on (the proof of steering): ``IpForwDatagrams`` of
        a router guest; the IPv4 frames a bridge guest sent out of its two NICs, OVN's health
        probes (link-local addresses) not included."""
        if self.out_endpoint is None:
            return self.endpoint.ip_counters()["ForwDatagrams"]
        return sum(c.counts()[0] for c in self.counters)

    def forwarded_per_nic(self) -> tuple[int, int]:
        """A bridge guest's pod frames sent out of ``data-in`` and out of ``data-out``.

        What leaves ``data-in`` re-enters OVN at the function's inport: traffic that OVN sent
        in at the outport, i.e. towards the protected pod for a to-lport (exit-lport) ACL.
        Unequal counts show a flow crossing the VNF in one direction only."""
        if len(self.counters) != 2:
            raise DatapathError(f"VNF {self.namespace}/{self.vm} is not a bridge guest")
        return self.counters[0].counts()[0], self.counters[1].counts()[0]

    @property
    def health_probes(self) -> int:
        """Frames of OVN's Network Function health probe the bridge guest passed on (0 for a
        router guest, which OVN never probes)."""
        return sum(c.counts()[1] for c in self.counters)

    def close(self) -> None:
        if self.program is not None:
            self.program.close()
        for counter in self.counters:
            counter.close()
        for endpoint in self.endpoints:
            endpoint.close()


class GuestHost(Protocol):
    """What the virt-handler needs from a data path: namespaces and NICs on a node's chassis."""

    def nb_remote_of(self, node: str) -> str: ...

    def check_alive(self) -> None: ...

    def new_namespace(self, label: str, *sysctls: str) -> str: ...

    def add_nic(
        self, netns: str, ifname: str, lsp: str, mac: str, node: str, *, ip_address: str = "",
        cni: Any = None,
    ) -> Endpoint: ...  # fmt: skip

    def plug(
        self, label: str, lsp: str, mac: str, ip_address: str, node: str, *,
        sysctls: Iterable[str] = (),
    ) -> Endpoint: ...  # fmt: skip

    def unplug(self, *endpoints: Endpoint) -> None: ...


@dataclass
class BridgeProgram:
    """The Linux bridge between a two-NIC guest's data-in and data-out (a bump in the wire):
    the default program of a Network Function guest. Down, it drops every frame."""

    netns: str
    nics: tuple[str, str]
    name: str = "bridge"
    running: bool = False

    def start(self, forward: bool) -> None:
        first, second = self.nics
        ip("-n", self.netns, "-batch", "-", stdin="\n".join([
            # No multicast snooping: with it the bridge joins 224.0.0.106 and sends IGMP
            # reports of its own into both NF ports, which counts as forwarded traffic.
            f"link add {VNF_BRIDGE} type bridge stp_state 0 forward_delay 0 mcast_snooping 0",
            f"link set {VNF_BRIDGE} multicast off",
            f"link set {first} master {VNF_BRIDGE}",
            f"link set {second} master {VNF_BRIDGE}",
            # A wire, not a learning switch: a pod's MAC arrives on data-out for traffic
            # towards it and on data-in for traffic from it (and, between two members of
            # one group, on both sides), so a learned entry would make the bridge drop a
            # frame "back out of the port it came in on".
            f"link set {first} type bridge_slave learning off flood on",
            f"link set {second} type bridge_slave learning off flood on",
            *([f"link set {VNF_BRIDGE} up"] if forward else []),  # else: booting
        ]))  # fmt: skip
        self.running = forward

    def forward(self, enabled: bool) -> None:
        ip("-n", self.netns, "link", "set", VNF_BRIDGE, "up" if enabled else "down")
        self.running = enabled

    def close(self) -> None:
        """Nothing to stop: the bridge goes with the guest's namespace."""


@dataclass
class RouterProgram:
    """IP forwarding on a router guest's one NIC (router-policy steering). Set up by the
    namespace's sysctls (:data:`ROUTER_GUEST_SYSCTLS`, ``ip_forward=0`` while booting)."""

    netns: str
    nic: str
    name: str = "router"
    running: bool = False

    def start(self, forward: bool) -> None:
        self.running = forward  # the namespace was made with ip_forward as ``forward``

    def forward(self, enabled: bool) -> None:
        sysctl(self.netns, f"net.ipv4.ip_forward={1 if enabled else 0}")
        if enabled:  # re-enabling forwarding resets these per-interface defaults in some kernels
            sysctl(
                self.netns, "net.ipv4.conf.all.send_redirects=0",
                f"net.ipv4.conf.{self.nic}.send_redirects=0",
                "net.ipv4.conf.all.rp_filter=0", f"net.ipv4.conf.{self.nic}.rp_filter=0",
            )  # fmt: skip
        self.running = enabled

    def close(self) -> None:
        """Nothing to stop: forwarding goes with the guest's namespace."""


def start_program(
    kind: str, netns: str, nics: Sequence[str], *, running: bool,
    programs: GuestPrograms | None = None, vm: Mapping[str, Any] | None = None,
    vmi: Mapping[str, Any] | None = None, node: str = "",
) -> ForwardingProgram:  # fmt: skip
    """Choose and start the guest's forwarding program: THE place a VNF guest's own software is
    started (a real VNF's image; here the kernel or Suricata). ``kind``: ``router`` (``nics``
    = its one NIC: :class:`RouterProgram`) or ``bridge`` (``nics`` = data-in, data-out: what
    ``programs`` hands for ``vm``/``vmi`` on ``node``, else :class:`BridgeProgram`).
    ``running``: forward at once, else it is still booting and :func:`forwarding` switches it
    on later. A program that fails to start is closed."""
    program: ForwardingProgram | None = None
    if kind == "router":
        program = RouterProgram(netns, nics[0])
    elif kind == "bridge":
        first, second = nics
        if programs is not None:
            program = programs(vm or {}, vmi or {}, netns, node, (first, second))
        if program is None:
            program = BridgeProgram(netns, (first, second))
    else:
        raise DatapathError(f"unknown guest program {kind!r}")
    try:
        program.start(forward=running)
    except BaseException:
        program.close()
        raise
    return program


def forwarding(vnf: Vnf, enabled: bool) -> None:
    """Let the guest pass traffic on or not (its program's ``forward``: the bridge down drops
    frames, a stopped Suricata forwards nothing, a router stops IP forwarding)."""
    if vnf.program is None:
        raise DatapathError(f"VNF {vnf.namespace}/{vnf.vm} runs no forwarding program")
    vnf.program.forward(enabled)


class VirtHandler:
    """Runs a guest per VMI of the reconciler's VMs (see the module docstring)."""

    def __init__(
        self, host: GuestHost, kube: Any, kubevirt: KubeVirt, *, boot_delay: float = 0.0,
        ovs_cni: str = ovs_cni.RELEASED, programs: GuestPrograms | None = None,
    ) -> None:  # fmt: skip
        self.host = host
        self.programs = programs
        """Which forwarding program a two-NIC guest runs (``None``: always the bridge)."""
        self.kube = kube
        self.kubevirt = kubevirt
        self.boot_delay = boot_delay
        """Default boot time of a guest in seconds (a VM's annotation wins)."""
        if ovs_cni not in ovs_cni_versions():
            raise DatapathError(f"unknown ovs-cni {ovs_cni!r} (one of {ovs_cni_versions()})")
        self.ovs_cni = ovs_cni
        """How the played ovs-cni finds the OVN port: ``v0.39.0`` (released: only from
        ``CNI_ARGS``, so never) or ``main`` (also the NAD's ``args.cni.ovnPort``)."""
        self.vnfs: dict[str, Vnf] = {}
        """Running guests by VirtualMachine ``<namespace>/<name>``. Replaced, never mutated,
        so a reader can iterate it while the handler thread plugs and unplugs."""
        self._failed: dict[str, tuple[DatapathError, float]] = {}
        """VMI uid -> (why its guest could not start, when to try again)."""
        self._sync_lock = threading.RLock()
        self._worker = Worker(
            "virt-handler", lambda: self.sync_once(retry_now=False), self._next_timer
        )

    # -- the thread ------------------------------------------------------------------------
    def start(self) -> None:
        self.kubevirt.external_handler = True
        self.kube.subscribe(("VirtualMachine", "VirtualMachineInstance"), self._changed)
        self._worker.start()

    def stop(self) -> None:
        """Stop following (the guests stay until :meth:`close`)."""
        self.kube.unsubscribe(self._changed)
        self.kubevirt.external_handler = False
        self._worker.stop()

    def close(self) -> None:
        """Stop following and take every guest down."""
        self.stop()
        with self._sync_lock:
            vnfs, self.vnfs = self.vnfs, {}
            for vnf in vnfs.values():
                vnf.close()
                for endpoint in vnf.endpoints:
                    delete_netns(endpoint.netns)

    def _changed(self, event: str, kind: str, obj: dict[str, Any]) -> None:
        self._worker.wake()

    def _next_timer(self) -> float | None:
        """Seconds until the next boot ends or a failed guest is retried (None: no timer)."""
        times = [v.boots_at for v in self.vnfs.values() if not v.booted]
        times += [retry for _, retry in self._failed.values()]
        return max(0.0, min(times) - time.monotonic()) if times else None

    # -- one pass ---------------------------------------------------------------------------
    def sync(self) -> list[str]:
        """Catch up now (after KubeVirt's controller has): plug every VMI's guest, retry those
        that failed, raise what still fails. Returns the OVN ports of every running guest."""
        self.kubevirt.wait_settled()
        self.sync_once(retry_now=True)
        error = self._worker.take_error()
        if self._failed:
            raise next(iter(self._failed.values()))[0]
        if error is not None:
            raise DatapathError(f"the VNF guest handler failed: {error}") from error
        return [e.lsp for v in self.vnfs.values() for e in v.endpoints]

    def sync_once(self, *, retry_now: bool) -> None:
        with self._sync_lock:
            wanted = self._wanted()
            for key, vnf in list(self.vnfs.items()):
                if key not in wanted or wanted[key][1]["metadata"]["uid"] != vnf.vmi_uid:
                    self._remove(key)
            self._failed = {
                uid: failure for uid, failure in self._failed.items()
                if uid in {v["metadata"]["uid"] for _, v in wanted.values()}
            }  # fmt: skip
            now = time.monotonic()
            for key, (vm, vmi) in sorted(wanted.items()):
                uid = vmi["metadata"]["uid"]
                if key in self.vnfs or (
                    uid in self._failed and not retry_now and self._failed[uid][1] > now
                ):
                    continue
                try:
                    vnf = self._start_guest(vm, vmi)
                except DatapathError as exc:
                    self._failed[uid] = (exc, time.monotonic() + RETRY_INTERVAL)
                    continue
                self._failed.pop(uid, None)
                self.vnfs = {**self.vnfs, key: vnf}
                self.kubevirt.report_running(
                    vnf.namespace, vnf.vm, uid,
                    [{"name": f"data-{side}", "mac": e.mac, "interfaceName": e.ifname}
                     for side, e in zip(("in", "out"), vnf.endpoints, strict=False)],
                )  # fmt: skip
                if vnf.booted:  # no boot delay: up at once
                    self.kubevirt.report_booted(vnf.namespace, vnf.vm, uid)
            for vnf in list(self.vnfs.values()):
                if not vnf.booted and vnf.boots_at <= time.monotonic():
                    self._boot(vnf)

    def _wanted(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """``<namespace>/<vm>`` -> (VM, VMI) for every live VMI of a VM of ours."""
        vms = {
            f"{vm['metadata']['namespace']}/{vm['metadata']['name']}": vm
            for vm in self.kube.objects("VirtualMachine")
            if PORTS_ANNOTATION in (vm["metadata"].get("annotations") or {})
        }
        wanted = {}
        for vmi in self.kube.objects("VirtualMachineInstance"):
            key = f"{vmi['metadata']['namespace']}/{vmi['metadata']['name']}"
            phase = (vmi.get("status") or {}).get("phase")
            if key in vms and phase not in FINAL_PHASES:
                wanted[key] = (vms[key], vmi)
        return wanted

    def _remove(self, key: str) -> None:
        vnfs = dict(self.vnfs)
        gone = vnfs.pop(key)
        self.vnfs = vnfs
        gone.close()
        self.host.unplug(*gone.endpoints)

    def _boot(self, vnf: Vnf) -> None:
        forwarding(vnf, True)
        vnf.booted = True
        self.kubevirt.report_booted(vnf.namespace, vnf.vm, vnf.vmi_uid)

    def set_forwarding(self, vnf: Vnf, enabled: bool) -> None:
        """A test's say over a guest (a dead VNF swallows packets): also ends its boot."""
        with self._sync_lock:
            vnf.booted = True
            forwarding(vnf, enabled)

    def boot_delay_of(self, vm: dict[str, Any], vmi: dict[str, Any]) -> float:
        """The VMI's (= its template's) annotation, else the VM's, else the default."""
        for meta in (vmi["metadata"], vm["metadata"]):
            value = (meta.get("annotations") or {}).get(BOOT_DELAY_ANNOTATION)
            if value is not None:
                try:
                    return max(0.0, float(value))
                except ValueError:
                    raise DatapathError(
                        f"VirtualMachine {vm['metadata']['namespace']}/{vm['metadata']['name']}:"
                        f" {BOOT_DELAY_ANNOTATION}={value!r} is not a number of seconds"
                    ) from None
        return self.boot_delay

    # -- one guest --------------------------------------------------------------------------
    def _start_guest(self, vm: dict[str, Any], vmi: dict[str, Any]) -> Vnf:
        """Play virt-handler for one VMI: its NICs (:meth:`_plug_nics`), then its forwarding
        program (:func:`start_program`): a router guest when its ``data-in`` port has an
        address (router-policy), else a two-NIC guest on ``data-in`` + ``data-out`` (Network
        Function: the bridge, or what :attr:`programs` hands). Forwarding starts when the
        boot delay is over."""
        meta = vm["metadata"]
        where = f"VirtualMachine {meta['namespace']}/{meta['name']}"
        spec = vmi.get("spec") or {}
        node = pinned_node(spec)
        if not node:
            raise DatapathError(f"{where} is pinned to no node (node affinity on metadata.name)")
        ports = dict(
            p.split("=", 1) for p in meta["annotations"][PORTS_ANNOTATION].split(",") if "=" in p
        )
        delay = self.boot_delay_of(vm, vmi)
        in_lsp, _in_mac = self._vm_port(vm, spec, "in", ports, where)
        address = self._lsp_ip(in_lsp, where, node)
        label = f"vnf-{meta['name']}"
        boots_at, booted, vmi_uid = time.monotonic() + delay, delay <= 0, vmi["metadata"]["uid"]
        launchers = launcher_pods_of(self.kubevirt.server, vmi)
        if len(launchers) != 1:
            raise DatapathError(f"{where}: {len(launchers)} virt-launcher pods for its VMI")
        launcher = launchers[0]
        sides = ("in",) if address else ("in", "out")
        sysctls: tuple[str, ...] = ()
        if address:
            sysctls = ROUTER_GUEST_SYSCTLS if delay <= 0 else (
                "net.ipv4.ip_forward=0", *ROUTER_GUEST_SYSCTLS[1:])  # fmt: skip
        netns = self.host.new_namespace(label, *sysctls)
        counters: list[FrameCounter] = []
        try:
            nics = self._plug_nics(vm, vmi, launcher, node, netns, sides, ports, address, where)
            if not address:  # before the program: it may forward at once
                counters += [FrameCounter(netns, e.ifname) for e in nics]
            program = start_program(
                "router" if address else "bridge", netns, [e.ifname for e in nics],
                running=delay <= 0, programs=self.programs, vm=vm, vmi=vmi, node=node,
            )  # fmt: skip
        except BaseException:
            for counter in counters:  # an open packet socket would keep the namespace alive
                counter.close()
            delete_netns(netns)
            raise
        return Vnf(
            meta["namespace"], meta["name"], meta["uid"], nics[0],
            nics[1] if len(nics) > 1 else None, counters,
            vmi_uid=vmi_uid, boots_at=boots_at, booted=booted, program=program,
        )  # fmt: skip

    def _plug_nics(
        self, vm: dict[str, Any], vmi: dict[str, Any], launcher: dict[str, Any], node: str,
        netns: str, sides: tuple[str, ...], ports: dict[str, str], address: str, where: str,
    ) -> list[Endpoint]:  # fmt: skip
        """Multus + ovs-cni: the CNI ADD of each data network of the VMI's virt-launcher pod
        (see the module docstring), then Multus' ``network-status`` on the pod."""
        pod_meta = launcher["metadata"]
        networks = {n["network"]: n for n in multus_networks(vmi)}
        nics = []
        for side in sides:
            net = networks.get(f"data-{side}")
            if net is None:
                raise DatapathError(f"{where} has no multus data-{side} network")
            lsp, mac = self._vm_port(vm, vmi.get("spec") or {}, side, ports, where)
            nad = self.kube.get_object("NetworkAttachmentDefinition", net["namespace"], net["nad"])
            if nad is None:
                raise DatapathError(f"{where}: NAD {net['namespace']}/{net['nad']} not found")
            cni_args = ";".join([
                "IgnoreUnknown=true", f"K8S_POD_NAMESPACE={pod_meta['namespace']}",
                f"K8S_POD_NAME={pod_meta['name']}",
                f"K8S_POD_INFRA_CONTAINER_ID={pod_meta['uid'][:12]}",
                f"K8S_POD_UID={pod_meta['uid']}", f"MAC={net['mac'] or mac}",
            ])  # fmt: skip
            cni = (self.ovs_cni, nad["spec"]["config"], cni_args)
            nics.append(self.host.add_nic(
                netns, net["interface"], lsp, net["mac"] or mac, node,
                ip_address=address if side == "in" else "", cni=cni,
            ))  # fmt: skip
        patch: dict[str, Any] = {"status": {"phase": "Running"}}  # the kubelet, after the CNI
        if self.kubevirt.multus_status:
            macs = {f"data-{s}": e.mac for s, e in zip(sides, nics, strict=True)}
            patch["metadata"] = {"annotations": {NETWORK_STATUS: network_status(vmi, macs)}}
        with contextlib.suppress(Exception):  # the pod went meanwhile: the VMI is gone
            self.kube.patch(
                self.kube.resource_type("Pod"), pod_meta["namespace"], pod_meta["name"],
                "application/merge-patch+json", patch,
            )  # fmt: skip
        return nics

    def _vm_port(
        self, vm: dict[str, Any], spec: dict[str, Any], side: str, ports: dict[str, str],
        where: str,
    ) -> tuple[str, str]:  # fmt: skip
        """The OVN port the ``data-<side>`` NIC belongs on (the ``osc.io/ports`` annotation,
        which the compiler writes beside the NAD's ``args.cni.ovnPort``) and its MAC."""
        name = f"data-{side}"
        interfaces = ((spec.get("domain") or {}).get("devices") or {}).get("interfaces") or []
        iface = next((i for i in interfaces if i.get("name") == name), None)
        network = next((n for n in spec.get("networks", []) if n.get("name") == name), None)
        if iface is None or network is None or "multus" not in network:
            raise DatapathError(f"{where} has no multus {name} interface")
        lsp = ports.get(side)
        if not lsp:
            raise DatapathError(f"{where}: no OVN port for {name} in its osc.io/ports")
        return lsp, str(iface["macAddress"])

    def _lsp_ip(self, lsp: str, where: str, node: str) -> str:
        """The guest's address: what the reconciler wrote in the port's ``addresses`` (a
        router-policy VNF port); ``""`` for a port without one (a Network Function port)."""
        self.host.check_alive()
        rows = ovsdb_rpc.transact(self.host.nb_remote_of(node), "OVN_Northbound", [
            {"op": "select", "table": "Logical_Switch_Port", "where": [["name", "==", lsp]],
             "columns": ["addresses"]},
        ])[0]["rows"]  # fmt: skip
        if not rows:
            raise DatapathError(f"{where}: OVN port {lsp} does not exist in the NB")
        addresses = ovsdb_rpc.from_atom(rows[0]["addresses"])
        for entry in [addresses] if isinstance(addresses, str) else addresses:
            parts = entry.split()
            if len(parts) >= 2:
                return str(parts[1])
        return ""
