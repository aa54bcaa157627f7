"""KubeVirt, played behind the Kubernetes API emulator: VM -> VMI, status, restart.

Why: the reconciler creates ``VirtualMachine`` objects and (issue 22) restarts them to roll out a
new image; a VM that only exists as a stored object cannot show what a real VM does: a
restart that takes it down and brings a *new* instance up, a template change that waits for
the next start (``RestartRequired``), a status saying whether it runs. :class:`KubeVirt`
attaches to a :class:`~osc_gitops_sandbox.kubeapi.server.KubeApiServer` and plays two KubeVirt
components, on the same wire a real cluster has:

- **virt-api**'s aggregated API ``subresources.kubevirt.io/v1`` (``virtctl`` talks to it):
  ``PUT .../namespaces/NS/virtualmachines/NAME/restart`` (``virtctl restart``),
  ``.../start`` and ``.../stop``, with KubeVirt's answers (``202 Accepted`` and an empty body;
  409 for a halted VM or a VM without an instance, 404 for a missing VM, 400 for a grace
  period other than 0, 500 "stop/start already underway" while a request is pending), as
  ``pkg/virt-api/rest/lifecycle.go`` answers. A restart only records
  ``status.stateChangeRequests = [{action: Stop, uid: <VMI uid>}, {action: Start}]`` on the
  VM; the controller carries it out.
- **virt-controller**: a thread that keeps one ``VirtualMachineInstance`` per running VM
  (same name, ``ownerReferences`` to the VM, ``spec`` = the VM's ``spec.template.spec``,
  annotation ``kubevirt.io/vm-generation``): ``runStrategy: Always``/``RerunOnFailure`` starts
  one, ``Halted`` deletes it, a deleted VMI of an ``Always`` VM is replaced by a new one (new
  UID), a deleted VM takes its VMI with it, a restart request deletes the VMI and starts a new
  one from the *current* template. It writes the VM's ``status`` as KubeVirt does:
  ``created``, ``ready``, ``printableStatus`` (``Stopped``, ``Starting``, ``Running``),
  ``desiredGeneration``/``observedGeneration``, ``conditions`` ``Ready`` and
  ``RestartRequired`` (``"a non-live-updatable field was changed in the template spec"``:
  the template's spec differs from the running VMI's; cleared when a VMI from the current
  template starts; every template change counts, KubeVirt's ``Stage`` rollout strategy).

**virt-handler** (running the VMI on its node) is instant by default: a new VMI is ``Running``
and ``Ready`` at once. A data path (:class:`osc_gitops_sandbox.datapath.network.Datapath`) takes
that role instead (:attr:`KubeVirt.external_handler`): new VMIs stay ``Scheduled`` until it has
plugged the guest's NICs (:meth:`KubeVirt.report_running`), and it reports the guest's boot
as the VMI condition ``AgentConnected`` (:meth:`KubeVirt.report_booted`, what the QEMU guest
agent does once the guest OS is up). A VMI can be ``Running`` and ``Ready`` while its guest
still boots: KubeVirt's readiness says nothing about the guest forwarding packets; OVN's
health check does.

- **virt-launcher pods**: one per VMI, as ``pkg/virt-controller/services/template.go``
  renders it: ``virt-launcher-<vmi>-<5 random>`` in the VMI's namespace, labels
  ``kubevirt.io: virt-launcher``, ``kubevirt.io/created-by: <VMI uid>``, ``vm.kubevirt.io/name``
  and the VMI's own, annotations ``kubevirt.io/domain`` and Multus' network request
  ``k8s.v1.cni.cncf.io/networks`` (``pkg/network/multus/annotation.go``: per Multus network its
  NAD, the pod-side interface name ``pod<first 11 hex of sha256(network name)>``
  (``pkg/network/namescheme``), and the NIC's ``macAddress`` as ``mac``), a controller owner
  reference to the VMI, ``spec.nodeName`` = the VMI's node. A VMI that goes takes its pod
  along; a restarted VM's new VMI gets a new pod (new UID). **Multus** writes the pod's
  ``k8s.v1.cni.cncf.io/network-status`` once it has plugged every network (the default
  network as ``ovn-kubernetes``/``eth0``, then one entry per NAD with the interface and MAC it
  got): without a data path at once, with one by the data path's CNI (:mod:`osc_gitops_sandbox.
  datapath.guests`) after ovs-cni made the NICs. :data:`MULTUS_STATUS` switches that off (a
  Multus that never reports, to show what a missing annotation does).

Simplifications: no migrations, no ``Manual``/``Once`` subtleties beyond the answers above; a
failed guest never makes a VMI ``Failed``; the virt-launcher pod's default network is not
plugged (it gets no OVN port).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from osc_gitops_sandbox.kubeapi.kubevirt_webhook import mutate_vm
from osc_gitops_sandbox.kubeapi.placement import pinned_node
from osc_gitops_sandbox.kubeapi.server import ApiError, KubeApiServer
from osc_gitops_sandbox.lifecycle import Worker

__all__ = [
    "AGENT_CONNECTED",
    "BOOT_DELAY_ANNOTATION",
    "LAUNCHER_LABEL",
    "NETWORKS_ANNOTATION",
    "NETWORK_STATUS",
    "RESTART_REQUIRED",
    "SUBRESOURCES_GROUP",
    "VM_GENERATION",
    "KubeVirt",
    "launcher_pods_of",
    "multus_networks",
    "network_status",
    "pod_interface_name",
    "restart_path",
]

SUBRESOURCES_GROUP = "subresources.kubevirt.io"
VM_KIND = "VirtualMachine"
VMI_KIND = "VirtualMachineInstance"
VM_GENERATION = "kubevirt.io/vm-generation"
"""VMI annotation: the VM ``metadata.generation`` the instance was started from."""
RESTART_REQUIRED = "RestartRequired"
RESTART_REQUIRED_MESSAGE = "a non-live-updatable field was changed in the template spec"
AGENT_CONNECTED = "AgentConnected"
BOOT_DELAY_ANNOTATION = "sandbox.osc.io/boot-delay"
"""Seconds a VNF guest boots before it forwards (on the VM, or its template's metadata); read
by the data path, never by KubeVirt or the product (not an ``osc.io/`` key, so the reconciler
leaves it alone)."""
RUNNING_STRATEGIES = ("Always", "RerunOnFailure")
LAUNCHER_LABEL = "kubevirt.io"
CREATED_BY = "kubevirt.io/created-by"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"
DEFAULT_NETWORK = "ovn-kubernetes"
"""The name Multus reports for the cluster's default network (OVN-Kubernetes' delegate)."""
STARTING_PHASES = ("Pending", "Scheduling", "Scheduled")


def restart_path(namespace: str, name: str, action: str = "restart") -> str:
    """The URL path of ``virtctl restart|start|stop`` for one VM."""
    return f"/apis/{SUBRESOURCES_GROUP}/v1/namespaces/{namespace}/virtualmachines/{name}/{action}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_interface_name(network: str) -> str:
    """KubeVirt's pod-side interface name of a secondary network: ``pod`` + the first 11 hex
    digits of the SHA-256 of the network's name (``namescheme.GenerateHashedInterfaceName``)."""
    return "pod" + hashlib.sha256(network.encode()).hexdigest()[:11]


