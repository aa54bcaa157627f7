"""VNF guests: KubeVirt's virt-handler and ovs-cni, played for the data path.

Why a thread of its own: a real VM comes and goes without anybody asking the test harness. The
reconciler restarts one through KubeVirt's ``restart`` subresource, a user deletes its VMI, a
rollout waits (``apply --wait``) while new VMs boot. :class:`VirtHandler` follows the
``VirtualMachineInstance`` objects that :class:`~osc_gitops_sandbox.kubeapi.kubevirt.KubeVirt`
keeps, the way virt-handler follows the VMIs of its node:

- a new VMI of one of the reconciler's VMs (``osc.io/ports`` annotation) gets a guest: a
  network namespace whose NICs are plugged on the OVN ports the VM's NADs name (ovs-cni's
  ``args.cni.ovnPort``), with the VM's ``macAddress``; the VMI is reported ``Running``;
- the guest **boots** for ``boot delay`` seconds before it forwards (its bridge, or IP
  forwarding of a routing guest, stays down), then the VMI gets ``AgentConnected`` (what the
  QEMU guest agent reports once the OS is up). The delay is the VM's annotation
  :data:`~osc_gitops_sandbox.kubeapi.kubevirt.BOOT_DELAY_ANNOTATION` (on the VM or its template),
  else the data path's default (:attr:`VirtHandler.boot_delay`, 0: forwarding at once);
- a VMI that is deleted or replaced (a restart: same name, new UID) takes its guest down: the
  namespace goes, so its OVN ports go down until the new guest is plugged, and the new guest
  boots again.

Two kinds of guest, chosen by the OVN ports the reconciler wrote (as before): a *bridge* for
Network Function ports (no address; ``data-in`` and ``data-out`` in a Linux bridge, a bump in
the wire) and a *router* for a router-policy port (an address; one NIC, ``ip_forward=1``).
Which forwarding program a two-NIC guest runs is the data path's choice (:data:`GuestPrograms`):
the Linux bridge unless it hands one (Suricata inline, :mod:`osc_gitops_sandbox.datapath.suricata`,
for a VM whose image names Suricata).

A guest that cannot be plugged yet (its VM exists before the OVN transaction that creates its
ports committed) is retried every :data:`RETRY_INTERVAL`; :meth:`VirtHandler.sync` retries at
once and raises what still fails.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
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
from osc_gitops_sandbox.kubeapi.kubevirt import BOOT_DELAY_ANNOTATION, KubeVirt
from osc_gitops_sandbox.kubeapi.placement import pinned_node
from osc_gitops_sandbox.lifecycle import Worker
from osc_gitops_sandbox.ovn import ovsdb_rpc

__all__ = [
    "PORTS_ANNOTATION",
    "ForwardingProgram",
    "GuestHost",
    "GuestPrograms",
    "VirtHandler",
    "Vnf",
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


class ForwardingProgram(Protocol):
    """What a two-NIC guest runs between ``eth0`` (data-in) and ``eth1`` (data-out) instead of
    the Linux bridge: it forwards while it runs, unchanged headers (a bump in the wire)."""

    name: str

    def start(self, forward: bool) -> None:
        """Set up in the guest's namespace (its NICs are plugged); forward at once if
        ``forward``, else once :meth:`forward` says so (the guest boots)."""
        ...

    def forward(self, enabled: bool) -> None:
        """Pass traffic on, or stop (a dead VNF that swallows packets)."""
        ...

    def close(self) -> None: ...


GuestPrograms = Callable[[dict[str, Any], dict[str, Any], str, str], ForwardingProgram | None]
"""``programs(vm, vmi, netns, node)``: the program a two-NIC guest of ``vm`` runs, ``None`` for
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
    """What a two-NIC guest runs between its NICs when not the Linux bridge (Suricata)."""

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
        self, netns: str, ifname: str, lsp: str, mac: str, node: str, *, ip_address: str = ""
    ) -> Endpoint: ...

    def plug(
        self, label: str, lsp: str, mac: str, ip_address: str, node: str, *,
        sysctls: Iterable[str] = (),
    ) -> Endpoint: ...  # fmt: skip

    def unplug(self, *endpoints: Endpoint) -> None: ...


def forwarding(vnf: Vnf, enabled: bool) -> None:
    """Let the guest pass traffic on or not: the bridge of a bridge guest (down: frames are
    dropped), IP forwarding of a router guest."""
    netns = vnf.endpoint.netns
    if vnf.program is not None:
        vnf.program.forward(enabled)
        return
    if vnf.bridge:
        ip("-n", netns, "link", "set", VNF_BRIDGE, "up" if enabled else "down")
        return
    sysctl(netns, f"net.ipv4.ip_forward={1 if enabled else 0}")
    if enabled:  # re-enabling forwarding resets these per-interface defaults in some kernels
        sysctl(
            netns, "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0",
            "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0",
        )  # fmt: skip


