"""The standalone reproductions in ``docs/upstream/`` still reproduce on OVN 26.03.

Each script is written for a plain OVN installation (tools on ``PATH``) so it can go to the
OVN maintainers as it is; here it runs against the sid root through wrapper scripts
(``osc_gitops_sandbox.ovn.distributions.write_wrappers``). The day an OVN release fixes the bug,
this test fails: then the product's workaround or warning can go (see the script's header and
``docs/upstream/README.md``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from osc_gitops_sandbox.datapath.network import DATAPATH_TOOLS
from osc_gitops_sandbox.ovn import distributions

from tests.support.paths import REPO

pytestmark = pytest.mark.datapath

UPSTREAM = REPO / "docs" / "upstream"


def test_a_from_lport_network_function_and_a_load_balancer_drop_the_vip_connection(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the reproduction needs root (network namespaces, veths, ovs-vswitchd)")
    sid = distributions.sid().require(DATAPATH_TOOLS)  # missing sid root: fail (make setup)
    env = {**os.environ, **distributions.write_wrappers(sid, tmp_path / "bin")}
    script = subprocess.Popen(
        ["sh", str(UPSTREAM / "nf-from-lport-lb-reply-dropped.sh")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    out, err = script.communicate(timeout=120)
    assert script.returncode == 0, f"{out}\n{err}"
    assert "client -> server 10.0.0.2:8080 (direct):         connected" in out
    assert "client -> VIP 10.96.0.100:80 (load balancer):    FAILED" in out
    assert "the same ACL without the Network Function, VIP:  connected" in out
    crossed = int(out.split("(SYN and its retransmits): ")[1].split()[0])
    assert crossed >= 1, "the SYN did cross the VNF: it is the reply that is lost"
    assert "workaround, the function ports stateless, VIP:   connected" in out
    through = int(out.split("frames that crossed the VNF meanwhile: ")[1].split()[0])
    assert through >= 3, "with the workaround the connection crosses the VNF"
    assert "REPRODUCED" in out and "ovn-northd 26.03" in out
    mine = f"nflb{script.pid}-"  # the script names its namespaces after its pid
    assert not [n for n in os.listdir("/run/netns") if n.startswith(mine)], "left behind"


def test_a_port_group_deleted_and_re_created_in_one_northd_iteration_loses_its_flows(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the reproduction needs root (network namespaces, ovs-vswitchd)")
    sid = distributions.sid().require((*DATAPATH_TOOLS, "ovs-ofctl", "ovn-sbctl", "ovn-appctl"))
    env = {**os.environ, **distributions.write_wrappers(sid, tmp_path / "bin")}
    script = subprocess.Popen(
        ["sh", str(UPSTREAM / "northd-port-group-recreated.sh")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    out, err = script.communicate(timeout=120)
    assert script.returncode == 0, f"{out}\n{err}"
    lines = {line.split(":")[0].strip(): line for line in out.splitlines()}
    assert "SB: 1_pg0 p1 ACL flows: 2" in lines["1. pg0 = {p1} with its ACL"]
    assert "NB: pg0 (1 port) SB: none     ACL flows: 0" in lines[
        "2. deleted, re-created (one northd iteration)"]  # fmt: skip
    assert "SB: 1_pg0 p1 ACL flows: 2" in lines["3. deleted, northd --wait=sb, re-created"]
    assert "SB: 1_pg0 p1 ACL flows: 2" in lines[
        "4. emptied, refilled in place (one northd iteration)"]  # fmt: skip
    assert "BUG:" in out and "ovn-northd 26.03" in out
    mine = f"pgre{script.pid}-"  # the script names its namespace after its pid
    assert not [n for n in os.listdir("/run/netns") if n.startswith(mine)], "left behind"
