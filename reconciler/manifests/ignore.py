"""``.oscignore``: files of a manifest folder that are not manifests, in gitignore syntax.

A policy repository holds more than manifests (Helm values, kustomize patches, test fixtures in
YAML). Files the loader should not read are listed in ``.oscignore`` at the top of the manifest
folder (the ``PATH`` argument, or ``--path`` inside a git repository), with git's rules
(``gitignore(5)``), so the file reads as every Flux/Argo CD user expects:

- one pattern per line; blank lines and lines starting with ``#`` are ignored (``\\#`` for a
  literal ``#``); trailing spaces are dropped unless escaped with ``\\``;
- ``!pattern`` re-includes what an earlier pattern excluded (not inside an excluded folder);
- a pattern ending in ``/`` matches folders only;
- a pattern with a ``/`` at its start or in its middle is relative to the folder of
  ``.oscignore``; otherwise it matches a name at any depth;
- ``*`` matches anything but ``/``, ``?`` one character but ``/``, ``[a-z]`` a range (``[!a-z]``
  or ``[^a-z]`` its complement, ``[[:digit:]]`` a POSIX class); ``**/`` at the start matches in
  every folder, ``/**`` at the end everything inside, ``/**/`` zero or more folders; other
  runs of ``*`` are one ``*`` (git's rule).

Only the top-level ``.oscignore`` is read (nested ones are not: one file says what the folder
holds).

**Hostile input.** ``.oscignore`` comes with the manifests, so from pull requests. It is never
turned into a backtracking regular expression: a pattern is split at ``/`` into segments, each
segment at ``*`` into fixed-length chunks, and a path is matched chunk by chunk, leftmost first
(a ``*`` never needs to give back what it took, since every chunk has a fixed length), and
segment by segment with a set of states for ``**``. A match costs at most (path length x
pattern length) steps, whatever the pattern: twelve ``**a`` segments against a 255-character
name take microseconds (a backtracking regex took minutes). The file's size and its patterns are
bounded (:data:`MAX_IGNORE_BYTES`, :data:`MAX_PATTERNS`, :data:`MAX_PATTERN_CHARS`), and every
problem (a reversed range ``[z-a]``, an unknown ``[[:class:]]``, a limit) is reported with its
line and column like a manifest error, never raised.

Pure: :class:`IgnoreRules` is built from the file's text (the loader reads the file, with the
same rules as a manifest: a regular file inside the folder, not larger than the limit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

IGNORE_FILE = ".oscignore"

MAX_IGNORE_BYTES = 64 * 1024
"""Largest ``.oscignore`` read. Real ones are a few lines (the largest of GitHub's gitignore
templates is about 10 KiB); the limit bounds what the file can cost before it is parsed."""
MAX_PATTERNS = 1000
"""Most patterns in one ``.oscignore``: every path of the folder is matched against every
pattern, so this bounds the walk's cost (1,000 patterns x 1,000 files is about a second)."""
MAX_PATTERN_CHARS = 1024
"""Longest pattern accepted: four times the longest file name most file systems allow (255),
far more than any real pattern."""

_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}
"""git's wildmatch classes (ASCII, as git matches them)."""


class _PatternError(ValueError):
    """A pattern that cannot be compiled: ``column`` is 1-based within the line."""

    def __init__(self, column: int, message: str) -> None:
        super().__init__(message)
        self.column = column


@dataclass(frozen=True, slots=True)
class _Segment:
    """One ``/``-free part of a pattern: fixed-length chunks between ``*`` s.

    ``chunks[0]`` must match at the start, ``chunks[-1]`` at the end, the others in order in
    between (leftmost first); with one chunk (no ``*``) it must match the whole name."""

    chunks: tuple[tuple[re.Pattern[str], int], ...]
    literal: str | None = None
    """The segment itself when it has no wildcard at all (compared as a string)."""

    def matches(self, name: str) -> bool:
        if self.literal is not None:
            return name == self.literal
        first, first_len = self.chunks[0]
        if len(self.chunks) == 1:
            return len(name) == first_len and first.fullmatch(name) is not None
        last, last_len = self.chunks[-1]
        end = len(name) - last_len
        if end < first_len or first.match(name, 0, first_len) is None:
            return False
        if last.fullmatch(name, end) is None:
            return False
        pos = first_len
        for chunk, size in self.chunks[1:-1]:
            if size == 0:
                continue
            found = chunk.search(name, pos, end)
            if found is None:
                return False
            pos = found.end()
        return True


