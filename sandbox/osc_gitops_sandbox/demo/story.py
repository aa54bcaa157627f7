"""``osc-gitops demo``: the whole story on a laptop, with real parts and no cluster.

Starts the sandbox (real ``ovsdb-server`` + ``ovn-northd`` from Debian's ``ovn-central``, with
upstream OVN 26.03's NB schema when available, and the Kubernetes API emulator), seeds it from
``examples/cluster/`` as OVN-Kubernetes would, and walks through the user stories of the 2017
design: plan -> apply -> empty plan -> a newly labelled pod is steered -> a VNF VM deleted by a
user is redeployed -> a binding removed from git is pruned.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def _find(folder: str | None, default: str) -> Path:
    for candidate in [Path(folder)] if folder else [Path(default), REPO / default]:
        if candidate.is_dir():
            return candidate
    raise UserError(f"cannot find {folder or default}: run the demo from the osc-gitops checkout")


def _say(text: str = "") -> None:
    print(text, flush=True)


def _step(title: str) -> None:
    _say()
    _say(f"=== {title}")


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """The OVN adapter's cache follows the NB asynchronously (ms); wait until it saw a change
    that another client (here: the simulated OVN-Kubernetes) just committed."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise UserError("the sandbox did not reflect a change within 5 s")
        time.sleep(0.02)


def run(
    policies: str | None, cluster_dir: str | None, steering: str | None, *,
    datapath: bool = False, ovn_version: str | None = None, zones: bool = False,
) -> int:  # fmt: skip
    """The demo. ``ovn_version``: ``"26.03"`` (default; OVN 26.03 from the sid root that
    ``make setup`` builds, Network Function steering) or ``"23.03"`` (the host's Debian OVN,
    router-policy steering); ``steering`` overrides the backend the version implies.
    ``zones``: the two-zone interconnect story with packets (``demo --datapath --zones``)."""
    from osc_gitops_sandbox.datapath.world import DEFAULT_OVN, OVN_VERSIONS
    from osc_gitops_sandbox.ovn.stack import ovn_unavailable_reason

    version = ovn_version or DEFAULT_OVN
    if version not in OVN_VERSIONS:
        raise UserError(f"--ovn {version}: one of {', '.join(OVN_VERSIONS)}")
    if zones:
        if version != DEFAULT_OVN or steering not in (None, "network-function"):
            raise UserError("--zones runs OVN 26.03 with network-function steering only")
        from osc_gitops_sandbox.demo.zones import run as run_zones

        return run_zones()
    if datapath:
        from osc_gitops_sandbox.demo.datapath import run as run_datapath

        return run_datapath(version, steering)
    distribution = OVN_VERSIONS[version].distribution
    reason = ovn_unavailable_reason(northd=True, distribution=distribution)
    if reason:
        other = ", or try --ovn 23.03" if version != "23.03" else ""
        raise UserError(f"the demo on OVN {version} cannot run here: {reason}{other}")
    policy_dir = _find(policies, "examples/policies")
    seed_dir = _find(cluster_dir, "examples/cluster")
    work = Path(tempfile.mkdtemp(prefix="osc-demo-"))
    try:
        return _story(work, policy_dir, seed_dir, distribution, steering)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # also when a step failed


