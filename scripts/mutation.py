"""Mutation testing of the functional core: ``make mutation`` (docs/testing.md says how to read
the result).

    python scripts/mutation.py run [MODULE ...]   # mutmut over reconciler/core, then the scores
    python scripts/mutation.py run --survivors [MODULE ...]  # survivors and mutants not run yet
    python scripts/mutation.py scores             # the scores of the last run (mutants/)
    python scripts/mutation.py record [MODULE ...] # records of a stopped run's finished modules
    python scripts/mutation.py survivors [MODULE] # the surviving mutants, as diffs
    python scripts/mutation.py check [REV]        # the ratchet file never went down (no run)

``run`` installs the mutmut version pinned in pyproject.toml's ``mutation`` extra when the venv
has another one, runs it under ``nice -n 19`` with ``MUTATION_CHILDREN`` (default 2) children,
restricted to the modules given (``compiling/diff`` or ``reconciler/core/compiling/diff.py``),
prints each module's score, and holds the scores against the ratchet file
``tests/unit/mutation_scores.json``: a module below its recorded score fails the run, a module
above it raises the record (commit the file). A module that was not run keeps its record.

Without modules, mutmut keeps the verdicts it has (of functions whose code did not change) and
runs the other mutants; with modules, it runs all of theirs again; ``--survivors`` runs only the
survivors again (after new tests) and the mutants not run yet (of code changed since). The
event-simulation property tests run ``OSC_HYPOTHESIS_EXAMPLES`` examples (20 here instead of
120: a surviving mutant runs every test that reaches it, and these take most of that time).

A module's score is killed / (mutants - skipped), in per cent; a mutant no test reaches counts
as a survivor. Killed: a test failed, timed out or crashed with the mutant in place.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORE = "reconciler/core"
RATCHET = REPO / "tests" / "unit" / "mutation_scores.json"
DOCS = REPO / "docs" / "testing.md"
FLOOR = 90.0
"""The goal every module of the core is held to (issue 34)."""

# mutmut's exit codes of a mutant's test run (mutmut/stats.py, status_by_exit_code)
KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout",
          255: "timeout", -11: "segfault", -9: "segfault", 37: "caught by type check"}  # fmt: skip
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests", 35: "suspicious"}
SKIPPED = {34: "skipped"}


@dataclass
class Score:
    """One module's mutants, by what became of them."""

    module: str
    statuses: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    """Mutants not run yet (new, or of a function whose code changed since)."""

    @property
    def tested(self) -> int:
        return sum(n for s, n in self.statuses.items() if s not in ("skipped", "not checked"))

    @property
    def killed(self) -> int:
        return sum(self.statuses[s] for s in set(KILLED.values()))

    @property
    def complete(self) -> bool:
        """Every mutant of the module was run (a partial run scores nothing)."""
        return not self.statuses["not checked"]

    @property
    def percent(self) -> float:
        return 100.0 if not self.tested else round(100.0 * self.killed / self.tested, 1)


def status_of(exit_code: int | None) -> str:
    if exit_code is None:
        return "not checked"
    return KILLED.get(exit_code) or SURVIVED.get(exit_code) or SKIPPED.get(exit_code, "suspicious")


def module_of(path: str) -> str:
    """``reconciler/core/compiling/diff.py`` from a meta file's path under mutants/."""
    return path.removesuffix(".meta")


def read_scores(root: Path = REPO / "mutants") -> dict[str, Score]:
    """Each core module's score from mutmut's results (``mutants/**/*.py.meta``)."""
    scores: dict[str, Score] = {}
    for meta in sorted((root / CORE).rglob("*.py.meta")):
        module = module_of(meta.relative_to(root).as_posix())
        data = json.loads(meta.read_text(encoding="utf-8"))
        score = Score(module)
        for name, code in sorted(data.get("exit_code_by_key", {}).items()):
            status = status_of(code)
            score.statuses[status] += 1
            if status in SURVIVED.values() or status == "suspicious":
                score.survivors.append(name)
            elif status == "not checked":
                score.unchecked.append(name)
        scores[module] = score
    modules = set(core_modules())
    return {m: s for m, s in scores.items() if m in modules}


def core_modules(root: Path = REPO) -> list[str]:
    """Every module of the core with a function (mutmut mutates code in functions only)."""
    return [
        path.relative_to(root).as_posix()
        for path in sorted((root / CORE).rglob("*.py"))
        if re.search(r"^\s*(async )?def ", path.read_text(encoding="utf-8"), re.M)
    ]


