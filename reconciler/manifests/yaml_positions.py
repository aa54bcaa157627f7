"""Where things are in a YAML document: ``(line, column)`` of keys, values and items in
ruamel.yaml's round-trip tree, plain Python values out of it, and readable renderings of values
and field paths for error messages. Pure helpers shared by the loader and the error mapper."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

Position = tuple[int, int]


def mark_pos(mark: Any) -> Position:
    if mark is None:
        return (1, 1)
    return (int(mark.line) + 1, int(mark.column) + 1)


def offset_pos(content: str | bytes, offset: int) -> Position:
    head = content[:offset]
    newline: Any = b"\n" if isinstance(content, bytes) else "\n"
    line = head.count(newline) + 1
    column = offset - (head.rfind(newline) + 1) + 1
    return (line, column)


def line_col(pair: Any) -> Position | None:
    try:
        return (int(pair[0]) + 1, int(pair[1]) + 1)
    except (TypeError, IndexError, ValueError):
        return None


def key_position(node: Any, key: Any) -> Position | None:
    try:
        return line_col(node.lc.key(key))
    except Exception:
        return None


def value_pos(node: Any, key: Any) -> Position:
    """Where a mapping value (or list item) starts; its key when the value is empty."""
    try:
        if isinstance(node, CommentedSeq):
            return line_col(node.lc.item(key)) or (1, 1)
        if node.get(key) is None:
            return key_position(node, key) or (1, 1)
        return line_col(node.lc.value(key)) or key_position(node, key) or (1, 1)
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
            out += f"[{quote(part)}]"
    return out


def quote(value: Any) -> str:
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def record_positions(node: Any, parts: tuple[Any, ...], out: dict[str, Position]) -> None:
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            sub = (*parts, key)
            out[format_path(sub)] = value_pos(node, key)
            record_positions(value, sub, out)
    elif isinstance(node, CommentedSeq):
        for index, value in enumerate(node):
            sub = (*parts, index)
            out[format_path(sub)] = value_pos(node, index)
            record_positions(value, sub, out)


def plain(node: Any) -> Any:
    """ruamel's round-trip types to plain Python, so pydantic sees ordinary values.

    Depth is bounded by the scan (:data:`MAX_DEPTH`) and aliases were refused, so this cannot
    recurse deeply or expand.
    """
    if isinstance(node, dict):
        return {plain_key(k): plain(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [plain(v) for v in node]
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


def plain_key(key: Any) -> Any:
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
    return key if not isinstance(key, list | tuple) else tuple(plain(key))


def describe(value: Any) -> str:
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
        return f"the string {shorten(value)}"
    return f"a {type(value).__name__}"


def shorten(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def name_of(data: Any) -> str | None:
    if isinstance(data, dict):
        meta = data.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            return str(meta["name"])
    return None
