"""The fast path reads a text exactly as the round-trip loader does, or declines: for every input,
``load_plain`` is ``None`` or equal to ruamel's documents made plain (and ``None`` whenever
ruamel refuses the text)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from reconciler.manifests.fast_yaml import AVAILABLE, load_plain
from reconciler.manifests.load import MAX_DEPTH, MAX_NODES
from reconciler.manifests.yaml_positions import plain

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def roundtrip(text: str) -> list[Any] | None:
    """What the round-trip loader makes of ``text``, plain; ``None`` when it refuses it."""
    try:
        return [plain(d) for d in YAML(typ="rt").load_all(text)]
    except Exception:
        return None


def fast(text: str) -> list[Any] | None:
    return load_plain(text, max_depth=MAX_DEPTH, max_nodes=MAX_NODES)


def agrees(text: str) -> bool:
    """The fast path declined, or it read what ruamel reads (and ruamel accepted the text)."""
    got = fast(text)
    return got is None or got == roundtrip(text)


def test_libyaml_is_there() -> None:
    assert AVAILABLE, "PyYAML without libyaml: every load takes the slow path"


@pytest.mark.parametrize(
    "path", sorted((EXAMPLES / "policies").rglob("*.yaml")) + sorted(
        (EXAMPLES / "invalid").glob("*.yaml")), ids=lambda p: p.name,
)  # fmt: skip
def test_examples_read_the_same_or_decline(path: Path) -> None:
    assert agrees(path.read_text())


@pytest.mark.parametrize(
    "path", sorted((EXAMPLES / "policies").rglob("*.yaml")), ids=lambda p: p.name
)
def test_the_example_policies_take_the_fast_path_and_read_as_ruamel_reads_them(
    path: Path,
) -> None:
    """Not a decline: the fast path reads every example, and reads what ruamel reads (which
    is some documents with a kind each, not an empty or a half-read list)."""
    text = path.read_text()
    got = fast(text)
    assert got is not None
    assert got == roundtrip(text)
    documents = [d for d in got if d is not None]
    assert documents and all(isinstance(d, dict) and d.get("kind") for d in documents)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 1Gi\nb: 01\nc: +1\nd: 1.50\n", [{"a": "1Gi", "b": 1, "c": 1, "d": 1.5}]),
        ("a: yes\nb: on\nc: tRue\nd: 12:30:00\n",
         [{"a": "yes", "b": "on", "c": "tRue", "d": "12:30:00"}]),
        ("a: true\nb: FALSE\nc: ~\nd:\ne: null\n",
         [{"a": True, "b": False, "c": None, "d": None, "e": None}]),
        ("a: 'x: y'\nb: \"\\u0041\\t\"\nc: {d: [1, e]}\n", [{"a": "x: y", "b": "A\t",
                                                            "c": {"d": [1, "e"]}}]),
        ("---\n---\na: b\n...\n", [None, {"a": "b"}]),
    ],
)  # fmt: skip
def test_scalars_resolve_as_yaml_1_2(text: str, expected: list[Any]) -> None:
    assert fast(text) == expected == roundtrip(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 0x1f\n", "a: 0o17\n", "a: 1_000\n", "a: 1e3\n", "a: .inf\n", "a: 2001-12-14\n",
        "<<: {a: 1}\n", "a: =\n", "a: |\n  x\n", "a: >\n  x\n", "a: b\n  c\n", "a: &x 1\nb: *x\n",
        "a: !!str 1\n", "? [a]\n: b\n", "1: a\n", "a: 1\na: 2\n", "%YAML 1.1\n---\na: yes\n",
        "a: \"x\u2028y\"\n", "a: [\n", "\ta: 1\n",
    ],
)  # fmt: skip
def test_anything_else_declines(text: str) -> None:
    assert fast(text) is None


def test_limits_decline() -> None:
    deep = "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 1)) + "  " * 65 + "x: 1\n"
    assert fast(deep) is None
    assert load_plain("[" + "1, " * 100 + "1]\n", max_depth=5, max_nodes=50) is None


SCALARS = st.sampled_from([
    "a", "web", "1Gi", "01", "0", "-1", "+1", "1.5", "-0.0", "1e3", ".inf", "0x1f", "0o7",
    "1_000", "yes", "No", "ON", "y", "true", "True", "TRUE", "tRue", "false", "null", "Null",
    "~", "", "2001-12-14", "12:30", "<<", "=", "-", "-x", ".x", "a b", "a: b", "a #b", "#c",
    "[x]", "{x}", "é", "x\ty", "'q'", '"d"', "\\", "*x", "&x", "!x", "%x", "@x", "`x",
])  # fmt: skip
STYLES = st.sampled_from(["plain", "single", "double"])


def render(value: str, style: str) -> str:
    if style == "single":
        return "'" + value.replace("'", "''") + "'"
    if style == "double":
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t") + '"'
    return value


@st.composite
def documents(draw: st.DrawFn, depth: int = 0) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        key = render(draw(SCALARS), draw(STYLES))
        shape = draw(st.sampled_from(["scalar", "list", "flow", "map"] if depth < 2
                                     else ["scalar", "flow"]))  # fmt: skip
        if shape == "scalar":
            lines.append(f"{key}: {render(draw(SCALARS), draw(STYLES))}")
        elif shape == "flow":
            items = draw(st.lists(st.tuples(SCALARS, STYLES), max_size=3))
            lines.append(f"{key}: [{', '.join(render(v, s) for v, s in items)}]")
        elif shape == "list":
            lines.append(f"{key}:")
            for value, style in draw(st.lists(st.tuples(SCALARS, STYLES), min_size=1,
                                              max_size=3)):  # fmt: skip
                lines.append(f"  - {render(value, style)}")
        else:
            lines.append(f"{key}:")
            inner = draw(documents(depth + 1))
            lines += ["  " + line for line in inner.splitlines()]
    return "\n".join(lines) + "\n"


@given(st.lists(documents(), min_size=1, max_size=3))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generated_documents_agree(docs: list[str]) -> None:
    assert agrees("---\n".join(docs))


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_mutated_manifests_agree(data: st.DataObject) -> None:
    text = (EXAMPLES / "policies").joinpath(sorted(
        p.name for p in (EXAMPLES / "policies").glob("*.yaml"))[0]).read_text()  # fmt: skip
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 3))
        insert = data.draw(st.text(alphabet=" \n\t:-'\"#&*!|>{}[],?%@`0a.~\\", max_size=3))
        text = text[:at] + insert + text[at + cut :]
    assert agrees(text)
