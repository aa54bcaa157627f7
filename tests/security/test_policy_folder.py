"""A pull request's policy folder: links out of it, files that are not files, ``.oscignore``.

Issue 31, items 1 and 3. Each case ran on main as written in the issue (a leaked file, a walk of
the whole host, a hang, a traceback, minutes of CPU, 16 GB of memory); each must now end in a
clear ``file:line:column`` error within a few seconds, with nothing read that is not ours."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.errors import ValidationFailed
from reconciler.manifests.ignore import IgnoreRules
from reconciler.manifests.load import load_path
from tests.security.hostile import osc, policies

OUTSIDE = "symbolic link to a path outside the manifest folder; refused"


def test_a_link_to_a_file_outside_is_refused_unread(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("ghs_planted-secret-value\n")
    folder = policies(tmp_path / "p")
    os.symlink(secret, folder / "leak.yaml")
    run = osc("validate", folder)
    assert run.code == 1
    assert f"{folder}/leak.yaml:1:1: {OUTSIDE}" in run.err
    assert "planted-secret" not in run.out + run.err and "Traceback" not in run.err
    relative = folder / "rel.yaml"
    os.symlink("../token", relative)  # a relative link out is the same
    with pytest.raises(ValidationFailed) as failed:
        load_path(folder)
    assert [i.file for i in failed.value.issues] == [str(folder / "leak.yaml"), str(relative)]


def test_a_link_to_the_root_of_the_host_is_not_walked(tmp_path: Path) -> None:
    folder = policies(tmp_path / "p")
    os.symlink("/", folder / "r")
    run = osc("validate", folder, timeout=30)
    assert run.code == 1 and run.seconds < 10, run.seconds  # main: 51 s, 8,662 problems
    first, last = run.err.splitlines()
    assert (
        first.startswith(f"{folder}/r:1:1: {OUTSIDE}") and last == f"{folder}: 1 problem — invalid"
    )


@pytest.mark.parametrize("target", ["/proc/self/fd/1", "fifo", "/dev/zero"])
def test_a_file_that_is_not_a_regular_file_is_never_read(tmp_path: Path, target: str) -> None:
    folder = policies(tmp_path / "p")
    if target == "fifo":
        os.mkfifo(folder / "zz.yaml")
        expected = "a named pipe (FIFO), not a regular file; refused"
    else:
        os.symlink(target, folder / "zz.yaml")
        expected = OUTSIDE
    run = osc("validate", folder, timeout=20)  # main: blocked for ever on /proc/self/fd/1
    assert run.code == 1
    assert f"{folder}/zz.yaml:1:1: {expected}" in run.err


def test_links_inside_the_folder_still_work(tmp_path: Path) -> None:
    """A Kubernetes ConfigMap volume: every file a link into ``..data``."""
    folder = tmp_path / "cm"
    data = policies(folder / "..2026_11_27")
    os.symlink(data.name, folder / "..data")
    for file in sorted(data.rglob("*.yaml")):
        rel = file.relative_to(data)
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(Path("/".join([".."] * (len(rel.parts) - 1) or ["."])) / "..data" / rel,
                   folder / rel)  # fmt: skip
    run = osc("validate", folder)
    assert run.code == 0, run.err


def test_a_single_file_argument_that_links_out_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    os.symlink("/etc/hostname", tmp_path / "a" / "one.yaml")
    run = osc("validate", tmp_path / "a" / "one.yaml")
    assert run.code == 1 and OUTSIDE in run.err


# --------------------------------------------------------------------------- .oscignore


def test_a_reversed_range_is_an_error_at_its_line_and_column(tmp_path: Path) -> None:
    folder = policies(tmp_path / "p")
    (folder / ".oscignore").write_text("# fixtures\nvalues-*.yaml\ntmp/[z-a]*\n")
    run = osc("validate", folder)
    assert run.code == 1 and "Traceback" not in run.err  # main: re.error with a traceback
    assert run.err.splitlines()[0] == (
        f"{folder}/.oscignore:3:6: character range z-a is reversed and matches nothing (write a-z)"
    )


def test_a_pattern_that_backtracks_is_matched_in_linear_time(tmp_path: Path) -> None:
    folder = policies(tmp_path / "p")
    (folder / ".oscignore").write_text("**a" * 12 + "\n" + "/**a" * 12 + "\n")
    (folder / ("a" * 200 + ".yaml")).write_text("")
    deep = folder.joinpath(*["a" * 20] * 12)
    deep.mkdir(parents=True)
    (deep / ("a" * 200 + "b.yaml")).write_text("")
    run = osc("validate", folder, timeout=30)  # main: minutes at 100% CPU, SIGTERM ignored
    assert run.code == 0 and run.seconds < 10, (run.seconds, run.err)


def test_the_matcher_is_bounded_for_any_pattern() -> None:
    import time

    name = "a" * 255
    for pattern in ("*a" * 100 + "b", "?*" * 200 + "b", "[a]*" * 100 + "b", "**/" * 100 + "b"):
        rules = IgnoreRules(pattern + "\n")
        started = time.perf_counter()
        assert not rules.ignored("/".join([name] * 16), is_dir=False)
        assert time.perf_counter() - started < 0.5, pattern


@pytest.mark.parametrize("case", ["dev-zero", "too-big", "fifo", "binary", "long-pattern"])
def test_a_hostile_oscignore_file_is_refused_like_a_manifest(tmp_path: Path, case: str) -> None:
    from reconciler.manifests.ignore import MAX_IGNORE_BYTES, MAX_PATTERN_CHARS

    folder = policies(tmp_path / "p")
    ignore = folder / ".oscignore"
    if case == "dev-zero":
        os.symlink("/dev/zero", ignore)  # main: MemoryError (16 GB in 30 s)
        expected = f"{ignore}:1:1: {OUTSIDE}"
    elif case == "too-big":
        ignore.write_text("# x\n" * (MAX_IGNORE_BYTES // 4 + 1))
        expected = f"{ignore}:1:1: file is 64.0 KiB, larger than the 64 KiB limit"
    elif case == "fifo":
        os.mkfifo(ignore)
        expected = f"{ignore}:1:1: a named pipe (FIFO), not a regular file; refused"
    elif case == "binary":
        ignore.write_bytes(b"ok\nbad\x00\n")
        expected = f"{ignore}:2:4: binary file (contains NUL bytes)"
    else:
        ignore.write_text("ok\n" + "a" * (MAX_PATTERN_CHARS + 5) + "\n")
        expected = f"{ignore}:2:{MAX_PATTERN_CHARS + 1}: pattern is {MAX_PATTERN_CHARS + 5} "
    run = osc("validate", folder, timeout=20)
    assert run.code == 1 and "Traceback" not in run.err
    assert run.err.startswith(expected), run.err


def test_gitignore_semantics_are_kept() -> None:
    rules = IgnoreRules(
        "**/tmp\n/only-top/\ndocs/**\n\\#literal.yaml\n*.bak   \n!x.bak\na/**/b.yaml\n"
        "[[:digit:]]*.yaml\n[!v]al*.yml\nmid**dle.yaml\n"
    )
    assert not rules.problems
    assert rules.ignored("tmp", is_dir=True) and rules.ignored("a/b/tmp", is_dir=False)
    assert rules.ignored("only-top", is_dir=True) and not rules.ignored("only-top", is_dir=False)
    assert not rules.ignored("sub/only-top", is_dir=True)
    assert rules.ignored("docs/a/b.yaml", is_dir=False) and not rules.ignored("docs", is_dir=True)
    assert rules.ignored("#literal.yaml", is_dir=False)
    assert rules.ignored("a/y.bak", is_dir=False) and not rules.ignored("x.bak", is_dir=False)
    assert rules.ignored("a/b.yaml", is_dir=False) and rules.ignored("a/x/y/b.yaml", is_dir=False)
    assert rules.ignored("x/1st.yaml", is_dir=False)
    assert not rules.ignored("first.yaml", is_dir=False)
    assert rules.ignored("balance.yml", is_dir=False)
    assert not rules.ignored("values.yml", is_dir=False)
    # '**' not between slashes is a '*': it does not cross a folder
    assert rules.ignored("middle.yaml", is_dir=False)
    assert not rules.ignored("mid/dle.yaml", is_dir=False)
