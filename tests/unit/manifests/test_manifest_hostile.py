"""Hostile input: every case ends in a clear ManifestIssue, never a traceback or a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.errors import ManifestIssue, PathNotFound, ValidationFailed
from reconciler.manifests import load
from reconciler.manifests.load import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_LINE_CHARS,
    load_path,
    load_sources,
)
from tests.support.manifests import GROUP_WEB, HEADER, VNF_FW, issues_of, load_text, only_issue

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_billion_laughs_is_refused_at_the_first_alias() -> None:
    issues = issues_of(BILLION_LAUGHS, "bomb.yaml")
    assert str(issues[0]).startswith("bomb.yaml:2:8: YAML alias *a is not allowed")
    assert all("alias" in i.message for i in issues)


def test_merge_keys_need_aliases_and_are_refused() -> None:
    text = "base: &base {a: 1}\nother:\n  <<: *base\n"
    issue = only_issue(text)
    assert "YAML alias *base" in issue.message and issue.line == 3


@pytest.mark.parametrize("opener", ["[", "{a: ", "- "])
def test_deep_nesting_is_capped(opener: str) -> None:
    block = "".join("  " * i + "-\n" for i in range(200))
    text = block if opener == "- " else opener * 5000
    issue = only_issue(text, "deep.yaml")
    assert f"nesting deeper than {MAX_DEPTH} levels" in issue.message
    assert issue.file == "deep.yaml"


def test_file_size_cap_names_file_and_limit(tmp_path: Path) -> None:
    big = tmp_path / "huge.yaml"
    with big.open("wb") as fh:  # a sparse 50 MB file: cheap to create, never read
        fh.truncate(50 * 1024 * 1024)
    issue = only_issue_path(tmp_path)
    assert issue.file == str(big)
    assert "50.0 MiB" in issue.message and f"{MAX_FILE_BYTES // 1048576} MiB limit" in issue.message


def test_text_size_cap() -> None:
    issue = only_issue("#" * (MAX_FILE_BYTES + 1), "big.yaml")
    assert "MiB limit" in issue.message


def only_issue_path(path: Path) -> ManifestIssue:
    with pytest.raises(ValidationFailed) as info:
        load_path(path)
    assert len(info.value.issues) == 1, info.value
    return info.value.issues[0]


def test_binary_file_named_yaml(tmp_path: Path) -> None:
    (tmp_path / "image.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    issue = only_issue_path(tmp_path)
    assert "binary file" in issue.message
    assert issue.line == 3  # the NUL byte follows two newlines


def test_non_utf8_names_byte_and_line() -> None:
    with pytest.raises(ValidationFailed) as info:
        load_sources([("latin1.yaml", b"a: 1\nname: caf\xe9\n")])
    (issue,) = info.value.issues
    assert str(issue) == (
        "latin1.yaml:2:10: not UTF-8 text: invalid byte 0xe9 (save the file as UTF-8)"
    )


def test_utf8_bom_is_accepted() -> None:
    desired = load_sources([("bom.yaml", b"\xef\xbb\xbf" + GROUP_WEB.encode())])
    assert list(desired.security_groups) == ["web"]


def test_control_characters_are_reported_with_position() -> None:
    issue = only_issue("a: 1\nb: \x07\n")
    assert issue.line == 2 and "#x0007" in issue.message


def test_tab_indentation() -> None:
    issue = only_issue("a:\n\tb: 1\n", "tabs.yaml")
    assert str(issue) == "tabs.yaml:2:1: tab character: YAML indentation must use spaces, not tabs"


def test_duplicate_keys_report_both_positions_and_other_documents_still_load() -> None:
    text = GROUP_WEB + "---\n" + VNF_FW.replace("kind:", "kind: VnfDeployment\nkind:", 1)
    issues = issues_of(text)
    assert [i.message for i in issues] == ["duplicate key 'kind' (first at line 7, column 1)"]
    assert issues[0].line == 8


def test_document_that_is_not_a_mapping() -> None:
    for text, what in (("just a string\n", "the string 'just a string'"), ("- a\n", "a list")):
        issue = only_issue(text)
        assert issue.message.startswith(f"document is {what}, expected a mapping")


def test_symlink_loops_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(GROUP_WEB)
    os.symlink(tmp_path, tmp_path / "loop")
    os.symlink(tmp_path / "missing", tmp_path / "broken.yaml")
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "sub", tmp_path / "sub" / "again")
    with pytest.raises(ValidationFailed) as info:
        load_path(tmp_path)
    (issue,) = info.value.issues
    assert issue.file.endswith("broken.yaml") and "cannot read file" in issue.message


def test_symlinked_files_and_dirs_are_followed_once(tmp_path: Path) -> None:
    real = tmp_path / "..2026_01_01"  # how Kubernetes ConfigMap volumes look
    real.mkdir()
    (real / "web.yaml").write_text(GROUP_WEB)
    os.symlink(real / "web.yaml", tmp_path / "web.yaml")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "fw.yaml").write_text(VNF_FW)
    os.symlink(shared, tmp_path / "alias-of-shared")
    desired = load_path(tmp_path)  # fw.yaml is visited once, so no duplicate-name error
    assert list(desired.security_groups) == ["web"] and list(desired.vnfs) == ["firewall"]


def test_symlink_loop_as_the_path_itself(tmp_path: Path) -> None:
    os.symlink(tmp_path / "self", tmp_path / "self")
    with pytest.raises(PathNotFound, match="looping symbolic link"):
        load_path(tmp_path / "self")


def test_parse_error_in_one_file_suppresses_unknown_reference_echoes() -> None:
    binding = (
        HEADER + "kind: Binding\nmetadata: {name: b}\n"
        "spec: {securityGroup: web, vnf: firewall, order: 1}\n"
    )
    with pytest.raises(ValidationFailed) as info:
        load_sources([("groups.yaml", "a: [\n"), ("b.yaml", binding), ("fw.yaml", VNF_FW)])
    assert [i.file for i in info.value.issues] == ["groups.yaml"]


YAMLISH = st.text(
    alphabet=st.sampled_from(list("abk:-[]{}&*!|>'\"#%@`,?.=0123456789 \t\n\r\x00\x85\ufeff")),
    max_size=200,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(YAMLISH)
def test_random_text_never_raises_anything_but_validation_failed(text: str) -> None:
    try:
        load_text(text, "fuzz.yaml")
    except ValidationFailed as exc:
        for issue in exc.issues:
            assert issue.file == "fuzz.yaml" and issue.line >= 1 and issue.column >= 1
            assert issue.message


FIELD_NAMES = ["apiVersion", "kind", "metadata", "spec", "name", "labels", "order", "x"]


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.sampled_from(FIELD_NAMES), children, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_random_documents_never_raise_anything_but_validation_failed(value: object) -> None:
    import json

    text = HEADER + "kind: Binding\nmetadata: {name: b}\nspec: " + json.dumps(value) + "\n"
    try:
        load_text(text, "fuzz.yaml")
    except ValidationFailed as exc:
        assert all(i.line >= 1 for i in exc.issues)


def test_overlong_line_is_refused_before_parsing() -> None:
    issue = only_issue("a: 1\n#" + "x" * (MAX_LINE_CHARS + 10) + "\n", "wide.yaml")
    assert (issue.line, issue.column) == (2, MAX_LINE_CHARS + 1)
    assert f"more than the limit of {MAX_LINE_CHARS}" in issue.message


def test_node_count_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "MAX_NODES", 100)  # our own limit, lowered to keep the test fast
    issue = only_issue("items:\n" + "  - 1\n" * 200, "many.yaml")
    assert issue.message.startswith("more than 100 YAML nodes in one file")
    assert issue.line == 99  # mapping, key, list, then 98 items
