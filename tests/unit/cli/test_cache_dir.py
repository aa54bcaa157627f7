"""The CLI's default cache folder is the git adapter's, without importing GitPython for it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from reconciler.adapters.git import default_cache_dir
from reconciler.cli.common import cache_dir


@pytest.mark.parametrize("xdg", [None, "/tmp/xdg-cache-test"])
def test_default_cache_dir_matches_the_git_adapter(
    monkeypatch: pytest.MonkeyPatch, xdg: str | None
) -> None:
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert cache_dir(argparse.Namespace()) == default_cache_dir()


def test_the_flag_wins(tmp_path: Path) -> None:
    assert cache_dir(argparse.Namespace(cache_dir=str(tmp_path))) == tmp_path
