"""Small builders for manifest tests."""

from __future__ import annotations

import textwrap

import pytest

from reconciler.core.model.desired import Desired
from reconciler.errors import ManifestIssue, ValidationFailed
from reconciler.manifests.load import load_sources

HEADER = "apiVersion: osc.io/v1alpha1\n"

GROUP_WEB = HEADER + "kind: SecurityGroup\nmetadata: {name: web}\nspec: {labels: [app=web]}\n"
VNF_FW = (
    HEADER + "kind: VnfDeployment\nmetadata: {name: firewall}\n"
    "spec: {namespace: osc-vnfs, image: quay.io/example/fw:1}\n"
)


def doc(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def issues_of(text: str, filename: str = "m.yaml") -> list[ManifestIssue]:
    """The issues ``load_text`` reports; fails the test when the text is valid."""
    with pytest.raises(ValidationFailed) as info:
        load_text(text, filename)
    assert info.value.issues, "ValidationFailed without issues"
    return info.value.issues


def only_issue(text: str, filename: str = "m.yaml") -> ManifestIssue:
    issues = issues_of(text, filename)
    assert len(issues) == 1, "\n".join(map(str, issues))
    return issues[0]


def load_text(text: str, filename: str = "<text>") -> Desired:
    """Load manifests from a string; ``filename`` is used in messages."""
    return load_sources([(filename, text)])
