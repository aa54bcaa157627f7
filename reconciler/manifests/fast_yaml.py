"""A fast path for manifests that are plain, valid YAML: libyaml's C parser, events to data.

Why: ruamel.yaml's round-trip loader (:mod:`reconciler.manifests.load`) is pure Python and
records the position of every key and value, which only an *error* message needs; for the 400
documents of a 200-group repository it takes about half a second of every cold ``plan`` and
``apply``, and most of a node agent's. libyaml (PyYAML's C extension, already installed with the
Kubernetes client) parses the same text some 20 times faster.

The contract: :func:`load_plain` returns exactly what the round-trip loader followed by
:func:`~reconciler.manifests.yaml_positions.plain` returns, or ``None``. It returns ``None``
(and the caller takes the round-trip path, which also reports every problem with its
``file:line:column``) as soon as the text uses anything outside a conservative subset:

- anything libyaml refuses, a ``%YAML``/``%TAG`` directive (ruamel reads YAML 1.2, libyaml
  1.1), a tab anywhere (ruamel refuses tabs in places libyaml takes as white space), a
  character ruamel's reader finds unprintable, a byte order mark, the line breaks
  U+0085/U+2028/U+2029 (a line break in 1.1 only);
- anchors, aliases, explicit tags, block scalars (``|``, ``>``), a scalar spread over several
  lines, a key that is not a scalar, a key twice in one mapping;
- nesting deeper than ``max_depth`` or more than ``max_nodes`` nodes (the round-trip path's
  limits, so a hostile file costs the fast path no more than its event stream);
- a plain scalar that ruamel's own YAML 1.2 resolver (asked for every plain scalar, so the
  type is decided by the same rules) reads as anything but a string, null, a boolean, a
  decimal integer (``[-+]?[0-9]+``) or a decimal float (``[-+]?[0-9]+.[0-9]+``): octal, hex,
  ``1_000``, exponents, ``.inf``, timestamps, ``<<``, ``=``.

Quoted scalars are strings. Positions are not kept: the loader needs them only for messages,
and any message means the round-trip path runs.
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

try:  # PyYAML with libyaml; without it, every file takes the round-trip path
    from yaml import CSafeLoader as _Loader
    from yaml import YAMLError
    from yaml.events import (
        AliasEvent,
        CollectionStartEvent,
        DocumentStartEvent,
        MappingEndEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceEndEvent,
        SequenceStartEvent,
    )

    AVAILABLE = True
except ImportError:  # pragma: no cover - PyYAML is installed with the kubernetes client
    AVAILABLE = False

__all__ = ["AVAILABLE", "load_plain"]

_TAG = "tag:yaml.org,2002:"
_INT = re.compile(r"[-+]?[0-9]+\Z")
_FLOAT = re.compile(r"[-+]?[0-9]+\.[0-9]+\Z")
_DECLINED_CHARS = re.compile(
    "[^\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
"""Anything but what ruamel's reader accepts, less the tab, the YAML 1.1 line breaks and the
byte order mark (libyaml skips one inside the text, ruamel reads it as a character)."""
_RESOLVER = VersionedResolver(version=(1, 2))
"""ruamel's resolver as its round-trip loader uses it (YAML 1.2, the default)."""


class _Unsafe(Exception):
    """The text leaves the subset this module reads exactly like ruamel."""


def _scalar(event: Any) -> Any:
    if event.anchor is not None or event.tag is not None:
        raise _Unsafe
    if event.start_mark.line != event.end_mark.line:
        raise _Unsafe  # multi-line: folding rules differ in corner cases
    value = event.value
    style = event.style
    if style in ("'", '"'):
        return value
    if style:  # block scalars
        raise _Unsafe
    tag = _RESOLVER.resolve(ScalarNode, value, (True, False))
    if tag == _TAG + "str":
        return value
    if tag == _TAG + "null":
        return None
    if tag == _TAG + "bool":
        return value.lower() == "true"
    if tag == _TAG + "int" and _INT.match(value):
        return int(value)
    if tag == _TAG + "float" and _FLOAT.match(value):
        return float(value)
    raise _Unsafe  # octal, hex, 1_000, exponents, .inf, timestamps, merge and value keys


def load_plain(text: str, *, max_depth: int, max_nodes: int) -> list[Any] | None:
    """The documents of ``text`` as plain Python values (``None`` for an empty document), or
    ``None`` when the text is outside the subset (see the module docstring)."""
    if not AVAILABLE or _DECLINED_CHARS.search(text):
        return None
    try:
        return _build(text, max_depth, max_nodes)
    except (_Unsafe, YAMLError, RecursionError, ValueError, TypeError):
        return None


def _build(text: str, max_depth: int, max_nodes: int) -> list[Any]:
    loader = _Loader(text)
    documents: list[Any] = []
    # open collections: [container, pending key (mappings), keys seen (mappings)]
    stack: list[tuple[Any, list[Any], set[str]]] = []
    nodes = 0
    try:
        while True:
            event = loader.get_event()
            if event is None:
                break
            if isinstance(event, DocumentStartEvent):
                if event.version is not None or event.tags:
                    raise _Unsafe
                continue
            if isinstance(event, MappingEndEvent | SequenceEndEvent):
                container, _pending, _seen = stack.pop()
                _add(container, stack, documents)
                continue
            if isinstance(event, AliasEvent):
                raise _Unsafe
            if isinstance(event, ScalarEvent):
                nodes += 1
                if nodes > max_nodes:
                    raise _Unsafe
                value = _scalar(event)
                if stack and isinstance(stack[-1][0], dict) and not stack[-1][1]:
                    if not isinstance(value, str) or event.value in stack[-1][2]:
                        raise _Unsafe  # a non-string key, or a key twice
                    stack[-1][2].add(event.value)
                    stack[-1][1].append(value)
                    continue
                _add(value, stack, documents)
                continue
            if isinstance(event, CollectionStartEvent):
                nodes += 1
                if nodes > max_nodes or len(stack) >= max_depth:
                    raise _Unsafe
                if event.anchor is not None or event.tag is not None:
                    raise _Unsafe
                if stack and isinstance(stack[-1][0], dict) and not stack[-1][1]:
                    raise _Unsafe  # a collection as a key
                if isinstance(event, MappingStartEvent):
                    stack.append(({}, [], set()))
                elif isinstance(event, SequenceStartEvent):
                    stack.append(([], [], set()))
    finally:
        loader.dispose()
    return documents


def _add(value: Any, stack: list[tuple[Any, list[Any], set[str]]], documents: list[Any]) -> None:
    """Put a finished node where it belongs: a mapping's value, a list item, or a document."""
    if not stack:
        documents.append(value)
        return
    container, pending, _seen = stack[-1]
    if isinstance(container, dict):
        container[pending.pop()] = value
    else:
        container.append(value)
