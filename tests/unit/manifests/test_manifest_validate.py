"""Cross-reference checks: every rule, with file:line of both sides of a clash."""

from __future__ import annotations

from reconciler.manifests.load import load_sources
from reconciler.manifests.validate import check_bindings, check_duplicates
from tests.support.manifests import GROUP_WEB, HEADER, VNF_FW, issues_of


def binding(name: str, group: str = "web", vnf: str = "firewall", order: int = 10) -> str:
    return HEADER + (
        f"kind: Binding\nmetadata: {{name: {name}}}\n"
        f"spec: {{securityGroup: {group}, vnf: {vnf}, order: {order}}}\n"
    )


def run(*docs: str) -> list[str]:
    return [str(i) for i in issues_of("---\n".join(docs), "p.yaml")]


def test_valid_set_passes() -> None:
    fw2 = VNF_FW.replace("firewall", "firewall2")
    two = binding("b1") + "---\n" + binding("b2", order=20, vnf="firewall2")
    desired = load_sources(
        [("a.yaml", GROUP_WEB + "---\n" + VNF_FW), ("b.yaml", two), ("c.yaml", fw2)]
    )
    assert list(desired.bindings) == ["b1", "b2"]
    assert desired.vnfs["firewall2"].metadata.name == "firewall2"


def test_duplicate_names_per_kind_across_files() -> None:
    issues = issues_of_sources(
        ("one.yaml", GROUP_WEB), ("two.yaml", "# second\n" + GROUP_WEB + "---\n" + VNF_FW)
    )
    assert issues == [
        "two.yaml:4:18: SecurityGroup/web metadata.name: duplicate SecurityGroup name 'web' "
        "(first declared at one.yaml:3:18)"
    ]


def test_same_name_in_different_kinds_is_fine() -> None:
    desired = load_sources([("a.yaml", GROUP_WEB + "---\n" + VNF_FW.replace("firewall", "web"))])
    assert "web" in desired.vnfs and "web" in desired.security_groups


def test_unknown_group_and_vnf_with_suggestions() -> None:
    issues = run(GROUP_WEB, VNF_FW, binding("b", group="wbe", vnf="firewal"))
    assert issues == [
        "p.yaml:14:23: Binding/b spec.securityGroup: unknown SecurityGroup 'wbe' "
        "(did you mean 'web'?) (expected one of: web)",
        "p.yaml:14:33: Binding/b spec.vnf: unknown VnfDeployment 'firewal' "
        "(did you mean 'firewall'?) (expected one of: firewall)",
    ]


def test_unknown_reference_when_nothing_is_declared() -> None:
    issues = run(binding("b"))
    assert issues[0].endswith("unknown SecurityGroup 'web': no SecurityGroup is declared")


def test_reference_to_an_invalid_group_is_not_reported_twice() -> None:
    bad_group = GROUP_WEB.replace("app=web", "'app=we b'")
    issues = run(bad_group, VNF_FW, binding("b"))
    assert len(issues) == 1 and "spec.labels[0]" in issues[0]


def test_duplicate_order_on_one_group() -> None:
    vnf2 = VNF_FW.replace("firewall", "ips")
    issues = run(GROUP_WEB, VNF_FW, vnf2, binding("b1"), binding("b2", vnf="ips"))
    assert issues == [
        "p.yaml:24:45: Binding/b2 spec.order: duplicate order 10 on SecurityGroup web "
        "(also used by Binding/b1 at p.yaml:19:50) (expected a unique order per SecurityGroup)"
    ]


def test_same_order_on_different_groups_is_fine() -> None:
    api = GROUP_WEB.replace("web", "api")
    docs = [GROUP_WEB, api, VNF_FW, binding("b1"), binding("b2", group="api")]
    desired = load_sources([("x.yaml", "---\n".join(docs))])
    assert {b.spec.order for b in desired.bindings.values()} == {10}


def test_vnf_bound_twice_to_one_group() -> None:
    issues = run(GROUP_WEB, VNF_FW, binding("b1"), binding("b2", order=20))
    assert issues == [
        "p.yaml:19:33: Binding/b2 spec.vnf: VNF firewall is bound twice to SecurityGroup web "
        "(also by Binding/b1 at p.yaml:14:33)"
    ]


def test_duplicate_binding_name_is_reported_once() -> None:
    issues = run(GROUP_WEB, VNF_FW, binding("b1"), binding("b1"))
    assert len(issues) == 1 and "duplicate Binding name 'b1'" in issues[0]


def test_checks_are_pure_functions_of_source_docs() -> None:
    assert check_duplicates([]) == [] and check_bindings([]) == []


def issues_of_sources(*sources: tuple[str, str]) -> list[str]:
    import pytest

    from reconciler.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as info:
        load_sources(list(sources))
    return [str(i) for i in info.value.issues]
