"""``osc-gitops sandbox up --datapath``: the README's quick start with packets. ``up`` is a real
process (the session keeps running); the user's commands run as the README shows them (kubectl
and ``osc-gitops`` with the exports ``up`` printed). One data-path sandbox for the module, plus
a plain one for the hint."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.datapath.network import DATAPATH_TOOLS, datapath_unavailable_reason
from osc_gitops_sandbox.ovn import distributions

from tests.support.cli import cli
from tests.support.paths import POLICIES

pytestmark = [pytest.mark.datapath, pytest.mark.ovn]


def osc(*args: object) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "osc-gitops"
    return subprocess.run([str(script), *map(str, args)], capture_output=True, text=True,
                          timeout=180, check=False)  # fmt: skip


def kubectl(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, **env})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "condition not met in time"
        time.sleep(0.05)
    return time.monotonic() - start


def netns_of(pid: int) -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in names.stdout.splitlines()
            if line.startswith(f"osc-dp-{pid}-")]  # fmt: skip


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    distributions.sid().require(DATAPATH_TOOLS)  # missing sid root: fail, saying `make setup`
    assert datapath_unavailable_reason(distributions.SID) is None
    folder = tmp_path_factory.mktemp("sbx-dp")
    up = osc("sandbox", "up", "--datapath", "--dir", folder)
    assert up.returncode == 0, up.stderr
    assert "OVS and ovn-controller" in up.stderr and "No data path" not in up.stderr
    env = dict(re.findall(r"^export (\w+)=(\S+)$", up.stdout, flags=re.M))
    try:
        yield folder, env
    finally:
        osc("sandbox", "down", "--dir", folder)


@pytest.fixture
def user_env(
    session: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> dict[str, str]:
    """What ``eval "$(osc-gitops sandbox up --datapath)"`` does to a shell."""
    for key, value in session[1].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OSC_CACHE_DIR", str(tmp_path / "cache"))
    return session[1]


def test_the_quick_start_steers_through_the_vnfs(
    session: tuple[Path, dict[str, str]], user_env: dict[str, str]
) -> None:
    folder, env = session
    # the session plays the kubelets: nodes Ready, pods Running with their addresses
    nodes = kubectl(env, "get", "nodes")
    assert [line.split()[:2] for line in nodes.splitlines()[1:]] == [
        ["node-1", "Ready"], ["node-2", "Ready"]]  # fmt: skip
    pods = kubectl(env, "get", "pods", "-n", "shop-frontend", "-o", "wide").splitlines()
    assert pods[1].split()[:3] == ["cdn-edge-1", "1/1", "Running"]
    kubectl(env, "run", "web-3", "-n", "shop-frontend", "--image=nginx", "--labels=app=web")
    nbctl = folder / "bin" / "ovn-nbctl"

    def bound() -> bool:  # ovn-controller bound the new pod's port: it is plugged
        out = subprocess.run([str(nbctl), "--if-exists", "get", "Logical_Switch_Port",
                              "shop-frontend_web-3", "up"], capture_output=True, text=True,
                             check=False)  # fmt: skip
        return out.stdout.strip() == "true"

    wait_for(bound)
    assert "1/1" in kubectl(env, "get", "pod", "web-3", "-n", "shop-frontend")
    # --wait: the steering is held until OVN reports the VNF guests healthy (issue 22)
    applied = cli("apply", POLICIES, "--auto-approve", "--wait", "--wait-timeout", "60s")
    assert applied.code == 0, applied.err
    vmis = kubectl(env, "get", "vmi", "-n", "osc-vnfs", "-o", "json")
    assert len(json.loads(vmis)["items"]) == 3  # firewall on both nodes, ips on node-1

    # VNF guests forward, so OVN's health checks pass: the fail-close bindings steer
    def steered() -> bool:
        return cli("explain", "shop-backend/api-1", POLICIES, "--trace").code == 0

    healthy_after = wait_for(steered)
    result = cli("explain", "shop-frontend/web-3", POLICIES, "--trace")
    assert result.code == 0, result.out
    assert (
        "[ok] Binding web-firewall, from the pod: icmp echo 10.244.1.11 -> 10.244.1.9 "
        "(shop-frontend_web-3 -> shop-backend_cache-1): reaches VNF firewall at its port "
        "nf_firewall_node-1_in"
    ) in result.out
    assert "reaches VNF ips at its port nf_ips_node-1_out" in result.out
    assert "NOT STEERED" not in result.out
    api = cli("explain", "shop-backend/api-1", POLICIES, "--trace")
    assert "[ok] Binding api-ips, to the pod: tcp" in api.out
    assert "VirtualMachine osc-vnfs/ips-node-1, healthy" in api.out
    assert cli("explain", "shop-backend/api-1", POLICIES).code == 0
    print(f"health checks passed {healthy_after:.2f} s after apply returned")


def test_the_quick_start_with_suricata_drops_an_attack_on_a_protected_pod(
    session: tuple[Path, dict[str, str]], user_env: dict[str, str], tmp_path: Path
) -> None:
    """The README's Suricata lines: examples/suricata (its manager's URL the session's, in case
    port 8790 was taken), then ``bin/in-pod`` with curl against the pods' web servers."""
    folder, _ = session
    state = json.loads((folder / "session.json").read_text())
    policies = tmp_path / "suricata"
    policies.mkdir()
    text = (POLICIES.parent / "suricata" / "suricata.yaml").read_text()
    (policies / "suricata.yaml").write_text(
        text.replace("http://127.0.0.1:8790/events", state["security_manager"])
    )
    applied = cli("apply", policies, "--auto-approve", "--wait", "--wait-timeout", "60s")
    assert applied.code == 0, applied.err
    assert "not delivered" not in applied.err

    def curl(src: str, address: str, query: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(folder / "bin" / "in-pod"), src, "curl", "-sm1",
             f"http://{address}/cgi-bin/status?host=x{query}"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip

    attack = "%3Bcat%20/etc/passwd"
    web1, static1 = "10.244.1.5", "10.244.2.6"  # shop-frontend/web-1 (app=web), static-1
    assert curl("shop-backend/cache-1", web1, "").returncode == 0, "benign: answered"
    assert curl("shop-backend/cache-1", web1, attack).returncode == 28, "dropped: curl timed out"
    unprotected = curl("shop-backend/cache-1", static1, attack)
    assert unprotected.returncode == 0 and "etc/passwd" in unprotected.stdout
    manager = json.loads(
        subprocess.run(["curl", "-s", state["security_manager"].replace("/events", "/status")],
                       capture_output=True, text=True, check=True, timeout=30).stdout
    )  # fmt: skip
    held = {b["node"]: b["members"] for b in manager["bindings"]}
    assert {"shop-backend/web-canary", "shop-frontend/web-1"} <= set(held["node-1"])
    assert held["node-2"] == ["shop-frontend/web-2"]
    (guest,) = [g for g in manager["guests"] if g["node"] == "node-1" and g["running"]]
    alerts = [json.loads(line) for line in Path(guest["eve"]).read_text().splitlines()]
    assert any(a.get("event_type") == "alert" and a["dest_ip"] == web1 for a in alerts)
    missing = subprocess.run([str(folder / "bin" / "in-pod"), "shop/none", "true"],
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert missing.returncode == 1 and "no pod shop/none is plugged" in missing.stderr


def test_exec_into_pods_and_guests_and_the_forwarding_annotation(
    session: tuple[Path, dict[str, str]], user_env: dict[str, str]
) -> None:
    """Issue 33 item 4: ``sandbox exec`` runs a command in a pod's or a VNF guest's network
    namespace (kubectl exec says so instead of NotFound); ping is there; a VM annotated
    ``sandbox.osc.io/forwarding=false`` makes its guest stop forwarding (OVN's health check
    fails), and removing the annotation makes it forward again."""
    folder, env = session
    applied = cli("apply", POLICIES, "--auto-approve", "--wait", "--wait-timeout", "60s")
    assert applied.code == 0, applied.err  # the firewall guests (an earlier test may differ)
    script = Path(sys.executable).parent / "osc-gitops"

    def sandbox_exec(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(script), "sandbox", "exec", "--dir", str(folder), *args],
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip

    up = osc("sandbox", "up", "--datapath", "--dir", folder)  # its own eval line, and exec's
    assert f'eval "$(osc-gitops sandbox up --datapath --dir {folder})"' in up.stderr
    assert f"osc-gitops sandbox exec --dir {folder} shop-frontend/web-1 -- ping" in up.stderr
    addr = sandbox_exec("shop-frontend/web-1", "--", "ip", "-br", "-4", "addr", "show", "eth0")
    assert addr.returncode == 0 and "10.244." in addr.stdout, addr.stderr
    cache = json.loads(kubectl(env, "get", "pod", "cache-1", "-n", "shop-backend", "-o", "json"))
    ping = sandbox_exec("shop-frontend/web-1", "--", "ping", "-c", "1", "-W", "2",
                        cache["status"]["podIP"])  # fmt: skip
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert sandbox_exec("shop-frontend/web-1", "--", "sh", "-c", "exit 7").returncode == 7
    missing = sandbox_exec("shop-frontend/nope", "--", "true")
    assert missing.returncode == 1 and "shop-frontend/nope: no pod or VNF guest" in missing.stderr
    refused = subprocess.run(["kubectl", "exec", "-n", "shop-frontend", "web-1", "--", "true"],
                             capture_output=True, text=True, timeout=60, check=False,
                             env={**os.environ, **env})  # fmt: skip
    assert "osc-gitops sandbox exec shop-frontend/web-1 -- CMD" in refused.stderr

    def bridge(state: str) -> bool:
        link = sandbox_exec("osc-vnfs/firewall-node-1", "--", "ip", "-br", "link", "show", "br0")
        return link.returncode == 0 and link.stdout.split()[1] == state

    assert bridge("UP")

    def health(vnf: str, node: str) -> str:
        data = json.loads(cli("plan", POLICIES, "-o", "json").out)
        inst = data["meta"]["vnf_instances"]
        return str(next(i["health"] for i in inst if (i["vnf"], i["node"]) == (vnf, node)))

    kubectl(env, "annotate", "vm", "-n", "osc-vnfs", "firewall-node-1",
            "sandbox.osc.io/forwarding=false")  # fmt: skip
    wait_for(lambda: bridge("DOWN"))
    wait_for(lambda: health("firewall", "node-1") == "not healthy")
    assert health("firewall", "node-2") == "healthy"
    kubectl(env, "annotate", "vm", "-n", "osc-vnfs", "firewall-node-1",
            "sandbox.osc.io/forwarding-")  # fmt: skip
    wait_for(lambda: bridge("UP"))
    wait_for(lambda: health("firewall", "node-1") == "healthy")


def test_down_removes_every_process_namespace_and_the_folder(
    session: tuple[Path, dict[str, str]],
) -> None:
    # Last of the data-path tests: it stops the module's session.
    folder, _ = session
    state = json.loads((folder / "session.json").read_text())
    assert state["datapath"] is True and len(state["pids"]) == 6  # NB, SB, northd + a chassis
    assert len(netns_of(state["pid"])) >= 13  # the chassis, 12+1 pods, 3 VNF guests
    down = osc("sandbox", "down", "--dir", folder)
    assert down.returncode == 0 and f"sandbox stopped (pid {state['pid']})" in down.stderr
    assert not folder.exists()
    for pid in (state["pid"], *state["pids"]):
        wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists(), timeout=10)
    assert netns_of(state["pid"]) == []


def test_plain_up_says_vnfs_are_never_healthy_and_datapath_needs_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plain"
    up = osc("sandbox", "up", "--dir", folder)
    try:
        assert up.returncode == 0, up.stderr
        assert "No data path: " in up.stderr
        assert "run as root: osc-gitops sandbox up --datapath" in up.stderr
        other = osc("sandbox", "up", "--dir", folder, "--datapath")
        assert other.returncode == 1 and "without --datapath" in other.stderr
        no_netns = osc("sandbox", "exec", "--dir", folder, "shop-frontend/web-1", "--", "true")
        assert no_netns.returncode == 1
        assert "this sandbox runs without a data path" in no_netns.stderr
    finally:
        assert osc("sandbox", "down", "--dir", folder).returncode == 0
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # as a user without root
    refused = cli("sandbox", "up", "--datapath", "--dir", tmp_path / "user")
    assert refused.code == 1
    assert refused.err.startswith("error: --datapath needs root: it creates network namespaces")
    assert not (tmp_path / "user").exists()
