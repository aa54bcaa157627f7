"""Kubernetes label and field selectors: parser, matcher and name validation.

Kept apart from the API emulator so the grammar can be unit-tested on its own and reused (for
example by tests that compute the expected result of a selector independently of the server).

The grammar follows ``k8s.io/apimachinery/pkg/labels`` (``selector.go``)::

    selector    := requirement ( "," requirement )*          # comma = AND
    requirement := key ( "=" | "==" | "!=" ) value
                 | key ( "in" | "notin" ) "(" [ value ( "," value )* ] ")"
                 | key                                         # key exists
                 | "!" key                                     # key does not exist

Keys may carry a DNS-subdomain prefix (``app.kubernetes.io/name``). As upstream, ``!=`` and
``notin`` also match objects that do not have the key at all. Field selectors only support
``=``, ``==`` and ``!=`` on a per-kind list of fields, as the real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class SelectorError(ValueError):
    """An unparsable selector; the API server answers 400 BadRequest with this message."""


@dataclass(frozen=True)
class _Rule:
    """A name rule of the API server: a length limit and a pattern, in its own words."""

    limit: int
    pattern: re.Pattern[str]
    message: str

    def errors(self, value: str) -> list[str]:
        too_long = [f"must be no more than {self.limit} characters"] * (len(value) > self.limit)
        return too_long + ([] if self.pattern.match(value) else [self.message])


_SUBDOMAIN = _Rule(
    253, DNS1123_SUBDOMAIN,
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character",
)  # fmt: skip
_LABEL = _Rule(
    63, DNS1123_LABEL,
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
    "'-', and must start and end with an alphanumeric character",
)  # fmt: skip
_VALUE = _Rule(
    63, _LABEL_VALUE,
    "a valid label must be an empty string or consist of alphanumeric characters, '-', "
    "'_' or '.', and must start and end with an alphanumeric character",
)  # fmt: skip


def dns1123_subdomain_errors(name: str) -> list[str]:
    """Why ``name`` is not a valid DNS-1123 subdomain (the rule for most object names)."""
    return _SUBDOMAIN.errors(name)


def dns1123_label_errors(name: str) -> list[str]:
    """Why ``name`` is not a valid DNS-1123 label (the rule for namespace names)."""
    return _LABEL.errors(name)


def label_key_errors(key: str) -> list[str]:
    """Why ``key`` is not a valid label key (``[prefix/]name``, name <= 63 chars)."""
    prefix, slash, name = key.rpartition("/")
    errors: list[str] = []
    if slash:
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {e}" for e in dns1123_subdomain_errors(prefix))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid label value (<= 63 chars, may be empty)."""
    return _VALUE.errors(value)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ANDed term of a label selector."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!":
            return self.key not in labels
        if self.op in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        # "!=" and "notin" match objects without the key, as upstream.
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


_TOKEN = re.compile(r"\s*(==|!=|=|!|\(|\)|,|[^\s=!(),]+)")


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            raise SelectorError(f"unable to parse requirement: unexpected {text[pos:]!r}")
        tokens.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return tokens


def _check_key(key: str) -> None:
    errors = label_key_errors(key)
    if errors:
        raise SelectorError(f"unable to parse requirement: invalid label key {key!r}: {errors[0]}")


