"""Fixtures every test folder may use."""

import pytest

from tests.support.ovn import require_ovn_or_fail


@pytest.fixture
def require_ovn() -> None:
    """``OVN_MARKS`` uses it: OVN is installed by ``make setup``, so its absence fails."""
    require_ovn_or_fail(northd=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every ovn-controller crash the sandbox survived by restarting it (as kubelet restarts
    OVN-Kubernetes' container): an upstream bug to reduce, printed so it is never hidden."""
    from osc_gitops_sandbox.datapath.chassis import CONTROLLER_CRASHES

    if not CONTROLLER_CRASHES:
        return
    terminalreporter.write_sep("=", f"ovn-controller crashes survived: {len(CONTROLLER_CRASHES)}")
    for crash in CONTROLLER_CRASHES:
        terminalreporter.write_line(crash)
