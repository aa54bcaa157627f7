"""Every error osc-gitops raises on purpose, in one hierarchy (kopf's ``clients/errors.py`` is
the model), and how each kind is shown.

::

    OscError                      cause label   shown as
    ├── UserError                 other         ``error: <message>``, exit 1, no traceback
    │   ├── ValidationFailed      manifests     every ``file:line:column`` issue of the run
    │   │   └── RevisionRefused   manifests     (a commit too big to export: adapters.git)
    │   ├── PathNotFound          manifests
    │   ├── CompileError          other         (reconciler.core.steering.base)
    │   └── EmptyDesiredRefused   empty-refused (reconciler.engine.pipeline)
    ├── EndpointError             (per client)  ``error: <message naming the endpoint>``, exit 1
    │   ├── KubeError             kubernetes    (reconciler.adapters.kube.client)
    │   ├── OvnError              ovn           (reconciler.adapters.ovn)
    │   ├── GitSourceError        git           (reconciler.adapters.git)
    │   ├── SecurityManagerError  security-manager (reconciler.adapters.notify)
    │   └── LeaseError            lease         (reconciler.adapters.kube.lease)
    ├── ConflictError             (mixin)       someone else holds or changed it first
    ├── Aborted                   aborted       a reconcile stopped on purpose before a write
    └── InternalError             other         our bug or a broken invariant: traceback kept
        └── NotConverged          not-converged (reconciler.engine.pipeline)

- :attr:`OscError.cause` is the label of ``osc_gitops_errors_total``: it comes from the class,
  never from a module name, so moving code cannot change a metric.
- A *user* error (bad input, an endpoint that is down, a lock held by another process) is
  printed as one line: a traceback tells a user "the tool is broken", not "your input is".
  An :class:`InternalError` keeps its traceback (``show_traceback``): it may be our bug.
- Text from outside (file names, ``metadata.name``, a foreign ``apiVersion``, a git server's
  or an API server's message) never reaches a terminal or a CI log raw: :func:`printable` and
  :func:`one_line` escape control characters (ANSI sequences, OSC-8 hyperlinks, C1 controls,
  bidirectional overrides), and a value's line break, which could start a line of its own
  (a GitHub ``::error::`` workflow command), wherever such text is printed or logged.
- :class:`ManifestIssue` is one problem in one manifest, located to ``file:line:column`` (the
  format compilers and editors understand, so terminals and CI annotations make it clickable).
  :class:`ValidationFailed` carries *all* issues of a run, because fixing a repository one error
  per CI round-trip is miserable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
"""What a terminal or a log viewer would act on: C0 controls but tab and line feed (ESC starts
ANSI and OSC-8 sequences, CR rewrites a line), DEL, C1 controls (CSI is one), the Unicode line
and paragraph separators and the bidirectional controls ("Trojan Source")."""
_BREAKS = re.compile(r"[\t\n]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(char) or (
        f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    )


def printable(text: str) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\u202e``);
    tabs and line breaks are kept (a message's own lines)."""
    return _CONTROL.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` as one printable line: control characters and line breaks escaped. For any
    value from outside inside a line (a file name, an object's name)."""
    return _BREAKS.sub(_escape, printable(text))


class OscError(Exception):
    """Root of every error osc-gitops raises on purpose."""

    cause: ClassVar[str] = "other"
    """Label of the ``osc_gitops_errors_total`` metric for this kind of error."""
    show_traceback: ClassVar[bool] = False
    """True only where the error may be our own bug (the CLI and the log then keep the trace)."""


class UserError(OscError):
    """An error caused by input or configuration, shown to the user without a traceback.

    The message must name what is wrong and where (file, endpoint, flag), e.g.
    ``cannot read examples/policies: no such file or directory``.
    """


class EndpointError(OscError):
    """A live system (Kubernetes API, OVN NB, git remote) could not be reached or refused a
    request. Each client's adapter subclasses it once and sets :attr:`cause`; the message
    always names the endpoint."""


class ConflictError(OscError):
    """Someone else holds or changed the object first (a lock, a create race). Used as a mixin
    beside the endpoint's own class, e.g. ``class OvnLockedError(OvnApplyError, ConflictError)``;
    retrying later is the answer."""


class Aborted(OscError):
    """A reconcile stopped on purpose before a write: shutting down, or the Lease is not held."""

    cause = "aborted"


class InternalError(OscError):
    """Something that should not happen did: possibly a bug of ours. Keeps its traceback."""

    show_traceback = True


def error_cause(exc: BaseException) -> str:
    """The metric label of any exception: the class's :attr:`OscError.cause`, else "other"."""
    return exc.cause if isinstance(exc, OscError) else "other"


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
        return one_line(text)  # a file or object name from a pull request stays one line

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

    cause = "manifests"

    def __init__(self, issues: Iterable[ManifestIssue]) -> None:
        self.issues: list[ManifestIssue] = sorted(issues, key=ManifestIssue.sort_key)
        super().__init__(self._summary())

    def _summary(self) -> str:
        count = len(self.issues)
        noun = "problem" if count == 1 else "problems"
        lines = [f"{count} {noun} in manifests:"]
        lines.extend(f"  {issue}" for issue in self.issues)
        return "\n".join(lines)


class RevisionRefused(ValidationFailed):
    """A source revision refused whole before its manifests were read (a file or the whole
    export past a size limit, ``reconciler.adapters.git``): reported, and kept refused, like
    invalid manifests; ``revision`` is the commit."""

    def __init__(self, revision: str, issues: Iterable[ManifestIssue]) -> None:
        self.revision = revision
        super().__init__(issues)


class PathNotFound(UserError):
    """The manifest path given on the command line does not exist."""

    cause = "manifests"

    def __init__(self, path: str, reason: str = "no such file or directory") -> None:
        self.path = path
        super().__init__(f"cannot read manifests at {path}: {reason}")


_UNCLOSED = {
    "while parsing a flow mapping": "the mapping '{' opened here is never closed",
    "while parsing a flow sequence": "the list '[' opened here is never closed",
    "while scanning a quoted scalar": "the quoted string opened here is never closed",
}
"""Constructs that run until they are closed: a parser notices the missing end only later (often
at the next ``---``), so the error is reported where the construct opened."""


def yaml_syntax_message(exc: Any) -> tuple[str, Any]:
    """A YAML syntax error's message (ruamel's ``MarkedYAMLError``: its problem, context and
    marks) and the mark it is reported at: one wording for manifests and kubeconfigs."""
    problem = str(exc.problem or "invalid YAML")
    mark = exc.problem_mark or exc.context_mark
    if "'\\t'" in problem:
        return "tab character: YAML indentation must use spaces, not tabs", mark
    context = str(exc.context or "")
    opened = _UNCLOSED.get(context)
    if opened and exc.context_mark is not None:
        found = ""
        if exc.problem_mark is not None:
            found = (
                f" (at line {exc.problem_mark.line + 1}, column {exc.problem_mark.column + 1}: "
                f"{problem})"
            )
        return f"YAML syntax error: {opened}{found}", exc.context_mark
    if context:
        return f"YAML syntax error: {context}: {problem}", mark
    return f"YAML syntax error: {problem}", mark
