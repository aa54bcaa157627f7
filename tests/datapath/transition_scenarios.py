"""The transitions of issue 22 as scenarios on a data-path world (OVN 26.03), each measured with
the continuous probes of :mod:`osc_gitops_sandbox.datapath.streams`: used by
``tests/datapath/test_transitions.py`` (which asserts) and ``bench/datapath_transitions.py``
(which repeats them for the figures in docs/datapath.md).

The world's pods: ``web-a`` (node-1) in group ``web``, steered ``both`` through the firewall,
``fail-close``; ``other-b`` (node-1) in group ``api``, ``fail-open``; the probes start at
``client-c`` (node-2). Every scenario starts from :func:`clean` (no VNF at all).
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from typing import Any

from osc_gitops_sandbox.datapath.streams import IcmpStream, TcpStream
from osc_gitops_sandbox.datapath.world import VNF_NAMESPACE, World, binding, security_group

FW1, FW2 = f"{VNF_NAMESPACE}/firewall-node-1", f"{VNF_NAMESPACE}/firewall-node-2"
PORT = 7070
GROUPS = (security_group("web", ["app=web"]), security_group("api", ["app=api"]))
BINDINGS = (
    binding("web-firewall", group="web", failure_policy="fail-close"),
    binding("api-firewall", group="api", failure_policy="fail-open"),
)
FAST_CHECK = "  healthCheck: {interval: 1, timeout: 1, successCount: 1, failureCount: 1}\n"
STANDBY = "  instancesPerNode: 2\n  updateStrategy: {maxUnavailable: 2}\n" + FAST_CHECK


def firewall(image: str = "1.4.2", *, node: str | None = None, extra: str = "") -> str:
    """VnfDeployment ``firewall`` (on ``node`` only, if given)."""
    selector = f"  nodeSelector: {{kubernetes.io/hostname: {node}}}\n" if node else ""
    return (
        "apiVersion: osc.io/v1alpha1\nkind: VnfDeployment\nmetadata: {name: firewall}\n"
        f"spec:\n  namespace: {VNF_NAMESPACE}\n  image: quay.io/example/vnf-firewall:{image}\n"
        f"{selector}{extra}"
    )


def apply_wait(w: World, timeout: str = "90s") -> str:
    """``osc-gitops apply --wait`` (the CLI in-process); the plan it printed."""
    from reconciler.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*w.apply_args, "--wait", "--wait-timeout", timeout])
    if code != 0:
        raise AssertionError(f"apply --wait exited {code}: {err.getvalue()}")
    return out.getvalue()


def clean(w: World) -> None:
    """No VNF at all (their guests gone, northd's probes of them dropped), ``web-a`` labelled
    web and ``other-b`` api, no boot delay."""
    w.dp.boot_delay = 0.0
    w.write_manifests(*GROUPS)
    for pod in ("web-a", "other-b", "client-c", "client-d"):
        w.label(pod, None)
    apply_wait(w)
    w.dp.sync_vnfs()
    # a function created again at once could find its predecessor's "online" verdict in the
    # Southbound DB if northd had not dropped the probe yet
    deadline = time.monotonic() + 10
    while w.cluster.ovn.sbctl("--bare", "--columns=_uuid", "list", "Service_Monitor").strip():
        if time.monotonic() > deadline:
            raise AssertionError("northd kept the deleted functions' probes")
        time.sleep(0.02)
    assert not w.dp.vnfs
    w.label("web-a", "web")
    w.label("other-b", "api")


@contextlib.contextmanager
def streams(w: World, src: str, fail_close: str, fail_open: str | None) -> Iterator[dict[str, Any]]:
    """ICMP to both targets and a TCP stream to the fail-close one, from ``src``; the results
    (``fail-close``/``fail-open``/``tcp``: :class:`StreamResult`, ``retransmitted``,
    ``forwarded`` per VNF guest) land in the yielded dict when the block ends."""
    client, closed = w.pod(src), w.pod(fail_close)
    targets = {"fail-close": closed.ip}
    if fail_open:
        targets["fail-open"] = w.pod(fail_open).ip
    results: dict[str, Any] = {}
    before = {k: v.forwarded for k, v in w.dp.vnfs.items()}
    icmp = IcmpStream(client, targets)
    tcp = TcpStream(client, closed, PORT)
    try:
        yield results
    finally:
        results.update(icmp.stop())
        results["tcp"], results["retransmitted"] = tcp.stop()
        after = {k: v.forwarded for k, v in w.dp.vnfs.items()}
        results["forwarded"] = {k: v - before.get(k, 0) for k, v in after.items()}


def first_apply(w: World, boot: float) -> dict[str, Any]:
    """The first apply of the bindings onto firewalls whose guests boot ``boot`` seconds."""
    clean(w)
    w.dp.boot_delay = boot
    w.write_manifests(*GROUPS, firewall(), *BINDINGS)
    start = time.monotonic()
    with streams(w, "client-c", "web-a", "other-b") as got:
        apply_wait(w)
        got["seconds"] = time.monotonic() - start
        w.dp.wait_hv()
        got["after"] = w.dp.probe(w.pod("client-c"), w.pod("web-a"))
    return got


def new_node(w: World, boot: float) -> dict[str, Any]:
    """The firewall runs on node-1; then on node-2 too, where a protected pod (``client-d``)
    receives a stream from ``web-a``."""
    clean(w)
    w.label("client-d", "web")
    w.write_manifests(*GROUPS, firewall(node="node-1"), *BINDINGS)
    apply_wait(w)
    w.dp.boot_delay = boot
    w.write_manifests(*GROUPS, firewall(), *BINDINGS)
    start = time.monotonic()
    with streams(w, "web-a", "client-d", None) as got:
        apply_wait(w)
        got["seconds"] = time.monotonic() - start
        w.dp.wait_hv()
        got["after"] = w.dp.probe(w.pod("web-a"), w.pod("client-d"))
    return got


def rollout(w: World, boot: float) -> dict[str, Any]:
    """Two firewalls per node; a new image rolled out (``maxUnavailable: 2``: both nodes at
    once, each node's standby first)."""
    clean(w)
    w.dp.boot_delay = boot
    w.write_manifests(*GROUPS, firewall(extra=STANDBY), *BINDINGS)
    apply_wait(w)
    before = {k: v.vmi_uid for k, v in w.dp.vnfs.items()}
    w.write_manifests(*GROUPS, firewall("1.5.0", extra=STANDBY), *BINDINGS)
    start = time.monotonic()
    with streams(w, "client-c", "web-a", "other-b") as got:
        apply_wait(w, "180s")
        got["seconds"] = time.monotonic() - start
    after = {k: v.vmi_uid for k, v in w.dp.vnfs.items()}
    got["restarted"] = sorted(k for k in after if before.get(k) not in (None, after[k]))
    got["before"] = sorted(before)
    return got


def rollout_single(w: World, boot: float) -> dict[str, Any]:
    """For comparison: one firewall per node, a new image rolled out (``maxUnavailable: 1``):
    each restart is an outage of that node's firewall for its boot (the failure policy acts)."""
    clean(w)
    w.dp.boot_delay = boot
    w.write_manifests(*GROUPS, firewall(extra=FAST_CHECK), *BINDINGS)
    apply_wait(w)
    w.write_manifests(*GROUPS, firewall("1.5.0", extra=FAST_CHECK), *BINDINGS)
    start = time.monotonic()
    with streams(w, "client-c", "web-a", "other-b") as got:
        apply_wait(w, "180s")
        got["seconds"] = time.monotonic() - start
    return got


def failover(w: World, check: str = FAST_CHECK) -> dict[str, Any]:
    """Two firewalls per node, health check ``check``; node-1's active one stops forwarding:
    how long the protected pod gets no reply, and whether the other one carries it then."""
    clean(w)
    extra = "  instancesPerNode: 2\n" + check
    w.write_manifests(*GROUPS, firewall(extra=extra), *BINDINGS)
    apply_wait(w)
    group = "osc.firewall.node_1.fail_close"
    active = w.active_functions()[group]
    assert active is not None
    vm = "firewall-node-1-b" if active.endswith("._b") else "firewall-node-1"
    other = "firewall-node-1" if vm.endswith("-b") else "firewall-node-1-b"
    dead = w.dp.vnfs[f"{VNF_NAMESPACE}/{vm}"]
    with streams(w, "client-c", "web-a", None) as got:
        time.sleep(0.5)
        w.dp.set_forwarding(dead, False)
        deadline = time.monotonic() + 15
        while w.active_functions()[group] == active and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.0)  # the other one carries the traffic for a while
    w.dp.set_forwarding(dead, True)
    got["outage"] = got["fail-close"].longest_gap
    got["standby"] = f"{VNF_NAMESPACE}/{other}"
    return got
