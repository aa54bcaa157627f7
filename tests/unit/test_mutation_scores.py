"""The mutation-score ratchet (``make mutation``, ``scripts/mutation.py``): the recorded scores
never go down in the file's history, every module of the core has one, and the script reads
mutmut's results as its docs say. No mutation run here (too slow for a unit test)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "mutation.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_recorded_scores_never_went_down_and_are_at_the_floor_or_say_why() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "check"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_every_recorded_module_is_at_the_floor_or_says_why_not() -> None:
    ratchet = json.loads((REPO / "tests" / "unit" / "mutation_scores.json").read_text())
    assert ratchet["floor"] == 90.0 and ratchet["tool"].startswith("mutmut==")
    low = {
        m: r
        for m, r in ratchet["modules"].items()
        if r["score"] < ratchet["floor"] and not r.get("why_below_floor")
    }
    assert low == {}


def meta(root: Path, module: str, codes: dict[str, int | None]) -> None:
    path = root / "mutants" / f"{module}.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes}))


def test_scores_count_timeouts_as_kills_and_untested_mutants_as_survivors(
    tmp_path: Path,
) -> None:
    m = script()
    module = m.core_modules()[0]
    codes = {"k1": 1, "k2": 3, "t": 36, "s": 0, "none": 33, "skip": 34}
    meta(tmp_path, module, codes)
    (score,) = m.read_scores(tmp_path / "mutants").values()
    assert (score.killed, score.tested, score.percent, score.complete) == (3, 5, 60.0, True)
    assert score.survivors == ["none", "s"]
    meta(tmp_path, module, {**codes, "later": None})
    (partial,) = m.read_scores(tmp_path / "mutants").values()
    assert not partial.complete


def test_a_run_raises_records_and_fails_on_a_lower_score(tmp_path: Path) -> None:
    m = script()
    a, b = m.core_modules()[:2]
    ratchet = {"modules": {a: {"score": 95.0, "killed": 19, "mutants": 20}}}
    meta(tmp_path, a, {"k": 1, "s": 0})
    meta(tmp_path, b, {"k": 1})
    lower, raised = m.hold(m.read_scores(tmp_path / "mutants"), ratchet)
    assert lower == [f"{a}: 50.0 < 95.0"] and raised == [b]
    assert ratchet["modules"][a]["score"] == 95.0  # a lower score never replaces a record
    assert ratchet["modules"][b] == {"score": 100.0, "killed": 1, "mutants": 1}


@pytest.mark.parametrize(
    ("older", "newer", "dropped"),
    [
        (90.0, 91.0, False),
        (90.0, 90.0, False),
        (91.0, 90.0, True),
        (None, 50.0, False),  # a new module
    ],
)
def test_a_drop_in_the_history_is_refused_unless_a_reason_is_recorded(
    older: float | None, newer: float, dropped: bool
) -> None:
    m = script()
    old = {"modules": {} if older is None else {"x.py": {"score": older}}}
    new = {"modules": {"x.py": {"score": newer}}}
    assert bool(m.drops(old, new)) is dropped
    new["modules"]["x.py"]["why_lower"] = "split in two by issue 30"
    assert m.drops(old, new) == []


def test_module_names_become_mutmut_patterns() -> None:
    m = script()
    assert m.globs(["compiling/diff", "reconciler/core/views/typos.py"]) == [
        "reconciler.core.compiling.diff.*",
        "reconciler.core.views.typos.*",
    ]
    # a package's __init__: its own functions and methods, not its modules'
    assert m.globs(["steering/__init__"]) == [
        "reconciler.core.steering.x_*",
        "reconciler.core.steering.x\u01c1*",
    ]
    assert m.paths(["steering/__init__", "compiling/diff.py"]) == {
        "reconciler/core/steering/__init__.py",
        "reconciler/core/compiling/diff.py",
    }


def test_a_test_map_made_on_other_code_is_made_again(tmp_path: Path) -> None:
    """mutmut 3.8 maps only new tests to functions after the first run: once the code changed
    (a merge), ``run`` has it map every test again."""
    mutation = script()

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True,
                              check=True)  # fmt: skip
        return done.stdout.strip()

    git("init", "-q")
    (tmp_path / "reconciler").mkdir()
    (tmp_path / "reconciler" / "a.py").write_text("A = 1\n", encoding="utf-8")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
    assert mutation.stale_stats(tmp_path) is False  # no record yet
    (tmp_path / "mutants").mkdir()
    stats = tmp_path / "mutants" / "mutmut-stats.json"
    stats.write_text(json.dumps({"git_commit": git("rev-parse", "HEAD")}), encoding="utf-8")
    assert mutation.stale_stats(tmp_path) is False
    (tmp_path / "tests.py").write_text("# a test changed, not the code\n", encoding="utf-8")
    assert mutation.stale_stats(tmp_path) is False
    (tmp_path / "reconciler" / "a.py").write_text("A = 2\n", encoding="utf-8")
    assert mutation.stale_stats(tmp_path) is True


def test_a_branch_measured_beside_main_is_no_drop_once_merged(tmp_path: Path) -> None:
    """main raised x to 97; later a branch from 95 raised it to 96 and measured y; the merge
    keeps x's 97 and y. Along first parents the history only went up; commit by commit, 97
    then 96 would be a drop that never happened on main."""
    mutation = script()
    mutation.REPO = tmp_path
    ratchet = tmp_path / "scores.json"
    clock = itertools.count(1_700_000_000, 10)  # one commit after the other, in this order

    def git(*args: str, check: bool = True) -> None:
        when = f"{next(clock)} +0000"
        env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path, capture_output=True, text=True, check=check, env=env,
        )  # fmt: skip

    def record(score: float, message: str, **more: float) -> None:
        modules = {"x.py": score} | {f"{m}.py": s for m, s in more.items()}
        data = {"modules": {m: {"score": s} for m, s in modules.items()}}
        ratchet.write_text(json.dumps(data), encoding="utf-8")
        git("add", ".")
        git("commit", "-q", "-m", message)

    git("init", "-q", "-b", "main")
    record(95.0, "first")
    git("branch", "-q", "branch")
    record(97.0, "main raises")
    git("checkout", "-q", "branch")
    record(96.0, "the branch raises x, later, and measures y", y=90.0)
    git("checkout", "-q", "main")
    git("merge", "-q", "branch", check=False)  # both changed the record: a conflict
    record(97.0, "the merge keeps the higher record of each", y=90.0)
    versions = mutation.history(ratchet)
    assert [v["modules"]["x.py"]["score"] for _, v in versions] == [95.0, 97.0, 97.0]
    pairs = itertools.pairwise(versions)
    assert [d for (_, older), (_, newer) in pairs for d in mutation.drops(older, newer)] == []


def test_record_raises_the_records_of_a_stopped_runs_finished_modules_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = script()
    a, b = m.core_modules()[:2]
    meta(tmp_path, a, {"k": 1, "s": 0})  # every mutant run
    meta(tmp_path, b, {"k": 1, "later": None})  # stopped before its last mutant
    read = m.read_scores
    written: list[dict[str, object]] = []
    monkeypatch.setattr(m, "read_scores", lambda: read(tmp_path / "mutants"))
    monkeypatch.setattr(m, "load_ratchet", lambda: {"modules": {}})
    monkeypatch.setattr(m, "write_ratchet", written.append)
    monkeypatch.setattr(m, "write_docs", lambda data: None)
    assert m.main(["scores", a, b]) == 0 and written == []  # scores only reads
    assert m.main(["record", a, b]) == 0
    (record,) = written
    assert record["modules"] == {a: {"score": 50.0, "killed": 1, "mutants": 2}}
