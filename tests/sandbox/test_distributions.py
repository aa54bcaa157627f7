"""The two OVN distributions the sandbox runs: the host's Debian OVN and OVN 26.03 from the
Debian sid root that `make setup` builds. A missing sid root fails these tests (never a skip)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from osc_gitops_sandbox.ovn import distributions
from osc_gitops_sandbox.ovn.distributions import (
    OVN_TOOLS,
    OVS_TOOLS,
    Distribution,
    DistributionError,
    version_key,
)
from osc_gitops_sandbox.ovn.stack import OvnCluster, OvnSandbox, OvnSandboxError

from tests.support.ovn import OVN_MARKS

pytestmark = OVN_MARKS

CHECKED_TOOLS = ("ovsdb-server", "ovn-northd", "ovn-controller", "ovs-vswitchd", "ovn-nbctl")


@pytest.fixture(scope="module")
def sid() -> Distribution:
    return distributions.sid().require(OVS_TOOLS + OVN_TOOLS)


def _has_network_function(schema: Path) -> bool:
    return "Network_Function" in json.loads(schema.read_text())["tables"]


def test_sid_is_ovn_26_03_and_ovs_3_5_or_newer_through_its_own_loader(sid: Distribution) -> None:
    versions = sid.verify()  # every tool answers --version through sid's loader
    for tool in CHECKED_TOOLS:
        family = "ovn" if tool.startswith("ovn-") else "ovs"
        minimum = distributions.MINIMUM_VERSIONS["sid"][family]
        assert version_key(versions[tool]) >= version_key(minimum), (tool, versions[tool])
    assert len({versions[t] for t in OVN_TOOLS}) == 1, versions
    assert len({versions[t] for t in OVS_TOOLS}) == 1, versions
    assert _has_network_function(sid.nb_schema)
    # The trap: sid's usr/sbin/ovs-vswitchd points into /etc/alternatives, i.e. at the host's.
    assert not sid.path("ovs-vswitchd").is_symlink()
    assert sid.path("ovs-vswitchd").is_relative_to(sid.root)


def test_host_is_the_machines_debian_ovn_without_network_functions() -> None:
    host = distributions.host()
    versions = host.versions(CHECKED_TOOLS)
    assert set(versions) == set(CHECKED_TOOLS)
    ovn = {versions[t] for t in CHECKED_TOOLS if t.startswith("ovn-")}
    assert len(ovn) == 1, versions
    assert host.loader is None and host.command("ovn-northd") == [str(host.path("ovn-northd"))]
    # The router-policy backend's home; Debian bookworm ships 23.03.
    assert not _has_network_function(host.nb_schema)


def test_too_old_tools_are_refused_with_a_clear_message() -> None:
    """What `make setup` does when sid falls behind: the host's 23.03 posing as sid."""
    impostor = Distribution("sid", Path("/"))
    with pytest.raises(
        DistributionError, match=r"is too old: .*ovs-vswitchd 3\.1\.0 \(needs >= 3\.5\)"
    ):
        impostor.verify()
    with pytest.raises(DistributionError, match=r"ovn-northd 23\.03\.\d+ \(needs >= 26\.03\)"):
        impostor.verify()


def test_a_missing_sid_root_fails_saying_run_make_setup(tmp_path: Path) -> None:
    missing = distributions.sid(tmp_path / "nowhere")
    assert "make setup" in (missing.unavailable_reason() or "")
    with pytest.raises(OvnSandboxError, match="run `make setup`"):
        OvnSandbox(tmp_path / "ovn", distribution=missing)


def test_the_older_nb_schema_spelling_runs_sid(tmp_path: Path, sid: Distribution) -> None:
    sandbox = OvnSandbox(tmp_path / "ovn", northd=False, nb_schema="26.03")
    assert sandbox.distribution == sid and sandbox.nb_schema_path == sid.nb_schema
    assert sandbox.network_function
    with pytest.raises(OvnSandboxError, match='use distribution="sid"'):
        OvnSandbox(tmp_path / "ovn2", nb_schema="26.03", distribution="host")


def test_sid_daemons_are_tracked_by_pid_and_keep_to_their_work_dir(
    tmp_path: Path, sid: Distribution
) -> None:
    sandbox = OvnSandbox(tmp_path / "ovn", northd=True, distribution="sid")
    with sandbox:
        pids = sandbox.pids
        for pid in pids:
            # Run through sid's loader, so every daemon is named after it: never look up by name.
            assert Path(os.readlink(f"/proc/{pid}/exe")).is_relative_to(sid.root.resolve())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert cmdline[:2] == [str(sid.loader).encode(), b"--library-path"]
        names = {p.name for p in sandbox.workdir.iterdir()}
        assert {"nb.ctl", "sb.ctl", "northd.ctl", "nb.sock", "sb.sock"} <= names
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)


def test_northd_26_03_turns_network_function_rows_into_logical_flows(tmp_path: Path) -> None:
    with OvnSandbox(tmp_path / "ovn", northd=True, distribution="sid") as ovn:
        nf_options = ["is-nf=true", "receive_multicast=false"]
        ovn.nbctl(
            "ls-add", "sw", "--", "lsp-add", "sw", "pod", "--",
            "lsp-add", "sw", "nf-in", "--", "lsp-add", "sw", "nf-out", "--",
            "lsp-set-options", "nf-in", *nf_options, "nf-linked-port=nf-out", "--",
            "lsp-set-options", "nf-out", *nf_options, "nf-linked-port=nf-in",
        )  # fmt: skip
        ovn.nbctl("nf-add", "nf1", "1", "nf-in", "nf-out")
        ovn.nbctl("nfg-add", "nfg1", "1", "inline", "nf1")
        ovn.nbctl("pg-add", "pg1", "pod")
        ovn.wait_northd_sync()
        before = ovn.sbctl("lflow-list", "sw")
        ovn.nbctl("acl-add", "pg1", "from-lport", "1001", "inport == @pg1 && ip4",
                  "allow-related", "nfg1")  # fmt: skip
        ovn.wait_northd_sync()
        after = ovn.sbctl("lflow-list", "sw")
    redirect = re.compile(r"ls_in_network_function.*action=\(outport = \"nf-in\"; output;\)")
    assert not redirect.search(before)
    assert redirect.search(after), after
    assert re.search(r"ls_out_network_function.*outport = \"nf-out\"", after)


def test_clustered_nb_on_sid_waits_until_every_member_joined(tmp_path: Path) -> None:
    with OvnCluster(tmp_path / "raft", distribution="sid") as cluster:
        assert all(cluster.joined(i) for i in range(cluster.size))
        assert "OVN_Northbound" in cluster.status(0)
