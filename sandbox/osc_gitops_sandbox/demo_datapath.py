"""``osc-gitops demo --datapath``: real packets through the VNF, on this machine.

The NB-rows demo (``osc_gitops_sandbox.demo``) shows what the reconciler writes; this one shows what
the rows *do*. It builds a two-node sandbox (real ``ovsdb-server``/``ovn-northd``, the Kubernetes
API emulator), adds a real data path (OVS userspace datapath + ``ovn-controller``, pods and VNF
guests as network namespaces, see ``osc_gitops_sandbox.datapath``), and drives the reconciler
only through ``osc-gitops apply``. Steering is ``router-policy``: this Debian's OVN (23.03)
has no Network Function tables.

:class:`World` and :func:`world` are shared by the data-path tests and
``bench/datapath_latency.py``, so all three exercise the same setup.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.errors import UserError

NODES = {"node-1": "10.244.1.0/24", "node-2": "10.244.2.0/24"}
PODS = {
    # name: node. Only "web-a" is ever labelled app=web (the SecurityGroup below).
    "web-a": "node-1",
    "other-b": "node-1",
    "client-c": "node-2",
    "client-d": "node-2",
}
NAMESPACE = "shop"
VNF_NAMESPACE = "osc-vnfs"

SECURITY_GROUP = """\
apiVersion: osc.io/v1alpha1
kind: SecurityGroup
metadata: {name: web}
spec:
  labels: [app=web]
"""
VNF = """\
apiVersion: osc.io/v1alpha1
kind: VnfDeployment
metadata: {name: firewall}
spec:
  namespace: osc-vnfs
  image: quay.io/example/vnf-firewall:1.4.2
"""
BINDING = """\
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: web-firewall}
spec:
  securityGroup: web
  vnf: firewall
  order: 10
  redirection: both
  failurePolicy: fail-close