def table(scores: Mapping[str, Score], ratchet: Mapping[str, Any]) -> str:
    lines = [f"{'module':<45} {'score':>6} {'killed':>7} {'tested':>7} {'record':>7}"]
    for module, score in sorted(scores.items()):
        record = ratchet.get(module, {}).get("score")
        shown = f"{score.percent:.1f}" if score.complete else "part"
        flag = "" if not score.complete or score.percent >= FLOOR else "  < 90"
        lines.append(
            f"{module:<45} {shown:>6} {score.killed:>7} {score.tested:>7} "
            f"{'' if record is None else f'{record:.1f}':>7}{flag}"
        )
    done = [s for s in scores.values() if s.complete]
    killed, tested = sum(s.killed for s in done), sum(s.tested for s in done)
    if tested:
        lines.append(
            f"{'all modules run':<45} {100 * killed / tested:>6.1f} {killed:>7} {tested:>7}"
        )
    return "\n".join(lines)


def load_ratchet(path: Path = RATCHET) -> dict[str, Any]:
    if not path.exists():
        return {"floor": FLOOR, "tool": "", "modules": {}}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def write_ratchet(data: Mapping[str, Any], path: Path = RATCHET) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def hold(scores: Mapping[str, Score], ratchet: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Modules below their record, and modules whose record this run raised or set (``ratchet``
    is updated in place with the latter)."""
    lower, raised = [], []
    modules: dict[str, Any] = ratchet.setdefault("modules", {})
    for module, score in sorted(scores.items()):
        if not score.complete:
            continue
        record = modules.get(module)
        if record is not None and score.percent < record["score"]:
            lower.append(f"{module}: {score.percent:.1f} < {record['score']:.1f}")
        elif record is None or score.percent > record["score"]:
            modules[module] = {"score": score.percent, "killed": score.killed,
                               "mutants": score.tested}  # fmt: skip
            raised.append(module)
    return lower, raised


def docs_table(ratchet: Mapping[str, Any]) -> str:
    """The recorded scores as the Markdown table of docs/testing.md."""
    lines = [
        "| module | score | killed / mutants | note |",
        "|---|---:|---:|---|",
    ]
    for module, record in sorted(ratchet.get("modules", {}).items()):
        note = record.get("why_below_floor") or record.get("why_lower") or ""
        lines.append(
            f"| `{module.removeprefix(CORE + '/')}` | {record['score']:.1f} % | "
            f"{record['killed']} / {record['mutants']} | {note} |"
        )
    return "\n".join(lines)


def write_docs(ratchet: Mapping[str, Any], path: Path = DOCS) -> None:
    """docs/testing.md's block between ``<!-- scores:start -->`` and ``<!-- scores:end -->``."""
    text = path.read_text(encoding="utf-8")
    start, end = "<!-- scores:start -->", "<!-- scores:end -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{start}\n{docs_table(ratchet)}\n{end}{tail}", encoding="utf-8")


# --- the history check (no mutation run) ---------------------------------------------------------


def drops(older: Mapping[str, Any], newer: Mapping[str, Any]) -> list[str]:
    """Modules whose recorded score went down from ``older`` to ``newer`` without a reason
    (``why_lower``) recorded with the lower score."""
    found = []
    for module, record in sorted(newer.get("modules", {}).items()):
        before = older.get("modules", {}).get(module)
        if before is None or record["score"] >= before["score"] or record.get("why_lower"):
            continue
        found.append(f"{module}: {before['score']:.1f} -> {record['score']:.1f}")
    return found