def _story(
    work: Path, policy_dir: Path, seed_dir: Path, distribution: Any, steering: str | None
) -> int:
    from osc_gitops_sandbox.ovn.cluster import SandboxCluster
    from reconciler.adapters.kube.client import KubeCluster, KubeSettings
    from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
    from reconciler.core.compiling.compile import CompileOptions
    from reconciler.core.model.observed import OvnCapabilities
    from reconciler.core.planning.full import make_plan
    from reconciler.core.steering import default_backend
    from reconciler.engine.pipeline import observe, reconcile
    from reconciler.engine.wait import reconcile_until_ready
    from reconciler.manifests.load import load_path
    from reconciler.render import render

    policies_copy = work / "policies"
    shutil.copytree(policy_dir, policies_copy)

    with SandboxCluster(work / "sandbox", distribution=distribution) as cluster:
        cluster.seed_dir(seed_dir)
        if steering is None:
            steering = default_backend(OvnCapabilities("", cluster.network_function)).name
        schema = (
            "OVN 26.03 NB schema (Network Function tables)"
            if cluster.network_function
            else ("installed OVN NB schema (no Network Function tables)")
        )
        _say("osc-gitops demo: real ovsdb-server + ovn-northd and a Kubernetes API emulator")
        _say(f"  OVN NB:     {cluster.nb_remote}  ({schema})")
        _say(f"  Kubernetes: {cluster.kube.url}  (kubeconfig {cluster.kubeconfig})")
        _say(f"  manifests:  {policy_dir}  ·  cluster seeded from {seed_dir}")
        _say(f"  steering:   {steering}")

        kube = KubeCluster(KubeSettings(kubeconfig=cluster.kubeconfig))
        ovn = OvnNorthbound.connect(OvnSettings(remote=cluster.nb_remote))
        options = CompileOptions(steering=steering)
        cmd = f"osc-gitops {{}} {policies_copy} --ovn-nb {cluster.nb_remote} " \
              f"--kubeconfig {cluster.kubeconfig}"  # fmt: skip

        def show_plan(brief: bool = False) -> Any:
            _say(f"$ {cmd.format('plan')}")
            the_plan = make_plan(load_path(policies_copy), observe(kube, ovn, "osc-gitops"),
                                 options)  # fmt: skip
            text = render(the_plan)
            if brief and len(text.splitlines()) > 40:
                lines = text.splitlines()
                text = "\n".join([*lines[:30], "  …", *lines[-8:]]) + "\n"
            sys.stdout.write(text)
            _say(f"(exit code {2 if the_plan.changes else 0})")
            return the_plan

        def apply(wait: bool = False) -> None:
            _say(f"$ {cmd.format('apply --wait' if wait else 'apply')}")
            if wait:
                first, waited = reconcile_until_ready(load_path(policies_copy), kube, ovn,
                                                      options, timeout=60)  # fmt: skip
                report = first.report
            else:
                report = reconcile(load_path(policies_copy), kube, ovn, options)
            s = report.plan.summary()
            held = len(report.plan.held)
            _say(
                f"Apply complete: {s['create']} created, {s['update']} changed, {s['delete']} "
                f"deleted in {sum(report.seconds.values()) * 1000:.0f} ms; re-plan is empty"
                + (f" ({held} binding(s) x node held until their VNF is healthy)." if held
                   else ".")
            )  # fmt: skip
            if wait:
                ready = (
                    f"Ready after {waited.seconds:.1f} s ({waited.passes} pass(es)): OVN reported "
                    "every new VNF instance healthy, the held steering is switched on."
                )
                _say(ready if waited.done else "not ready: " + "; ".join(waited.unready))

        try:
            _step("1. Plan from an empty NB: VNF VMs, their OVN ports, port groups, steering")
            show_plan(brief=True)
            _step(
                "2. Apply --wait (Kubernetes first, then ONE OVN transaction, then verify; the "
                "steering onto the new VNFs once OVN reports them healthy)"
            )
            apply(wait=True)
            _step("3. Plan again: nothing to do (idempotent)")
            show_plan()

            _step("4. A new pod labelled app=web starts on node-2 (OVN-Kubernetes adds its port)")
            cluster.add_pod("shop-frontend", "web-new", "node-2", {"app": "web"})
            _wait_for(lambda: any(p.name == "shop-frontend_web-new"
                                  for p in ovn.read().pod_ports))  # fmt: skip
            show_plan()
            apply()

            vm = next(o for o in kube.list_owned("VirtualMachine", "osc-gitops"))
            _step(f"5. Somebody deletes a VNF VM (kubectl -n {vm.namespace} delete vm {vm.name})")
            cluster.delete_vm(vm.namespace, vm.name)
            show_plan()
            apply()

            _step("6. A binding is removed from git: its steering rows are pruned")
            removed = _remove_one_binding(policies_copy)
            _say(f"(removed Binding {removed} from the manifests)")
            show_plan()
            apply()
            _step("7. Final plan")
            show_plan()
        finally:
            ovn.close()
    _say()
    _say("demo finished: sandbox stopped, nothing left running.")
    return 0


def _remove_one_binding(folder: Path) -> str:
    """Delete the last Binding document from the copied manifests (as a git commit would),
    whatever its style (``metadata: {name: x}`` or block style)."""
    from ruamel.yaml import YAML

    from reconciler.manifests.load import find_manifest_files, load_path

    desired = load_path(folder)
    name = sorted(desired.bindings)[-1]
    yaml = YAML(typ="safe", pure=True)
    for path in find_manifest_files(folder):
        docs = path.read_text().split("\n---")
        kept = []
        for text in docs:
            try:
                data = yaml.load(text)
            except Exception:  # a fragment the split cut oddly: keep it as it was
                data = None
            meta = data.get("metadata") if isinstance(data, dict) else None
            if (
                isinstance(data, dict)
                and data.get("kind") == "Binding"
                and isinstance(meta, dict)
                and meta.get("name") == name
            ):
                continue
            kept.append(text)
        if len(kept) != len(docs):
            path.write_text("\n---".join(kept))
            return name
    raise UserError(f"could not find Binding {name} in {folder}")
