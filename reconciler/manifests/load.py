"""YAML manifests to a validated :class:`~reconciler.core.model.Desired`, with ``file:line`` errors.

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
- symlinked directories are followed at most once (loops are cut), hidden directories skipped.

All issues of a run are collected and raised together in one
:class:`~reconciler.errors.ValidationFailed`.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
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

from reconciler.core.model import API_VERSION, DNS1123_LABEL, KINDS, MODEL_BY_KIND, Desired
from reconciler.errors import ManifestIssue, PathNotFound, ValidationFailed
from reconciler.manifests.validate import SourceDoc, build_desired, cross_check, did_you_mean

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

Position = tuple[int, int]


# --- public API -------------------------------------------------------------------------------


def load_path(path: str | os.PathLike[str]) -> Desired:
    """Load every ``.yaml``/``.yml`` file under ``path`` (or the single file ``path``).

    Raises :class:`PathNotFound` when ``path`` does not exist and :class:`ValidationFailed` with
    every issue of the run when anything is invalid. No manifests at all is valid and returns
    an empty :class:`Desired` (check ``is_empty``).
    """
    return load_sources(_read_all(path))


def load_text(text: str, filename: str = "<text>") -> Desired:
    """Load manifests from a string (tests, stdin); ``filename`` is used in messages."""
    return load_sources([(filename, text)])


def load_sources(sources: Iterable[tuple[str, str | bytes]]) -> Desired:
    """Load manifests from ``(display name, content)`` pairs, e.g. the blobs of a git tree.

    Content given as ``bytes`` is checked for size, binary data and UTF-8 first.
    """
    run = _Run()
    for name, content in sources:
        run.load_file(name, content)
    issues = list(run.issues)
    issues += cross_check(run.docs, run.declared, complete=run.complete)
    if issues:
        raise ValidationFailed(issues)
    return build_desired(run.docs)


def find_manifest_files(root: str | os.PathLike[str]) -> list[Path]:
    """YAML files under ``root``, sorted, skipping hidden entries and symlink loops.

    Symlinked directories are followed (Kubernetes ConfigMap volumes are made of symlinks) but
    each real directory is visited once, so ``a -> .`` cannot loop.
    """
    top = Path(root)
    found: list[Path] = []
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and os.path.realpath(os.path.join(dirpath, d)) not in seen
        )
        for name in filenames:
            if name.startswith(".") or not name.endswith(YAML_SUFFIXES):
                continue
            found.append(Path(dirpath) / name)
    return sorted(found)


# --- reading files ------------------------------------------------------------------------------


def _read_all(path: str | os.PathLike[str]) -> Iterator[tuple[str, str | bytes]]:
    root = Path(path)
    if not root.exists():
        if root.is_symlink():
            raise PathNotFound(str(path), "broken or looping symbolic link")
        raise PathNotFound(str(path))
    files = [root] if root.is_file() else find_manifest_files(root)
    for file in files:
        yield str(file), _read_bytes(file)


class _Unreadable(bytes):
    """Marker content for a file that could not be read; carries the reason."""

    reason: str

    def __new__(cls, reason: str) -> _Unreadable:
        obj = super().__new__(cls)
        obj.reason = reason
        return obj


def _read_bytes(file: Path) -> bytes:
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            return _Unreadable(
                f"file is {size / 1048576:.1f} MiB, larger than the "
                f"{MAX_FILE_BYTES // 1048576} MiB limit for a manifest file"
            )
        with file.open("rb") as fh:
            return fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return _Unreadable(f"cannot read file: {exc.strerror or exc}")


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
                self.file_issue(file, f"cannot load YAML: {problem}", _mark_pos(mark))
            self.complete = False
            return
        for index, data in enumerate(documents, start=1):
            info = infos[index - 1] if index <= len(infos) else _DocInfo()
            if data is None:
                continue  # an empty document (comments only, or a stray '---')
            if info.bad:
                self._declare(file, data, info.start)
                continue
            self._document(file, index, data, info.start)

    # -- stage 1: bytes to text

    def _decode(self, file: str, content: str | bytes) -> str | None:
        if isinstance(content, _Unreadable):
            self.file_issue(file, content.reason)
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
                _offset_pos(content, offset),
            )
            return None
        try:
            return content.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.file_issue(
                file,
                f"not UTF-8 text: invalid byte 0x{content[exc.start]:02x} (save the file as UTF-8)",
                _offset_pos(content, exc.start),
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
        awaiting_root = False
        nodes = 0
        try:
            for event in YAML(typ="rt").parse(text):
                if isinstance(event, DocumentStartEvent):
                    infos.append(_DocInfo(start=_mark_pos(event.start_mark)))
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
                        f"more than {MAX_NODES} YAML nodes in one file; split it into "
                        "smaller files",
                        _mark_pos(event.start_mark),
                        doc,
                    )
                    return None
                pos = _mark_pos(event.start_mark)
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
                                f"duplicate key {key!r} (first at line {first[0]}, "
                                f"column {first[1]})",
                                pos,
                                doc,
                            )
                            infos[-1].bad = True
                        else:
                            seen[key] = pos
                    expecting_key[0] = not expecting_key[0]
                if isinstance(event, AliasEvent):
                    self.file_issue(
                        file,
                        f"YAML alias *{event.anchor} is not allowed in manifests "
                        "(aliases can expand exponentially); write the value out",
                        pos,
                        doc,
                    )
                    infos[-1].bad = True
                elif isinstance(event, CollectionStartEvent):
                    if len(stack) >= MAX_DEPTH:
                        self.file_issue(
                            file,
                            f"nesting deeper than {MAX_DEPTH} levels; manifests are never "
                            "this deep",
                            pos,
                            doc,
                        )
                        return None
                    stack.append((isinstance(event, MappingStartEvent), [True], {}))
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            self.file_issue(file, _syntax_message(exc), _mark_pos(mark), len(infos))
            return None
        except ReaderError as exc:
            self.file_issue(
                file,
                f"unacceptable character #x{exc.character:04x} ({exc.reason}); "
                "manifests must be printable text",
                _offset_pos(text, exc.position),
                len(infos),
            )
            return None
        except (YAMLError, RecursionError, ValueError, TypeError) as exc:
            self.file_issue(file, f"invalid YAML: {exc}", (1, 1), len(infos))
            return None
        return infos

    # -- stage 3: one document to a model

    def _declare(self, file: str, data: Any, start: Position) -> None:
        """Remember kind/name of a document that failed, so references to it still resolve."""
        if not isinstance(data, dict):
            return
        kind = data.get("kind")
        meta = data.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(kind, str) and isinstance(name, str):
            self.declared.setdefault(kind, {}).setdefault(name, f"{file}:{start[0]}")

    def _document(self, file: str, index: int, data: Any, start: Position) -> None:
        def issue(
            message: str,
            pos: Position = start,
            path: str = "",
            kind: str | None = None,
            expected: str | None = None,
        ) -> None:
            name = _name_of(data)
            self.issues.append(
                ManifestIssue(
                    file=file,
                    line=pos[0],
                    column=pos[1],
                    document=index,
                    path=path,
                    kind=kind,
                    name=name,
                    message=message,
                    expected=expected,
                )
            )

        if not isinstance(data, CommentedMap):
            issue(
                f"document is {_describe(data)}, expected a mapping with apiVersion, kind, "
                "metadata and spec"
            )
            return
        kind = data.get("kind")
        api_version = data.get("apiVersion")
        bad_header = False
        if api_version is None:
            issue("missing required field 'apiVersion'", path="apiVersion", expected=API_VERSION)
            bad_header = True
        elif api_version != API_VERSION:
            issue(
                f"unknown apiVersion {api_version!r}",
                _value_pos(data, "apiVersion"),
                "apiVersion",
                expected=API_VERSION,
            )
            bad_header = True
        if kind is None:
            issue("missing required field 'kind'", path="kind", expected=" or ".join(KINDS))
            bad_header = True
        elif kind not in MODEL_BY_KIND:
            hint = did_you_mean(str(kind), KINDS)
            issue(
                f"unknown kind {kind!r}{hint}",
                _value_pos(data, "kind"),
                "kind",
                expected="one of " + ", ".join(KINDS),
            )
            bad_header = True
        if bad_header:
            self._declare(file, data, start)
            return
        assert isinstance(kind, str)
        model = MODEL_BY_KIND[kind]
        try:
            manifest = model.model_validate(_plain(data))
        except ValidationError as exc:
            for message, pos, path, expected in _map_errors(model, data, start, exc):
                issue(message, pos, path, kind, expected)
            self._declare(file, data, start)
            return
        positions: dict[str, Position] = {}
        _record_positions(data, (), positions)
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


# --- helpers: positions -----------------------------------------------------------------------


def _mark_pos(mark: Any) -> Position:
    if mark is None:
        return (1, 1)
    return (int(mark.line) + 1, int(mark.column) + 1)


def _offset_pos(content: str | bytes, offset: int) -> Position:
    head = content[:offset]
    newline: Any = b"\n" if isinstance(content, bytes) else "\n"
    line = head.count(newline) + 1
    column = offset - (head.rfind(newline) + 1) + 1
    return (line, column)


def _lc(pair: Any) -> Position | None:
    try:
        return (int(pair[0]) + 1, int(pair[1]) + 1)
    except (TypeError, IndexError, ValueError):
        return None


def _key_pos(node: Any, key: Any) -> Position | None:
    try:
        return _lc(node.lc.key(key))
    except Exception:
        return None


def _value_pos(node: Any, key: Any) -> Position:
    """Where a mapping value (or list item) starts; its key when the value is empty."""
    try:
        if isinstance(node, CommentedSeq):
            return _lc(node.lc.item(key)) or (1, 1)
        if node.get(key) is None:
            return _key_pos(node, key) or (1, 1)
        return _lc(node.lc.value(key)) or _key_pos(node, key) or (1, 1)
    except Exception:
        return (1, 1)


def format_path(parts: Sequence[Any]) -> str:
    """``('spec', 'labels', 1)`` -> ``spec.labels[1]``; odd keys are quoted:
    ``spec.nodeSelector["osc.io/vnf"]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            out += f".{part}" if out else part
        else:
            out += f"[{_quote(part)}]"
    return out


