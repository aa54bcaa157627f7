"""Fixtures of the unit tests."""

from __future__ import annotations

import pytest

from reconciler.core.model import naming
from reconciler.core.planning import full


@pytest.fixture(autouse=True)
def _names_built_afresh() -> None:
    """Each test builds its OVN names itself: ``naming.ovn_ident`` caches them per process, and
    a name an earlier test cached must not stand in for the one this test would build (under
    ``make mutation`` every mutant's tests run in a process forked from one that ran them all:
    a mutant of the naming rules would otherwise never be called)."""
    naming.ovn_ident.cache_clear()


@pytest.fixture(autouse=True)
def _no_owned_objects_remembered() -> None:
    """Each test plans as a process's first plan does: ``planning.full.owned_only`` remembers
    its last answer per process, and under ``make mutation`` an earlier test's answer would
    otherwise hide a mutant of the first call's path."""
    full._OWNED_MEMO.clear()