def history(path: Path = RATCHET, rev: str = "HEAD") -> list[tuple[str, dict[str, Any]]]:
    """``(commit, ratchet file)`` of every commit that changed the file, oldest first (none
    outside a git clone, or a shallow one without them). Along the first parents only: a
    branch measured in parallel joins with its merge commit, and its own commits, older than
    the records it merges into, are no drop."""
    rel = path.relative_to(REPO).as_posix()
    try:
        log = subprocess.run(
            ["git", "log", "--first-parent", "--format=%H", rev, "--", rel],
            cwd=REPO, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return []
    out = []
    for commit in reversed(log):
        shown = subprocess.run(["git", "show", f"{commit}:{rel}"], cwd=REPO, capture_output=True,
                               text=True, check=False)  # fmt: skip
        if shown.returncode == 0:
            out.append((commit, json.loads(shown.stdout)))
    return out


def check(rev: str = "HEAD") -> tuple[list[str], list[str]]:
    """What is wrong with the ratchet file (a recorded score that went down in its history, or
    from the last commit to the work tree, without a ``why_lower``; one below the floor without
    a ``why_below_floor``; a record of a module that is gone), and the core's modules it has no
    record of yet (not an error: measured by the next ``make mutation``)."""
    problems = []
    versions = history(rev=rev)
    current = load_ratchet()
    versions.append(("work tree", current))
    for (_, older), (commit, newer) in itertools.pairwise(versions):
        problems += [f"{commit[:12]}: {d}" for d in drops(older, newer)]
    records = current.get("modules", {})
    floor = float(current.get("floor", FLOOR))
    problems += [
        f"{m}: {r['score']:.1f} % is below the floor of {floor:.0f} % and says not why "
        "(why_below_floor)"
        for m, r in sorted(records.items())
        if r["score"] < floor and not r.get("why_below_floor")
    ]
    modules = set(core_modules())
    problems += [
        f"{m}: in {RATCHET.name}, but no such module" for m in sorted(set(records) - modules)
    ]
    return problems, sorted(modules - set(records))


# --- running mutmut --------------------------------------------------------------------------


def pinned_mutmut() -> str:
    """The requirement of pyproject.toml's ``mutation`` extra (``mutmut==X.Y.Z``)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (requirement,) = project["project"]["optional-dependencies"]["mutation"]
    return str(requirement)


def ensure_mutmut() -> str:
    from importlib import metadata

    requirement = pinned_mutmut()
    wanted = requirement.partition("==")[2]
    try:
        have = metadata.version("mutmut")
    except metadata.PackageNotFoundError:
        have = None
    if have != wanted:
        print(f"mutation: installing {requirement} into {sys.prefix}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", requirement], check=True)
    return requirement


def globs(modules: Iterable[str]) -> list[str]:
    """mutmut's mutant-name patterns for ``compiling/diff``, ``reconciler/core/compiling/diff.py``
    or ``reconciler.core.compiling.diff``. A package's ``__init__`` (``steering/__init__``) has
    mutants named after the package (``reconciler.core.steering.x_backend_for__mutmut_1``): its
    patterns are the package's functions (``x_``) and methods (``xǁ``), not its modules'."""
    out = []
    for dotted in map(_dotted, modules):
        if dotted.endswith(".__init__"):
            package = dotted.removesuffix(".__init__")
            out += [f"{package}.x_*", f"{package}.xǁ*"]
        else:
            out.append(f"{dotted}.*")
    return out


def _dotted(module: str) -> str:
    dotted = module.removesuffix(".py").replace("/", ".")
    if not dotted.startswith("reconciler."):
        dotted = "reconciler.core." + dotted.removeprefix("core.")
    return dotted


def paths(modules: Iterable[str]) -> set[str]:
    """The files of the modules given as :func:`globs` takes them
    (``reconciler/core/compiling/diff.py``)."""
    return {_dotted(module).replace(".", "/") + ".py" for module in modules}


def run_mutmut(patterns: list[str], children: int, log: Path) -> int:
    """mutmut run, at the lowest priority, its output in ``log`` and a progress line every
    half minute."""
    mutmut = Path(sys.executable).with_name("mutmut")
    command = [str(mutmut), "run", "--max-children", str(children), *patterns]
    log.parent.mkdir(exist_ok=True)
    env = {**os.environ, "OSC_HYPOTHESIS_EXAMPLES": os.environ.get("OSC_HYPOTHESIS_EXAMPLES", "20")}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.nice(19),  # lowest priority: the machine is shared
        )
        last = 0.0
        while proc.poll() is None:
            time.sleep(1)
            if time.monotonic() - last >= 30:
                last = time.monotonic()
                print(f"mutation: {progress(log)}", file=sys.stderr, flush=True)
    return proc.returncode


def progress(log: Path) -> str:
    tail = log.read_bytes()[-600:].decode("utf-8", "replace")
    parts = [p.strip() for p in re.split(r"[\r\n]", tail) if p.strip()]
    return parts[-1] if parts else "starting"


def stale_stats(root: Path = REPO) -> bool:
    """Whether mutmut's record of which tests reach which function (``mutmut-stats.json``) was
    made on other code than the work tree's: mutmut 3.8 then maps only the tests that are new
    since to each function, so a function added or changed by a merge is run against too few
    tests and its mutants survive for no reason. (Without a commit of its own in the record,
    or without git, the record is kept.)"""
    stats = root / "mutants" / "mutmut-stats.json"
    try:
        commit = json.loads(stats.read_text(encoding="utf-8")).get("git_commit")
    except (OSError, ValueError):
        return False
    if not commit:
        return False
    same = subprocess.run(
        ["git", "diff", "--quiet", commit, "--", "reconciler/"],
        cwd=root, capture_output=True, check=False,
    )  # fmt: skip
    return same.returncode == 1


def cmd_run(args: argparse.Namespace) -> int:
    requirement = ensure_mutmut()
    if stale_stats():
        print("mutation: the code changed since mutmut mapped tests to functions: mapping "
              "every test again", file=sys.stderr)  # fmt: skip
        (REPO / "mutants" / "mutmut-stats.json").unlink()
    children = int(os.environ.get("MUTATION_CHILDREN", "2"))
    patterns = globs(args.modules)
    if args.survivors:
        scores = read_scores()
        wanted = paths(args.modules)
        names = [
            n
            for m, s in scores.items()
            if not wanted or m in wanted
            for n in (*s.survivors, *s.unchecked)
        ]
        if not names:
            print("mutation: no survivors to run again", file=sys.stderr)
            return report(only=args.modules)
        patterns_run = names
    else:
        patterns_run = patterns
    log = REPO / "mutants" / "mutmut-run.log"
    print(f"mutation: {requirement} over {', '.join(patterns) or CORE}, {children} children, "
          f"nice 19; log in {log.relative_to(REPO)}", file=sys.stderr)  # fmt: skip
    code = run_mutmut(patterns_run, children, log)
    if code != 0:
        print(f"mutation: mutmut exited with {code}; the end of its log:", file=sys.stderr)
        print(log.read_text("utf-8", "replace")[-3000:], file=sys.stderr)
        return code
    return report(only=args.modules)


def report(only: list[str] | None = None, update: bool = True) -> int:
    """The scores (of the modules ``only`` names, as :func:`globs` takes them)."""
    scores = read_scores()
    if only:
        wanted = paths(only)
        scores = {m: s for m, s in scores.items() if m in wanted}
    ratchet = load_ratchet()
    print(table(scores, ratchet.get("modules", {})))
    lower, raised = hold(scores, ratchet)
    if update and raised:
        ratchet["floor"] = FLOOR
        ratchet["tool"] = pinned_mutmut()
        write_ratchet(ratchet)
        write_docs(ratchet)
        print(f"\nrecord raised or set for {len(raised)} module(s) in "
              f"{RATCHET.relative_to(REPO)}: commit it", file=sys.stderr)  # fmt: skip
    below = [m for m, s in scores.items() if s.complete and s.percent < FLOOR]
    if below:
        print(f"\nbelow {FLOOR:.0f} %: {', '.join(below)}", file=sys.stderr)
    if lower:
        print("\nlower than recorded (a test stopped killing mutants, or new code is not pinned):",
              *lower, sep="\n  ", file=sys.stderr)  # fmt: skip
        print("see the survivors: python scripts/mutation.py survivors MODULE", file=sys.stderr)
        return 1
    return 0


def cmd_scores(args: argparse.Namespace) -> int:
    return report(only=args.modules or None, update=False)


def cmd_record(args: argparse.Namespace) -> int:
    """What ``run`` does at its end, for a run that was stopped (or ran elsewhere): the scores
    of the modules whose every mutant was run raise their records (a module run in part keeps
    its record)."""
    return report(only=args.modules or None, update=True)


def cmd_survivors(args: argparse.Namespace) -> int:
    scores = read_scores()
    wanted = paths(args.modules)
    mutmut = Path(sys.executable).with_name("mutmut")
    for module, score in sorted(scores.items()):
        if wanted and module not in wanted:
            continue
        for name in score.survivors:
            print(f"# {name}", flush=True)
            subprocess.run([str(mutmut), "show", name], cwd=REPO, check=False)
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    write_docs(load_ratchet())
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    problems, unmeasured = check(args.rev)
    for module in unmeasured:
        print(f"not measured yet: {module} (make mutation MODULES={module})", file=sys.stderr)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    commands = (("run", cmd_run), ("scores", cmd_scores), ("record", cmd_record),
                ("survivors", cmd_survivors))  # fmt: skip
    for name, fn in commands:
        p = sub.add_parser(name)
        p.add_argument("modules", nargs="*", help="e.g. compiling/diff (default: all of the core)")
        if name == "run":
            p.add_argument(
                "--survivors",
                action="store_true",
                help="run only survivors and mutants not run yet",
            )
        p.set_defaults(fn=fn)
    p = sub.add_parser("docs", help="write the recorded scores into docs/testing.md")
    p.set_defaults(fn=cmd_docs)
    p = sub.add_parser("check")
    p.add_argument("rev", nargs="?", default="HEAD")
    p.set_defaults(fn=cmd_check)
    args = parser.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
