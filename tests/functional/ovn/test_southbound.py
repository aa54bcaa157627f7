"""``reconciler.adapters.ovn.southbound``: whether the Southbound's Port_Binding of a port of ours
has a chassis, read from a real NB, SB and ovn-northd (26.03 from the sid root); the ports are
bound by hand with ``ovn-sbctl lsp-bind``, as an ovn-controller claims them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from osc_gitops_sandbox.ovn.stack import OvnSandbox, SeedPod, seed_ovn_kubernetes

from reconciler.adapters.ovn import OvnSettings
from reconciler.adapters.ovn.snapshot import OvnSnapshot
from reconciler.adapters.ovn.southbound import SouthboundError, WithSouthbound, read_port_chassis
from tests.support.ovn import NODES, OVN_MARKS

pytestmark = OVN_MARKS

IN, OUT = "nf_firewall_node0_in", "nf_firewall_node0_out"


@pytest.fixture
def ovn(pods: list[SeedPod]) -> Iterator[OvnSandbox]:
    with OvnSandbox(northd=True, distribution="sid") as sandbox:
        seed_ovn_kubernetes(sandbox.nb_remote, NODES, pods)
        for port in (IN, OUT):
            sandbox.nbctl(
                "lsp-add", NODES[0].name, port, "--", "set", "Logical_Switch_Port", port,
                "external_ids:osc.io/owner=osc-gitops", f"external_ids:osc.io/key={port}",
            )  # fmt: skip
        sandbox.wait_northd_sync()
        yield sandbox


def _until(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.05)


def test_a_port_has_a_chassis_once_one_claims_it(ovn: OvnSandbox) -> None:
    sb = OvnSettings(remote=ovn.sb_remote, timeout=5)
    assert read_port_chassis(sb, [IN, OUT, "nf_nobody_in"]) == {IN: False, OUT: False}
    ovn.sbctl("chassis-add", "node0-chassis", "geneve", "127.0.0.1")
    ovn.sbctl("lsp-bind", IN, "node0-chassis")
    assert read_port_chassis(sb, [IN, OUT]) == {IN: True, OUT: False}
    assert read_port_chassis(sb, []) == {}

    # an NB adapter's reads carry it, for our LSPs; everything else is the NB's
    nb = OvnSnapshot(OvnSettings(remote=ovn.nb_remote, timeout=5))
    wrapped = WithSouthbound(nb, sb)
    try:
        state = wrapped.read()
        assert state.ports_chassis == {IN: True, OUT: False}
        assert wrapped.settings is nb.settings  # what callers ask the NB adapter itself
        ovn.sbctl("lsp-unbind", IN)
        _until(lambda: wrapped.read().ports_chassis == {IN: False, OUT: False})
    finally:
        wrapped.close()


def test_a_southbound_that_cannot_be_read_is_named_and_never_fails_a_read(
    ovn: OvnSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    missing = str(ovn.sb_remote) + ".gone"
    with pytest.raises(SouthboundError, match=f"cannot read OVN SB at {missing}: .*No such file"):
        read_port_chassis(OvnSettings(remote=missing, timeout=2), [IN])
    # the NB given as the SB: not a Southbound server
    with pytest.raises(SouthboundError, match="is this an OVN Southbound server"):
        read_port_chassis(OvnSettings(remote=ovn.nb_remote, timeout=2), [IN])
    # a pass goes on with the NB's verdict alone, and says why once
    wrapped = WithSouthbound(OvnSnapshot(OvnSettings(remote=ovn.nb_remote, timeout=5)),
                             OvnSettings(remote=missing, timeout=2))  # fmt: skip
    try:
        assert wrapped.read().ports_chassis == {}
        assert wrapped.read().ports_chassis == {}
    finally:
        wrapped.close()
    warned = [r for r in caplog.records if "cannot read the Southbound" in r.getMessage()]
    assert len(warned) == 1 and missing in str(getattr(warned[0], "error", ""))