"""

DIRECT_TTL = 63
"""TTL of an echo reply between pods on different nodes: one hop (``ovn_cluster_router``)."""
VIA_VNF_TTL = 62
"""... and through one VNF guest, which routes the packet on (one more hop)."""


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


@dataclass
class World:
    """The sandbox cluster, its data path and the manifest folder ``osc-gitops`` applies."""

    cluster: Any
    """``osc_gitops_sandbox.cluster.SandboxCluster``"""
    dp: Any
    """``osc_gitops_sandbox.datapath.Datapath``"""
    manifests: Path
    outputs: list[str] = field(default_factory=list)
    """stdout of every ``osc-gitops apply`` run so far (the rendered plan)."""

    def pod(self, name: str) -> Any:
        return self.dp.pods[f"{NAMESPACE}_{name}"]

    def vnf(self, node: str) -> Any:
        return self.dp.vnf_on(node, "firewall")

    def write_manifests(self, *, binding: bool = True) -> None:
        """The git checkout: a SecurityGroup, a VnfDeployment and (optionally) the Binding."""
        (self.manifests / "groups.yaml").write_text(SECURITY_GROUP)
        (self.manifests / "vnfs.yaml").write_text(VNF)
        path = self.manifests / "bindings.yaml"
        if binding:
            path.write_text(BINDING)
        else:
            path.unlink(missing_ok=True)

    @property
    def apply_args(self) -> list[str]:
        return [
            "apply", str(self.manifests), "--ovn-nb", self.cluster.nb_remote,
            "--kubeconfig", self.cluster.kubeconfig, "--steering", "router-policy",
        ]  # fmt: skip

    def apply(self, *, wait: bool = True) -> str:
        """``osc-gitops apply`` in-process, then play KubeVirt (start/stop VNF guests).

        ``wait``: also block until ovn-controller installed the flows for everything apply
        committed (``ovn-nbctl --wait=hv sync``), so a probe right after sees the new steering.
        Returns apply's stdout (the plan it applied).
        """
        from reconciler.cli.app import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(self.apply_args)
        if code != 0:
            raise UserError(f"osc-gitops apply failed ({code}): {err.getvalue().strip()}")
        self.outputs.append(out.getvalue())
        self.dp.sync_vnfs()
        if wait:
            self.dp.wait_hv()
        return out.getvalue()

    def label(self, pod: str, value: str | None) -> None:
        """``kubectl label pod <pod> app=<value>`` (``None``: ``app-``) through the API."""
        self.cluster.label_pod(NAMESPACE, pod, {"app": value})

    def reset(self) -> None:
        """Baseline: manifests with the binding, nobody labelled app=web, every VNF guest
        running and forwarding, all of it applied and installed on the chassis."""
        self.write_manifests(binding=True)
        for name in PODS:
            self.label(name, None)
        self.apply()
        for vnf in self.dp.vnfs.values():
            self.dp.set_forwarding(vnf, True)


@contextlib.contextmanager
def world() -> Iterator[World]:
    """Start the two-node sandbox + data path, plug every pod; tear everything down after."""
    from osc_gitops_sandbox.cluster import SandboxCluster
    from osc_gitops_sandbox.datapath import Datapath, datapath_unavailable_reason

    reason = datapath_unavailable_reason()
    if reason:
        raise UserError(f"the data-path demo cannot run here: {reason}")
    with (
        tempfile.TemporaryDirectory(prefix="osc-dpm-") as tmp,
        SandboxCluster(nb_schema="installed") as cluster,
    ):
        manifests = Path(tmp)
        cluster.seed(
            [node_object(n, s) for n, s in NODES.items()],
            [],
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
             for ns in (NAMESPACE, VNF_NAMESPACE)],
        )  # fmt: skip
        for name, node in PODS.items():
            cluster.add_pod(NAMESPACE, name, node, {"tier": "shop"})
        with Datapath(cluster) as dp:
            dp.plug_pods()
            the_world = World(cluster, dp, manifests)
            the_world.write_manifests()
            yield the_world


# ---------------------------------------------------------------------------------------------
# the narrated demo


def _say(text: str = "") -> None:
    print(text, flush=True)


def _show(label: str, probe: Any) -> None:
    via = ", ".join(f"{k} +{v}" for k, v in sorted(probe.forwarded.items()))
    verdict = f"{probe.replies}/{probe.sent} replies" + (f", TTL {probe.ttl}" if probe.ttl else "")
    _say(f"  {label:<34} {verdict:<22} VNF forwarded: {via}")


def run() -> int:
    """The narrated run; returns the exit code (0). Everything is torn down at the end."""
    started = time.monotonic()
    with world() as w:
        dp = w.dp
        _say("osc-gitops demo --datapath: real packets, real OVN")
        _say(f"  OVN NB {w.cluster.nb_remote} (installed schema, northd 23.03)")
        _say(f"  chassis {dp.chassis!r} runs OVS (netdev) + ovn-controller for both nodes")
        for lsp, ep in sorted(dp.pods.items()):
            _say(f"  pod {lsp:<16} {ep.ip:<12} on {ep.node}  (netns {ep.netns})")
        _say(f"  set up in {time.monotonic() - started:.2f} s")

        _say()
        _say("=== 1. osc-gitops apply: firewall VMs on both nodes, binding web -> firewall")
        _say(f"$ osc-gitops {' '.join(w.apply_args)}")
        w.apply()
        for key, vnf in sorted(dp.vnfs.items()):
            e = vnf.endpoint
            _say(f"  VM {key} running: guest on port {e.lsp} ({e.mac} {e.ip})")
        web, client = w.pod("web-a"), w.pod("client-c")
        _show("client-c -> web-a (unlabelled)", dp.probe(client, web))

        _say()
        _say("=== 2. kubectl label pod web-a app=web; osc-gitops apply")
        t0 = time.monotonic()
        w.label("web-a", "web")
        w.apply(wait=False)
        took = dp.wait_steered(client, web, w.vnf("node-1"))
        total = (time.monotonic() - t0) * 1000
        _say(
            f"  steered packets {total:.0f} ms after the label change (apply + northd + "
            f"ovn-controller; {took * 1000:.0f} ms of it polling with pings after apply)"
        )
        _show("client-c -> web-a", dp.probe(client, web))
        _show("web-a -> client-c", dp.probe(web, client))
        _show("other-b -> client-d (outsiders)", dp.probe(w.pod("other-b"), w.pod("client-d")))

        _say()
        _say("=== 3. The node-1 firewall dies (forwarding off): fail-close")
        dp.set_forwarding(w.vnf("node-1"), False)
        _show("client-c -> web-a", dp.probe(client, web, count=2, timeout=0.3))
        _show("other-b -> client-d (outsiders)", dp.probe(w.pod("other-b"), w.pod("client-d")))
        dp.set_forwarding(w.vnf("node-1"), True)

        _say()
        _say("=== 4. kubectl label pod web-a app-; osc-gitops apply: bypass")
        w.label("web-a", None)
        w.apply()
        _show("client-c -> web-a", dp.probe(client, web))
        _say()
        _say("demo finished: namespaces, OVS, ovn-controller and the sandbox are being removed.")
    _say(f"done in {time.monotonic() - started:.1f} s, nothing left running.")
    return 0
