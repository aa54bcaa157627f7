"""Manifests in, ``Desired`` out: YAML with ``file:line`` errors, validation, JSON Schemas."""
