"""Deployment artefacts: kustomize builds offline, the RBAC covers every API call the code
makes (recorded from a real run against the emulator), and the pods are locked down.

The API calls are not listed by hand: the loop (initial apply, an update, a delete, both
watches, the Lease) runs against the emulator, whose request log is the list. A new API call
in an adapter therefore fails this test until ``deploy/base/rbac.yaml`` allows it.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from osc_gitops_sandbox.cluster import SandboxCluster
from osc_gitops_sandbox.kubeapi import Faults
from ruamel.yaml import YAML

from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.kube.lease import LeaseLock, LeaseSettings, api_client
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compile import CompileOptions
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.sources import LocalSource
from tests.support.gitops import wait_for
from tests.support.paths import POLICIES, REPO

SA = ("osc-gitops", "osc-gitops")  # namespace, name


def kustomize(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(REPO / "deploy" / "overlays" / overlay)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return [d for d in YAML(typ="safe").load_all(out) if d]


@pytest.mark.parametrize("overlay", ["deployment", "cronjob"])
def test_overlays_build_offline_and_pods_are_locked_down(overlay: str) -> None:
    docs = kustomize(overlay)
    kinds = {d["kind"] for d in docs}
    assert {"ServiceAccount", "ClusterRole", "Role", "RoleBinding", "ConfigMap"} <= kinds
    workload = next(d for d in docs if d["kind"] in ("Deployment", "CronJob"))
    spec = workload["spec"]
    if overlay == "deployment":
        assert spec["replicas"] == 2
        pod = spec["template"]["spec"]
        args = pod["containers"][0]["args"]
        assert "--leader-elect" in args and "--once" not in args
        probes = pod["containers"][0]
        assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
    else:
        assert spec["concurrencyPolicy"] == "Forbid"
        pod = spec["jobTemplate"]["spec"]["template"]["spec"]
        assert "--once" in pod["containers"][0]["args"]
    assert pod["serviceAccountName"] == "osc-gitops"
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["image"].startswith("ghcr.io/example/osc-gitops:")
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/var/cache/osc-gitops", "/tmp", "/etc/osc-gitops/ovn-nb"} <= mounts
    secret = next(v for v in pod["volumes"] if v["name"] == "ovn-nb")
    assert secret["secret"]["secretName"] == "osc-gitops-ovn-nb"
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    assert config["OSC_OVN_NB"].startswith("ssl:")
    assert config["OSC_OVN_PRIVATE_KEY"].startswith("/etc/osc-gitops/ovn-nb/")


# ---------------------------------------------------------------------------------- RBAC


class RecordingFaults(Faults):
    """The emulator's fault hook sees every request first: record (method, path+query)."""

    def __init__(self, on_drop: Any = None) -> None:
        super().__init__(on_drop)
        self.seen: list[tuple[str, str]] = []

    def take_failure(self, method: str, path: str) -> dict[str, Any] | None:
        self.seen.append((method, path))
        return super().take_failure(method, path)


def request_attributes(method: str, target: str) -> tuple[str, str, str, str | None]:
    """(apiGroup, resource, verb, namespace) as the API server's authorizer sees a request."""
    parts = urlsplit(target)
    segs = [s for s in parts.path.split("/") if s]
    query = parse_qs(parts.query)
    if segs[0] == "api":
        group, rest = "", segs[2:]
    else:
        group, rest = segs[1], segs[3:]
    namespace = None
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        verb = "get" if name else ("watch" if query.get("watch") == ["true"] else "list")
    return group, resource, verb, namespace


def allowed(docs: list[dict[str, Any]], attrs: tuple[str, str, str, str | None]) -> bool:
    group, resource, verb, namespace = attrs

    def bound(kind: str) -> set[tuple[str | None, str]]:
        """(namespace of the binding or None, role name) granted to our service account."""
        out = set()
        for d in docs:
            if d["kind"] != kind:
                continue
            if any(
                s["kind"] == "ServiceAccount" and (s["namespace"], s["name"]) == SA
                for s in d["subjects"]
            ):
                out.add((d["metadata"].get("namespace"), d["roleRef"]["name"]))
        return out

    def grants(role: dict[str, Any]) -> bool:
        return any(
            group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
            for r in role["rules"]
        )

    for _, name in bound("ClusterRoleBinding"):
        role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name)
        if grants(role):
            return True
    if namespace is None:
        return False
    for ns, name in bound("RoleBinding"):
        if ns != namespace:
            continue
        role = next(
            d for d in docs
            if d["kind"] == "Role" and d["metadata"]["name"] == name
            and d["metadata"]["namespace"] == ns
        )  # fmt: skip
        if grants(role):
            return True
    return False


