"""One setup for the packet tests, ``osc-gitops demo --datapath`` and the data-path benchmark.

A :class:`World` is a two-node sandbox cluster (real NB/SB/``ovn-northd``, the Kubernetes API
emulator) with a real data path (:class:`~osc_gitops_sandbox.datapath.network.Datapath`), four pods
and a manifest folder, on one of two OVN versions (:data:`OVN_VERSIONS`):

- ``26.03``: OVN 26.03 + OVS 4.0 from the sid root, the product's default flags
  (``network-function`` steering); VNF guests bridge their two NICs;
- ``23.03``: the host's Debian OVN, ``--steering router-policy``; VNF guests route.

The reconciler is driven the way a user drives it: either ``osc-gitops apply`` (the CLI's
``main`` in-process, :class:`CliApply`: what the tests use, so they cover the command and its
flags) or the library a long-running process uses (:func:`reconciler.engine.pipeline.reconcile`
with adapters connected once, :class:`LibraryApply`: the demo, and the benchmark's "loop"
mode). Either way the world then plays KubeVirt (:meth:`Datapath.sync_vnfs`) and waits until
ovn-controller installed what apply committed.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.distributions import HOST, SID
from osc_gitops_sandbox.ovn.processes import seconds_until
from reconciler.cli.common import DEMO_OVN_VERSIONS
from reconciler.errors import UserError

__all__ = [
    "DEFAULT_OVN",
    "NAMESPACE",
    "NODES",
    "OVN_VERSIONS",
    "PODS",
    "ROUTED_TTL",
    "ROUTER_VNF_TTL",
    "SAME_SWITCH_TTL",
    "SURICATA_IMAGE",
    "TOPOLOGIES",
    "VNF_NAMESPACE",
    "Applier",
    "CliApply",
    "LibraryApply",
    "OvnVersion",
    "World",
    "ZoneApply",
    "binding",
    "node_object",
    "security_group",
    "vnf_deployment",
    "world",
]

NODES = {"node-1": "10.244.1.0/24", "node-2": "10.244.2.0/24"}
PODS = {
    # name: node. The tests label some of them (app=...); none is labelled at the start.
    "web-a": "node-1",
    "other-b": "node-1",
    "client-c": "node-2",
    "client-d": "node-2",
}
NAMESPACE = "shop"
VNF_NAMESPACE = "osc-vnfs"

ROUTED_TTL = 63
"""TTL of an echo reply between pods on different nodes: one hop (``ovn_cluster_router``). A
bridging VNF (Network Function) does not change it."""
SAME_SWITCH_TTL = 64
"""... between pods on one node switch (no router)."""
ROUTER_VNF_TTL = 62
"""... between nodes through a VNF guest that routes (router-policy): one hop more."""


@dataclass(frozen=True)
class OvnVersion:
    """Which OVN distribution a world runs and the steering flag ``apply`` gets there."""

    distribution: str
    steering: str | None
    """``None``: the product's default (``network-function`` when the NB has it)."""


OVN_VERSIONS: Mapping[str, OvnVersion] = dict(
    zip(
        DEMO_OVN_VERSIONS,  # the product's one list of them (its --ovn choices), default first
        (
            OvnVersion(SID, None),  # OVN 26.03 + OVS 4.0 from the sid root
            OvnVersion(HOST, "router-policy"),  # the host's Debian bookworm packages
        ),
        strict=True,
    )
)
DEFAULT_OVN = DEMO_OVN_VERSIONS[0]


# ---------------------------------------------------------------------------------------------
# manifests


def security_group(name: str = "web", labels: Sequence[str] = ("app=web",)) -> str:
    terms = ", ".join(labels)
    return (
        "apiVersion: osc.io/v1alpha1\nkind: SecurityGroup\n"
        f"metadata: {{name: {name}}}\nspec:\n  labels: [{terms}]\n"
    )


