"""pydantic validation errors to :class:`~reconciler.errors.ManifestIssue`: each error's
location tuple (``('spec', 'labels', 1)``) is found in the YAML tree and becomes
``file:line:column`` with the field path, what was found and what was expected."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.core.model.desired import DNS1123_LABEL
from reconciler.manifests.validate import did_you_mean
from reconciler.manifests.yaml_positions import (
    Position,
    describe,
    format_path,
    key_position,
    shorten,
    value_pos,
)

EXPECTED_TYPE = {
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

EMPTY_LIST_HINTS = {
    "spec.traffic": (
        "an empty list steers nothing: omit traffic to steer all IP traffic, or list at least "
        "one {protocol, ports} filter"
    ),
    "spec.vnf": (
        "an empty chain steers nothing: name one VnfDeployment, or list the VNFs of the chain "
        "in the order a packet crosses them"
    ),
}
"""What an empty list means to the user, per field path (pydantic's ``too_short``)."""


def unwrap_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += unwrap_models(arg)
    return found


def fields_at(model: type[BaseModel], parts: Sequence[Any]) -> list[str]:
    """Field names allowed at ``parts`` (a path of real keys), for "did you mean"."""
    current: list[type[BaseModel]] = [model]
    for part in parts:
        if isinstance(part, int):
            continue
        nxt: list[type[BaseModel]] = []
        for cls in current:
            info = cls.model_fields.get(str(part))
            if info is not None:
                nxt += unwrap_models(info.annotation)
        current = nxt
    names: list[str] = []
    for cls in current:
        names += [n for n in cls.model_fields if n not in names]
    return names


@dataclass
class Located:
    parts: list[Any]
    pos: Position
    key_pos: Position
    complete: bool


def locate(root: CommentedMap, loc: Sequence[Any], start: Position) -> Located:
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
            key_pos = key_position(node, el) or pos
            pos = value_pos(node, el)
            parts.append(el)
            node = node[el]
        elif isinstance(node, CommentedSeq) and isinstance(el, int) and 0 <= el < len(node):
            pos = key_pos = value_pos(node, el)
            parts.append(el)
            node = node[el]
        elif not last and isinstance(el, str):
            pass  # a union member tag such as 'constrained-int' or 'function-after[...]'
        else:
            return Located(parts, pos, key_pos, complete=False)
        i += 1
    return Located(parts, pos, key_pos, complete=True)


def map_errors(
    model: type[BaseModel], data: CommentedMap, start: Position, exc: ValidationError
) -> list[tuple[str, Position, str, str | None]]:
    """pydantic errors to ``(message, position, path, expected)``, one per offending field."""
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], Located]]] = {}
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        located = locate(data, loc, start)
        if err["type"] == "missing":
            missing = loc[-1]
            path = format_path([*located.parts, missing])
        else:
            path = format_path(located.parts)
        groups.setdefault((path, err["type"] if err["type"] == "missing" else ""), []).append(
            (dict(err), located)
        )
    out: list[tuple[str, Position, str, str | None]] = []
    deeper = {path for path, _ in groups}
    for (path, _), errs in groups.items():
        located = errs[0][1]
        if _other_branch(path, errs, deeper):
            continue
        concrete = [e for e, _ in errs if e["type"] not in EXPECTED_TYPE]
        chosen = concrete if len(errs) > 1 and concrete else [e for e, _ in errs]
        if len(chosen) > 1 and all(e["type"] in EXPECTED_TYPE for e in chosen):
            kinds = []
            for e in chosen:
                if EXPECTED_TYPE[e["type"]] not in kinds:
                    kinds.append(EXPECTED_TYPE[e["type"]])
            value = chosen[0].get("input")
            hint = next((h for e in chosen if (h := _strict_hint(e["type"], value))), "")
            message = f"expected {' or '.join(kinds)}, got {describe(value)}{hint}"
            out.append((message, located.pos, path, None))
            continue
        message, expected, pos = error_message(model, chosen[0], located)
        out.append((message, pos, path, expected))
    return out


