"""A long-running node agent (``osc-gitops run --node``, as the DaemonSet runs it) steers a pod
labelled on its node within about a second, publishes its status Lease, and labels its metrics
with its node."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn.zones import ZonedCluster

from tests.functional.zones.support import AGENTS_NS, central, owned
from tests.support.ovn import OVN_MARKS
from tests.support.paths import REPO

pytestmark = OVN_MARKS


def web_ports(zones: ZonedCluster, node: str) -> list[str]:
    rows = owned(zones.nb_remote(node))
    (fields,) = [f for (t, k), f in rows.items() if t == "Port_Group" and ".web." in k]
    return list(fields["ports"])


def wait_until(condition: object, what: str, timeout: float = 15.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():  # type: ignore[operator]
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def running_agent(
    zones: ZonedCluster, policies: Path
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli", "run", str(policies), "--node", "node-1",
         "--ovn-nb", zones.nb_remote("node-1"), "--kubeconfig", zones.kubeconfig,
         "--metrics-addr", "127.0.0.1:0", "--debounce", "0.05", "--interval", "30"],
        stderr=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ},
    )  # fmt: skip
    assert proc.stderr is not None
    address = ""
    for line in proc.stderr:
        if '"serving"' in line:
            address = json.loads(line)["metrics_addr"]
            break
    assert address, "the agent did not start"
    # keep reading its log, or a full pipe would block the agent
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield proc, address
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def test_a_running_agent_steers_a_pod_labelled_on_its_node(
    zones: ZonedCluster, policies: Path, running_agent: tuple[subprocess.Popen[str], str]
) -> None:
    _, address = running_agent
    assert central(zones, "apply", policies).code == 0
    wait_until(lambda: zones.kube.get_object("Lease", AGENTS_NS, "osc-gitops-agent-node-1"),
               "the agent's first status")  # fmt: skip
    zones.add_pod("shop-frontend", "cache-1", "node-1", {"app": "cache"})
    time.sleep(0.3)
    assert "shop-frontend_cache-1" not in web_ports(zones, "node-1")
    zones.label_pod("shop-frontend", "cache-1", {"app": "web"})
    took = wait_until(lambda: "shop-frontend_cache-1" in web_ports(zones, "node-1"),
                      "the labelled pod in node-1's web group")  # fmt: skip
    print(f"\nlabel -> in the zone's Port_Group: {took * 1000:.0f} ms (polling every 20 ms)")
    assert took < 5
    lease = zones.kube.get_object("Lease", AGENTS_NS, "osc-gitops-agent-node-1")
    assert lease is not None
    record = json.loads(lease["metadata"]["annotations"]["osc.io/agent-status"])
    assert (record["role"], record["node"]) == ("agent", "node-1")
    owner = lease["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Node", "node-1")
    metrics = urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    series = [line for line in metrics.splitlines() if line and not line.startswith("#")]
    assert series and all('node="node-1"' in line for line in series)