def vnf_deployment(
    name: str = "firewall", node: str | None = None, *, image: str | None = None,
    security_manager: str | None = None,
) -> str:  # fmt: skip
    """A VnfDeployment on every node, or (``node``) on that node only. ``image``: default
    ``quay.io/example/vnf-<name>:1.4.2`` (a bridge guest; :data:`SURICATA_IMAGE` boots
    Suricata); ``security_manager``: its ``securityManager.url``."""
    selector = f"  nodeSelector: {{kubernetes.io/hostname: {node}}}\n" if node else ""
    manager = f"  securityManager: {{url: '{security_manager}'}}\n" if security_manager else ""
    return (
        "apiVersion: osc.io/v1alpha1\nkind: VnfDeployment\n"
        f"metadata: {{name: {name}}}\nspec:\n  namespace: {VNF_NAMESPACE}\n"
        f"  image: {image or f'quay.io/example/vnf-{name}:1.4.2'}\n{selector}{manager}"
    )


SURICATA_IMAGE = "quay.io/example/vnf-suricata:8.0.7"
"""A VnfDeployment image the data path boots as a Suricata guest (Suricata 8 inline between
the NICs, :mod:`osc_gitops_sandbox.datapath.suricata`): an image whose name says suricata."""


def binding(
    name: str = "web-firewall", *, group: str = "web", vnf: str = "firewall", order: int = 10,
    redirection: str = "both", failure_policy: str = "fail-close",
    protocol: str | None = None, ports: Sequence[int] = (),
) -> str:  # fmt: skip
    traffic = ""
    if protocol:
        traffic = f"  traffic: {{protocol: {protocol}"
        traffic += f", ports: [{', '.join(str(p) for p in ports)}]}}\n" if ports else "}\n"
    return (
        "apiVersion: osc.io/v1alpha1\nkind: Binding\n"
        f"metadata: {{name: {name}}}\nspec:\n  securityGroup: {group}\n  vnf: {vnf}\n"
        f"  order: {order}\n  redirection: {redirection}\n  failurePolicy: {failure_policy}\n"
        f"{traffic}"
    )


DEFAULT_MANIFESTS = (security_group(), vnf_deployment(), binding())
"""SecurityGroup ``web`` (``app=web``), VnfDeployment ``firewall`` on both nodes, Binding
``web-firewall`` (``both``, ``fail-close``)."""


