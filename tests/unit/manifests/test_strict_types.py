"""Strict types: no number or boolean is ever coerced, and the JSON Schema and the models give
every manifest the same verdict (issue #24 item 3)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from reconciler.core.model.desired import API_VERSION, MODEL_BY_KIND
from reconciler.errors import ValidationFailed
from tests.support.manifests import load_text
from tests.support.paths import EXAMPLES, REPO

INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))


def _schema_validator() -> jsonschema.Draft7Validator:
    """The committed ``schemas/manifest.json``, judged with the YAML's own types: JSON Schema
    (draft 6 and later) counts ``443.0`` as an integer because JSON cannot tell the two apart;
    YAML can, and so do the models (docs/manifests.md says so)."""
    schema = json.loads((REPO / "schemas" / "manifest.json").read_text())
    checker = jsonschema.Draft7Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    )
    cls = jsonschema.validators.extend(jsonschema.Draft7Validator, type_checker=checker)
    return cls(schema)  # type: ignore[no-any-return]


VALIDATOR = _schema_validator()


def model_accepts(document: Any) -> bool:
    if not isinstance(document, dict) or document.get("apiVersion") != API_VERSION:
        return False
    model = MODEL_BY_KIND.get(document.get("kind"))  # type: ignore[arg-type]
    if model is None:
        return False
    try:
        model.model_validate(document)
    except ValidationError:
        return False
    return True


def schema_accepts(document: Any) -> bool:
    return VALIDATOR.is_valid(document)


def documents(text: str) -> list[Any] | None:
    """The YAML documents of ``text`` (``None`` when it is not loadable YAML at all)."""
    try:
        return [d for d in YAML(typ="safe", pure=True).load_all(text) if d is not None]
    except YAMLError:
        return None


def doc_examples() -> list[tuple[str, str]]:
    text = (REPO / "docs" / "manifests.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return [(f"docs/manifests.md#{i}", block) for i, block in enumerate(blocks)]


CASES = [*doc_examples(), *((f"examples/invalid/{p.name}", p.read_text()) for p in INVALID)]


@pytest.mark.parametrize(("where", "text"), CASES, ids=[c[0] for c in CASES])
def test_schema_and_models_give_the_same_verdict(where: str, text: str) -> None:
    docs = documents(text)
    if docs is None:  # not YAML at all: neither can judge it, the loader refuses the file
        with pytest.raises(ValidationFailed):
            load_text(text, where)
        return
    for document in docs:
        if isinstance(document, dict) and "apiVersion" in document and "kind" in document:
            assert model_accepts(document) == schema_accepts(document), (where, document)


def test_every_manifest_example_of_the_docs_is_a_valid_manifest() -> None:
    judged = 0
    for where, text in doc_examples():
        for document in documents(text) or ():
            if isinstance(document, dict) and document.get("apiVersion") == API_VERSION:
                if document.get("spec") == {"...": None}:
                    continue  # the page's first block: the shape, not a manifest
                assert model_accepts(document), where
                judged += 1
    assert judged >= 4


BINDING = """\
apiVersion: osc.io/v1alpha1
kind: Binding
metadata: {name: b}
spec:
  securityGroup: web
  vnf: fw
  traffic: {protocol: tcp, ports: [PORT]}
"""


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("true", "got the boolean true (a boolean is not a number)"),
        ('"443"', "got the string '443' (write 443 without quotes"),
        ("443.0", "got the number 443.0 (write a whole number without a decimal point)"),
    ],
)
def test_a_port_is_never_coerced(value: str, message: str) -> None:
    with pytest.raises(ValidationFailed) as failed:
        load_text(BINDING.replace("PORT", value), "b.yaml")
    (issue,) = [i for i in failed.value.issues if i.path == "spec.traffic.ports[0]"]
    assert message in issue.message


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cpu", '"2"', "expected an integer, got the string '2'"),
        ("cpu", "2.0", "expected an integer, got the number 2.0"),
        ("cpu", "true", "expected an integer, got the boolean true"),
        ("healthCheck", '{enabled: "yes"}', "expected a boolean, got the string 'yes'"),
        ("healthCheck", "{enabled: 1}", "expected a boolean, got the number 1"),
        ("healthCheck", "{interval: 1.5}", "expected an integer, got the number 1.5"),
        ("healthCheck", "{timeout: 1000}", "must be at most 300, got 1000"),
        ("cpu", "0", "must be at least 1, got 0"),
    ],
)
def test_vnf_numbers_and_booleans_are_strict(field: str, value: str, message: str) -> None:
    text = (
        "apiVersion: osc.io/v1alpha1\nkind: VnfDeployment\nmetadata: {name: fw}\nspec:\n"
        f"  namespace: x\n  image: a/b:1\n  {field}: {value}\n"
    )
    with pytest.raises(ValidationFailed) as failed:
        load_text(text, "v.yaml")
    assert any(message in i.message for i in failed.value.issues), failed.value.issues
    assert all("Input should" not in i.message for i in failed.value.issues)


def test_an_order_that_is_a_string_or_float_is_refused() -> None:
    for value in ('"10"', "10.0", "true"):
        text = BINDING.replace("traffic: {protocol: tcp, ports: [PORT]}", f"order: {value}")
        with pytest.raises(ValidationFailed):
            load_text(text, "b.yaml")


def test_new_invalid_examples_exist_for_strict_types() -> None:
    names = {p.name for p in INVALID}
    assert {"ports-not-integers.yaml", "port-float.yaml", "cpu-quoted.yaml"} <= names
    assert Path(EXAMPLES / "invalid" / "health-check-yes.yaml").exists()


def test_a_port_range_with_bad_fields_names_only_its_fields(tmp_path: Path) -> None:
    """A mapping in ``ports`` is a range: its fields' errors are the cause, not the integer the
    list also accepts (no ``expected an integer, got a mapping`` beside them)."""
    from tests.support.cli import cli

    ranges = '[{start: 80.0, end: "90"}, {start: 1, end: 70000}, {begin: 1, end: 2}, [1]]'
    (tmp_path / "b.yaml").write_text(BINDING.replace("[PORT]", ranges))
    result = cli("validate", tmp_path)
    assert result.code == 1
    lines = [line.split(": ", 2)[1:] for line in result.err.splitlines() if "spec." in line]
    assert lines == [
        ["Binding/b spec.traffic.ports[0].start", "expected an integer, got the number 80.0 "
         "(write a whole number without a decimal point)"],
        ["Binding/b spec.traffic.ports[0].end", "expected an integer, got the string '90' "
         "(write 90 without quotes: numbers are never converted from text)"],
        ["Binding/b spec.traffic.ports[1].end", "must be at most 65535, got 70000"],
        ["Binding/b spec.traffic.ports[2].start", "required field is missing"],
        ["Binding/b spec.traffic.ports[2].begin", "unknown field 'begin' (expected one of: "
         "start, end)"],
        ["Binding/b spec.traffic.ports[3]", "expected an integer or a mapping, got a list"],
    ]  # fmt: skip