class VirtHandler:
    """Runs a guest per VMI of the reconciler's VMs (see the module docstring)."""

    def __init__(
        self, host: GuestHost, kube: Any, kubevirt: KubeVirt, *, boot_delay: float = 0.0,
        programs: GuestPrograms | None = None,
    ) -> None:  # fmt: skip
        self.host = host
        self.programs = programs
        """Which forwarding program a two-NIC guest runs (``None``: always the bridge)."""
        self.kube = kube
        self.kubevirt = kubevirt
        self.boot_delay = boot_delay
        """Default boot time of a guest in seconds (a VM's annotation wins)."""
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
        """Play virt-handler + ovs-cni for one VMI: a router guest when its ``data-in`` port
        has an address (router-policy), else a bridge guest on ``data-in`` + ``data-out``
        (Network Function). Forwarding starts when the boot delay is over."""
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
        in_lsp, in_mac = self._vm_port(vm, spec, "in", ports, where)
        address = self._lsp_ip(in_lsp, where, node)
        label = f"vnf-{meta['name']}"
        boots_at, booted, vmi_uid = time.monotonic() + delay, delay <= 0, vmi["metadata"]["uid"]
        if address:
            sysctls = ROUTER_GUEST_SYSCTLS
            if delay > 0:
                sysctls = ("net.ipv4.ip_forward=0", *ROUTER_GUEST_SYSCTLS[1:])
            endpoint = self.host.plug(label, in_lsp, in_mac, address, node, sysctls=sysctls)
            return Vnf(
                meta["namespace"], meta["name"], meta["uid"], endpoint, vmi_uid=vmi_uid,
                boots_at=boots_at, booted=booted,
            )  # fmt: skip
        out_lsp, out_mac = self._vm_port(vm, spec, "out", ports, where)
        netns = self.host.new_namespace(label)
        counters: list[FrameCounter] = []
        program = None
        try:
            endpoint = self.host.add_nic(netns, "eth0", in_lsp, in_mac, node)
            out_endpoint = self.host.add_nic(netns, "eth1", out_lsp, out_mac, node)
            program = self.programs(vm, vmi, netns, node) if self.programs else None
            if program is not None:  # it forwards between the NICs instead of the bridge
                counters += [FrameCounter(netns, "eth0"), FrameCounter(netns, "eth1")]
                program.start(forward=delay <= 0)
                return Vnf(
                    meta["namespace"], meta["name"], meta["uid"], endpoint, out_endpoint,
                    counters, vmi_uid=vmi_uid, boots_at=boots_at, booted=booted,
                    program=program,
                )  # fmt: skip
            ip("-n", netns, "-batch", "-", stdin="\n".join([
                # No multicast snooping: with it the bridge joins 224.0.0.106 and sends IGMP
                # reports of its own into both NF ports, which counts as forwarded traffic.
                f"link add {VNF_BRIDGE} type bridge stp_state 0 forward_delay 0 mcast_snooping 0",
                f"link set {VNF_BRIDGE} multicast off",
                f"link set eth0 master {VNF_BRIDGE}",
                f"link set eth1 master {VNF_BRIDGE}",
                # A wire, not a learning switch: a pod's MAC arrives on data-out for traffic
                # towards it and on data-in for traffic from it (and, between two members of
                # one group, on both sides), so a learned entry would make the bridge drop a
                # frame "back out of the port it came in on".
                "link set eth0 type bridge_slave learning off flood on",
                "link set eth1 type bridge_slave learning off flood on",
                *([f"link set {VNF_BRIDGE} up"] if delay <= 0 else []),  # else: booting
            ]))  # fmt: skip
            counters += [FrameCounter(netns, "eth0"), FrameCounter(netns, "eth1")]
        except BaseException:
            if program is not None:
                program.close()
            for counter in counters:  # an open packet socket would keep the namespace alive
                counter.close()
            delete_netns(netns)
            raise
        return Vnf(
            meta["namespace"], meta["name"], meta["uid"], endpoint, out_endpoint, counters,
            vmi_uid=vmi_uid, boots_at=boots_at, booted=booted,
        )  # fmt: skip

    def _vm_port(
        self, vm: dict[str, Any], spec: dict[str, Any], side: str, ports: dict[str, str],
        where: str,
    ) -> tuple[str, str]:  # fmt: skip
        """The OVN port and MAC of the ``data-<side>`` NIC: the port as ovs-cni finds it, in
        the NAD's ``args.cni.ovnPort`` (checked against the ``osc.io/ports`` annotation)."""
        name = f"data-{side}"
        interfaces = ((spec.get("domain") or {}).get("devices") or {}).get("interfaces") or []
        iface = next((i for i in interfaces if i.get("name") == name), None)
        network = next((n for n in spec.get("networks", []) if n.get("name") == name), None)
        if iface is None or network is None or "multus" not in network:
            raise DatapathError(f"{where} has no multus {name} interface")
        nad = self.kube.get_object(
            "NetworkAttachmentDefinition", vm["metadata"]["namespace"],
            network["multus"]["networkName"],
        )  # fmt: skip
        lsp = ports.get(side)
        if nad is not None:  # ovs-cni reads the OVN port from the NAD's args.cni.ovnPort
            lsp = json.loads(nad["spec"]["config"])["args"]["cni"]["ovnPort"]
            if ports.get(side) not in (None, lsp):
                raise DatapathError(
                    f"{where}: annotation says {side}={ports.get(side)} but its NAD says {lsp}"
                )
        if not lsp:
            raise DatapathError(f"{where}: no OVN port for {name} (annotation or NAD)")
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