def multus_networks(vmi: Mapping[str, Any]) -> list[dict[str, str]]:
    """Per Multus network of a VMI: ``{network, nad, namespace, interface, mac}`` (the
    ``k8s.v1.cni.cncf.io/networks`` request KubeVirt writes on its virt-launcher pod)."""
    spec = vmi.get("spec") or {}
    namespace = (vmi.get("metadata") or {}).get("namespace", "")
    interfaces = {
        i.get("name"): i
        for i in ((spec.get("domain") or {}).get("devices") or {}).get("interfaces") or []
    }
    out = []
    for network in spec.get("networks") or []:
        multus = network.get("multus") or {}
        if not multus.get("networkName") or multus.get("default"):
            continue
        ns, _, nad = str(multus["networkName"]).rpartition("/")
        out.append({
            "network": str(network.get("name")), "nad": nad, "namespace": ns or namespace,
            "interface": pod_interface_name(str(network.get("name"))),
            "mac": str((interfaces.get(network.get("name")) or {}).get("macAddress") or ""),
        })  # fmt: skip
    return out


def network_status(vmi: Mapping[str, Any], macs: Mapping[str, str] | None = None) -> str:
    """Multus' ``network-status`` of the VMI's virt-launcher pod once every network is plugged:
    the default network, then one entry per NAD with the interface and the MAC it got
    (``macs`` by network name; default: the MAC KubeVirt requested)."""
    entries: list[dict[str, Any]] = [{
        "name": DEFAULT_NETWORK, "interface": "eth0", "ips": [], "mac": "0a:58:00:00:00:01",
        "default": True, "dns": {},
    }]  # fmt: skip
    for net in multus_networks(vmi):
        entries.append({
            "name": f"{net['namespace']}/{net['nad']}", "interface": net["interface"],
            "mac": (macs or {}).get(net["network"], net["mac"]), "dns": {},
        })  # fmt: skip
    return json.dumps(entries, indent=1)


