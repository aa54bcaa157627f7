"""``spec.vnf`` as a chain (issue 21): what a list of VNFs must be, each problem at its
``file:line:column``, and what is fine."""

from __future__ import annotations

from reconciler.manifests.load import load_sources
from tests.support.manifests import GROUP_WEB, HEADER, VNF_FW, issues_of

VNF_IDS = VNF_FW.replace("firewall", "ids")


def binding(name: str, vnf: str, order: int = 10) -> str:
    return HEADER + (
        f"kind: Binding\nmetadata: {{name: {name}}}\n"
        f"spec: {{securityGroup: web, vnf: {vnf}, order: {order}}}\n"
    )


def run(*docs: str) -> list[str]:
    return [str(i) for i in issues_of("---\n".join(docs), "p.yaml")]


def test_a_chain_loads_and_a_list_of_one_is_the_single_form() -> None:
    desired = load_sources([("p.yaml", "---\n".join(
        [GROUP_WEB, VNF_FW, VNF_IDS, binding("c", "[firewall, ids]"), binding("s", "[ids]", 20)]
    ))])  # fmt: skip
    assert desired.bindings["c"].spec.vnfs == ("firewall", "ids")
    assert desired.bindings["c"].spec.is_chain
    assert desired.bindings["s"].spec.vnfs == ("ids",) and not desired.bindings["s"].spec.is_chain


def test_an_empty_chain_an_unknown_hop_a_hop_twice_and_a_mapping_are_errors() -> None:
    issues = run(
        GROUP_WEB, VNF_FW, VNF_IDS,
        binding("empty", "[]", 1),
        binding("typo", "[firewall, idz]", 2),
        binding("twice", "[firewall, ids, firewall]", 3),
        binding("per-hop", "[firewall, {name: idz, failurePolicy: fail-safe}]", 4),
    )  # fmt: skip
    assert issues == [
        "p.yaml:19:33: Binding/empty spec.vnf: an empty chain steers nothing: name one "
        "VnfDeployment, or list the VNFs of the chain in the order a packet crosses them",
        "p.yaml:24:44: Binding/typo spec.vnf[1]: unknown VnfDeployment 'idz' (did you mean "
        "'ids'?) (expected one of: firewall, ids)",
        "p.yaml:29:49: Binding/twice spec.vnf[2]: VNF firewall appears twice in the chain "
        "(first at spec.vnf[0]): a packet crosses each VNF of a chain once (expected distinct "
        "VnfDeployments, in the order a packet crosses them)",
        "p.yaml:34:71: Binding/per-hop spec.vnf[1].failurePolicy: the string 'fail-safe' is "
        "not allowed (expected 'fail-close' or 'fail-open')",
    ]


def test_a_hop_with_a_failure_policy_of_its_own() -> None:
    desired = load_sources([("p.yaml", "---\n".join(
        [GROUP_WEB, VNF_FW, VNF_IDS,
         binding("c", "[firewall, {name: ids, failurePolicy: fail-open}]")]
    ))])  # fmt: skip
    spec = desired.bindings["c"].spec
    assert spec.vnfs == ("firewall", "ids")
    assert [p.value for p in spec.hop_policies] == ["fail-close", "fail-open"]
    issues = run(GROUP_WEB, VNF_FW, binding("c", "[firewall, {name: idz}]"))
    assert issues == [
        "p.yaml:14:51: Binding/c spec.vnf[1].name: unknown VnfDeployment 'idz' (expected one "
        "of: firewall)"
    ]


def test_the_same_chain_twice_on_a_group_is_an_error_a_vnf_alone_and_in_a_chain_is_not() -> None:
    issues = run(
        GROUP_WEB, VNF_FW, VNF_IDS,
        binding("c1", "[firewall, ids]", 1),
        binding("c2", "[firewall, ids]", 2),
        binding("alone", "ids", 3),
    )  # fmt: skip
    assert issues == [
        "p.yaml:24:33: Binding/c2 spec.vnf: chain firewall -> ids is bound twice to "
        "SecurityGroup web (also by Binding/c1 at p.yaml:19:33)"
    ]
