"""Issue #16 items 1-2 in manifests: ``spec.traffic`` as one filter or a list of them, and
``spec.order`` optional (default 100) with uniqueness per group still checked."""

from __future__ import annotations

import json

import jsonschema
import pytest

from reconciler.core.model.desired import DEFAULT_ORDER, Binding, Protocol, Traffic
from reconciler.errors import ValidationFailed
from tests.support.manifests import doc, issues_of, load_text, only_issue
from tests.support.paths import REPO

HEADER = "apiVersion: osc.io/v1alpha1\n"
GROUP_AND_VNFS = doc(
    """
    apiVersion: osc.io/v1alpha1
    kind: SecurityGroup
    metadata: {name: web}
    spec: {labels: [app=web]}
    ---
    apiVersion: osc.io/v1alpha1
    kind: VnfDeployment
    metadata: {name: firewall}
    spec: {namespace: osc-vnfs, image: "quay.io/example/fw:1"}
    ---
    apiVersion: osc.io/v1alpha1
    kind: VnfDeployment
    metadata: {name: ips}
    spec: {namespace: osc-vnfs, image: "quay.io/example/ips:1"}
    """
)


def binding_doc(name: str, vnf: str, body: str = "") -> str:
    return (
        f"---\napiVersion: osc.io/v1alpha1\nkind: Binding\nmetadata: {{name: {name}}}\n"
        f"spec:\n  securityGroup: web\n  vnf: {vnf}\n{body}"
    )


# --- traffic lists -------------------------------------------------------------------------------


def test_traffic_takes_one_mapping_or_a_list_and_both_read_as_filters() -> None:
    desired = load_text(
        GROUP_AND_VNFS
        + binding_doc("one", "firewall", "  order: 1\n  traffic: {protocol: tcp, ports: [80]}\n")
        + binding_doc(
            "many",
            "ips",
            "  order: 2\n  traffic:\n    - {protocol: tcp, ports: [80, 443]}\n"
            "    - protocol: udp\n      ports: [{start: 53, end: 54}]\n    - protocol: icmp\n",
        )
    )
    one = desired.bindings["one"].spec
    assert isinstance(one.traffic, Traffic)
    assert one.traffic_filters() == (Traffic(protocol=Protocol.TCP, ports=[80]),)
    many = desired.bindings["many"].spec.traffic_filters()
    assert [f.protocol for f in many] == [Protocol.TCP, Protocol.UDP, Protocol.ICMP]
    assert many[0].ports == [80, 443]


def test_omitted_traffic_is_one_filter_taking_everything() -> None:
    spec = load_text(GROUP_AND_VNFS + binding_doc("b", "firewall")).bindings["b"].spec
    assert spec.traffic is None
    assert spec.traffic_filters() == (Traffic(),)


def test_an_empty_traffic_list_is_an_error_at_its_line() -> None:
    text = HEADER + doc(
        """
        kind: Binding
        metadata: {name: b}
        spec:
          securityGroup: web
          vnf: fw
          traffic: []
        """
    )
    issue = only_issue(text, "b.yaml")
    assert (issue.file, issue.line, issue.column, issue.path) == ("b.yaml", 7, 12, "spec.traffic")
    assert issue.message.startswith("an empty list steers nothing: omit traffic")


def test_an_error_inside_a_list_item_is_reported_once_at_the_item() -> None:
    text = HEADER + doc(
        """
        kind: Binding
        metadata: {name: b}
        spec:
          securityGroup: web
          vnf: fw
          traffic:
            - {protocol: tcp, ports: [80]}
            - protocol: icmp
              ports: [8]
            - {protocol: udp, ports: [http]}
        """
    )
    issues = {i.path: i for i in issues_of(text)}
    assert set(issues) == {"spec.traffic[1]", "spec.traffic[2].ports[0]"}
    assert issues["spec.traffic[1]"].message == "ports need protocol tcp or udp, not icmp"
    assert issues["spec.traffic[1]"].line == 9
    assert issues["spec.traffic[2].ports[0]"].line == 11


def test_traffic_that_is_neither_a_mapping_nor_a_list_says_both_forms() -> None:
    text = (
        HEADER
        + "kind: Binding\nmetadata: {name: b}\nspec: {securityGroup: w, vnf: f, traffic: tcp}\n"
    )
    issue = only_issue(text)
    assert issue.path == "spec.traffic"
    assert issue.message == "expected a mapping {protocol, ports} or a list of them, got 'tcp'"