def node_object(name: str, subnet: str) -> dict[str, Any]:
    """A Node as OVN-Kubernetes annotates it (``k8s.ovn.org/node-subnets``)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": {"k8s.ovn.org/node-subnets": json.dumps({"default": [subnet]})},
        },
        "spec": {"podCIDR": subnet},
    }


# ---------------------------------------------------------------------------------------------
# two ways to run apply


class Applier(Protocol):
    """Runs one apply of a manifest folder; returns the applied plan as text."""

    steering: str | None
    """The ``--steering`` it applies with (``None``: the product's default)."""

    def apply(self, manifests: Path) -> str: ...

    def command(self, manifests: Path) -> list[str]:
        """The ``osc-gitops`` command line that does the same (for narration)."""
        ...

    def close(self) -> None: ...


def run_cli(args: Sequence[str]) -> tuple[int, str, str]:
    """``osc-gitops ARGS`` through the CLI's ``main``, in-process: (exit code, stdout,
    stderr)."""
    from reconciler.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue().strip()


@dataclass
class CliApply:
    """``osc-gitops apply`` through the CLI's ``main``, in-process: a fresh connection to both
    APIs per apply, exactly what the command does."""

    nb_remote: str
    kubeconfig: str
    steering: str | None

    def command(self, manifests: Path) -> list[str]:
        args = ["apply", str(manifests), "--ovn-nb", self.nb_remote]
        # as the deployment sets OSC_VNF_NAMESPACES: the VMs of VNFs removed from the
        # manifests are pruned even when no VnfDeployment names their namespace any more
        args += ["--kubeconfig", self.kubeconfig, "--vnf-namespaces", VNF_NAMESPACE]
        return args + (["--steering", self.steering] if self.steering else [])

    def apply(self, manifests: Path) -> str:
        code, out, err = run_cli(self.command(manifests))
        if code != 0:
            raise UserError(f"osc-gitops apply failed ({code}): {err}")
        return out

    def close(self) -> None:
        pass


@dataclass
class LibraryApply:
    """The library a long-running reconciler uses: adapters connected once (the NB mirrored by
    the IDL and kept up to date), :func:`reconciler.engine.pipeline.reconcile` per apply, and
    the security managers told beside it by one outbox (``reconciler.engine.notifications``:
    delivered by its own threads after the apply returned, as ``run`` does)."""

    nb_remote: str
    kubeconfig: str
    steering: str | None
    _adapters: tuple[Any, Any] | None = field(default=None, init=False, repr=False)
    outbox: Any = field(default=None, init=False, repr=False)

    def command(self, manifests: Path) -> list[str]:
        return CliApply(self.nb_remote, self.kubeconfig, self.steering).command(manifests)

    def adapters(self) -> tuple[Any, Any]:
        """``(KubeCluster, OvnNorthbound)``, connected on first use."""
        if self._adapters is None:
            from reconciler.adapters.kube.client import KubeCluster, KubeSettings
            from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings

            kube = KubeCluster(KubeSettings(kubeconfig=self.kubeconfig))
            self._adapters = (kube, OvnNorthbound.connect(OvnSettings(remote=self.nb_remote)))
        return self._adapters

    def apply(self, manifests: Path) -> str:
        from reconciler.core.compiling.compile import CompileOptions
        from reconciler.engine.pipeline import reconcile
        from reconciler.manifests.load import load_path
        from reconciler.render import render

        kube, ovn = self.adapters()
        if self.outbox is None:
            from reconciler.adapters.notify import JsonPoster
            from reconciler.engine.notifications import NotifySettings, Outbox

            settings = NotifySettings(timeout=2.0, debounce=0.02, debounce_max=0.2)
            self.outbox = Outbox(JsonPoster(settings.timeout), settings)
        options = CompileOptions(steering=self.steering, vnf_namespaces=(VNF_NAMESPACE,))
        report = reconcile(load_path(manifests), kube, ovn, options, notices=self.outbox)
        return render(report.plan)

    def close(self) -> None:
        if self.outbox is not None:
            self.outbox.close()
            self.outbox = None
        if self._adapters is not None:
            self._adapters[1].close()
            self._adapters = None


@dataclass
class ZoneApply:
    """Interconnect (one NB per node), as the README runs it: ``osc-gitops apply
    --kubernetes-only`` (the central owner: VMs and NADs), then per node ``osc-gitops apply
    --node NODE --ovn-nb <its zone's NB>`` (the node agents), each through the CLI's ``main``
    in-process."""

    nb_remotes: dict[str, str]
    """``{node: its zone's NB}``"""
    kubeconfig: str
    steering: str | None

    def commands(self, manifests: Path) -> list[list[str]]:
        common = ["--kubeconfig", self.kubeconfig]
        common += ["--steering", self.steering] if self.steering else []
        central = ["apply", str(manifests), "--kubernetes-only", "--kubeconfig", self.kubeconfig,
                   "--vnf-namespaces", VNF_NAMESPACE]  # fmt: skip
        return [central] + [
            ["apply", str(manifests), "--node", node, "--ovn-nb", remote, *common]
            for node, remote in self.nb_remotes.items()
        ]

    def command(self, manifests: Path) -> list[str]:
        """The first of :meth:`commands` (the central owner's)."""
        return self.commands(manifests)[0]

    def apply(self, manifests: Path) -> str:
        outputs = []
        for args in self.commands(manifests):
            code, out, err = run_cli(args)
            if code != 0:
                raise UserError(f"osc-gitops {' '.join(args[2:4])} failed ({code}): {err}")
            outputs.append(out)
        return "\n".join(outputs)

    def run_once(
        self, manifests: Path, node: str | None, revision: str, *extra: str
    ) -> tuple[int, str, str]:
        """One pass of the deployed loop (``osc-gitops run --once``) of ``node``'s agent (the
        central owner for ``None``), publishing its status Lease in ``osc-gitops``; ``extra``:
        more arguments of an agent's (e.g. ``--ovn-sb``)."""
        args = ["run", str(manifests), "--once", "--revision", revision,
                "--lease-namespace", "osc-gitops", "--log-format", "text",
                "--kubeconfig", self.kubeconfig]  # fmt: skip
        if node is None:
            return run_cli([*args, "--kubernetes-only"])
        steering = ["--steering", self.steering] if self.steering else []
        return run_cli(
            [*args, "--node", node, "--ovn-nb", self.nb_remotes[node], *steering, *extra]
        )

    def status(self) -> tuple[int, dict[str, Any]]:
        """``osc-gitops status --all-nodes -o json``: (exit code, report)."""
        code, out, err = run_cli(
            ["status", "--all-nodes", "--kubeconfig", self.kubeconfig, "-o", "json"]
        )
        return code, json.loads(out) if out.strip() else {"error": err}

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# the world


@dataclass
class World:
    """The sandbox cluster, its data path, the manifest folder and how apply runs."""

    cluster: Any
    """``osc_gitops_sandbox.ovn.cluster.SandboxCluster`` (one NB) or ``zones.ZonedCluster``"""
    dp: Any
    """``osc_gitops_sandbox.datapath.network.Datapath``"""
    manifests: Path
    applier: Applier
    ovn_version: str = DEFAULT_OVN
    outputs: list[str] = field(default_factory=list)
    """The plan text of every apply so far."""

    @property
    def network_function(self) -> bool:
        return self.cluster.network_function is True

    @property
    def apply_args(self) -> list[str]:
        """``osc-gitops`` arguments of the apply this world runs."""
        return self.applier.command(self.manifests)

    def pod(self, name: str) -> Any:
        """The plugged pod ``name`` (an :class:`~osc_gitops_sandbox.datapath.netns.Endpoint`)."""
        return self.dp.pods[f"{NAMESPACE}_{name}"]

    def vnf(self, node: str, name: str = "firewall") -> Any:
        """The running guest of VnfDeployment ``name`` on ``node``."""
        return self.dp.vnf_on(node, name)

    def write_manifests(self, *documents: str, binding: bool = True) -> None:
        """The git checkout: ``documents`` (default :data:`DEFAULT_MANIFESTS`, without the
        Binding when ``binding`` is false) in one file, replacing what was there."""
        docs = documents or (DEFAULT_MANIFESTS if binding else DEFAULT_MANIFESTS[:2])
        for old in self.manifests.glob("*.yaml"):
            old.unlink()
        (self.manifests / "manifests.yaml").write_text("---\n".join(docs))

    def apply(self, *, wait: bool = True) -> str:
        """Apply the manifests, then play KubeVirt (start/stop VNF guests).

        ``wait``: also block until OVN counts every Network Function healthy again (a guest
        that just started is dead to OVN until its first health probe passes, and a
        ``fail-close`` group drops meanwhile) and ovn-controller installed the flows for all of
        it (:meth:`Datapath.wait_hv`), so a probe right after sees the new steering. Pass
        ``wait=False`` to apply while a VNF is meant to stay dead.
        Returns the applied plan as text.
        """
        text = self.applier.apply(self.manifests)
        self.outputs.append(text)
        self.dp.sync_vnfs()
        if wait:
            self.wait_all_active()
            self.switch_on(text)
            self.dp.wait_hv()
        return text

    def switch_on(self, text: str) -> str | None:
        """Apply again when ``text`` (a plan just applied) held steering until OVN reported its
        VNF instance healthy (issue 22), as ``apply --wait`` or the loop's next pass does; the
        plan text of that apply, or ``None`` when nothing was held."""
        if "~ held:" not in text:
            return None
        again = self.applier.apply(self.manifests)
        self.outputs.append(again)
        return again

    def restart_vm(self, node: str, name: str = "firewall") -> None:
        """``virtctl restart`` of VnfDeployment ``name``'s VM on ``node`` (KubeVirt's
        subresource): its guest goes down and boots again."""
        self.cluster.restart_vm(VNF_NAMESPACE, f"{name}-{node}")

    def move_pod(self, pod: str, node: str) -> Any:
        """The pod rescheduled on ``node`` (deleted and recreated: new UID and address, its
        port on the other node's switch, in zone mode in the other zone) and plugged there."""
        self.dp.unplug_pod(NAMESPACE, pod)
        self.cluster.move_pod(NAMESPACE, pod, node)
        return self.dp.plug_pods([(NAMESPACE, pod)])[f"{NAMESPACE}_{pod}"]

    @contextlib.contextmanager
    def service(
        self, name: str, cluster_ip: str, port: int, backends: Sequence[str], target_port: int
    ) -> Iterator[None]:
        """A ClusterIP Service as OVN-Kubernetes writes it (``osc_gitops_sandbox.ovn.services``:
        its load balancer in ``clusterLBGroup`` on every node switch, in every NB), the
        backends being pods by name; removed again after, group and all."""
        from osc_gitops_sandbox.ovn.services import add_cluster_ip, remove_service

        endpoints = [(self.pod(b).ip, target_port) for b in backends]
        for stack in self.dp.stacks:
            switches = self._node_switches(stack)
            add_cluster_ip(stack.nb_remote, switches, NAMESPACE, name, cluster_ip, port, endpoints)
        try:
            self.dp.wait_hv()
            yield
        finally:
            for stack in self.dp.stacks:
                remove_service(stack.nb_remote, NAMESPACE, name,
                               detach_from=self._node_switches(stack))  # fmt: skip
            self.dp.wait_hv()

    def _node_switches(self, stack: Any) -> list[str]:
        """The node switches an NB holds (both in one NB, its own node's in a zone's)."""
        if not self.dp.zoned:
            return list(NODES)
        return [n for n in NODES if self.dp.stack_of(n) is stack]

    def label(self, pod: str, value: str | None, key: str = "app") -> None:
        """``kubectl label pod <pod> <key>=<value>`` (``None``: ``<key>-``) through the API."""
        self.cluster.label_pod(NAMESPACE, pod, {key: value})

    # -- what OVN thinks of the VNFs (Network Function only) -----------------------------------
    def active_functions(self) -> dict[str, str | None]:
        """Each Network_Function_Group's active function as northd wrote it
        (``network_function_active``): group name -> function name, ``None`` when none is
        active (all unhealthy: the group's ``fallback`` applies)."""
        if not self.network_function:
            return {}
        active: dict[str, str | None] = {}
        for stack in self.dp.stacks:  # one NB, or one per zone
            nfs, groups = ovsdb_rpc.transact(stack.nb_remote, "OVN_Northbound", [
                {"op": "select", "table": "Network_Function", "where": [],
                 "columns": ["_uuid", "name"]},
                {"op": "select", "table": "Network_Function_Group", "where": [],
                 "columns": ["name", "network_function_active"]},
            ])  # fmt: skip
            names = {ovsdb_rpc.from_atom(r["_uuid"]): r["name"] for r in nfs["rows"]}
            for row in groups["rows"]:
                uuid = ovsdb_rpc.from_atom(row["network_function_active"])
                active[row["name"]] = names.get(uuid) if isinstance(uuid, str) else None
        return active

    def health_checked(self) -> bool:
        """Whether any Network_Function has a health check (else OVN counts every function
        as healthy and the failure policy never acts)."""
        if not self.network_function:
            return False
        rows = [
            row for stack in self.dp.stacks
            for row in ovsdb_rpc.transact(stack.nb_remote, "OVN_Northbound", [
                {"op": "select", "table": "Network_Function", "where": [],
                 "columns": ["health_check"]},
            ])[0]["rows"]
        ]  # fmt: skip
        return any(ovsdb_rpc.from_atom(r["health_check"]) not in ([], None) for r in rows)

    def wait_all_active(self, timeout: float = 30.0) -> float:
        """Until every Network_Function_Group has an active function (health checks passed);
        returns the seconds it took."""
        return seconds_until(
            lambda: all(v is not None for v in self.active_functions().values()), timeout,
            late=lambda: UserError(
                f"Network_Function_Groups without an active function after {timeout} s: "
                f"{self.active_functions()}"
            ),
        )  # fmt: skip

    def reset(self) -> None:
        """Baseline: the default manifests, nobody labelled, every VNF guest running and
        forwarding (and, with health checks, seen healthy by OVN again), all of it applied and
        installed on the chassis."""
        self.write_manifests()
        for name in PODS:
            self.label(name, None)
        text = self.apply(wait=False)
        for vnf in self.dp.vnfs.values():
            self.dp.set_forwarding(vnf, True)
        self.wait_all_active()
        self.switch_on(text)
        self.dp.wait_hv()

    def close(self) -> None:
        self.applier.close()


TOPOLOGIES = ("single", "central", "zones")
"""``single``: one chassis plays both nodes (no tunnel); ``central``: one NB/SB/northd, a
chassis per node (Geneve between them); ``zones``: OVN-Kubernetes interconnect, one zone (NB, SB,
northd, chassis) per node, the transit switch between them."""


@contextlib.contextmanager
def world(
    ovn: str = DEFAULT_OVN, *, via: str = "cli", steering: str | None = None,
    workdir: str | Path | None = None, boot_delay: float = 0.0, topology: str = "single",
    ovs_cni: str | None = None, binder: bool | None = None,
) -> Iterator[World]:  # fmt: skip
    """Start the two-node sandbox + data path of OVN ``ovn`` (see :data:`OVN_VERSIONS`), plug
    every pod, write :data:`DEFAULT_MANIFESTS` (not applied yet); tear it all down after.

    ``via``: ``"cli"`` (:class:`CliApply`; :class:`ZoneApply` for zones) or ``"library"``
    (:class:`LibraryApply`, one NB only).
    ``steering``: the ``--steering`` to apply with instead of the version's default.
    ``boot_delay``: seconds a new VNF guest boots before it forwards (``Datapath.boot_delay``;
    a VM's ``sandbox.osc.io/boot-delay`` annotation wins).
    ``topology``: one of :data:`TOPOLOGIES`.
    ``ovs_cni``: how the played ovs-cni finds a VNF NIC's OVN port (``v0.39.0``, the released
    one, by default: not at all; ``main``: the NAD's ``args.cni.ovnPort``); ``binder``: whether
    the product's node binder runs on every node (default: yes). See
    :class:`~osc_gitops_sandbox.datapath.network.Datapath`."""
    from osc_gitops_sandbox.datapath.network import Datapath, datapath_unavailable_reason
    from osc_gitops_sandbox.ovn.cluster import SandboxCluster
    from osc_gitops_sandbox.ovn.zones import ZonedCluster

    if ovn not in OVN_VERSIONS:
        raise UserError(f"unknown OVN version {ovn!r}: one of {', '.join(OVN_VERSIONS)}")
    if via not in ("cli", "library") or (via == "library" and topology == "zones"):
        raise ValueError(f"via={via!r}: 'cli' or (one NB only) 'library'")
    if topology not in TOPOLOGIES:
        raise ValueError(f"topology={topology!r}: one of {', '.join(TOPOLOGIES)}")
    version = OVN_VERSIONS[ovn]
    reason = datapath_unavailable_reason(version.distribution)
    if reason:
        raise UserError(f"the data path on OVN {ovn} cannot run here: {reason}")
    with contextlib.ExitStack() as stack:
        root = Path(workdir) if workdir else Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="osc-dpw-"))
        )  # fmt: skip
        manifests = root / "manifests"
        manifests.mkdir(parents=True, exist_ok=True)
        namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                      for ns in (NAMESPACE, VNF_NAMESPACE, "osc-gitops", "osc-gitops-agents")
                      ]  # fmt: skip
        nodes = [node_object(n, s) for n, s in NODES.items()]
        cluster: Any
        if topology == "zones":
            cluster = stack.enter_context(
                ZonedCluster(root / "z", distribution=version.distribution, northd=True)
            )
            cluster.seed(nodes, [], namespaces)
        else:
            cluster = stack.enter_context(
                SandboxCluster(root / "sandbox", distribution=version.distribution)
            )
            cluster.seed(nodes, [], namespaces)
        for name, node in PODS.items():
            cluster.add_pod(NAMESPACE, name, node, {"tier": "shop"})
        dp = stack.enter_context(Datapath(
            cluster, root / "dp", boot_delay=boot_delay,
            chassis_per_node=topology != "single", ovs_cni=ovs_cni, binder=binder,
        ))  # fmt: skip
        dp.plug_pods()
        chosen = steering or version.steering
        applier: Applier
        if topology == "zones":
            applier = ZoneApply(cluster.nb_remotes, cluster.kubeconfig, chosen)
        elif via == "library":
            applier = LibraryApply(cluster.nb_remote, cluster.kubeconfig, chosen)
        else:
            applier = CliApply(cluster.nb_remote, cluster.kubeconfig, chosen)
        the_world = World(cluster, dp, manifests, applier, ovn)
        stack.callback(the_world.close)
        the_world.write_manifests()
        yield the_world
