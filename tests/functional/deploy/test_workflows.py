"""GitHub workflows are checked like code: schema-valid and free of known security smells.

``check-jsonschema`` validates each file against the vendored GitHub workflow schema (offline);
``zizmor --offline`` audits them (unpinned actions, credential persistence, template injection,
excessive permissions). Both run from the venv next to the interpreter, and the tests skip with
a reason when they are not installed (they are ``dev`` extras).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))


def tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} is not installed next to {sys.executable} (pip install -e '.[dev]')")
    return str(path)


def test_there_is_a_ci_workflow() -> None:
    assert REPO / ".github" / "workflows" / "ci.yml" in WORKFLOWS


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_the_github_schema(workflow: Path) -> None:
    result = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_finds_nothing_of_high_severity() -> None:
    if not WORKFLOWS:
        pytest.skip("no workflows")
    result = subprocess.run(
        [tool("zizmor"), "--offline", "--format", "json", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout.strip(), f"zizmor printed nothing: {result.stderr}"
    findings = json.loads(result.stdout)
    high = [
        f"{f['ident']}: {f.get('desc', '')}"
        for f in findings
        if str(f.get("determinations", {}).get("severity", "")).lower() == "high"
    ]
    assert not high, "\n".join(high)


def test_actions_are_pinned_and_credentials_not_persisted() -> None:
    for workflow in WORKFLOWS:
        text = workflow.read_text(encoding="utf-8")
        for line in text.splitlines():
            if "uses:" in line:
                ref = line.split("uses:", 1)[1].split("#")[0].strip()
                _, _, sha = ref.partition("@")
                assert len(sha) == 40 and all(c in "0123456789abcdef" for c in sha), line
        if "actions/checkout@" in text:
            assert text.count("persist-credentials: false") == text.count("actions/checkout@")