def test_the_schema_accepts_both_forms_and_refuses_an_empty_list() -> None:
    schema = json.loads((REPO / "schemas" / "binding.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    base = {
        "apiVersion": "osc.io/v1alpha1",
        "kind": "Binding",
        "metadata": {"name": "b"},
        "spec": {"securityGroup": "web", "vnf": "fw"},  # no order: optional
    }

    def errors(traffic: object) -> list[str]:
        body = {**base, "spec": {**base["spec"], "traffic": traffic}}
        return [e.message for e in validator.iter_errors(body)]

    assert not list(validator.iter_errors(base))
    assert not errors({"protocol": "tcp", "ports": [80]})
    assert not errors([{"protocol": "tcp", "ports": [80]}, {"protocol": "udp"}])
    assert errors([])
    assert errors([{"protocol": "sctp"}])
    spec = schema["definitions"]["BindingSpec"]
    assert "order" not in spec["required"]
    assert spec["properties"]["order"]["default"] == DEFAULT_ORDER
    forms = spec["properties"]["traffic"]["anyOf"][0]["oneOf"]
    assert forms[0] == {"$ref": "#/definitions/Traffic"}
    assert forms[1]["type"] == "array" and forms[1]["minItems"] == 1


# --- optional order ------------------------------------------------------------------------------


def test_order_defaults_to_100_and_says_it_was_omitted() -> None:
    desired = load_text(
        GROUP_AND_VNFS + binding_doc("a", "firewall") + binding_doc("b", "ips", "  order: 7\n")
    )
    assert desired.bindings["a"].spec.order == DEFAULT_ORDER == 100
    assert desired.bindings["a"].spec.order_is_default
    assert not desired.bindings["b"].spec.order_is_default
    explicit = Binding.model_validate(
        {"metadata": {"name": "c"}, "spec": {"securityGroup": "w", "vnf": "f", "order": 100}}
    )
    assert not explicit.spec.order_is_default


def test_two_bindings_without_order_on_one_group_clash_naming_both_with_lines() -> None:
    text = GROUP_AND_VNFS + binding_doc("a", "firewall") + binding_doc("b", "ips")
    with pytest.raises(ValidationFailed) as failed:
        load_text(text, "p.yaml")
    (issue,) = failed.value.issues
    assert str(issue) == (
        "p.yaml:27:3: Binding/b spec.order: duplicate order 100 (the default: spec.order "
        "omitted) on SecurityGroup web (also used by Binding/a at p.yaml:20:3, which omits "
        "spec.order) (expected a unique order per SecurityGroup: give one of them an explicit "
        "spec.order)"
    )


def test_an_explicit_order_equal_to_the_default_clashes_too() -> None:
    text = GROUP_AND_VNFS + binding_doc("a", "firewall") + binding_doc("b", "ips", "  order: 100\n")
    with pytest.raises(ValidationFailed) as failed:
        load_text(text, "p.yaml")
    (issue,) = failed.value.issues
    assert (issue.name, issue.path, issue.line) == ("b", "spec.order", 29)
    assert "duplicate order 100 on SecurityGroup web" in issue.message
    assert "Binding/a at p.yaml:20:3, which omits spec.order" in issue.message


def test_bindings_without_order_on_different_groups_are_fine() -> None:
    other_group = doc(
        """
        ---
        apiVersion: osc.io/v1alpha1
        kind: SecurityGroup
        metadata: {name: db}
        spec: {labels: [app=db]}
        """
    )
    text = GROUP_AND_VNFS + other_group + binding_doc("a", "firewall")
    text += binding_doc("b", "firewall").replace("securityGroup: web", "securityGroup: db")
    desired = load_text(text)
    assert {b.spec.order for b in desired.bindings.values()} == {DEFAULT_ORDER}


def test_the_example_policies_use_a_traffic_list_and_a_binding_without_order() -> None:
    from reconciler.manifests.load import load_path

    desired = load_path(REPO / "examples" / "policies")
    web_ips = desired.bindings["web-ips"].spec
    assert isinstance(web_ips.traffic, list) and len(web_ips.traffic) == 2
    assert desired.bindings["db-firewall"].spec.order_is_default
