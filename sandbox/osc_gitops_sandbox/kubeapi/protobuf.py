"""Request bodies in Kubernetes' protobuf encoding, decoded for the emulator.

Why: ``kubectl`` (client-go's generated clientset) sends the built-in kinds as
``application/vnd.kubernetes.protobuf``, with no way to ask for JSON: ``kubectl create namespace
NAME`` posts a protobuf ``v1.Namespace``. A real API server decodes it; client-go falls back to
JSON after a 415 only for CBOR (``rest/client.go``, ``requestClientContentConfigProvider``), so
an emulator that answered 415 would make the command fail. The emulator answers in JSON, which
the client accepts (its ``Accept`` lists ``application/json`` after protobuf).

The wire format (``k8s.io/apimachinery/pkg/runtime/serializer/protobuf``): the magic bytes
``k8s\\x00``, then a ``runtime.Unknown`` message whose ``typeMeta`` names apiVersion and kind and
whose ``raw`` is the object's own message. Field numbers come from ``k8s.io/api``'s and
apimachinery's ``generated.proto``; :data:`MESSAGES` holds those of the messages the emulator
decodes. Go's encoder writes every non-pointer field, zero values included, so zero values are
dropped here as the JSON encoder's ``omitempty`` does.

Nothing is guessed or lost: a kind without a schema here, or a field number the schema does
not know, is answered ``415 Unsupported Media Type`` naming it (send JSON instead), never
decoded partially.
"""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime
from typing import Any

from osc_gitops_sandbox.kubeapi.status import ApiError

__all__ = ["MAGIC", "MEDIA_TYPE", "MESSAGES", "decode_object"]

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

Field = tuple[str, str, bool]
"""``(JSON name, type, repeated)``; type is a scalar (``string``, ``bytes``, ``int64``,
``int32``, ``bool``), ``map`` (``map<string, string>``), ``time`` (``meta.v1.Time``),
``fields`` (``meta.v1.FieldsV1``: raw JSON) or the name of another message."""

MESSAGES: dict[str, dict[int, Field]] = {
    "runtime.Unknown": {
        1: ("typeMeta", "runtime.TypeMeta", False),
        2: ("raw", "bytes", False),
        3: ("contentEncoding", "string", False),
        4: ("contentType", "string", False),
    },
    "runtime.TypeMeta": {1: ("apiVersion", "string", False), 2: ("kind", "string", False)},
    "meta.v1.ObjectMeta": {
        1: ("name", "string", False),
        2: ("generateName", "string", False),
        3: ("namespace", "string", False),
        4: ("selfLink", "string", False),
        5: ("uid", "string", False),
        6: ("resourceVersion", "string", False),
        7: ("generation", "int64", False),
        8: ("creationTimestamp", "time", False),
        9: ("deletionTimestamp", "time", False),
        10: ("deletionGracePeriodSeconds", "int64", False),
        11: ("labels", "map", False),
        12: ("annotations", "map", False),
        13: ("ownerReferences", "meta.v1.OwnerReference", True),
        14: ("finalizers", "string", True),
        17: ("managedFields", "meta.v1.ManagedFieldsEntry", True),
    },
    "meta.v1.OwnerReference": {
        1: ("kind", "string", False),
        3: ("name", "string", False),
        4: ("uid", "string", False),
        5: ("apiVersion", "string", False),
        6: ("controller", "bool", False),
        7: ("blockOwnerDeletion", "bool", False),
    },
    "meta.v1.ManagedFieldsEntry": {
        1: ("manager", "string", False),
        2: ("operation", "string", False),
        3: ("apiVersion", "string", False),
        4: ("time", "time", False),
        6: ("fieldsType", "string", False),
        7: ("fieldsV1", "fields", False),
        8: ("subresource", "string", False),
    },
    "core.v1.Namespace": {
        1: ("metadata", "meta.v1.ObjectMeta", False),
        2: ("spec", "core.v1.NamespaceSpec", False),
        3: ("status", "core.v1.NamespaceStatus", False),
    },
    "core.v1.NamespaceSpec": {1: ("finalizers", "string", True)},
    "core.v1.NamespaceStatus": {
        1: ("phase", "string", False),
        2: ("conditions", "core.v1.NamespaceCondition", True),
    },
    "core.v1.NamespaceCondition": {
        1: ("type", "string", False),
        2: ("status", "string", False),
        4: ("lastTransitionTime", "time", False),
        5: ("reason", "string", False),
        6: ("message", "string", False),
    },
}

