"""YAML manifests to a validated :class:`~reconciler.core.model.desired.Desired`, with
``file:line`` errors.

Why ruamel.yaml's round-trip loader: it records the line and column of every key, value and
list item, so a pydantic error at ``('spec', 'labels', 1)`` becomes ``web.yaml:7:9``.

Manifests come from pull requests, so the loader treats its input as hostile and answers every
bad input with a :class:`~reconciler.errors.ManifestIssue`, never a traceback or a hang:

- files larger than :data:`MAX_FILE_BYTES`, binary files, non-UTF-8 text;
- YAML aliases (``*name``) are refused outright: they are never needed in a manifest and are
  the vehicle of "billion laughs" expansion bombs;
- nesting deeper than :data:`MAX_DEPTH` (recursion bombs), checked on the event stream
  before anything is built;
- duplicate keys (reported with both positions), syntax errors, tabs;
- symlinks are followed only while they stay inside the manifest folder (a link out of it, to
  ``/etc/hostname`` or ``/``, is refused unopened, as Flux and Argo CD refuse them), each real
  directory once (loops are cut); hidden entries are skipped;
- only regular files are opened, without blocking, and checked on the open descriptor (a FIFO
  or ``/proc/self/fd/1`` named ``x.yaml`` is refused, never read);
- ``.oscignore`` is read by the same rules and compiled without backtracking
  (:mod:`reconciler.manifests.ignore`); its problems are issues like any other, at its
  ``file:line:column``, and a run with one loads nothing else.

All issues of a run are collected and raised together in one
:class:`~reconciler.errors.ValidationFailed`.

Most runs have no issue at all, and positions only serve messages: so every run first tries
the fast path (:mod:`reconciler.manifests.fast_yaml`, libyaml's C parser, some 10 times
faster), which gives up on the first file, document or cross-reference that is not plainly
valid; the run then starts over on the round-trip path above, so every message (and every
note) is exactly what it would have been.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
)
from ruamel.yaml.reader import ReaderError

from reconciler.core.model.desired import API_VERSION, KINDS, MODEL_BY_KIND, Desired
from reconciler.errors import ManifestIssue, PathNotFound, ValidationFailed
from reconciler.errors import yaml_syntax_message as syntax_message
from reconciler.manifests import fast_yaml
from reconciler.manifests.ignore import IGNORE_FILE, MAX_IGNORE_BYTES, IgnoreRules
from reconciler.manifests.model_errors import map_errors
from reconciler.manifests.validate import SourceDoc, build_desired, cross_check, did_you_mean
from reconciler.manifests.yaml_positions import (
    Position,
    describe,
    mark_pos,
    name_of,
    offset_pos,
    plain,
    record_positions,
    value_pos,
)

MAX_FILE_BYTES = 1024 * 1024
"""Larger files are refused unread: real manifests are a few KiB, and 1 MiB is also Kubernetes'
limit for a ConfigMap (a common way to mount manifests). ruamel.yaml is pure Python (about
1.5 s per MiB), so this bounds what one file can cost."""
MAX_LINE_CHARS = 64 * 1024
"""Longest line accepted: ruamel.yaml's comment scanner is quadratic in the line length (a
single 1 MB comment line takes ~30 s), and no manifest needs such a line."""
MAX_DEPTH = 64
"""Deepest mapping/list nesting accepted (a manifest needs about 5)."""
MAX_NODES = 50_000
"""Most YAML nodes (scalars, lists, mappings) accepted per file: a manifest has about 30, and
the pure-Python parser spends ~30 µs per node, so this bounds the time one file can cost."""
YAML_SUFFIXES = (".yaml", ".yml")
"""Matched case-insensitively (``vnfs.YAML`` is read)."""
KUSTOMIZE_FILES = frozenset({"kustomization.yaml", "kustomization.yml", "Kustomization"})
"""kustomize's own file names: every Flux/Argo CD repository has one beside its manifests; it
may lack ``apiVersion`` and ``kind`` altogether, so it is recognised by name and skipped."""
OUR_API_GROUP = "osc.io/"


# --- public API -------------------------------------------------------------------------------


def load_path(path: str | os.PathLike[str], notes: list[str] | None = None) -> Desired:
    """Load every ``.yaml``/``.yml`` file under ``path`` (or the single file ``path``), but
    those ``.oscignore`` excludes (``reconciler.manifests.ignore``).

    Raises :class:`PathNotFound` when ``path`` does not exist and :class:`ValidationFailed` with
    every issue of the run when anything is invalid. No manifests at all is valid and returns
    an empty :class:`Desired` (check ``is_empty``). ``notes`` (if given) receives one line per
    file or document skipped as not ours (a ``kustomization.yaml``, another API's kinds).
    """
    return load_sources(_read_all(path), notes)


def load_sources(
    sources: Iterable[tuple[str, str | bytes]], notes: list[str] | None = None
) -> Desired:
    """Load manifests from ``(display name, content)`` pairs, e.g. the blobs of a git tree.

    Content given as ``bytes`` is checked for size, binary data and UTF-8 first. Kustomize's
    own files and documents of other APIs are skipped, each with a line in ``notes``.
    """
    sources = list(sources)
    fast = _fast_run(sources)
    if fast is not None:
        docs, skipped = fast
        if notes is not None:
            notes.extend(skipped)
        return build_desired(docs)
    run = _Run()
    for name, content in sources:
        if Path(name).name in KUSTOMIZE_FILES and not isinstance(content, _Unreadable):
            run.notes.append(f"{name}: skipped (kustomize's file, not an osc.io manifest)")
            continue
        run.load_file(name, content)
    if notes is not None:
        notes.extend(run.notes)
    issues = list(run.issues)
    issues += cross_check(run.docs, run.declared, complete=run.complete)
    if issues:
        raise ValidationFailed(issues)
    return build_desired(run.docs)


def find_manifest_files(root: str | os.PathLike[str]) -> list[Path]:
    """YAML files under ``root``, sorted, skipping hidden entries, symlink loops, links that
    lead out of ``root`` and what ``.oscignore`` excludes (their problems are reported by
    :func:`load_path`, not here).

    Symlinks that stay inside ``root`` are followed (Kubernetes ConfigMap volumes are made of
    symlinks) but each real directory is visited once, so ``a -> .`` cannot loop.
    """
    return _walk(Path(root)).files


# --- reading files ------------------------------------------------------------------------------


class _Unreadable(bytes):
    """Marker content for a file that could not be read; carries the reason (and where)."""

    reason: str
    position: Position

    def __new__(cls, reason: str, position: Position = (1, 1)) -> _Unreadable:
        obj = super().__new__(cls)
        obj.reason = reason
        obj.position = position
        return obj


@dataclass
class _Walk:
    """What a walk of a manifest folder found: the files to load, and entries refused
    (a link out of the folder, a file that is not a regular file, a bad ``.oscignore``)."""

    files: list[Path] = field(default_factory=list)
    refused: list[tuple[str, _Unreadable]] = field(default_factory=list)


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


_OUTSIDE = (
    "symbolic link to a path outside the manifest folder; refused (links must stay inside "
    "the folder, as Flux and Argo CD require)"
)


def _walk(top: Path) -> _Walk:
    """The manifest files under ``top``: hidden entries are skipped; a symlink is followed
    only while it stays inside ``top`` (a link out of it is refused, never opened); each real
    directory is visited once."""
    walk = _Walk()
    real_root = os.path.realpath(top)
    rules = _ignore_rules(top, real_root, walk)
    if rules is None:
        return walk  # the folder's .oscignore is invalid: which files to skip is unknown
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        here = Path(dirpath).relative_to(top).as_posix()
        prefix = "" if here == "." else here + "/"
        kept: list[str] = []
        for d in sorted(dirnames):
            if d.startswith(".") or rules.ignored(prefix + d, is_dir=True):
                continue
            target = os.path.realpath(os.path.join(dirpath, d))
            if not _inside(target, real_root):
                walk.refused.append((os.path.join(dirpath, d), _Unreadable(_OUTSIDE)))
                continue
            if target not in seen:
                kept.append(d)
        dirnames[:] = kept
        for name in filenames:
            if name.startswith(".") or not name.lower().endswith(YAML_SUFFIXES):
                continue
            if rules.ignored(prefix + name, is_dir=False):
                continue
            path = Path(dirpath) / name
            if os.path.islink(path) and not _inside(os.path.realpath(path), real_root):
                walk.refused.append((str(path), _Unreadable(_OUTSIDE)))
                continue
            walk.files.append(path)
    walk.files.sort()
    return walk


def _ignore_rules(top: Path, real_root: str, walk: _Walk) -> IgnoreRules | None:
    """The rules of ``top/.oscignore`` (none when there is no such file), read like a manifest
    (inside the folder, a regular file, bounded); ``None`` after recording its problems."""
    file = top / IGNORE_FILE
    if not os.path.lexists(file):
        return IgnoreRules()
    name = str(file)
    if not _inside(os.path.realpath(file), real_root):
        walk.refused.append((name, _Unreadable(_OUTSIDE)))
        return None
    content = _read_bytes(file, MAX_IGNORE_BYTES, f"the {MAX_IGNORE_BYTES // 1024} KiB limit")
    if isinstance(content, _Unreadable):
        walk.refused.append((name, content))
        return None
    if len(content) > MAX_IGNORE_BYTES:  # it grew while being read
        walk.refused.append(
            (name, _Unreadable(f"file is larger than the {MAX_IGNORE_BYTES // 1024} KiB limit"))
        )
        return None
    if b"\x00" in content:
        walk.refused.append((name, _Unreadable(
            "binary file (contains NUL bytes), not a list of patterns",
            offset_pos(content, content.index(b"\x00")),
        )))  # fmt: skip
        return None
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        walk.refused.append((name, _Unreadable(
            f"not UTF-8 text: invalid byte 0x{content[exc.start]:02x} (save the file as UTF-8)",
            offset_pos(content, exc.start),
        )))  # fmt: skip
        return None
    rules = IgnoreRules(text)
    for problem in rules.problems:
        walk.refused.append((name, _Unreadable(problem.message, (problem.line, problem.column))))
    return None if rules.problems else rules


def _read_all(path: str | os.PathLike[str]) -> Iterator[tuple[str, str | bytes]]:
    root = Path(path)
    if not root.exists():
        if root.is_symlink():
            raise PathNotFound(str(path), "broken or looping symbolic link")
        raise PathNotFound(str(path))
    if root.is_dir():
        walk = _walk(root)
        yield from walk.refused
        for file in walk.files:
            yield str(file), _read_bytes(file)
        return
    # One file named on the command line: its folder is the manifest folder.
    if root.is_symlink() and not _inside(os.path.realpath(root), os.path.realpath(root.parent)):
        yield str(root), _Unreadable(_OUTSIDE)
        return
    yield str(root), _read_bytes(root)


_FILE_TYPES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _read_bytes(
    file: Path,
    limit: int = MAX_FILE_BYTES,
    what: str = f"the {MAX_FILE_BYTES // 1048576} MiB limit for a manifest file",
) -> bytes:
    """The file's bytes, or an :class:`_Unreadable` saying why not: a file that is not a
    regular file (a FIFO, a device, ``/proc/self/fd/1``) is never read, and the check is
    made on the open descriptor (opened without blocking: a FIFO's open would wait for a
    writer), so nothing can be swapped in between."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        return _Unreadable(f"cannot read file: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _FILE_TYPES if test(st.st_mode)), "not a file")
            return _Unreadable(f"{kind}, not a regular file; refused")
        if st.st_size > limit:
            size = (
                f"{st.st_size / 1048576:.1f} MiB"
                if limit >= 1048576
                else f"{st.st_size / 1024:.1f} KiB"
            )
            return _Unreadable(f"file is {size}, larger than {what}")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    except OSError as exc:
        return _Unreadable(f"cannot read file: {exc.strerror or exc}")
    finally:
        os.close(fd)