def launcher_pods_of(server: Any, vmi: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The virt-launcher pods of one VMI (by its ``kubevirt.io/created-by`` label)."""
    meta = vmi.get("metadata") or {}
    return [
        p for p in server.objects("Pod", meta.get("namespace"))
        if (p["metadata"].get("labels") or {}).get(CREATED_BY) == meta.get("uid")
    ]  # fmt: skip


def run_strategy(vm: Mapping[str, Any]) -> str:
    """``spec.runStrategy``, else the deprecated ``spec.running`` (true = Always), else
    ``Halted``."""
    spec = vm.get("spec") or {}
    if spec.get("runStrategy"):
        return str(spec["runStrategy"])
    return "Always" if spec.get("running") else "Halted"


def template_spec(vm: Mapping[str, Any]) -> dict[str, Any]:
    return dict(((vm.get("spec") or {}).get("template") or {}).get("spec") or {})


def condition(
    kind: str, status: bool, old: list[dict[str, Any]], reason: str = "", message: str = ""
) -> dict[str, Any]:
    """A condition as KubeVirt writes it, keeping ``lastTransitionTime`` while the status
    stays the same."""
    value = "True" if status else "False"
    previous = next((c for c in old if c.get("type") == kind), None)
    since = (
        previous["lastTransitionTime"]
        if previous and previous.get("status") == value and previous.get("lastTransitionTime")
        else _now()
    )
    cond: dict[str, Any] = {
        "type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": since,
    }  # fmt: skip
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _has_condition(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


class KubeVirt:
    """virt-api's lifecycle subresources and virt-controller (see the module docstring).

    ``KubeVirt(server)`` attaches itself; its controller thread runs while the server does.
    """

    group = SUBRESOURCES_GROUP
    version = "v1"

    def __init__(self, server: KubeApiServer) -> None:
        self.server = server
        self.vm_type = server.resource_type(VM_KIND)
        self.vmi_type = server.resource_type(VMI_KIND)
        self.external_handler = False
        """Whether a virt-handler of its own (a data path) runs new VMIs; else they are
        ``Running`` at once."""
        self.multus_status = True
        """Whether Multus writes ``network-status`` on virt-launcher pods (without a data
        path: at once; with one: the data path's CNI does)."""
        self._controller = Worker("kubevirt-controller", self.reconcile)
        server.add_mutator(VM_KIND, mutate_vm)  # virt-api's mutating webhook
        server.subscribe((VM_KIND, VMI_KIND), self._changed)
        server.add_extension(self)

    # -- lifecycle (with the API server) ---------------------------------------------------
    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()

    def _changed(self, event: str, kind: str, obj: dict[str, Any]) -> None:
        self._controller.wake()

    def wait_settled(self, timeout: float = 10.0) -> None:
        """Until the controller has acted on every VM/VMI change made so far (what a test
        waits for instead of sleeping); raises what the controller last failed with."""
        if not self._controller.wait_idle(timeout):
            raise TimeoutError(f"KubeVirt's controller still busy after {timeout} s")
        error = self._controller.take_error()
        if error is not None:
            raise RuntimeError(f"KubeVirt's controller failed: {error}") from error

    # -- virt-controller ---------------------------------------------------------------------
    def reconcile(self) -> None:
        """One pass over every VM and VMI (the controller thread calls it on each change)."""
        server = self.server
        with server._lock:
            vms = {(o["metadata"]["namespace"], o["metadata"]["name"]): o
                   for o in server.objects(VM_KIND)}  # fmt: skip
            vmis = {(o["metadata"]["namespace"], o["metadata"]["name"]): o
                    for o in server.objects(VMI_KIND)}  # fmt: skip
            for key, vmi in vmis.items():  # garbage collection of orphaned instances
                owner = vms.get(key)
                refs = vmi["metadata"].get("ownerReferences") or []
                owner_uid = owner["metadata"]["uid"] if owner is not None else None
                if refs and all(r.get("uid") != owner_uid for r in refs):
                    server.delete(self.vmi_type, *key)
            for key, vm in vms.items():
                instance = vmis.get(key)
                if instance is not None and vm["metadata"]["uid"] not in {
                    r.get("uid") for r in instance["metadata"].get("ownerReferences") or []
                }:
                    instance = None  # deleted above, or never ours
                self._reconcile_vm(vm, instance)
            self._reconcile_launchers()

    def _reconcile_launchers(self) -> None:
        """One virt-launcher pod per live VMI; a pod whose VMI is gone goes too (one look at
        every pod and VMI per pass)."""
        server = self.server
        pod_type = server.resource_type("Pod")
        live = {o["metadata"]["uid"]: o for o in server.objects(VMI_KIND)}
        housed: set[str] = set()
        for pod in server.objects("Pod"):
            labels = pod["metadata"].get("labels") or {}
            if labels.get(LAUNCHER_LABEL) != "virt-launcher":
                continue
            if labels.get(CREATED_BY) not in live:
                server.delete(pod_type, pod["metadata"]["namespace"], pod["metadata"]["name"])
            else:
                housed.add(str(labels[CREATED_BY]))
        for uid, vmi in live.items():
            if uid in housed or (vmi.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            server.create(pod_type, vmi["metadata"]["namespace"], self._launcher_of(vmi))

    def _launcher_of(self, vmi: dict[str, Any]) -> dict[str, Any]:
        meta = vmi["metadata"]
        networks = multus_networks(vmi)
        annotations = {
            "kubevirt.io/domain": meta["name"],
            "kubectl.kubernetes.io/default-container": "compute",
            NETWORKS_ANNOTATION: json.dumps([
                {"name": n["nad"], "namespace": n["namespace"], "interface": n["interface"],
                 **({"mac": n["mac"]} if n["mac"] else {})}
                for n in networks
            ]),
        }  # fmt: skip
        if not self.external_handler and self.multus_status:
            annotations[NETWORK_STATUS] = network_status(vmi)
        node = pinned_node(vmi.get("spec") or {})  # where the scheduler puts it
        spec: dict[str, Any] = {
            "containers": [{"name": "compute", "image": "quay.io/kubevirt/virt-launcher"}],
            "restartPolicy": "Never",
        }
        if node:
            spec["nodeName"] = node
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "generateName": f"virt-launcher-{meta['name']}-",
                "labels": {
                    **dict(meta.get("labels") or {}), LAUNCHER_LABEL: "virt-launcher",
                    CREATED_BY: meta["uid"], "vm.kubevirt.io/name": meta["name"],
                },
                "annotations": annotations,
                "ownerReferences": [{
                    "apiVersion": "kubevirt.io/v1", "kind": VMI_KIND, "name": meta["name"],
                    "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True,
                }],
            },
            "spec": spec,
            # With a data path its CNI (Multus + ovs-cni) runs first: Running once plugged.
            "status": {"phase": "Pending" if self.external_handler else "Running"},
        }  # fmt: skip

    def _reconcile_vm(self, vm: dict[str, Any], vmi: dict[str, Any] | None) -> None:
        server = self.server
        namespace, name = vm["metadata"]["namespace"], vm["metadata"]["name"]
        status = dict(vm.get("status") or {})
        requests = list(status.get("stateChangeRequests") or [])
        start_requested = False
        if requests and requests[0].get("action") == "Stop":
            stop = requests.pop(0)
            if vmi is not None and stop.get("uid") in (None, vmi["metadata"]["uid"]):
                server.delete(self.vmi_type, namespace, name)
                vmi = None
        if requests and requests[0].get("action") == "Start":
            requests.pop(0)
            start_requested = True
        strategy = run_strategy(vm)
        if vmi is not None and strategy == "Halted":
            server.delete(self.vmi_type, namespace, name)
            vmi = None
        elif vmi is None and (strategy in RUNNING_STRATEGIES or start_requested):
            vmi = server.create(self.vmi_type, namespace, self._instance_of(vm))
        new_status = self._vm_status(vm, vmi, status, requests)
        if new_status != (vm.get("status") or {}):
            server.replace_status(self.vm_type, namespace, name, new_status)

    def _instance_of(self, vm: dict[str, Any]) -> dict[str, Any]:
        """A new VMI for ``vm``: its template now, the VM's generation, owned by the VM."""
        meta = vm["metadata"]
        template = (vm.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        spec = copy.deepcopy(template_spec(vm))
        node = pinned_node(spec)
        phase = "Scheduled" if self.external_handler else "Running"
        status: dict[str, Any] = {"phase": phase, "conditions": []}
        if node:
            status["nodeName"] = node
        if phase == "Running":
            status["conditions"] = [condition("Ready", True, [])]
        return {
            "apiVersion": "kubevirt.io/v1", "kind": VMI_KIND,
            "metadata": {
                "name": meta["name"],
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": {**dict(tmeta.get("annotations") or {}),
                                VM_GENERATION: str(meta.get("generation", 1))},
                "ownerReferences": [{
                    "apiVersion": "kubevirt.io/v1", "kind": VM_KIND, "name": meta["name"],
                    "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True,
                }],
            },
            "spec": spec,
            "status": status,
        }  # fmt: skip

    def _vm_status(
        self, vm: dict[str, Any], vmi: dict[str, Any] | None, old: dict[str, Any],
        requests: list[dict[str, Any]],
    ) -> dict[str, Any]:  # fmt: skip
        old_conditions = list(old.get("conditions") or [])
        generation = int(vm["metadata"].get("generation", 1))
        status: dict[str, Any] = {"created": vmi is not None, "ready": False}
        if vmi is None:
            status["printableStatus"] = "Stopped"
            conditions = [condition("Ready", False, old_conditions, "VMINotExists",
                                    "VMI does not exist")]  # fmt: skip
            status["observedGeneration"] = generation
        else:
            phase = (vmi.get("status") or {}).get("phase", "Pending")
            ready = phase == "Running" and _has_condition(vmi, "Ready")
            status["ready"] = ready
            status["printableStatus"] = "Starting" if phase in STARTING_PHASES else phase
            conditions = [condition("Ready", ready, old_conditions)]
            stale = template_spec(vm) != (vmi.get("spec") or {})
            if stale:
                conditions.append(condition(RESTART_REQUIRED, True, old_conditions, "",
                                            RESTART_REQUIRED_MESSAGE))  # fmt: skip
                started_from = int(vmi["metadata"].get("annotations", {}).get(VM_GENERATION, 1))
                status["observedGeneration"] = started_from
            else:
                status["observedGeneration"] = generation
        status["desiredGeneration"] = generation
        status["conditions"] = conditions
        if requests:
            status["stateChangeRequests"] = requests
        return status

    # -- virt-handler reports (the data path) ------------------------------------------------
    def report_running(self, namespace: str, name: str, uid: str, interfaces: list[dict[str, Any]]
                       ) -> None:  # fmt: skip
        """The VMI ``uid`` runs on its node: phase ``Running``, ``Ready``, its NICs."""
        self._update_vmi(namespace, name, uid, lambda s: {
            **s, "phase": "Running", "interfaces": interfaces,
            "conditions": [
                *(c for c in s.get("conditions") or [] if c.get("type") != "Ready"),
                condition("Ready", True, s.get("conditions") or []),
            ],
        })  # fmt: skip

    def report_booted(self, namespace: str, name: str, uid: str) -> None:
        """The guest of VMI ``uid`` finished booting: condition ``AgentConnected``."""
        self._update_vmi(namespace, name, uid, lambda s: {
            **s, "conditions": [
                *(c for c in s.get("conditions") or [] if c.get("type") != AGENT_CONNECTED),
                condition(AGENT_CONNECTED, True, s.get("conditions") or []),
            ],
        })  # fmt: skip

    def _update_vmi(self, namespace: str, name: str, uid: str, change: Any) -> None:
        with self.server._lock:
            vmi = self.server.get_object(VMI_KIND, namespace, name)
            if vmi is None or vmi["metadata"]["uid"] != uid:
                return  # replaced meanwhile: the report is about an instance that is gone
            self.server.replace_status(
                self.vmi_type, namespace, name, change(dict(vmi.get("status") or {}))
            )

    # -- virt-api ----------------------------------------------------------------------------
    def resources(self) -> list[dict[str, Any]]:
        return [
            {"name": f"virtualmachines/{action}", "singularName": "", "namespaced": True,
             "kind": "", "verbs": ["update"]}
            for action in ("restart", "start", "stop")
        ]  # fmt: skip

    def handle(
        self, method: str, namespace: str | None, rest: list[str], body: Any
    ) -> tuple[int, Any]:
        if (
            namespace is None or len(rest) != 3 or rest[0] != "virtualmachines"
            or rest[2] not in ("restart", "start", "stop")
        ):  # fmt: skip
            raise ApiError(404, f"the server could not find the requested resource ({rest})")
        if method != "PUT":
            raise ApiError(405, f"method {method} is not supported", reason="MethodNotAllowed")
        name, action = rest[1], rest[2]
        options = body if isinstance(body, dict) else {}
        dry_run = bool(options.get("dryRun"))
        if action == "restart":
            grace = options.get("gracePeriodSeconds")
            if grace is not None and int(grace) > 0:
                raise ApiError(400, "For force restart, only gracePeriod=0 is supported for now")
            if grace is not None and int(grace) < 0:
                raise ApiError(400, "gracePeriod has to be greater or equal to 0")
        with self.server._lock:
            vm = self.server.get_object(VM_KIND, namespace, name)
            if vm is None:
                raise ApiError(
                    404, f'virtualmachines.kubevirt.io "{name}" not found',
                    details={"name": name, "group": "kubevirt.io", "kind": "virtualmachines"},
                )  # fmt: skip
            vmi = self.server.get_object(VMI_KIND, namespace, name)
            strategy = run_strategy(vm)
            if action == "restart":
                self._restart(vm, vmi, strategy, dry_run)
            elif action == "start":
                self._start_or_stop(vm, strategy, "Always", dry_run)
            else:
                self._start_or_stop(vm, strategy, "Halted", dry_run)
        return 202, None

    @staticmethod
    def _conflict(name: str, why: str) -> ApiError:
        return ApiError(
            409, f'Operation cannot be fulfilled on virtualmachine.kubevirt.io "{name}": {why}',
            details={"name": name, "group": "kubevirt.io", "kind": "virtualmachine"},
        )  # fmt: skip

    def _restart(
        self, vm: dict[str, Any], vmi: dict[str, Any] | None, strategy: str, dry_run: bool
    ) -> None:
        meta = vm["metadata"]
        if strategy in ("Halted", "Once"):
            raise self._conflict(
                meta["name"], f"RunStategy {strategy} does not support manual restart requests"
            )  # (sic: KubeVirt's spelling)
        if vmi is None:
            raise self._conflict(meta["name"], "VM is not running: Halted")
        status = dict(vm.get("status") or {})
        if status.get("stateChangeRequests"):
            raise ApiError(
                500,
                "Internal error occurred: unable to complete request: stop/start already underway",
            )
        if dry_run:
            return
        status["stateChangeRequests"] = [
            {"action": "Stop", "uid": vmi["metadata"]["uid"]}, {"action": "Start"},
        ]  # fmt: skip
        self.server.replace_status(self.vm_type, meta["namespace"], meta["name"], status)

    def _start_or_stop(self, vm: dict[str, Any], strategy: str, want: str, dry_run: bool) -> None:
        """``virtctl start`` on a halted VM / ``stop`` on an ``Always`` one: its runStrategy."""
        meta = vm["metadata"]
        if want == "Always" and strategy != "Halted":
            raise self._conflict(meta["name"], f"{strategy} does not support manual start requests")
        if want == "Halted" and strategy == "Halted":
            raise self._conflict(meta["name"], "VM is not running")
        if dry_run:
            return
        spec = {**vm.get("spec", {}), "runStrategy": want}
        spec.pop("running", None)
        self.server.update(self.vm_type, meta["namespace"], meta["name"], {**vm, "spec": spec})
