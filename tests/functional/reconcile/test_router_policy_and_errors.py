"""Router-policy backend judged by a real ovn-northd, and the CLI's error paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from osc_gitops_sandbox.ovn.cluster import SandboxCluster
from osc_gitops_sandbox.ovn.stack import free_port

from tests.support.cli import cli, conn


def test_network_function_is_refused_clearly_on_old_ovn(rp_cluster, policies):
    result = cli("plan", policies, *conn(rp_cluster))
    assert result.code == 1
    assert "has no Network_Function tables" in result.err
    assert "--steering router-policy" in result.err
    assert "Traceback" not in result.err


def test_router_policy_rows_become_logical_flows_in_northd(rp_cluster: SandboxCluster, policies):
    result = cli("apply", policies, *conn(rp_cluster), "--steering", "router-policy")
    assert result.code == 0, result.err
    again = cli("plan", policies, *conn(rp_cluster), "--steering", "router-policy")
    assert again.code == 0, again.out
    rp_cluster.ovn.wait_northd_sync()
    flows = rp_cluster.ovn.sbctl("lflow-list", "ovn_cluster_router")
    policy = [line for line in flows.splitlines() if "lr_in_policy" in line and "osc.web" in line]
    # exit-lport towards web pods on node-1: rerouted to the firewall's address there. No
    # `inport !=` guard: ovn-controller refuses it (nominal field), see docs/datapath.md.
    assert any("match=(ip4.dst == $osc.web.node_1_ip4)" in line for line in policy), "\n".join(
        policy
    )
    assert not any("inport !=" in line for line in policy)
    assert any("10.244.1.254" in line for line in flows.splitlines() if "lr_in_policy" in line)
    # the port group's address set exists in the SB with the members' addresses
    sets = rp_cluster.ovn.sbctl("--columns=name,addresses", "list", "Address_Set")
    assert "osc.web.node_1_ip4" in sets
    assert '"10.244.1.5"' in sets  # web-1


def test_unreachable_nb_names_the_endpoint_and_exits_1(rp_cluster, policies):
    port = free_port()
    result = cli("plan", policies, "--ovn-nb", f"tcp:127.0.0.1:{port}", "--ovn-timeout", "1",
                 "--kubeconfig", rp_cluster.kubeconfig)  # fmt: skip
    assert result.code == 1
    assert f"tcp:127.0.0.1:{port}" in result.err
    assert "Traceback" not in result.err


def test_missing_connection_settings_are_user_errors(policies, tmp_path, monkeypatch):
    monkeypatch.delenv("OSC_OVN_NB", raising=False)
    result = cli("plan", policies)
    assert result.code == 1 and "--ovn-nb" in result.err
    missing = tmp_path / "nope.kubeconfig"
    result = cli("plan", policies, "--ovn-nb", "unix:/nonexistent.sock", "--kubeconfig", missing)
    assert result.code == 1 and "Traceback" not in result.err


def test_invalid_manifests_stop_before_any_connection(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: osc.io/v1alpha1\nkind: Binding\nmetadata: {name: x}\nspec: {}\n")
    result = cli("apply", bad, "--ovn-nb", "tcp:127.0.0.1:1")
    assert result.code == 1
    assert f"{bad}:4:" in result.err
    assert "problem(s) in the manifests" in result.err


def test_console_script_plan_exit_codes_without_traceback(rp_cluster, policies):
    exe = Path(sys.executable).with_name("osc-gitops")
    env = {**os.environ, "OSC_OVN_NB": rp_cluster.nb_remote, "KUBECONFIG": rp_cluster.kubeconfig}
    args = [str(exe), "plan", str(policies), "--steering", "router-policy"]
    first = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 2, first.stderr
    applied = subprocess.run([str(exe), "apply", str(policies), "--steering", "router-policy"],
                             env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0 and "No changes." in second.stdout
