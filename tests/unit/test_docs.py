"""The documentation site builds in strict mode (``make docs``): every page in the navigation,
every link to a page and every anchor resolves. A copy of the docs with a broken link and a
broken anchor planted in it must fail the build, or the check proves nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

MKDOCS = Path(sys.executable).parent / "mkdocs"


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    if not MKDOCS.exists():
        pytest.fail(f"{MKDOCS} is missing: `make setup` installs the dev extras (mkdocs)")
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(root / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip


def test_the_site_builds_with_every_link_and_anchor_resolved(tmp_path: Path) -> None:
    result = build(REPO, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "review-a-plan" / "index.html").is_file()


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "troubleshooting.md"
    text = page.read_text(encoding="utf-8")
    page.write_text(text + "\n[gone](no-such-page.md) [nowhere](install.md#no-such-heading)\n")
    result = build(tmp_path, tmp_path / "site")
    report = result.stdout + result.stderr
    assert result.returncode != 0, report
    assert "no-such-page.md" in report and "no-such-heading" in report, report


def test_the_readme_stays_a_first_hour_read() -> None:
    assert len((REPO / "README.md").read_bytes()) < 12 * 1024
