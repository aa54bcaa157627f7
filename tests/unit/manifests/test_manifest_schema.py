"""JSON Schemas: generated from the models, committed, and usable by editors and CI."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from reconciler import cli
from reconciler.manifests import schema
from tests.support.paths import REPO

SCHEMAS = REPO / "schemas"


def test_committed_schemas_match_the_models() -> None:
    stale = schema.drifted(SCHEMAS)
    assert not stale, f"{stale} drifted from reconciler/model.py: run `osc-gitops schema --write`"
    assert sorted(p.name for p in SCHEMAS.glob("*.json")) == sorted(schema.generate())


def test_schema_check_flag_detects_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["schema", "--write", "--dir", str(tmp_path)]) == 0
    assert cli.main(["schema", "--check", "--dir", str(tmp_path)]) == 0
    (tmp_path / "binding.json").write_text("{}\n")
    capsys.readouterr()
    assert cli.main(["schema", "--check", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}/binding.json: out of date" in err
    assert "osc-gitops schema --write" in err


def test_schema_without_flags_prints_the_manifest_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema.manifest_schema()


def manifest_validator() -> jsonschema.Draft7Validator:
    data = json.loads((SCHEMAS / "manifest.json").read_text())
    jsonschema.Draft7Validator.check_schema(data)
    return jsonschema.Draft7Validator(data)


def test_examples_validate_against_the_schema_files() -> None:
    validator = manifest_validator()
    count = 0
    for file in sorted((REPO / "examples" / "policies").rglob("*.yaml")):
        first = file.read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema=")
        assert (file.parent / first.split("=", 1)[1]).resolve() == SCHEMAS / "manifest.json"
        for document in YAML(typ="safe").load_all(file.read_text()):
            errors = list(validator.iter_errors(document))
            assert not errors, f"{file}: {errors[0].message}"
            count += 1
    assert count == 10


@pytest.mark.parametrize(
    "document",
    [
        {"apiVersion": "osc.io/v1alpha1", "kind": "SecurityGroup", "metadata": {"name": "w"}},
        {
            "apiVersion": "osc.io/v1alpha1",
            "kind": "SecurityGroup",
            "metadata": {"name": "w"},
            "spec": {"labels": ["tier frontend=x"]},
        },
        {"kind": "Binding", "metadata": {"name": "b"}, "spec": {}},
        {
            "apiVersion": "osc.io/v1alpha1",
            "kind": "VnfDeployment",
            "metadata": {"name": "v", "labels": {"bad key": "x"}},
            "spec": {"namespace": "n", "image": "i", "memory": "lots"},
        },
    ],
)
def test_schema_rejects_what_the_loader_rejects(document: dict[str, object]) -> None:
    assert not manifest_validator().is_valid(document)


def test_kind_files_require_api_version_and_kind() -> None:
    for file in ("securitygroup.json", "vnfdeployment.json", "binding.json"):
        data = json.loads((SCHEMAS / file).read_text())
        assert data["required"][:2] == ["apiVersion", "kind"]
        assert data["$schema"] == "http://json-schema.org/draft-07/schema#"