def _other_branch(
    path: str, errs: Sequence[tuple[dict[str, Any], Located]], paths: set[str]
) -> bool:
    """A union's other member refusing a mapping (``ports[0]: expected an integer, got a
    mapping``) while the mapping's own fields have errors of their own: the mapping was meant,
    so only its fields' errors are the cause."""
    if not all(e["type"] in EXPECTED_TYPE for e, _ in errs):
        return False
    if not all(isinstance(e.get("input"), dict) for e, _ in errs):
        return False
    return any(p.startswith((f"{path}.", f"{path}[")) for p in paths if p != path)


_BOUNDS = {
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "greater than"),
}


def _bound_message(kind: str, ctx: dict[str, Any], value: Any) -> str | None:
    """pydantic's range and length errors in our words (``must be at most 300, got 1000``)."""
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {ctx.get(key)}, got {value}"
    if kind == "string_too_long":
        return (
            f"is {len(value) if isinstance(value, str) else '?'} characters long, more than the "
            f"limit of {ctx.get('max_length')}"
        )
    if kind == "string_too_short":
        return (
            "must not be empty"
            if ctx.get("min_length") == 1
            else (f"must be at least {ctx.get('min_length')} characters long")
        )
    if kind == "too_short":
        least = ctx.get("min_length")
        return "must not be empty" if least == 1 else f"needs at least {least} items"
    if kind == "too_long":
        return (
            f"has {ctx.get('actual_length')} items, more than the limit of {ctx.get('max_length')}"
        )
    return None


def _strict_hint(kind: str, value: Any) -> str:
    """Why a value that looks right is refused: numbers and booleans are never converted."""
    if kind == "int_type" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return f" (write {value.strip()} without quotes: numbers are never converted from text)"
    if kind == "int_type" and isinstance(value, float):
        return " (write a whole number without a decimal point)"
    if kind == "int_type" and isinstance(value, bool):
        return " (a boolean is not a number)"
    if kind == "bool_type" and isinstance(value, str):
        return " (write true or false without quotes)"
    return ""


def error_message(
    model: type[BaseModel], err: dict[str, Any], located: Located
) -> tuple[str, str | None, Position]:
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return ("required field is missing", None, located.key_pos)
    if kind == "extra_forbidden":
        key = located.parts[-1] if located.parts else err["loc"][-1]
        allowed = fields_at(model, located.parts[:-1])
        hint = did_you_mean(str(key), allowed)
        expected = "one of: " + ", ".join(allowed) if allowed else None
        return (f"unknown field {str(key)!r}{hint}", expected, located.key_pos)
    if kind == "string_pattern_mismatch" and ctx.get("pattern") == DNS1123_LABEL:
        return (
            f"{shorten(str(value))} is not a valid name: use at most 63 lowercase letters, "
            "digits and '-', starting and ending with a letter or digit (a DNS-1123 label)",
            None,
            located.pos,
        )
    empty_hint = EMPTY_LIST_HINTS.get(format_path(located.parts))
    if kind == "too_short" and empty_hint and value == []:
        return (empty_hint, None, located.pos)
    if kind in ("enum", "literal_error"):
        return (f"{describe(value)} is not allowed", ctx.get("expected"), located.pos)
    if kind in EXPECTED_TYPE:
        return (
            f"expected {EXPECTED_TYPE[kind]}, got {describe(value)}{_strict_hint(kind, value)}",
            None,
            located.pos,
        )
    bound = _bound_message(kind, ctx, value)
    if bound:
        return (bound, None, located.pos)
    message = str(err.get("msg", "invalid value"))
    if message.startswith("Value error, "):
        return (message.removeprefix("Value error, "), None, located.pos)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        message = f"{message}, got {shorten(str(value)) if isinstance(value, str) else value}"
    return (message, None, located.pos)