KINDS: dict[tuple[str, str], str] = {("v1", "Namespace"): "core.v1.Namespace"}
"""``(apiVersion, kind)`` -> the message of its object."""


def _unsupported(what: str) -> ApiError:
    return ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json, application/yaml, {MEDIA_TYPE} (the sandbox API emulator decodes "
        f"protobuf for {', '.join(f'{v} {k}' for v, k in KINDS)} only: {what}; send JSON)",
    )


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ApiError(400, "protobuf body ends inside a varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ApiError(400, "protobuf varint longer than 10 bytes")


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """``(field number, wire type, raw value)`` of one message, in wire order."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
            if len(value) != length:
                raise ApiError(400, "protobuf body ends inside a field")
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ApiError(400, f"protobuf wire type {wire} (field {number}) is not supported")
        out.append((number, wire, value))
    return out


def _time(data: bytes) -> str | None:
    seconds = nanos = 0
    for number, wire, value in _fields(data):
        if wire != 0:
            raise ApiError(400, "meta.v1.Time: a field is not a varint")
        if number == 1:
            seconds = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 2:
            nanos = value
    if seconds == 0 and nanos == 0:
        return None  # the zero time: null in JSON, omitted in metadata
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scalar(kind: str, wire: int, value: Any, where: str) -> Any:
    expected = 0 if kind in ("int64", "int32", "bool") else 2
    if wire != expected:
        raise ApiError(400, f"{where}: wire type {wire} where {kind} was expected")
    if kind == "string":
        return bytes(value).decode()
    if kind == "bytes":
        return bytes(value)
    if kind == "bool":
        return bool(value)
    if kind == "int32":
        return struct.unpack("<i", struct.pack("<I", value & 0xFFFFFFFF))[0]
    return value - (1 << 64) if value >= 1 << 63 else value


def _empty(value: Any) -> bool:
    return value in (None, "", 0, False, b"") or (isinstance(value, dict | list) and not value)


def decode_message(name: str, data: bytes) -> dict[str, Any]:
    """One message as the JSON object Go's encoder would write (zero values omitted)."""
    schema = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data):
        if number not in schema:
            raise _unsupported(f"field {number} of {name} is not known")
        key, kind, repeated = schema[number]
        where = f"{name}.{key}"
        item: Any
        if kind == "map":
            entry = {n: bytes(v).decode() for n, w, v in _fields(value) if w == 2}
            out.setdefault(key, {})[entry.get(1, "")] = entry.get(2, "")
            continue
        if kind == "time":
            item = _time(value)
        elif kind == "fields":
            raw = dict((n, v) for n, _, v in _fields(value)).get(1, b"{}")
            item = json.loads(bytes(raw) or b"{}")
        elif kind in MESSAGES:
            if wire != 2:
                raise ApiError(400, f"{where}: wire type {wire} where a message was expected")
            item = decode_message(kind, value)
        else:
            item = _scalar(kind, wire, value, where)
        if repeated:
            out.setdefault(key, []).append(item)
        elif not _empty(item):
            out[key] = item
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """The object a protobuf request body carries, as JSON would carry it (``apiVersion``,
    ``kind`` and its fields). Raises :class:`ApiError` 400 for a malformed body and 415 for a
    kind or field this module cannot decode."""
    if not body.startswith(MAGIC):
        raise ApiError(400, "protobuf body without the k8s\\x00 prefix")
    unknown = decode_message("runtime.Unknown", body[len(MAGIC) :])
    type_meta = unknown.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if unknown.get("contentEncoding"):
        raise _unsupported(f"content encoding {unknown['contentEncoding']!r}")
    message = KINDS.get((api_version, kind))
    if message is None:
        raise _unsupported(f"{api_version} {kind} is not among them")
    return {
        "apiVersion": api_version,
        "kind": kind,
        **decode_message(message, unknown.get("raw", b"")),
    }