def _quote(value: Any) -> str:
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _record_positions(node: Any, parts: tuple[Any, ...], out: dict[str, Position]) -> None:
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            sub = (*parts, key)
            out[format_path(sub)] = _value_pos(node, key)
            _record_positions(value, sub, out)
    elif isinstance(node, CommentedSeq):
        for index, value in enumerate(node):
            sub = (*parts, index)
            out[format_path(sub)] = _value_pos(node, index)
            _record_positions(value, sub, out)


# --- helpers: values --------------------------------------------------------------------------


def _plain(node: Any) -> Any:
    """ruamel's round-trip types to plain Python, so pydantic sees ordinary values.

    Depth is bounded by the scan (:data:`MAX_DEPTH`) and aliases were refused, so this cannot
    recurse deeply or expand.
    """
    if isinstance(node, dict):
        return {_plain_key(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if hasattr(node, "value") and isinstance(node.value, bool):  # ScalarBoolean
        return bool(node.value)
    return node


def _plain_key(key: Any) -> Any:
    if isinstance(key, str):
        return str(key)
    if isinstance(key, bool) or key is None:
        return key
    if isinstance(key, int):
        return int(key)
    try:
        hash(key)
    except TypeError:
        return repr(key)
    return key if not isinstance(key, list | tuple) else tuple(_plain(key))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {_short(value)}"
    return f"a {type(value).__name__}"


def _short(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _name_of(data: Any) -> str | None:
    if isinstance(data, dict):
        meta = data.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            return str(meta["name"])
    return None


def _syntax_message(exc: MarkedYAMLError) -> str:
    problem = str(exc.problem or "invalid YAML")
    if "'\\t'" in problem:
        return "tab character: YAML indentation must use spaces, not tabs"
    context = f" {exc.context}" if exc.context else ""
    return f"YAML syntax error:{context}: {problem}" if context else f"YAML syntax error: {problem}"


# --- helpers: pydantic errors -----------------------------------------------------------------

_EXPECTED_TYPE = {
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
}


def _unwrap_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _unwrap_models(arg)
    return found


def _fields_at(model: type[BaseModel], parts: Sequence[Any]) -> list[str]:
    """Field names allowed at ``parts`` (a path of real keys), for "did you mean"."""
    current: list[type[BaseModel]] = [model]
    for part in parts:
        if isinstance(part, int):
            continue
        nxt: list[type[BaseModel]] = []
        for cls in current:
            info = cls.model_fields.get(str(part))
            if info is not None:
                nxt += _unwrap_models(info.annotation)
        current = nxt
    names: list[str] = []
    for cls in current:
        names += [n for n in cls.model_fields if n not in names]
    return names


@dataclass
class _Located:
    parts: list[Any]
    pos: Position
    key_pos: Position
    complete: bool


def _locate(root: CommentedMap, loc: Sequence[Any], start: Position) -> _Located:
    """Walk the ruamel tree along a pydantic ``loc``; skip union tags pydantic inserts."""
    node: Any = root
    parts: list[Any] = []
    pos = key_pos = start
    items = list(loc)
    i = 0
    while i < len(items):
        el = items[i]
        last = i == len(items) - 1
        if el == "[key]" and parts:
            pos = key_pos
            i += 1
            continue
        if isinstance(node, CommentedMap) and el in node:
            key_pos = _key_pos(node, el) or pos
            pos = _value_pos(node, el)
            parts.append(el)
            node = node[el]
        elif isinstance(node, CommentedSeq) and isinstance(el, int) and 0 <= el < len(node):
            pos = key_pos = _value_pos(node, el)
            parts.append(el)
            node = node[el]
        elif not last and isinstance(el, str):
            pass  # a union member tag such as 'constrained-int' or 'function-after[...]'
        else:
            return _Located(parts, pos, key_pos, complete=False)
        i += 1
    return _Located(parts, pos, key_pos, complete=True)


def _map_errors(
    model: type[BaseModel], data: CommentedMap, start: Position, exc: ValidationError
) -> list[tuple[str, Position, str, str | None]]:
    """pydantic errors to ``(message, position, path, expected)``, one per offending field."""
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], _Located]]] = {}
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        located = _locate(data, loc, start)
        if err["type"] == "missing":
            missing = loc[-1]
            path = format_path([*located.parts, missing])
        else:
            path = format_path(located.parts)
        groups.setdefault((path, err["type"] if err["type"] == "missing" else ""), []).append(
            (dict(err), located)
        )
    out: list[tuple[str, Position, str, str | None]] = []
    for (path, _), errs in groups.items():
        located = errs[0][1]
        concrete = [e for e, _ in errs if e["type"] not in _EXPECTED_TYPE]
        chosen = concrete if len(errs) > 1 and concrete else [e for e, _ in errs]
        if len(chosen) > 1 and all(e["type"] in _EXPECTED_TYPE for e in chosen):
            kinds = []
            for e in chosen:
                if _EXPECTED_TYPE[e["type"]] not in kinds:
                    kinds.append(_EXPECTED_TYPE[e["type"]])
            message = f"expected {' or '.join(kinds)}, got {_describe(chosen[0].get('input'))}"
            out.append((message, located.pos, path, None))
            continue
        message, expected, pos = _message(model, chosen[0], located)
        out.append((message, pos, path, expected))
    return out


