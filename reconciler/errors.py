"""Errors a user can act on, and how they are printed.

Two families:

- :class:`ManifestIssue` is one problem in one manifest, located to ``file:line:column`` (the
  format compilers and editors understand, so terminals and CI annotations make it clickable).
  :class:`ValidationFailed` carries *all* issues of a run, because fixing a repository one error
  per CI round-trip is miserable.
- :class:`UserError` is the base of every error the CLI prints as ``error: <message>`` with exit
  code 1 and no traceback (a traceback tells a user "the tool is broken", not "your input is").
  Other modules subclass it (endpoint unreachable, snapshot unreadable, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


class UserError(Exception):
    """An error caused by input or environment, shown to the user without a traceback.

    The message must name what is wrong and where (file, endpoint, flag), e.g.
    ``cannot read examples/policies: no such file or directory``.
    """


@dataclass(frozen=True, slots=True)
class ManifestIssue:
    """One problem in a manifest.

    ``line`` and ``column`` are 1-based (like editors and compilers). ``document`` is the 1-based
    number of the YAML document inside the file (``---`` separated), 0 when the problem concerns
    the whole file (unreadable, not UTF-8, syntax error before any document). ``path`` is the
    field inside the document, e.g. ``spec.labels[1]`` (empty for the document itself).
    ``kind`` and ``name`` identify the manifest when they could be read.
    """

    file: str
    line: int
    column: int
    message: str
    document: int = 0
    path: str = ""
    kind: str | None = None
    name: str | None = None
    expected: str | None = None

    @property
    def subject(self) -> str:
        """``Kind/name`` (or just what is known of it), for messages."""
        if self.kind and self.name:
            return f"{self.kind}/{self.name}"
        return self.kind or ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}:"
        parts = [where]
        if self.subject:
            parts.append(self.subject)
        if self.path:
            parts.append(f"{self.path}:")
        elif self.subject:
            parts[-1] += ":"
        parts.append(self.message)
        text = " ".join(parts)
        if self.expected:
            text += f" (expected {self.expected})"
        return text

    def to_json(self) -> dict[str, Any]:
        """The shape of ``osc-gitops validate -o json`` errors."""
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "document": self.document,
            "kind": self.kind,
            "name": self.name,
            "path": self.path,
            "message": self.message,
            "expected": self.expected,
        }

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.file, self.document, self.line, self.column, self.message)


class ValidationFailed(UserError):
    """The manifests of a run are invalid; ``issues`` holds every problem found, sorted."""

    def __init__(self, issues: Iterable[ManifestIssue]) -> None:
        self.issues: list[ManifestIssue] = sorted(issues, key=ManifestIssue.sort_key)
        super().__init__(self._summary())

    def _summary(self) -> str:
        count = len(self.issues)
        noun = "problem" if count == 1 else "problems"
        lines = [f"{count} {noun} in manifests:"]
        lines.extend(f"  {issue}" for issue in self.issues)
        return "\n".join(lines)


class PathNotFound(UserError):
    """The manifest path given on the command line does not exist."""

    def __init__(self, path: str, reason: str = "no such file or directory") -> None:
        self.path = path
        super().__init__(f"cannot read manifests at {path}: {reason}")
