"""JSON Schemas for the manifests (and the security-manager notifications), generated from the
pydantic models.

The models in :mod:`reconciler.core.model.desired` are the single source of truth; the files in
``schemas/`` are derived artefacts for editors (yaml-language-server: ``# yaml-language-server:
$schema=../../schemas/manifest.json``) and for other tools in CI. Committed generated files
drift, so ``osc-gitops schema --check`` (run in CI) and a test compare them with a fresh
generation.

Draft-07 with ``definitions`` is used rather than pydantic's default 2020-12 ``$defs``: it is
the dialect every editor plugin understands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter

from reconciler.core.model.desired import API_VERSION, Binding, SecurityGroup, VnfDeployment
from reconciler.core.model.notices import Notification

DRAFT = "http://json-schema.org/draft-07/schema#"
ID_BASE = "https://osc.io/schemas/v1alpha1/"
KIND_FILES: dict[str, type[BaseModel]] = {
    "securitygroup.json": SecurityGroup,
    "vnfdeployment.json": VnfDeployment,
    "binding.json": Binding,
}
MANIFEST_FILE = "manifest.json"
NOTIFICATION_FILE = "security-manager-notification.json"
_REF_TEMPLATE = "#/definitions/{model}"
_KINDS = {cls.__name__ for cls in KIND_FILES.values()}


def _require_header(schema: dict[str, Any]) -> None:
    """apiVersion and kind have Python defaults (handy in code) but are required in files."""
    rest = [k for k in schema.get("required", []) if k not in ("apiVersion", "kind")]
    schema["required"] = ["apiVersion", "kind", *rest]


def _finish(schema: dict[str, Any], file: str, title: str) -> dict[str, Any]:
    if "$defs" in schema:
        schema["definitions"] = schema.pop("$defs")
    return {"$schema": DRAFT, "$id": ID_BASE + file, "title": title, **schema}


def kind_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema of one kind, standalone."""
    schema = model.model_json_schema(ref_template=_REF_TEMPLATE)
    _require_header(schema)
    file = next(f for f, m in KIND_FILES.items() if m is model)
    return _finish(schema, file, f"osc-gitops {model.__name__} ({API_VERSION})")


def manifest_schema() -> dict[str, Any]:
    """Any manifest: oneOf the three kinds, discriminated by ``kind``."""
    union = Annotated[SecurityGroup | VnfDeployment | Binding, Field(discriminator="kind")]
    schema = TypeAdapter(union).json_schema(ref_template=_REF_TEMPLATE)
    for name, definition in schema.get("$defs", {}).items():
        if name in _KINDS:
            _require_header(definition)
    return _finish(schema, MANIFEST_FILE, f"osc-gitops manifest ({API_VERSION})")


def notification_schema() -> dict[str, Any]:
    """What a security manager receives (``reconciler.core.model.notices``): oneOf the
    ``members`` and the ``deployed``/``removed`` messages, discriminated by ``event``."""
    schema = TypeAdapter(Notification).json_schema(ref_template=_REF_TEMPLATE)
    return _finish(schema, NOTIFICATION_FILE, "osc-gitops security-manager notification")


def generate() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every file of ``schemas/``."""
    files = {file: kind_schema(model) for file, model in KIND_FILES.items()}
    files[MANIFEST_FILE] = manifest_schema()
    files[NOTIFICATION_FILE] = notification_schema()
    return files


def render(schema: dict[str, Any]) -> str:
    """Stable text form (sorted keys, trailing newline) so diffs stay minimal."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def drifted(directory: str | Path) -> list[str]:
    """Files of ``directory`` that are missing or differ from a fresh generation."""
    base = Path(directory)
    stale: list[str] = []
    for file, schema in generate().items():
        path = base / file
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            stale.append(str(path))
            continue
        if current != render(schema):
            stale.append(str(path))
    return stale


def write(directory: str | Path) -> list[str]:
    """(Re)write every schema file; returns the paths written."""
    base = Path(directory)
    base.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for file, schema in generate().items():
        path = base / file
        path.write_text(render(schema), encoding="utf-8")
        written.append(str(path))
    return written
