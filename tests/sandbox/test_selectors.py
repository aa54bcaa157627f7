"""The label/field selector parser on its own (no server)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from osc_gitops_sandbox.kubeapi.selectors import (
    Requirement,
    SelectorError,
    label_key_errors,
    label_value_errors,
    parse_field_selector,
    parse_label_selector,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", [Requirement("a", "=", ("b",))]),
        ("a==b", [Requirement("a", "=", ("b",))]),
        ("a!=b", [Requirement("a", "!=", ("b",))]),
        ("a in (x, y)", [Requirement("a", "in", ("x", "y"))]),
        ("a notin (x)", [Requirement("a", "notin", ("x",))]),
        ("a", [Requirement("a", "exists")]),
        ("!a", [Requirement("a", "!")]),
        (
            " app.kubernetes.io/name = web , !osc.io/skip ",
            [Requirement("app.kubernetes.io/name", "=", ("web",)), Requirement("osc.io/skip", "!")],
        ),
        ("a=", [Requirement("a", "=", ("",))]),
        ("a in (x,)", [Requirement("a", "in", ("x", ""))]),
    ],
)
def test_parse(text: str, expected: list[Requirement]) -> None:
    assert list(parse_label_selector(text).requirements) == expected


@pytest.mark.parametrize(
    "text",
    [
        "a in ()",
        "a in x",
        "a in (x",
        "a,",
        ",a",
        "a b",
        "a=b=c",
        "a=(b)",
        "!",
        "!a=b",
        "-bad=x",
        "a=-bad",
        "a/b/c=x",
        "in (x)x",
        "a notin",
    ],
)
def test_parse_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_matching_semantics() -> None:
    labels = {"tier": "web", "app.kubernetes.io/name": "shop"}
    assert parse_label_selector("tier in (web,api),app.kubernetes.io/name").matches(labels)
    assert parse_label_selector("missing!=x").matches(labels)  # != matches absent keys
    assert parse_label_selector("missing notin (x)").matches(labels)
    assert not parse_label_selector("missing in (x)").matches(labels)
    assert not parse_label_selector("tier=web,!app.kubernetes.io/name").matches(labels)
    assert parse_label_selector("").matches(None)


def test_label_syntax_rules() -> None:
    assert label_key_errors("osc.io/owner") == []
    assert label_key_errors("a" * 63) == []
    assert label_key_errors("a" * 64)
    assert label_key_errors("Upper.example/x")  # prefix must be a lowercase DNS subdomain
    assert label_key_errors("/x") and label_key_errors("x/")
    assert label_value_errors("") == []
    assert label_value_errors("A-b_c.9") == []
    assert label_value_errors("v" * 64) and label_value_errors("a b")


def test_field_selector() -> None:
    sel = parse_field_selector(
        "spec.nodeName=n1,metadata.namespace!=kube-system", {"spec.nodeName", "metadata.namespace"}
    )
    assert sel.matches({"metadata": {"namespace": "a"}, "spec": {"nodeName": "n1"}})
    assert not sel.matches({"metadata": {"namespace": "kube-system"}, "spec": {"nodeName": "n1"}})
    assert parse_field_selector("spec.nodeName=", {"spec.nodeName"}).matches({"spec": {}})
    with pytest.raises(SelectorError, match="field label not supported"):
        parse_field_selector("spec.other=x", {"spec.nodeName"})


names = st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?", fullmatch=True)


@given(
    labels=st.dictionaries(names, names, max_size=4),
    key=names,
    values=st.lists(names, min_size=1, max_size=3),
)
def test_set_operators_agree_with_equality(
    labels: dict[str, str], key: str, values: list[str]
) -> None:
    """``k in (v1,..)`` is the OR of ``k=v``; ``notin`` is its negation."""
    joined = ",".join(values)
    in_sel = parse_label_selector(f"{key} in ({joined})").matches(labels)
    assert in_sel == any(parse_label_selector(f"{key}={v}").matches(labels) for v in values)
    assert parse_label_selector(f"{key} notin ({joined})").matches(labels) == (not in_sel)
    assert parse_label_selector(f"!{key}").matches(labels) == (key not in labels)
