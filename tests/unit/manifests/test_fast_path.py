"""The loader's fast path (libyaml) changes nothing but the time: a valid repository loads to the
same manifests with the same notes, and anything with an issue gets exactly the round-trip
path's issues, because the fast path gives up and the run starts over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.core.model.desired import Desired
from reconciler.errors import ValidationFailed
from reconciler.manifests import load

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def outcome(path: Path) -> tuple[Desired | None, list[Any], list[str]]:
    notes: list[str] = []
    try:
        return load.load_path(path, notes), [], notes
    except ValidationFailed as failed:
        return None, [str(i) for i in failed.issues], notes


@pytest.fixture
def fast_taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each run of the loader kept the fast path's result."""
    taken: list[bool] = []
    real = load._fast_run

    def spy(sources: Any) -> Any:
        result = real(sources)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(load, "_fast_run", spy)
    return taken


def slow(monkeypatch: pytest.MonkeyPatch, path: Path) -> tuple[Any, list[Any], list[str]]:
    with monkeypatch.context() as patch:
        patch.setattr(load, "_fast_run", lambda sources: None)
        return outcome(path)


def test_a_valid_repository_takes_the_fast_path_and_loads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_taken: list[bool]
) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [policies]\n")
    (tmp_path / "other.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n"
        + (EXAMPLES / "policies" / "vnfs.yaml").read_text()
    )
    for sub in ("groups", "bindings"):
        for file in (EXAMPLES / "policies" / sub).glob("*.yaml"):
            (tmp_path / f"{sub}-{file.name}").write_text(file.read_text())
    fast = outcome(tmp_path)
    assert fast_taken == [True]
    assert fast[0] is not None and fast[0].bindings and len(fast[1]) == 0
    assert fast == slow(monkeypatch, tmp_path)
    assert any("skipped a document of other APIs (apps/v1 Deployment)" in n for n in fast[2])


@pytest.mark.parametrize("name", sorted(p.name for p in (EXAMPLES / "invalid").glob("*.yaml")))
def test_every_invalid_example_gets_the_round_trip_issues(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_taken: list[bool]
) -> None:
    (tmp_path / name).write_text((EXAMPLES / "invalid" / name).read_text())
    (tmp_path / "valid.yaml").write_text((EXAMPLES / "policies" / "vnfs.yaml").read_text())
    got = outcome(tmp_path)
    assert fast_taken == [False]
    assert got[0] is None and got[1]
    assert got == slow(monkeypatch, tmp_path)


def test_a_file_the_fast_path_declines_is_still_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_taken: list[bool]
) -> None:
    """A valid file with a YAML feature the fast path leaves to ruamel (a block scalar)."""
    text = (EXAMPLES / "policies" / "vnfs.yaml").read_text()
    (tmp_path / "vnfs.yaml").write_text(text.replace("image: ", "image: |-\n    ", 1))
    got = outcome(tmp_path)
    assert fast_taken == [False] and got[0] is not None and got[0].vnfs
    assert got == slow(monkeypatch, tmp_path)