# --- one run ----------------------------------------------------------------------------------


@dataclass
class _DocInfo:
    """What the event pass learned about one document."""

    start: Position = (1, 1)
    bad: bool = False


@dataclass
class _Run:
    docs: list[SourceDoc] = field(default_factory=list)
    issues: list[ManifestIssue] = field(default_factory=list)
    declared: dict[str, dict[str, str]] = field(default_factory=dict)
    complete: bool = True
    notes: list[str] = field(default_factory=list)

    def file_issue(
        self, file: str, message: str, pos: Position = (1, 1), document: int = 0
    ) -> None:
        self.issues.append(
            ManifestIssue(file=file, line=pos[0], column=pos[1], document=document, message=message)
        )

    def load_file(self, file: str, content: str | bytes) -> None:
        text = self._decode(file, content)
        if text is None or not self._lines_ok(file, text):
            self.complete = False
            return
        infos = self._scan(file, text)
        if infos is None:
            self.complete = False
            return
        yaml = YAML(typ="rt")
        yaml.allow_duplicate_keys = True  # reported by _scan, with both positions
        try:
            documents = list(yaml.load_all(text))
        except Exception as exc:  # any failure here is the input's fault, never a traceback
            # e.g. an alias to an anchor of another document: already reported by the scan.
            if not any(info.bad for info in infos):
                mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
                problem = getattr(exc, "problem", None) or exc
                self.file_issue(file, f"cannot load YAML: {problem}", mark_pos(mark))
            self.complete = False
            return
        foreign: list[str] = []
        for index, data in enumerate(documents, start=1):
            info = infos[index - 1] if index <= len(infos) else _DocInfo()
            if data is None:
                continue  # an empty document (comments only, or a stray '---')
            what = _foreign(data)
            if what:
                foreign.append(what)
                continue
            if info.bad:
                self._declare(file, data, info.start)
                continue
            self._document(file, index, data, info.start)
        if foreign:
            self.notes.append(_foreign_note(file, foreign))

    # -- stage 1: bytes to text

    def _decode(self, file: str, content: str | bytes) -> str | None:
        if isinstance(content, _Unreadable):
            self.file_issue(file, content.reason, content.position)
            return None
        if isinstance(content, str):
            if len(content) > MAX_FILE_BYTES:
                self.file_issue(
                    file,
                    f"text is larger than the {MAX_FILE_BYTES // 1048576} MiB limit "
                    "for a manifest file",
                )
                return None
            return content
        if len(content) > MAX_FILE_BYTES:
            self.file_issue(file, f"file is larger than the {MAX_FILE_BYTES // 1048576} MiB limit")
            return None
        if b"\x00" in content:
            offset = content.index(b"\x00")
            self.file_issue(
                file,
                "binary file (contains NUL bytes), not YAML text",
                offset_pos(content, offset),
            )
            return None
        try:
            return content.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.file_issue(
                file,
                f"not UTF-8 text: invalid byte 0x{content[exc.start]:02x} (save the file as UTF-8)",
                offset_pos(content, exc.start),
            )
            return None

    def _lines_ok(self, file: str, text: str) -> bool:
        if len(text) <= MAX_LINE_CHARS:
            return True
        for number, line in enumerate(text.splitlines(), start=1):
            if len(line) > MAX_LINE_CHARS:
                self.file_issue(
                    file,
                    f"line is {len(line)} characters long, more than the limit of {MAX_LINE_CHARS}",
                    (number, MAX_LINE_CHARS + 1),
                )
                return False
        return True

    # -- stage 2: the event stream (cheap, lazy: nothing is expanded or built)

    def _scan(self, file: str, text: str) -> list[_DocInfo] | None:
        """Syntax, aliases, depth and duplicate keys, from parser events only.

        Returns per-document info, or ``None`` when the file cannot be loaded at all.
        """
        infos: list[_DocInfo] = []
        # Stack of open collections: [is_mapping, expecting_key, keys seen -> position].
        stack: list[tuple[bool, list[bool], dict[str, Position]]] = []
        aliases: dict[tuple[int, str], list[Any]] = {}
        try:
            return self._scan_events(file, text, infos, stack, aliases)
        finally:
            for (doc, anchor), (pos, uses) in aliases.items():
                times = f" (used {uses} times)" if uses > 1 else ""
                self.file_issue(
                    file,
                    f"YAML alias *{anchor} is not allowed in manifests (aliases can expand "
                    f"exponentially); write the value out{times}",
                    pos,
                    doc,
                )

    def _scan_events(
        self, file: str, text: str, infos: list[_DocInfo], stack: list[_Level],
        aliases: dict[tuple[int, str], list[Any]],
    ) -> list[_DocInfo] | None:  # fmt: skip
        """:meth:`_scan`'s loop over the parser events (aliases are reported by the caller);
        ``None`` when the file is refused (a YAML error, or a limit passed)."""
        try:
            return self._walk_events(file, text, infos, stack, aliases)
        except MarkedYAMLError as exc:
            message, mark = syntax_message(exc)
            self.file_issue(file, message, mark_pos(mark), len(infos))
            return None
        except ReaderError as exc:
            self.file_issue(
                file,
                f"unacceptable character #x{exc.character:04x} ({exc.reason}); "
                "manifests must be printable text",
                offset_pos(text, exc.position),
                len(infos),
            )
            return None
        except (YAMLError, RecursionError, ValueError, TypeError) as exc:
            self.file_issue(file, f"invalid YAML: {exc}", (1, 1), len(infos))
            return None

    def _walk_events(
        self, file: str, text: str, infos: list[_DocInfo], stack: list[_Level],
        aliases: dict[tuple[int, str], list[Any]],
    ) -> list[_DocInfo] | None:  # fmt: skip
        awaiting_root = False
        nodes = 0
        for event in YAML(typ="rt").parse(text):
            if isinstance(event, DocumentStartEvent):
                infos.append(_DocInfo(start=mark_pos(event.start_mark)))
                awaiting_root = True
                continue
            if not isinstance(event, NodeEvent | CollectionEndEvent):
                continue
            doc = len(infos)
            if isinstance(event, CollectionEndEvent):
                stack.pop()
                continue
            nodes += 1
            if nodes > MAX_NODES:
                self.file_issue(
                    file,
                    f"more than {MAX_NODES} YAML nodes in one file; split it into smaller files",
                    mark_pos(event.start_mark),
                    doc,
                )
                return None
            pos = mark_pos(event.start_mark)
            if awaiting_root:
                infos[-1].start = pos
                awaiting_root = False
            if stack and stack[-1][0]:
                expecting_key = stack[-1][1]
                if expecting_key[0] and isinstance(event, ScalarEvent):
                    seen = stack[-1][2]
                    key = str(event.value)
                    if key in seen:
                        first = seen[key]
                        self.file_issue(
                            file,
                            f"duplicate key {key!r} (first at line {first[0]}, column {first[1]})",
                            pos,
                            doc,
                        )
                        infos[-1].bad = True
                    else:
                        seen[key] = pos
                expecting_key[0] = not expecting_key[0]
            if isinstance(event, AliasEvent):
                # One issue per anchor and document (an expansion bomb uses one many times).
                aliases.setdefault((doc, str(event.anchor)), [pos, 0])[1] += 1
                infos[-1].bad = True
            elif isinstance(event, CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    self.file_issue(
                        file,
                        f"nesting deeper than {MAX_DEPTH} levels; manifests are never this deep",
                        pos,
                        doc,
                    )
                    return None
                stack.append((isinstance(event, MappingStartEvent), [True], {}))
        return infos

    # -- stage 3: one document to a model

    def _declare(self, file: str, data: Any, start: Position, kind: Any = None) -> None:
        """Remember kind/name of a document that failed, so references to it still resolve
        (``kind``: the kind it was meant to be, for a misspelt one)."""
        if not isinstance(data, dict):
            return
        kind = kind or data.get("kind")
        meta = data.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(kind, str) and isinstance(name, str):
            self.declared.setdefault(kind, {}).setdefault(name, f"{file}:{start[0]}")

    def _document(self, file: str, index: int, data: Any, start: Position) -> None:
        issue = _Issues(self.issues, file, index, data, start)
        kind = self._header(file, data, start, issue)
        if kind is None:
            return
        model = MODEL_BY_KIND[kind]
        try:
            manifest = model.model_validate(plain(data))
        except ValidationError as exc:
            for message, pos, path, expected in map_errors(model, data, start, exc):
                issue(message, pos, path, kind, expected)
            self._declare(file, data, start)
            return
        positions: dict[str, Position] = {}
        record_positions(data, (), positions)
        self.docs.append(
            SourceDoc(
                file=file,
                document=index,
                line=start[0],
                column=start[1],
                manifest=manifest,
                positions=positions,
            )
        )

    def _header(self, file: str, data: Any, start: Position, issue: _Issues) -> str | None:
        """The document's kind when it is a mapping with our ``apiVersion`` and a known
        ``kind``; else ``None``, with the issues said (and its name declared, so references
        to it still resolve)."""
        if not isinstance(data, CommentedMap):
            issue(
                f"document is {describe(data)}, expected a mapping with apiVersion, kind, "
                "metadata and spec"
            )
            return None
        kind = data.get("kind")
        api_version = data.get("apiVersion")
        bad_header = False
        if api_version is None:
            issue("missing required field 'apiVersion'", path="apiVersion", expected=API_VERSION)
            bad_header = True
        elif api_version != API_VERSION:
            issue(
                f"unknown apiVersion {api_version!r}",
                value_pos(data, "apiVersion"),
                "apiVersion",
                expected=API_VERSION,
            )
            bad_header = True
        if kind is None:
            issue("missing required field 'kind'", path="kind", expected=" or ".join(KINDS))
            bad_header = True
        elif not isinstance(kind, str) or kind not in MODEL_BY_KIND:  # a mapping is unhashable
            hint = did_you_mean(str(kind), KINDS)
            if hint:  # meant as that kind: its name still counts, so no "unknown" echoes
                self._declare(file, data, start, hint.split("'")[1])
            issue(
                f"unknown kind {kind!r}{hint}",
                value_pos(data, "kind"),
                "kind",
                expected="one of " + ", ".join(KINDS),
            )
            bad_header = True
        if bad_header:
            self._declare(file, data, start)
            return None
        assert isinstance(kind, str)
        return kind


_Level = tuple[bool, list[bool], dict[str, Position]]
"""An open YAML collection while scanning: a mapping?, whether a key comes next, its keys."""


@dataclass(frozen=True)
class _Issues:
    """Records the issues of one document (at its start unless told where)."""

    issues: list[ManifestIssue]
    file: str
    index: int
    data: Any
    start: Position

    def __call__(
        self,
        message: str,
        pos: Position | None = None,
        path: str = "",
        kind: str | None = None,
        expected: str | None = None,
    ) -> None:
        at = pos if pos is not None else self.start
        self.issues.append(
            ManifestIssue(
                file=self.file,
                line=at[0],
                column=at[1],
                document=self.index,
                path=path,
                kind=kind,
                name=name_of(self.data),
                message=message,
                expected=expected,
            )
        )


def _foreign_note(file: str, foreign: list[str]) -> str:
    shown = ", ".join(foreign[:3]) + (f", … {len(foreign) - 3} more" if len(foreign) > 3 else "")
    count = "a document" if len(foreign) == 1 else f"{len(foreign)} documents"
    return f"{file}: skipped {count} of other APIs ({shown})"


# --- the fast path ------------------------------------------------------------------------------


def _fast_run(sources: list[tuple[str, str | bytes]]) -> tuple[list[SourceDoc], list[str]] | None:
    """The run's documents and notes when every file is plainly valid, read by libyaml
    (:mod:`reconciler.manifests.fast_yaml`); ``None`` as soon as anything would be an issue
    (the round-trip path then reports it). Positions are not recorded: only issues use them."""
    docs: list[SourceDoc] = []
    notes: list[str] = []
    for name, content in sources:
        if isinstance(content, _Unreadable):
            return None
        if Path(name).name in KUSTOMIZE_FILES:
            notes.append(f"{name}: skipped (kustomize's file, not an osc.io manifest)")
            continue
        text = _fast_text(content)
        if text is None:
            return None
        documents = fast_yaml.load_plain(text, max_depth=MAX_DEPTH, max_nodes=MAX_NODES)
        if documents is None:
            return None
        foreign: list[str] = []
        for index, data in enumerate(documents, start=1):
            if data is None:
                continue
            what = _foreign(data)
            if what:
                foreign.append(what)
                continue
            kind = data.get("kind") if isinstance(data, dict) else None
            if not isinstance(kind, str) or kind not in MODEL_BY_KIND:
                return None
            if data.get("apiVersion") != API_VERSION:
                return None
            try:
                manifest = MODEL_BY_KIND[kind].model_validate(data)
            except ValidationError:
                return None
            docs.append(SourceDoc(file=name, document=index, line=1, column=1, manifest=manifest))
        if foreign:
            notes.append(_foreign_note(name, foreign))
    if cross_check(docs, {}, complete=True):
        return None
    return docs, notes


def _fast_text(content: str | bytes) -> str | None:
    """The text, when the round-trip path's first two stages would find nothing to report."""
    if isinstance(content, _Unreadable) or len(content) > MAX_FILE_BYTES:
        return None
    if isinstance(content, bytes):
        if b"\x00" in content:
            return None
        try:
            content = content.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None
    if len(content) > MAX_LINE_CHARS and any(
        len(line) > MAX_LINE_CHARS for line in content.splitlines()
    ):
        return None
    return content


def _foreign(data: Any) -> str | None:
    """``"apps/v1 Deployment"`` for a document of another API (skipped with a note), ``None``
    for one that is, or is meant to be, ours. Meant to be ours: no ``apiVersion`` string, an
    ``osc.io/`` one, one close to ours (a typo), or one of our kinds (then the version is the
    error); those are validated and their errors reported."""
    if not isinstance(data, dict):
        return None
    api, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api, str) or api.startswith(OUR_API_GROUP) or kind in KINDS:
        return None
    if did_you_mean(api, [API_VERSION]):
        return None
    return f"{api} {kind}" if isinstance(kind, str) else api


# --- helpers: positions -----------------------------------------------------------------------


# --- helpers: values --------------------------------------------------------------------------


# --- helpers: pydantic errors -----------------------------------------------------------------