def _message(
    model: type[BaseModel], err: dict[str, Any], located: _Located
) -> tuple[str, str | None, Position]:
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return ("required field is missing", None, located.key_pos)
    if kind == "extra_forbidden":
        key = located.parts[-1] if located.parts else err["loc"][-1]
        allowed = _fields_at(model, located.parts[:-1])
        hint = did_you_mean(str(key), allowed)
        expected = "one of: " + ", ".join(allowed) if allowed else None
        return (f"unknown field {str(key)!r}{hint}", expected, located.key_pos)
    if kind == "string_pattern_mismatch" and ctx.get("pattern") == DNS1123_LABEL:
        return (
            f"{_short(str(value))} is not a valid name: use at most 63 lowercase letters, "
            "digits and '-', starting and ending with a letter or digit (a DNS-1123 label)",
            None,
            located.pos,
        )
    if kind in ("enum", "literal_error"):
        return (f"{_describe(value)} is not allowed", ctx.get("expected"), located.pos)
    if kind in _EXPECTED_TYPE:
        return (f"expected {_EXPECTED_TYPE[kind]}, got {_describe(value)}", None, located.pos)
    message = str(err.get("msg", "invalid value"))
    if message.startswith("Value error, "):
        return (message.removeprefix("Value error, "), None, located.pos)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        message = f"{message}, got {_short(str(value)) if isinstance(value, str) else value}"
    return (message, None, located.pos)
