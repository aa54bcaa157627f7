"""Fixtures every test folder may use."""

import pytest

from tests.support.ovn import require_ovn_or_fail


@pytest.fixture
def require_ovn() -> None:
    """``OVN_MARKS`` uses it: OVN is installed by ``make setup``, so its absence fails."""
    require_ovn_or_fail(northd=True)