@pytest.mark.ovn
@pytest.mark.timeout(120)
def test_rbac_covers_every_api_call_the_loop_makes(cluster: SandboxCluster, tmp_path: Path) -> None:
    docs = kustomize("deployment")
    recorder = RecordingFaults(cluster.kube.wake_watchers)
    cluster.kube.faults = recorder
    cluster.kube.add_objects([{"kind": "Namespace", "metadata": {"name": "osc-gitops"}}])
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)

    kube = KubeCluster(KubeSettings(kubeconfig=cluster.kubeconfig))
    ovn = OvnNorthbound.connect(OvnSettings(remote=cluster.nb_remote))
    lease = LeaseLock(
        api_client(KubeSettings(kubeconfig=cluster.kubeconfig)),
        LeaseSettings(namespace="osc-gitops", lease_duration=5, renew_interval=0.1),
    )
    config = LoopConfig(options=CompileOptions(), interval=30, debounce=0.05)
    loop = Loop(config, LocalSource(policies), kube, ovn, lease=lease)
    thread = threading.Thread(target=loop.run, daemon=True)
    try:
        thread.start()
        wait_for(lambda: loop.applies >= 1, what="initial apply (creates)")
        # update: another VNF image -> VM patch; then a user deletes a VM -> recreate
        vnfs = policies / "vnfs.yaml"
        vnfs.write_text(vnfs.read_text().replace("vnf-firewall:1.4.2", "vnf-firewall:1.4.3"))
        loop.request("test")
        wait_for(lambda: loop.applies >= 2, what="update")
        # delete: drop the IPS VNF and its bindings -> VM and NAD deletes
        vnfs.write_text(vnfs.read_text().split("\n---")[0] + "\n")
        for binding in (policies / "bindings").glob("*.yaml"):
            kept = [d for d in binding.read_text().split("\n---") if "vnf: ips" not in d]
            binding.write_text("\n---".join(kept))
        loop.request("test")
        wait_for(lambda: loop.applies >= 3 and loop.last is not None
                 and loop.last.result == "applied", what="delete")  # fmt: skip
        time.sleep(0.3)  # watches are connected (they started with the loop)
    finally:
        loop.shutdown()
        thread.join(timeout=10)
        ovn.close()
        kube.close()

    calls = {request_attributes(m, p) for m, p in recorder.seen}
    verbs = {(r, v) for _, r, v, _ in calls}
    # the run really exercised what the RBAC is about
    for needed in [("pods", "list"), ("pods", "watch"), ("nodes", "list"),
                   ("virtualmachines", "create"), ("virtualmachines", "patch"),
                   ("virtualmachines", "delete"), ("virtualmachines", "watch"),
                   ("network-attachment-definitions", "create"),
                   ("network-attachment-definitions", "delete"), ("networkpolicies", "list"),
                   ("leases", "create"), ("leases", "update"), ("leases", "get")]:  # fmt: skip
        assert needed in verbs, f"the run did not exercise {needed}: {sorted(verbs)}"
    missing = sorted(str(c) for c in calls if not allowed(docs, c))
    assert not missing, "deploy/base/rbac.yaml does not allow:\n" + "\n".join(missing)
    # and nothing more than needed: every granted verb is used by some call. VMs and NADs
    # share one write path in the adapter (replace_managed = get + merge patch), so a verb
    # seen on one is needed on the other.
    used: dict[str, set[str]] = {}
    for _, resource, verb, _ in calls:
        used.setdefault(resource, set()).add(verb)
    shared = used.get("virtualmachines", set()) & {"get", "patch"}
    used.setdefault("network-attachment-definitions", set()).update(shared)
    for d in docs:
        if d["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in d["rules"]:
            for resource in rule["resources"]:
                extra = set(rule["verbs"]) - used.get(resource, set())
                assert not extra, f"{d['metadata']['name']}: {resource} {sorted(extra)} unused"
