"""``osc-gitops sandbox up/down`` and ``explain --trace`` (issue #24 items 5 and 7), through the
CLI: ``up`` is a real process (it leaves a session running), the commands a user then runs are
in-process with the environment ``up`` printed. One sandbox for the module."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import CliResult, cli
from tests.support.ovn import require_ovn_or_fail
from tests.support.paths import POLICIES

pytestmark = pytest.mark.ovn


def osc(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "osc-gitops"
    return subprocess.run(
        [str(script), *map(str, args)], capture_output=True, text=True, timeout=120,
        check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def parse_exports(text: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(\S+)$", text, flags=re.M))


def wait_for(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    require_ovn_or_fail(northd=True)
    folder = tmp_path_factory.mktemp("sbx")
    up = osc("sandbox", "up", "--dir", folder)
    assert up.returncode == 0, up.stderr
    env = parse_exports(up.stdout)
    try:
        yield folder, env
    finally:
        osc("sandbox", "down", "--dir", folder)


@pytest.fixture
def user_env(session: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """What ``eval "$(osc-gitops sandbox up)"`` does to a shell, for in-process commands."""
    for key, value in session[1].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OSC_CACHE_DIR", str(tmp_path / "cache"))
    return session[1]


def test_up_prints_the_exports_and_kubectl_works(
    session: tuple[Path, dict[str, str]], user_env: dict[str, str]
) -> None:
    folder, env = session
    assert set(env) == {"OSC_OVN_NB", "OSC_OVN_SB", "KUBECONFIG", "OSC_OVN_TRACE"}
    assert env["OSC_OVN_NB"] == f"unix:{folder}/world/ovn/nb.sock"
    pods = subprocess.run(["kubectl", "get", "pods", "-A", "-o", "name"], capture_output=True,
                          text=True, timeout=60, check=True, env=os.environ)  # fmt: skip
    assert "pod/web-1" in pods.stdout and len(pods.stdout.split()) == 12
    again = osc("sandbox", "up", "--dir", folder)
    assert again.returncode == 0 and parse_exports(again.stdout) == env
    assert "(already up)" in again.stderr
    # the hints name the --dir that finds this sandbox: copied as printed, they work
    assert f'eval "$(osc-gitops sandbox up --dir {folder})"' in again.stderr
    assert f"Stop it with: osc-gitops sandbox down --dir {folder}\n" in again.stderr
    other = osc("sandbox", "up", "--dir", folder, "--ovn", "23.03")
    assert other.returncode == 1
    assert f"run `osc-gitops sandbox down --dir {folder}` first" in other.stderr


def test_a_pod_created_with_kubectl_gets_its_port_and_is_steered(
    session: tuple[Path, dict[str, str]], user_env: dict[str, str], tmp_path: Path
) -> None:
    folder, _ = session
    subprocess.run(
        ["kubectl", "run", "web-new", "-n", "shop-frontend", "--image=nginx", "--labels=app=web"],
        capture_output=True, text=True, timeout=60, check=True, env=os.environ,
    )  # fmt: skip
    nbctl = folder / "bin" / "ovn-nbctl"

    def has_port() -> bool:
        out = subprocess.run([str(nbctl), "--bare", "--columns=name", "find",
                              "Logical_Switch_Port", "name=shop-frontend_web-new"],
                             capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        return "shop-frontend_web-new" in out.stdout

    wait_for(has_port)
    applied = cli("apply", POLICIES, "--auto-approve")
    assert applied.code == 0, applied.err
    assert cli("plan", POLICIES).code == 0
    explained = cli("explain", "shop-frontend/web-new", POLICIES)
    assert "SecurityGroup web" in explained.out


def trace(pod: str, policies: Path) -> CliResult:
    return cli("explain", pod, policies, "--trace")


def test_explain_trace_reaches_the_vnf_port(user_env: dict[str, str], tmp_path: Path) -> None:
    # No health check: OVN counts the instances healthy (the sandbox runs no VNF guest), so
    # the packet is handed to the VNF's port.
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    vnfs = policies / "vnfs.yaml"
    checked = "  healthCheck:\n    interval: 1\n    timeout: 1\n    successCount: 1\n"
    checked += "    failureCount: 2\n"
    vnfs.write_text(vnfs.read_text().replace(checked, "  healthCheck: {enabled: false}\n"))
    assert cli("apply", policies, "--auto-approve").code == 0
    subprocess.run([user_env["OSC_OVN_TRACE"].replace("ovn-trace", "ovn-nbctl"), "--wait=sb",
                    "sync"], check=True, timeout=30, capture_output=True)  # fmt: skip
    result = trace("shop-backend/db-1", policies)
    assert result.code == 0, result.out + result.err
    assert (
        "[ok] Binding db-firewall, to the pod: tcp 10.244.2.10 -> 10.244.2.9:5432 "
        "(shop-backend_worker-1 -> shop-backend_db-1): reaches VNF firewall at its port "
        "nf_firewall_node-2_out"
    ) in result.out
    both = trace("shop-frontend/web-2", policies)
    assert "from the pod: icmp echo 10.244.2.5 ->" in both.out
    assert "reaches VNF firewall at its port nf_firewall_node-2_in" in both.out
    data = cli("explain", "shop-frontend/web-2", policies, "--trace", "-o", "json")
    steps = json.loads(data.out)["trace"]
    assert {s["direction"] for s in steps} == {"to-pod", "from-pod"}
    assert all(s["reachesVnf"] for s in steps) and steps[0]["outputs"]


def test_explain_trace_says_why_a_packet_does_not_reach_the_vnf(user_env: dict[str, str]) -> None:
    # The examples' health checks: no VNF answers OVN's probe here, so the fail-close ips
    # binding drops what it steers.
    assert cli("apply", POLICIES, "--auto-approve").code == 0
    subprocess.run([user_env["OSC_OVN_TRACE"].replace("ovn-trace", "ovn-nbctl"), "--wait=sb",
                    "sync"], check=True, timeout=30, capture_output=True)  # fmt: skip
    result = trace("shop-backend/api-1", POLICIES)
    assert result.code == 3
    assert (
        "[NOT STEERED] Binding api-ips, to the pod: tcp 10.244.1.9 -> 10.244.1.7:8080 "
        "(shop-backend_cache-1 -> shop-backend_api-1): dropped in ls_out_network_function "
        "before reaching VNF ips; VNF ips is not healthy as OVN sees it and the binding fails "
        "close"
    ) in result.out
    missing = cli("explain", "shop-backend/api-1", POLICIES, "--trace", "--ovn-trace",
                  "/nonexistent/ovn-trace")  # fmt: skip
    assert missing.code == 1 and "/nonexistent/ovn-trace not found" in missing.err


def test_down_stops_everything(session: tuple[Path, dict[str, str]]) -> None:
    # Last in the module: it stops the module's session (the fixture's own down then finds
    # none).
    folder, _ = session
    pid = int(json.loads((folder / "session.json").read_text())["pid"])
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True,
                              check=False).stdout.split()  # fmt: skip
    assert len(children) == 3  # NB, SB, northd
    down = osc("sandbox", "down", "--dir", folder)
    assert down.returncode == 0 and f"sandbox stopped (pid {pid})" in down.stderr
    assert not folder.exists()
    for process in (pid, *map(int, children)):
        wait_for(lambda process=process: not Path(f"/proc/{process}").exists())
    assert "no sandbox is up" in osc("sandbox", "down", "--dir", folder).stderr
    assert cli("sandbox").code == 1  # up or down is required: a usage error


def test_up_refuses_a_bad_cluster_description_or_folder(tmp_path: Path) -> None:
    bad = tmp_path / "cluster"
    bad.mkdir()
    (bad / "nodes.yaml").write_text("kind: List\nitems: [\n")
    result = cli("sandbox", "up", "--cluster", bad, "--dir", tmp_path / "s")
    assert result.code == 1
    assert result.err == (
        f"error: {bad}/nodes.yaml:3:1: YAML syntax error: expected the node content, but found "
        "'<stream end>'\n"
    )
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    refused = cli("sandbox", "up", "--dir", other)
    assert refused.code == 1 and "is not a sandbox folder" in refused.err
    assert (other / "notes.txt").exists()