def _check_value(value: str) -> None:
    errors = label_value_errors(value)
    if errors:
        raise SelectorError(
            f"unable to parse requirement: invalid label value {value!r}: {errors[0]}"
        )


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector string; raises :class:`SelectorError` with the reason."""
    if text is None or not text.strip():
        return LabelSelector()
    tokens = _tokenize(text)
    reqs: list[Requirement] = []
    i = 0
    n = len(tokens)

    def peek(j: int) -> str | None:
        return tokens[j] if j < n else None

    while i < n:
        tok = tokens[i]
        if tok == "!":
            key = peek(i + 1)
            if key is None or key in ("=", "==", "!=", "!", "(", ")", ","):
                raise SelectorError(
                    f"unable to parse requirement: expected a key after '!' in {text!r}"
                )
            _check_key(key)
            reqs.append(Requirement(key, "!"))
            i += 2
        elif tok in ("=", "==", "!=", "(", ")", ","):
            raise SelectorError(f"unable to parse requirement: unexpected {tok!r} in {text!r}")
        else:
            key = tok
            _check_key(key)
            op = peek(i + 1)
            if op is None or op == ",":
                reqs.append(Requirement(key, "exists"))
                i += 1
            elif op in ("=", "==", "!="):
                value = peek(i + 2)
                if value is None or value == ",":
                    value_s = ""  # "key=" selects the empty value, as upstream
                    i += 2
                elif value in ("=", "==", "!=", "!", "(", ")"):
                    raise SelectorError(
                        f"unable to parse requirement: unexpected {value!r} after {key}{op}"
                    )
                else:
                    value_s = value
                    i += 3
                _check_value(value_s)
                reqs.append(Requirement(key, "!=" if op == "!=" else "=", (value_s,)))
            elif op in ("in", "notin"):
                if peek(i + 2) != "(":
                    raise SelectorError(
                        f"unable to parse requirement: expected '(' after {key} {op} in {text!r}"
                    )
                j = i + 3
                values: list[str] = []
                expect_value = True
                while True:
                    t = peek(j)
                    if t is None:
                        raise SelectorError(f"unable to parse requirement: missing ')' in {text!r}")
                    if t == ")":
                        if expect_value and values:
                            values.append("")  # "in (a,)" includes the empty value
                        break
                    if t == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                    elif t in ("=", "==", "!=", "!", "("):
                        raise SelectorError(
                            f"unable to parse requirement: unexpected {t!r} in value list"
                        )
                    else:
                        if not expect_value:
                            raise SelectorError(
                                f"unable to parse requirement: expected ',' or ')' in {text!r}"
                            )
                        _check_value(t)
                        values.append(t)
                        expect_value = False
                    j += 1
                if not values:
                    raise SelectorError(
                        f"unable to parse requirement: for 'in', 'notin' operators, values set "
                        f"can't be empty ({text!r})"
                    )
                reqs.append(Requirement(key, op, tuple(values)))
                i = j + 1
            else:
                raise SelectorError(
                    f"unable to parse requirement: found {op!r}, expected: "
                    f"in, notin, =, ==, !=, gt, lt ({text!r})"
                )
        if i < n:
            if tokens[i] != ",":
                raise SelectorError(
                    f"unable to parse requirement: found {tokens[i]!r}, expected: ',' ({text!r})"
                )
            i += 1
            if i >= n:
                raise SelectorError(f"unable to parse requirement: trailing ',' in {text!r}")
    return LabelSelector(tuple(reqs))


FieldGetter = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    negate: bool
    value: str


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A parsed field selector (``=``, ``==``, ``!=`` only, comma = AND)."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for req in self.requirements:
            actual = field_value(obj, req.field)
            if (actual == req.value) == req.negate:
                return False
        return True


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value of a dotted field path; missing fields compare as ``""``."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    return str(cur)


def parse_field_selector(text: str | None, supported: frozenset[str] | set[str]) -> FieldSelector:
    """Parse a field selector; unknown fields raise :class:`SelectorError` like the server."""
    if text is None or not text.strip():
        return FieldSelector()
    reqs = []
    for term in text.split(","):
        term = term.strip()
        if not term:
            raise SelectorError(f"invalid field selector {text!r}: empty term")
        for op in ("!=", "==", "="):
            if op in term:
                field, _, value = term.partition(op)
                break
        else:
            raise SelectorError(f"invalid selector: '{term}'; can't understand '{term}'")
        field = field.strip()
        if field not in supported:
            raise SelectorError(f"field label not supported: {field}")
        reqs.append(FieldRequirement(field, op == "!=", value.strip()))
    return FieldSelector(tuple(reqs))
