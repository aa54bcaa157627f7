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
- ``*`` matches anything but ``/``, ``?`` one character but ``/``, ``[a-z]`` a range; ``**/``
  at the start matches in every folder, ``/**`` at the end everything inside, ``/**/`` zero or
  more folders.

Only the top-level ``.oscignore`` is read (nested ones are not: one file says what the folder
holds). Pure: :class:`IgnoreRules` is built from the file's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

IGNORE_FILE = ".oscignore"


@dataclass(frozen=True, slots=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    dirs_only: bool


def _unescaped_trailing_spaces(line: str) -> str:
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        return stripped[:-1] + " "
    return stripped


def _translate(pattern: str) -> str:
    """One gitignore pattern (without ``!`` and trailing ``/``) as a regex over a relative
    POSIX path."""
    anchored = "/" in pattern.rstrip("/")
    pattern = pattern.lstrip("/") if anchored else pattern
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
            continue
        if c == "*":
            if pattern.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    body = "".join(out)
    prefix = "" if anchored else "(?:.*/)?"
    return f"^{prefix}{body}$"


class IgnoreRules:
    """The patterns of one ``.oscignore``; :meth:`ignored` answers for one path."""

    def __init__(self, text: str = "") -> None:
        self.rules: list[_Rule] = []
        for raw in text.splitlines():
            line = _unescaped_trailing_spaces(raw)
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated or line.startswith(("\\!", "\\#")):
                line = line[1:]
            dirs_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            self.rules.append(_Rule(re.compile(_translate(line)), negated, dirs_only))

    @classmethod
    def for_folder(cls, folder: Path) -> IgnoreRules:
        """The rules of ``folder/.oscignore`` (none when there is no such file)."""
        try:
            return cls((folder / IGNORE_FILE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return cls()

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
            if rule.regex.match(relative):
                verdict = not rule.negated
        return verdict
