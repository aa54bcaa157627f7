"""Deployment artefacts: kustomize builds offline, the RBAC covers every API call the code
makes (recorded from a real run against the emulator), and the pods are locked down.

The API calls are not listed by hand: the loop (initial apply, an update, a delete, both
watches, the Lease) runs against the emulator, whose request log is the list. A new API call
in an adapter therefore fails this test until ``deploy/base/rbac.yaml`` allows it.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from osc_gitops_sandbox.kubeapi.server import Faults
from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from osc_gitops_sandbox.ovn.vswitch_db import VswitchDb
from ruamel.yaml import YAML

from reconciler.adapters.kube.cache import KubeCache
from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.kube.lease import LeaseLock, LeaseSettings, api_client
from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
from reconciler.core.compiling.compile import CompileOptions
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


@pytest.mark.parametrize("overlay", ["central-nb/deployment", "central-nb/cronjob"])
def test_central_nb_overlays_build_offline_and_pods_are_locked_down(overlay: str) -> None:
    docs = kustomize(overlay)
    kinds = {d["kind"] for d in docs}
    assert {"ServiceAccount", "ClusterRole", "Role", "RoleBinding", "ConfigMap"} <= kinds
    workload = next(d for d in docs if d["kind"] in ("Deployment", "CronJob"))
    spec = workload["spec"]
    if overlay.endswith("deployment"):
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
    # a central NB is only for the router-policy backend (OVN-Kubernetes releases with one)
    assert "--steering=router-policy" in pod["containers"][0]["args"]
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
    if len(rest) > 2:  # a subresource: RBAC names it "<resource>/<subresource>"
        resource = f"{resource}/{rest[2]}"
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        verb = "get" if name else ("watch" if query.get("watch") == ["true"] else "list")
    return group, resource, verb, namespace


def authorized(seen: list[tuple[str, str]]) -> set[tuple[str, str, str, str | None]]:
    """What the API server authorizes for the requests ``seen``: each request's verb, and for a
    server-side apply (a PATCH with ``fieldManager``) ``create`` as well, which kube-apiserver
    checks when the apply creates the object (the reconciler's creates are applies)."""
    calls = set()
    for method, target in seen:
        attrs = request_attributes(method, target)
        calls.add(attrs)
        if method == "PATCH" and "fieldManager=" in urlsplit(target).query:
            calls.add((attrs[0], attrs[1], "create", attrs[3]))
    return calls


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
    docs = kustomize("central-nb/deployment")
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
    # As `osc-gitops run` does: the loop reads through the informer cache (list + watch).
    stop = threading.Event()
    cache = KubeCache(kube)
    cache.start(stop, "osc-gitops")
    loop = Loop(config, LocalSource(policies), cache, ovn, lease=lease, stopping=stop)
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

    calls = authorized(recorder.seen)
    verbs = {(r, v) for _, r, v, _ in calls}
    # the run really exercised what the RBAC is about
    for needed in [("pods", "list"), ("pods", "watch"), ("nodes", "list"), ("nodes", "watch"),
                   ("networkpolicies", "watch"), ("network-attachment-definitions", "watch"),
                   ("virtualmachines", "create"), ("virtualmachines", "patch"),
                   ("virtualmachines", "delete"), ("virtualmachines", "watch"),
                   ("network-attachment-definitions", "create"),
                   ("network-attachment-definitions", "delete"), ("networkpolicies", "list"),
                   ("leases", "create"), ("leases", "update"), ("leases", "get")]:  # fmt: skip
        assert needed in verbs, f"the run did not exercise {needed}: {sorted(verbs)}"
    missing = sorted(str(c) for c in calls if not allowed(docs, c))
    assert not missing, "deploy/base/rbac.yaml does not allow:\n" + "\n".join(missing)
    # and nothing more than needed: every granted verb is used by some call. VMs and NADs
    # share one write path in the adapter (a server-side apply), so a verb seen on one is
    # needed on the other.
    used: dict[str, set[str]] = {}
    for _, resource, verb, _ in calls:
        used.setdefault(resource, set()).add(verb)
    shared = used.get("virtualmachines", set()) & {"create", "patch"}
    used.setdefault("network-attachment-definitions", set()).update(shared)
    for d in docs:
        if d["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in d["rules"]:
            for resource in rule["resources"]:
                extra = set(rule["verbs"]) - used.get(resource, set())
                assert not extra, f"{d['metadata']['name']}: {resource} {sorted(extra)} unused"


# ------------------------------------------------------------------ interconnect overlay
# Where OVN-Kubernetes puts a single-node zone's NB socket (ovn-org/ovn-kubernetes at
# 6c366bb49d6fa57c80d6b39834952ce1d4d9dbb6: dist/templates/ovnkube-single-node-zone.yaml.j2,
# helm/ovn-kubernetes/charts/ovnkube-single-node-zone/templates/ovnkube-single-node-zone.yaml,
# dist/images/ovnkube.sh `local-nb-ovsdb`, go-controller/pkg/config/config.go's default
# "unix:/var/run/ovn/ovn%s_db.sock"): the nb-ovsdb container mounts the hostPath volume
# `host-var-run-ovs` (/var/run/openvswitch on the node) at /var/run/ovn.
OVNK_RUN_VOLUME = "host-var-run-ovs"
OVNK_HOST_RUN_DIR = "/var/run/openvswitch"
OVNK_POD_RUN_DIR = "/var/run/ovn"
OVNK_NB_SOCKET = "ovnnb_db.sock"

AGENT_SA = ("osc-gitops-agents", "osc-gitops-agent")
BINDER_SA = ("osc-gitops-agents", "osc-gitops-binder")
AGENTS_NS, CENTRAL_NS = "osc-gitops-agents", "osc-gitops"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


def interconnect() -> dict[str, Any]:
    """The rendered overlay: ``docs`` plus the two workloads and their pod specs."""
    docs = kustomize("interconnect")
    agent = next(d for d in docs if d["kind"] == "DaemonSet")
    central = next(d for d in docs if d["kind"] == "Deployment")
    return {
        "docs": docs,
        "agent": agent,
        "central": central,
        "agent_pod": agent["spec"]["template"]["spec"],
        "central_pod": central["spec"]["template"]["spec"],
    }


def grants(
    docs: list[dict[str, Any]], sa: tuple[str, str]
) -> list[tuple[str | None, dict[str, Any]]]:
    """Every RBAC rule bound to the service account ``sa``, with the namespace it applies in
    (``None``: cluster-wide)."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(
            s["kind"] == "ServiceAccount" and (s["namespace"], s["name"]) == sa
            for s in binding["subjects"]
        ):
            continue
        scope = binding["metadata"].get("namespace")  # None for a ClusterRoleBinding
        ref = binding["roleRef"]
        role = next(
            d for d in docs
            if d["kind"] == ref["kind"] and d["metadata"]["name"] == ref["name"]
            and (ref["kind"] == "ClusterRole" or d["metadata"]["namespace"] == scope)
        )  # fmt: skip
        out.extend((scope, rule) for rule in role["rules"])
    return out


def verbs_on(
    rules: list[tuple[str | None, dict[str, Any]]], group: str, resource: str
) -> dict[str | None, set[str]]:
    out: dict[str | None, set[str]] = {}
    for scope, rule in rules:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            out.setdefault(scope, set()).update(rule["verbs"])
    return out


def test_interconnect_overlay_renders_agents_and_a_kubernetes_only_owner() -> None:
    rendered = interconnect()
    docs, agent_pod, central_pod = rendered["docs"], rendered["agent_pod"], rendered["central_pod"]
    # the agents bind their nodes' VNF NICs themselves (--ovs-db): no bind-only DaemonSet here
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "DaemonSet"] == [
        rendered["agent"]["metadata"]["name"]
    ]
    namespaces = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Namespace"}
    assert namespaces[CENTRAL_NS]["metadata"]["labels"][
        "pod-security.kubernetes.io/enforce"] == "restricted"  # fmt: skip
    assert rendered["agent"]["metadata"]["namespace"] == AGENTS_NS in namespaces

    # the node agent: its node from the downward API, every node, locked down but for uid 0
    assert (rendered["agent"]["metadata"]["namespace"], agent_pod["serviceAccountName"]) == AGENT_SA
    (container,) = agent_pod["containers"]
    args = container["args"]
    assert args[0] == "run" and "--node=$(OSC_NODE_NAME)" in args
    assert not {"--leader-elect", "--kubernetes-only", "--once"} & set(args)
    env = {e["name"]: e for e in container["env"]}
    assert env["OSC_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert {"operator": "Exists"} in agent_pod["tolerations"]
    assert not agent_pod.get("hostNetwork") and not agent_pod.get("hostPID")
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and not sc.get("privileged")
    assert agent_pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert agent_pod["securityContext"]["runAsUser"] == 0  # the socket is root's, mode 0750
    config = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    agent_config = container["envFrom"][0]["configMapRef"]["name"]
    for key in ("OSC_GIT_REPO", "OSC_GIT_REF", "OSC_GIT_PATH", "OSC_INSTANCE"):
        assert config[agent_config][key] == config["osc-gitops"][key]  # one source of truth

    # the central owner: Kubernetes only, leader election, nothing OVN in reach
    (central,) = central_pod["containers"]
    assert "--kubernetes-only" in central["args"] and "--leader-elect" in central["args"]
    assert not [a for a in central["args"] if a.startswith(("--ovn", "--node"))]
    assert not [v for v in central_pod["volumes"] if "hostPath" in v or v["name"] == "ovn-nb"]
    assert {m["mountPath"] for m in central["volumeMounts"]} == {"/var/cache/osc-gitops", "/tmp"}
    assert not [k for k in config["osc-gitops"] if k.startswith("OSC_OVN")]
    assert central_pod["securityContext"]["runAsNonRoot"] is True
    assert central["image"] == container["image"]
    assert central["image"].startswith("ghcr.io/example/osc-gitops:")


def test_interconnect_agents_mount_the_zone_socket_where_ovn_kubernetes_puts_it() -> None:
    agent_pod = interconnect()["agent_pod"]
    (container,) = agent_pod["containers"]
    host_paths = [v for v in agent_pod["volumes"] if "hostPath" in v]
    assert [(v["name"], v["hostPath"]["path"]) for v in host_paths] == [
        (OVNK_RUN_VOLUME, OVNK_HOST_RUN_DIR)
    ]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == OVNK_RUN_VOLUME]
    assert mount["mountPath"] == OVNK_POD_RUN_DIR
    # connect() needs write permission on the socket, not a writable mount (see the next test)
    assert mount["readOnly"] is True
    assert f"--ovn-nb=unix:{OVNK_POD_RUN_DIR}/{OVNK_NB_SOCKET}" in container["args"]
    assert f"--ovn-sb=unix:{OVNK_POD_RUN_DIR}/ovnsb_db.sock" in container["args"]  # beside it
    # the node binder: OVS' db.sock sits in the same host directory (ovs-cni mounts it too)
    assert f"--ovs-db=unix:{OVNK_POD_RUN_DIR}/db.sock" in container["args"]


@pytest.mark.parametrize("overlay", ["central-nb/deployment", "central-nb/cronjob"])
def test_the_bind_only_daemonset_mounts_the_ovs_socket_as_ovs_cni_does_and_reads_only(
    overlay: str,
) -> None:
    """The central-NB overlays run the node binder on every node (deploy/components/
    node-binder; the interconnect agents bind themselves): hostPath /var/run/openvswitch
    (ovs-cni's own DaemonSet's volume), read-only, uid 0 without any capability; the overlay's
    image; RBAC: reads of pods, VMs and nodes, and its own status Lease; its admission policy
    names only that Lease."""
    docs = kustomize(overlay)
    (daemonset,) = [d for d in docs if d["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    assert (daemonset["metadata"]["namespace"], pod["serviceAccountName"]) == BINDER_SA
    (container,) = pod["containers"]
    assert container["args"][0] == "bind"
    assert container["image"] == "ghcr.io/example/osc-gitops:0.1.0"  # the overlay's knob
    assert "--ovs-db=unix:/var/run/openvswitch/db.sock" in container["args"]
    (volume,) = [v for v in pod["volumes"] if "hostPath" in v]
    assert volume["hostPath"]["path"] == "/var/run/openvswitch"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {"name": volume["name"], "mountPath": "/var/run/openvswitch", "readOnly": True}
    sc = container["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"]} and not sc.get("privileged")
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["runAsUser"] == 0 and not pod.get("hostNetwork")
    rules = grants(docs, BINDER_SA)
    assert verbs_on(rules, "", "pods") == {None: {"list", "watch"}}
    assert verbs_on(rules, "kubevirt.io", "virtualmachines") == {None: {"list", "watch"}}
    assert verbs_on(rules, "", "nodes") == {None: {"list"}}
    assert verbs_on(rules, "coordination.k8s.io", "leases") == {
        AGENTS_NS: {"get", "create", "update"}
    }
    assert len(rules) == 4
    policy = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    expressions = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert "object.metadata.name == 'osc-gitops-binder-' + variables.nodeName" in expressions
    # a node name over 235 characters: the shortened name (naming.binder_lease) and the full
    # node name it carries
    assert "variables.nodeName.substring(0, 200)" in expressions
    assert "object.metadata.annotations['osc.io/node-name'] == variables.nodeName" in expressions


def test_interconnect_rbac_is_least_privilege_per_role() -> None:
    docs = interconnect()["docs"]
    agent = grants(docs, AGENT_SA)
    central = grants(docs, SA)
    # agents: reads for their slice; the only write is leases in their own namespace
    assert verbs_on(agent, "", "pods") == {None: {"list", "watch"}}
    assert verbs_on(agent, "", "nodes") == {None: {"list"}}
    assert verbs_on(agent, "kubevirt.io", "virtualmachines") == {None: {"list", "watch"}}
    assert verbs_on(agent, "k8s.cni.cncf.io", "network-attachment-definitions") == {None: {"list"}}
    writes = {
        (scope, group, resource, verb)
        for scope, rule in agent
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in set(rule["verbs"]) & WRITE_VERBS
    }
    assert writes == {
        (AGENTS_NS, "coordination.k8s.io", "leases", "create"),
        (AGENTS_NS, "coordination.k8s.io", "leases", "update"),
    }
    assert not any("*" in rule["verbs"] or "*" in rule["resources"] for _, rule in agent)
    assert not [scope for scope, _ in agent if scope == CENTRAL_NS]  # not the leader Lease
    # the central owner: the only one creating VMs and NADs; nothing of the OVN side
    assert "create" in verbs_on(central, "kubevirt.io", "virtualmachines")["osc-vnfs"]
    assert (
        "create"
        in verbs_on(central, "k8s.cni.cncf.io", "network-attachment-definitions")["osc-vnfs"]
    )
    assert verbs_on(central, "", "pods") == {}
    assert verbs_on(central, "networking.k8s.io", "networkpolicies") == {}
    assert not [r for _, r in central if any(g.endswith("ovn.org") for g in r["apiGroups"])]
    assert not [scope for scope, _ in central if scope == AGENTS_NS]  # no agent status writes
    # nobody else may create VMs or NADs
    owned = [
        ("kubevirt.io", "virtualmachines"),
        ("k8s.cni.cncf.io", "network-attachment-definitions"),
    ]
    for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        for subject in binding["subjects"]:
            sa = (subject["namespace"], subject["name"])
            if sa == SA:
                continue
            for group, resource in owned:
                for verbs in verbs_on(grants(docs, sa), group, resource).values():
                    assert not verbs & WRITE_VERBS, f"{sa} may write {resource}"


def role_allows(
    rules: list[tuple[str | None, dict[str, Any]]], attrs: tuple[str, str, str, str | None]
) -> bool:
    """Whether one of ``rules`` (from :func:`grants`) authorizes the request ``attrs``."""
    group, resource, verb, namespace = attrs
    return any(
        group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
        and scope in (None, namespace)
        for scope, rule in rules
    )  # fmt: skip


def record_run(
    recorder: RecordingFaults, argv: list[str], steps: list[Any], command: str = "run"
) -> set[Any]:
    """The API calls of one real ``osc-gitops run ARGV`` (or ``COMMAND ARGV``) process while
    ``steps`` happen (each a callable: it changes something, or waits for the process to have
    done something)."""
    import os
    import signal
    import sys

    recorder.seen.clear()
    pace = ["--interval", "0.5", "--debounce", "0.05"] if command == "run" else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli", command, *argv, "--metrics-addr", "off",
         *pace, "--log-format", "text"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, env={**os.environ},
    )  # fmt: skip
    try:
        for step in steps:
            step()
        time.sleep(0.5)  # the watches are open and a periodic pass renewed the Leases
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    return authorized(recorder.seen)


def unused_verbs(rules: list[tuple[str | None, dict[str, Any]]], calls: set[Any]) -> list[str]:
    """Granted verbs no call used. VMs and NADs share one write path in the adapter (a
    server-side apply), so a verb seen on one is needed on the other."""
    used: dict[str, set[str]] = {}
    for _, resource, verb, _ in calls:
        used.setdefault(resource, set()).add(verb)
    shared = used.get("virtualmachines", set()) & {"create", "patch"}
    used.setdefault("network-attachment-definitions", set()).update(shared)
    return sorted(
        f"{resource} {verb}"
        for _, rule in rules
        for resource in rule["resources"]
        for verb in rule["verbs"]
        if verb not in used.get(resource, set())
    )


@pytest.mark.ovn
@pytest.mark.timeout(180)
def test_interconnect_rbac_covers_every_api_call_each_role_makes(tmp_path: Path) -> None:
    """The central owner (``run --kubernetes-only --leader-elect``: creates, an update, deletes)
    and a node agent (``run --node``) run for real against the emulator of a zone sandbox;
    each one's requests must be allowed by its own role in deploy/overlays/interconnect, and
    each role must grant nothing the process does not use."""
    from osc_gitops_sandbox.ovn.zones import ZonedCluster

    from tests.support.gitops import wait_for
    from tests.support.paths import CLUSTER

    docs = interconnect()["docs"]
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    with contextlib.ExitStack() as stack:
        zones = stack.enter_context(ZonedCluster(tmp_path / "z", distribution="sid"))
        zones.seed_dir(CLUSTER)
        zones.kube.add_objects([{"kind": "Namespace", "metadata": {"name": ns}}
                                for ns in (CENTRAL_NS, AGENTS_NS)])  # fmt: skip
        recorder = RecordingFaults(zones.kube.wake_watchers)
        zones.kube.faults = recorder
        kube = ["--kubeconfig", zones.kubeconfig]

        def vms() -> dict[str, Any]:
            return {o["metadata"]["name"]: o for o in zones.kube.objects("VirtualMachine")}

        def image(name: str) -> str:
            spec = vms()[name]["spec"]["template"]["spec"]
            return str(spec["volumes"][0]["containerDisk"]["image"])

        vnfs = policies / "vnfs.yaml"

        def new_image() -> None:
            vnfs.write_text(vnfs.read_text().replace("vnf-firewall:1.4.2", "vnf-firewall:1.4.3"))

        def drop_ips() -> None:
            vnfs.write_text(vnfs.read_text().split("\n---")[0] + "\n")
            for path in (policies / "bindings").glob("*.yaml"):
                kept = [d for d in path.read_text().split("\n---") if "vnf: ips" not in d]
                path.write_text("\n---".join(kept))

        central = record_run(
            recorder,
            [str(policies), "--kubernetes-only", "--leader-elect", "--lease-namespace",
             CENTRAL_NS, "--lease-renew", "0.2", *kube],
            [
                lambda: wait_for(lambda: len(vms()) == 3, what="VMs created"),
                new_image,
                lambda: wait_for(lambda: image("firewall-node-1").endswith("1.4.3"),
                                 what="VM updated"),
                drop_ips,
                lambda: wait_for(lambda: "ips-node-1" not in vms(), what="VM deleted"),
            ],
        )  # fmt: skip

        def lease_writes() -> int:
            return sum(
                1 for m, p in recorder.seen
                if m in ("POST", "PUT") and "/leases" in p and AGENTS_NS in p
            )  # fmt: skip

        ovs = stack.enter_context(VswitchDb(tmp_path / "ovs"))
        agent = record_run(
            recorder,
            [str(policies), "--node", "node-1", "--ovn-nb", zones.nb_remote("node-1"), *kube,
             "--ovs-db", ovs.remote, "--stats-interval", "0.3"],  # and the node binder
            [lambda: wait_for(lambda: lease_writes() >= 4, what="statuses created and renewed")],
        )  # fmt: skip
        # the bind-only DaemonSet's process, as beside a central NB: its Lease made anew
        zones.kube.delete(zones.kube.resource_type("Lease"), AGENTS_NS, "osc-gitops-binder-node-1")
        binder = record_run(
            recorder,
            ["--node", "node-1", "--ovs-db", ovs.remote, *kube, "--stats-interval", "0.3",
             "--cache-dir", str(tmp_path / "cache")],
            [lambda: wait_for(lambda: lease_writes() >= 2, what="binder status published")],
            command="bind",
        )  # fmt: skip
    for name, sa, calls, needed in (
        ("central owner", SA, central, [
            ("nodes", "list"), ("virtualmachines", "create"), ("virtualmachines", "patch"),
            ("virtualmachines", "delete"), ("virtualmachines", "watch"),
            ("network-attachment-definitions", "create"),
            ("network-attachment-definitions", "delete"), ("leases", "create"),
            ("leases", "update"), ("leases", "get"),
        ]),
        ("node agent", AGENT_SA, agent, [
            ("pods", "list"), ("pods", "watch"), ("nodes", "list"), ("networkpolicies", "list"),
            ("virtualmachines", "list"), ("virtualmachines", "watch"),
            ("network-attachment-definitions", "list"), ("leases", "create"),
            ("leases", "update"), ("leases", "get"),
        ]),
        ("node binder", BINDER_SA, binder, [
            ("pods", "list"), ("pods", "watch"), ("virtualmachines", "list"),
            ("virtualmachines", "watch"), ("nodes", "list"), ("leases", "create"),
            ("leases", "update"), ("leases", "get"),
        ]),
    ):  # fmt: skip
        verbs = {(resource, verb) for _, resource, verb, _ in calls}
        for pair in needed:
            assert pair in verbs, f"the {name} did not exercise {pair}: {sorted(verbs)}"
        rules = grants(docs if sa != BINDER_SA else kustomize("central-nb/deployment"), sa)
        missing = sorted(str(c) for c in calls if not role_allows(rules, c))
        assert not missing, f"the {name}'s RBAC does not allow:\n" + "\n".join(missing)
        unused = unused_verbs(rules, calls)
        assert not unused, f"the {name}'s RBAC grants what it never uses: {unused}"
    assert not {r for _, r, _, _ in central} & {"pods", "networkpolicies"}
    assert not {(r, v) for _, r, v, _ in agent if v in WRITE_VERBS and r != "leases"}
    assert not {(r, v) for _, r, v, _ in binder if v in WRITE_VERBS and r != "leases"}
    binder_leases = {p for m, p in recorder.seen if "/leases" in p}
    assert binder_leases and all("osc-gitops-binder-node-1" in p or p.endswith("/leases")
                                 for p in binder_leases)  # fmt: skip


def test_interconnect_agents_can_write_only_their_own_nodes_status_lease() -> None:
    rendered = interconnect()
    docs = rendered["docs"]
    policy = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": AGENTS_NS
    }
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"]) == (["coordination.k8s.io"], ["leases"])
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}  # the agent's only writes
    namespace, account = (
        rendered["agent"]["metadata"]["namespace"],
        rendered["agent_pod"]["serviceAccountName"],
    )
    (condition,) = spec["matchConditions"]
    assert f"'system:serviceaccount:{namespace}:{account}'" in condition["expression"]
    expressions = " ".join(v["expression"] for v in spec["validations"] + spec["variables"])
    assert "authentication.kubernetes.io/node-name" in expressions
    assert "object.metadata.name == 'osc-gitops-agent-' + variables.nodeName" in expressions
    assert "object.metadata.name == 'osc-gitops-binder-' + variables.nodeName" in expressions
    long_name = "startsWith('osc-gitops-agent-' + variables.nodeName.substring(0, 200))"
    assert long_name in expressions
    assert "object.metadata.annotations['osc.io/node-name'] == variables.nodeName" in expressions


@pytest.mark.ovn
@pytest.mark.timeout(60)
def test_a_read_only_mount_of_the_zone_run_dir_reaches_the_nb_and_survives_its_restart(
    tmp_path: Path,
) -> None:
    """Why the agent's socket mount is a read-only directory: connect() works through it,
    unlinking or replacing sockets does not, and a restarted NB's new socket shows up in it
    (while a bind mount of the socket file itself goes stale)."""
    import os
    import sys

    from osc_gitops_sandbox.ovn.stack import ovn_unavailable_reason
    from osc_gitops_sandbox.ovn.zones import ZonedCluster

    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    if reason := ovn_unavailable_reason():
        pytest.skip(reason)
    with ZonedCluster(tmp_path / "z", nodes=["n1"], distribution="host") as zones:
        run_dir = zones.nb_remote("n1").removeprefix("unix:").rsplit("/", 1)[0]
        ro_dir, file_mount = tmp_path / "ro", tmp_path / "sock-file"
        ro_dir.mkdir()
        file_mount.touch()
        probe = (
            "import sys\nfrom osc_gitops_sandbox.ovn import ovsdb_rpc\n"
            "try:\n    print(sys.argv[1], ovsdb_rpc.list_dbs('unix:' + sys.argv[2], 2.0))\n"
            "except ovsdb_rpc.OvsdbRpcError as exc:\n    print(sys.argv[1], 'refused', exc)\n"
        )
        script = f"""set -e
mount --bind {run_dir} {ro_dir}
mount -o remount,bind,ro {ro_dir}
mount --bind {run_dir}/nb.sock {file_mount}
{sys.executable} -c "$PROBE" dir-before {ro_dir}/nb.sock
{sys.executable} -c "$PROBE" file-before {file_mount}
if rm {ro_dir}/nb.sock 2>/dev/null; then echo unlinked; else echo unlink-refused; fi
read _
{sys.executable} -c "$PROBE" dir-after {ro_dir}/nb.sock
{sys.executable} -c "$PROBE" file-after {file_mount}
"""
        proc = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PROBE": probe},
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdin is not None
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        zones.stop_nb("n1")
        zones.start_nb("n1")
        out, err = proc.communicate("go\n", timeout=30)
        lines += out.strip().splitlines()
    assert proc.returncode == 0, err
    assert lines[:3] == [
        "dir-before ['OVN_Northbound', '_Server']",
        "file-before ['OVN_Northbound', '_Server']",
        "unlink-refused",
    ]
    assert lines[3] == "dir-after ['OVN_Northbound', '_Server']"
    assert lines[4].startswith("file-after refused")


def test_deploy_leads_with_the_interconnect_overlay() -> None:
    """``kubectl apply -k deploy/`` is the interconnect deployment (every NF-capable
    OVN-Kubernetes is interconnect), and the central-NB overlays are router-policy only."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(REPO / "deploy")],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert [d for d in YAML(typ="safe").load_all(out) if d] == kustomize("interconnect")
    readme = (REPO / "deploy" / "README.md").read_text(encoding="utf-8")
    first_row = next(line for line in readme.splitlines() if line.startswith("| **"))
    assert "overlays/interconnect" in first_row
