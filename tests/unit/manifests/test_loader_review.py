"""The loader as a new user meets it (issue #24 item 6): other APIs and kustomize files
skipped with a note, ``.oscignore``, extensions in any case, one message per cause, causes
before echoes, syntax errors where the construct opened, messages in our words."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import ValidationFailed
from reconciler.manifests.ignore import IgnoreRules
from reconciler.manifests.load import find_manifest_files, load_path
from tests.support.cli import cli
from tests.support.manifests import load_text
from tests.support.paths import POLICIES

GROUP = """\
apiVersion: osc.io/v1alpha1
kind: SecurityGroup
metadata: {name: NAME}
spec: {labels: [app=NAME]}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_foreign_documents_and_kustomize_files_are_skipped_with_a_note(tmp_path: Path) -> None:
    write(tmp_path, "kustomization.yaml", "resources: [groups.yaml]\n")
    write(
        tmp_path,
        "groups.yaml",
        GROUP.replace("NAME", "web")
        + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
        + "---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n",
    )
    notes: list[str] = []
    desired = load_path(tmp_path, notes)
    assert list(desired.security_groups) == ["web"]
    assert notes == [
        f"{tmp_path}/groups.yaml: skipped 2 documents of other APIs "
        "(apps/v1 Deployment, v1 Service)",
        f"{tmp_path}/kustomization.yaml: skipped (kustomize's file, not an osc.io manifest)",
    ]
    result = cli("validate", tmp_path)
    assert result.code == 0
    assert "note: " in result.err and "kustomization.yaml: skipped" in result.err


def test_a_misspelt_api_version_or_our_kind_elsewhere_is_still_an_error(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GROUP.replace("NAME", "a").replace("osc.io/", "osc.oi/"))
    write(tmp_path, "b.yaml", GROUP.replace("NAME", "b").replace("osc.io/v1alpha1", "v1"))
    with pytest.raises(ValidationFailed) as failed:
        load_path(tmp_path)
    assert [i.message for i in failed.value.issues] == [
        "unknown apiVersion 'osc.oi/v1alpha1'",
        "unknown apiVersion 'v1'",
    ]


def test_oscignore_uses_gitignore_syntax(tmp_path: Path) -> None:
    for name in ("a.yaml", "fixtures/x.yaml", "deep/fixtures/y.yaml", "keep/k.yaml",
                 "keep/drop.yaml", "values-prod.yaml", "sub/values-dev.yml", "anchored.yaml",
                 "sub/anchored.yaml"):  # fmt: skip
        write(tmp_path, name, GROUP.replace("NAME", Path(name).stem.replace("_", "-")))
    write(
        tmp_path,
        ".oscignore",
        "# test fixtures\nfixtures/\nvalues-*.y*ml\n/anchored.yaml\nkeep/*.yaml\n!keep/k.yaml\n",
    )
    found = sorted(p.relative_to(tmp_path).as_posix() for p in find_manifest_files(tmp_path))
    assert found == ["a.yaml", "keep/k.yaml", "sub/anchored.yaml"]


def test_ignore_rules_follow_git() -> None:
    rules = IgnoreRules("**/tmp\n/only-top/\ndocs/**\n\\#literal.yaml\n*.bak   \n!x.bak\n")
    assert rules.ignored("tmp", is_dir=True) and rules.ignored("a/b/tmp", is_dir=False)
    assert rules.ignored("only-top", is_dir=True)
    assert not rules.ignored("only-top", is_dir=False)  # a trailing / matches folders only
    assert not rules.ignored("sub/only-top", is_dir=True)
    assert rules.ignored("docs/a/b.yaml", is_dir=False)
    assert rules.ignored("#literal.yaml", is_dir=False)
    assert rules.ignored("a/y.bak", is_dir=False) and not rules.ignored("x.bak", is_dir=False)


def test_file_extensions_are_matched_in_any_case(tmp_path: Path) -> None:
    write(tmp_path, "vnfs.YAML", (POLICIES / "vnfs.yaml").read_text())
    write(tmp_path, "Group.Yml", GROUP.replace("NAME", "web"))
    desired = load_path(tmp_path)
    assert len(desired.vnfs) == 2 and list(desired.security_groups) == ["web"]


def test_an_alias_bomb_is_one_issue_per_anchor() -> None:
    text = GROUP.replace("NAME", "web").replace(
        "spec: {labels: [app=web]}",
        'spec:\n  description: &a "x"\n  labels: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]',
    )
    with pytest.raises(ValidationFailed) as failed:
        load_text(text, "bomb.yaml")
    (issue,) = failed.value.issues
    assert issue.message.endswith("write the value out (used 10 times)")
    assert (issue.line, issue.column) == (6, 12)


def test_a_syntax_error_points_where_the_construct_opened() -> None:
    text = (
        "apiVersion: osc.io/v1alpha1\nkind: SecurityGroup\nmetadata: {name: web\nspec:\n"
        "  labels: [app=web]\n---\n" + GROUP.replace("NAME", "db")
    )
    with pytest.raises(ValidationFailed) as failed:
        load_text(text, "g.yaml")
    (issue,) = failed.value.issues
    assert (issue.line, issue.column) == (3, 11)
    assert issue.message.startswith(
        "YAML syntax error: the mapping '{' opened here is never closed"
    )


def test_a_misspelt_kind_does_not_echo_as_unknown_references(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.yaml",
        "apiVersion: osc.io/v1alpha1\nkind: Binding\nmetadata: {name: b}\n"
        "spec: {securityGroup: web, vnf: fw}\n",
    )
    write(
        tmp_path,
        "b.yaml",
        GROUP.replace("NAME", "web").replace("kind: SecurityGroup", "kind: SecurityGroupp")
        + "---\napiVersion: osc.io/v1alpha1\nkind: VnfDeployment\nmetadata: {name: fw}\n"
        + "spec: {namespace: x, image: a/b:1}\n",
    )
    with pytest.raises(ValidationFailed) as failed:
        load_path(tmp_path)
    (issue,) = failed.value.issues
    assert issue.message.startswith("unknown kind 'SecurityGroupp' (did you mean 'SecurityGroup'?)")


@pytest.mark.parametrize(
    ("label", "fault"),
    [
        ("app=we b", "label value 'we b' contains a space"),
        ("app=" + "x" * 64, "is 64 characters long, more than 63"),
        ("app=-web", "must start and end with a letter or digit"),
        ("a pp=web", "name 'a pp' contains a space"),
    ],
)
def test_a_bad_label_says_what_is_wrong(label: str, fault: str) -> None:
    text = GROUP.replace("NAME", "web").replace("app=web", f'"{label}"')
    with pytest.raises(ValidationFailed) as failed:
        load_text(text, "g.yaml")
    assert fault in failed.value.issues[0].message