_ANY_SEGMENTS = "**"
"""A pattern segment standing for zero or more path segments (``/**/``, a leading ``**/``)."""
_SOME_SEGMENTS = "**+"
"""A trailing ``/**``: one or more path segments (everything inside, not the folder itself)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    segments: tuple[_Segment | str, ...]
    anchored: bool
    negated: bool
    dirs_only: bool

    def matches(self, relative: str) -> bool:
        parts = relative.split("/")
        if not self.anchored:  # no '/' in the pattern: the name at any depth
            only = self.segments[0]
            return isinstance(only, _Segment) and only.matches(parts[-1])
        # A set of states over the pattern's segments (no backtracking): at most
        # len(parts) x len(segments) steps.
        states = self._closure({0})
        for part in parts:
            following: set[int] = set()
            for index in states:
                if index == len(self.segments):
                    continue
                segment = self.segments[index]
                if segment == _ANY_SEGMENTS:
                    following.add(index)
                elif segment == _SOME_SEGMENTS:
                    following.update((index, index + 1))
                elif isinstance(segment, _Segment) and segment.matches(part):
                    following.add(index + 1)
            states = self._closure(following)
            if not states:
                return False
        return len(self.segments) in states

    def _closure(self, states: set[int]) -> set[int]:
        """``states`` plus those reached by skipping ``**`` segments (zero folders)."""
        out = set(states)
        for index in sorted(states):
            while index < len(self.segments) and self.segments[index] == _ANY_SEGMENTS:
                index += 1
                out.add(index)
        return out


def _unescaped_trailing_spaces(line: str) -> str:
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        return stripped[:-1] + " "
    return stripped


def _bracket(segment: str, start: int, column: int) -> tuple[str, int] | None:
    """The regex class of the ``[...]`` at ``segment[start]`` and the index after it, or
    ``None`` when it is never closed (then ``[`` is a literal, as the previous loader did)."""
    i = start + 1
    negated = i < len(segment) and segment[i] in "!^"
    if negated:
        i += 1
    items: list[str] = []
    first = True
    while i < len(segment):
        c = segment[i]
        if c == "]" and not first:
            body = "".join(items)
            if not body:
                return ("[^\\s\\S]" if not negated else "[\\s\\S]"), i + 1
            return f"[{'^' if negated else ''}{body}]", i + 1
        first = False
        if c == "[" and segment.startswith("[:", i):
            end = segment.find(":]", i + 2)
            if end != -1:
                name = segment[i + 2 : end]
                if name not in _POSIX_CLASSES:
                    raise _PatternError(
                        column + i, f"unknown character class [:{name}:] (git knows "
                        + ", ".join(sorted(_POSIX_CLASSES)) + ")",
                    )  # fmt: skip
                items.append(_POSIX_CLASSES[name])
                i = end + 2
                continue
        if c == "\\" and i + 1 < len(segment):
            i += 1
            c = segment[i]
        low = c
        if i + 2 < len(segment) and segment[i + 1] == "-" and segment[i + 2] != "]":
            high_at = i + 2
            if segment[high_at] == "\\" and high_at + 1 < len(segment):
                high_at += 1
            high = segment[high_at]
            if ord(high) < ord(low):
                raise _PatternError(
                    column + i,
                    f"character range {low}-{high} is reversed and matches nothing "
                    f"(write {high}-{low})",
                )
            items.append(f"{re.escape(low)}-{re.escape(high)}")
            i = high_at + 1
            continue
        items.append(re.escape(low))
        i += 1
    return None


def _compile_segment(segment: str, column: int) -> _Segment:
    """A ``/``-free glob (``column``: where it starts in the line, for errors)."""
    if not any(c in segment for c in "*?[\\"):
        return _Segment(chunks=(), literal=segment)
    chunks: list[tuple[re.Pattern[str], int]] = []
    current: list[str] = []
    length = 0
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            chunks.append((re.compile("".join(current), re.DOTALL), length))
            current, length = [], 0
            while i < len(segment) and segment[i] == "*":  # a run of '*' is one '*'
                i += 1
            continue
        if c == "?":
            current.append(".")
        elif c == "[":
            found = _bracket(segment, i, column)
            if found is not None:
                current.append(found[0])
                length += 1
                i = found[1]
                continue
            current.append(re.escape(c))
        elif c == "\\" and i + 1 < len(segment):
            i += 1
            current.append(re.escape(segment[i]))
        else:
            current.append(re.escape(c))
        length += 1
        i += 1
    chunks.append((re.compile("".join(current), re.DOTALL), length))
    return _Segment(chunks=tuple(chunks))


def _compile(pattern: str, column: int) -> tuple[tuple[_Segment | str, ...], bool]:
    """The segments of one pattern (without ``!`` and trailing ``/``) and whether it is
    anchored to the folder of ``.oscignore``."""
    anchored = "/" in pattern
    if not anchored:
        return (_compile_segment(pattern, column),), False
    if pattern.startswith("/"):
        pattern = pattern[1:]
        column += 1
    parts = pattern.split("/")
    segments: list[_Segment | str] = []
    for index, part in enumerate(parts):
        if part == "**":
            last = index == len(parts) - 1
            segments.append(_SOME_SEGMENTS if last and index > 0 else _ANY_SEGMENTS)
        elif part:  # 'a//b' is 'a/b', as in git
            segments.append(_compile_segment(part, column))
        column += len(part) + 1
    return tuple(segments), True


@dataclass(frozen=True, slots=True)
class IgnoreProblem:
    """A line of ``.oscignore`` that was not understood (1-based ``line`` and ``column``)."""

    line: int
    column: int
    message: str


@dataclass
class IgnoreRules:
    """The patterns of one ``.oscignore``; :meth:`ignored` answers for one path.

    Lines that cannot be compiled are left out and listed in :attr:`problems` (the loader
    reports them and refuses the run: which files the author meant to skip is unknown)."""

    text: str = ""
    rules: list[_Rule] = field(default_factory=list)
    problems: list[IgnoreProblem] = field(default_factory=list)

    def __post_init__(self) -> None:
        for number, raw in enumerate(self.text.splitlines(), start=1):
            self._add(number, raw)

    def _add(self, number: int, raw: str) -> None:
        if len(raw) > MAX_PATTERN_CHARS:
            self.problems.append(
                IgnoreProblem(
                    number,
                    MAX_PATTERN_CHARS + 1,
                    f"pattern is {len(raw)} characters long, more than the limit of "
                    f"{MAX_PATTERN_CHARS}",
                )
            )
            return
        line = _unescaped_trailing_spaces(raw)
        if not line or line.startswith("#"):
            return
        if len(self.rules) >= MAX_PATTERNS:
            if len(self.rules) == MAX_PATTERNS and not any(
                "patterns" in p.message for p in self.problems
            ):
                self.problems.append(
                    IgnoreProblem(
                        number, 1, f"more than {MAX_PATTERNS} patterns; ignore folders instead "
                        "of single files",
                    )
                )  # fmt: skip
            return
        column = 1
        negated = line.startswith("!")
        if negated or line.startswith(("\\!", "\\#")):
            line = line[1:]
            column += 1
        dirs_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            return
        try:
            segments, anchored = _compile(line, column)
        except _PatternError as exc:
            self.problems.append(IgnoreProblem(number, exc.column, str(exc)))
            return
        self.rules.append(_Rule(segments, anchored, negated, dirs_only))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        """Whether the path (POSIX, relative to the folder of ``.oscignore``) is excluded by the
        last pattern that matches it. A caller walking the tree prunes excluded folders, so a
        file inside one is never re-included (git's rule)."""
        verdict = False
        for rule in self.rules:
            if rule.dirs_only and not is_dir:
                continue
            if verdict != (not rule.negated) and rule.matches(relative):
                verdict = not rule.negated
        return verdict
