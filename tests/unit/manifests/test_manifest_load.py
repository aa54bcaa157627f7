"""Loading: valid input, positions of pydantic errors, documents and folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.core.model.desired import FailurePolicy, Redirection
from reconciler.errors import PathNotFound, ValidationFailed
from reconciler.manifests.load import (
    find_manifest_files,
    load_path,
    load_sources,
)
from reconciler.manifests.yaml_positions import format_path
from tests.support.manifests import GROUP_WEB, HEADER, VNF_FW, doc, issues_of, load_text, only_issue
from tests.support.paths import REPO


def test_examples_policies_load_completely() -> None:
    desired = load_path(REPO / "examples" / "policies")
    assert sorted(desired.security_groups) == ["api", "db", "web"]
    assert sorted(desired.vnfs) == ["firewall", "ips"]
    assert sorted(desired.bindings) == [
        "api-firewall",
        "api-ips",
        "db-firewall",
        "web-firewall",
        "web-ips",
    ]
    web_ips = desired.bindings["web-ips"].spec
    assert web_ips.order == 5 and web_ips.traffic is not None
    assert [(f.protocol.value, f.ports) for f in web_ips.traffic_filters()] == [
        ("tcp", [80, 443]),
        ("udp", [443]),
    ]
    assert desired.bindings["api-firewall"].spec.failurePolicy is FailurePolicy.FAIL_OPEN
    assert desired.bindings["web-firewall"].spec.redirection is Redirection.BOTH
    assert desired.security_groups["db"].spec.namespaces == ["shop-backend"]
    assert desired.vnfs["ips"].spec.nodeSelector == {"osc.io/vnf-capable": "true"}


def test_multi_document_with_empty_documents_and_comments() -> None:
    text = "---\n# only a comment\n---\n" + GROUP_WEB + "---\n---\n" + VNF_FW + "...\n"
    desired = load_text(text, "multi.yaml")
    assert list(desired.security_groups) == ["web"]
    assert list(desired.vnfs) == ["firewall"]


def test_empty_text_is_valid_and_empty() -> None:
    assert load_text("", "empty.yaml").is_empty
    assert load_text("# nothing here\n", "c.yaml").is_empty


def test_pydantic_error_points_at_the_offending_list_item() -> None:
    text = doc(
        """
        apiVersion: osc.io/v1alpha1
        kind: SecurityGroup
        metadata:
          name: web
        spec:
          labels:
            - app=web
            - "tier=front end"
        """
    )
    issue = only_issue(text, "groups/web.yaml")
    assert (issue.file, issue.line, issue.column) == ("groups/web.yaml", 8, 7)
    assert issue.path == "spec.labels[1]"
    assert issue.kind == "SecurityGroup" and issue.name == "web"
    assert "'front end'" in issue.message
    assert str(issue).startswith("groups/web.yaml:8:7: SecurityGroup/web spec.labels[1]: label")


def test_missing_field_points_at_the_parent_mapping() -> None:
    text = HEADER + "kind: Binding\nmetadata: {name: b}\nspec:\n  securityGroup: web\n  order: 1\n"
    issue = only_issue(text)
    assert issue.path == "spec.vnf"
    assert issue.line == 4 and issue.column == 1  # the `spec:` key
    assert issue.message == "required field is missing"


def test_missing_spec_points_at_the_document() -> None:
    issue = only_issue(HEADER + "kind: SecurityGroup\nmetadata: {name: web}\n")
    assert (issue.path, issue.line, issue.message) == ("spec", 1, "required field is missing")


def test_unknown_field_suggests_the_right_one_and_lists_allowed() -> None:
    text = HEADER + "kind: SecurityGroup\nmetadata: {name: web}\nspec:\n  lables: [app=web]\n"
    issues = issues_of(text)
    unknown = next(i for i in issues if "unknown field" in i.message)
    assert unknown.message == "unknown field 'lables' (did you mean 'labels'?)"
    assert (unknown.line, unknown.column) == (5, 3)
    assert unknown.expected is not None and "namespaces" in unknown.expected
    missing = next(i for i in issues if i.path == "spec.labels")
    assert missing.message == "required field is missing"


def test_type_errors_name_the_value() -> None:
    text = HEADER + doc(
        """
        kind: Binding
        metadata: {name: b}
        spec:
          securityGroup: web
          vnf: fw
          order: "10"
          traffic:
            protocol: tcp
            ports: [http, {start: 90, end: 80}]
        """
    )
    issues = {i.path: i for i in issues_of(text)}
    assert issues["spec.order"].message == (
        "expected an integer, got the string '10' (write 10 without quotes: numbers are never "
        "converted from text)"
    )
    assert issues["spec.order"].line == 7
    assert issues["spec.traffic.ports[0]"].message == (
        "expected an integer or a mapping, got the string 'http'"
    )
    assert issues["spec.traffic.ports[1]"].message == "port range start 90 is greater than end 80"
    assert issues["spec.traffic.ports[1]"].column == 19


def test_label_map_keys_are_quoted_in_paths() -> None:
    text = HEADER + doc(
        """
        kind: VnfDeployment
        metadata: {name: fw}
        spec:
          namespace: osc-vnfs
          image: quay.io/x/fw:1
          nodeSelector:
            osc.io/vnf-capable: 1
        """
    )
    issue = only_issue(text)
    assert issue.path == 'spec.nodeSelector["osc.io/vnf-capable"]'
    assert issue.message == "expected a string, got the number 1"
    assert issue.line == 8


def test_yaml_1_2_booleans_are_not_strings() -> None:
    # `true` unquoted is a boolean, Kubernetes label values must be strings: say so.
    text = HEADER + doc(
        """
        kind: VnfDeployment
        metadata: {name: fw}
        spec: {namespace: n, image: "quay.io/x/fw:1", nodeSelector: {capable: true}}
        """
    )
    assert only_issue(text).message == "expected a string, got the boolean true"


def test_all_issues_of_all_files_are_reported_together() -> None:
    sources = [
        ("a.yaml", HEADER + "kind: SecurityGroup\nmetadata: {name: A}\nspec: {labels: [x=y]}\n"),
        ("b.yaml", HEADER + "kind: Sg\n"),
        ("c.yaml", "a: [\n"),
    ]
    with pytest.raises(ValidationFailed) as info:
        load_sources(sources)
    files = [i.file for i in info.value.issues]
    assert files == ["a.yaml", "b.yaml", "c.yaml"]
    assert str(info.value).startswith("3 problems in manifests:\n  a.yaml:3:")


def test_document_numbers_count_every_document() -> None:
    text = GROUP_WEB + "---\n---\n" + HEADER + "kind: Nope\n"
    issue = only_issue(text)
    assert issue.document == 3
    assert issue.line == 8


def test_format_path() -> None:
    assert format_path(["spec", "labels", 1]) == "spec.labels[1]"
    assert format_path(["metadata", "labels", "app.kubernetes.io/name"]) == (
        'metadata.labels["app.kubernetes.io/name"]'
    )


def test_folder_walk_skips_hidden_and_other_files(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub" / "deeper" / "web.yml").write_text(GROUP_WEB)
    (tmp_path / "fw.yaml").write_text(VNF_FW)
    (tmp_path / ".git" / "bad.yaml").write_text("kind: Nope\n")
    (tmp_path / ".hidden.yaml").write_text("kind: Nope\n")
    (tmp_path / "README.md").write_text("kind: Nope\n")
    (tmp_path / "notes.txt").write_bytes(b"\xff\x00")
    files = find_manifest_files(tmp_path)
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "fw.yaml",
        "sub/deeper/web.yml",
    ]
    desired = load_path(tmp_path)
    assert list(desired.security_groups) == ["web"] and list(desired.vnfs) == ["firewall"]


def test_single_file_path_and_missing_path(tmp_path: Path) -> None:
    file = tmp_path / "one.yaml"
    file.write_text(GROUP_WEB)
    assert list(load_path(file).security_groups) == ["web"]
    with pytest.raises(PathNotFound, match=r"cannot read manifests at .*nope"):
        load_path(tmp_path / "nope")


def test_empty_folder_is_valid_and_empty(tmp_path: Path) -> None:
    assert load_path(tmp_path).is_empty


@pytest.mark.parametrize("kind", ["{a: b}", "[SecurityGroup]"])
def test_a_kind_that_is_not_a_string_is_an_issue_not_a_crash(kind: str) -> None:
    issue = only_issue(HEADER + f"kind: {kind}\nmetadata: {{name: web}}\n")
    assert "unknown kind" in issue.message and issue.line == 2
