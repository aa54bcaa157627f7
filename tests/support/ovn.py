"""Helpers for the OVN tests (plain functions, importable from any test module here)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from osc_gitops_sandbox.ovn.stack import SeedNode, ovn_unavailable_reason

from reconciler.adapters.ovn import OvnNorthbound, OvnSettings

OVN_MARKS = [pytest.mark.ovn, pytest.mark.usefixtures("require_ovn")]
"""``pytestmark = OVN_MARKS`` in every module here: marked ``ovn``, failing without OVN."""


def require_ovn_or_fail(northd: bool = True) -> None:
    """``make setup`` installs OVN: a machine without it fails the test, it is not skipped."""
    reason = ovn_unavailable_reason(northd=northd)
    if reason:
        pytest.fail(f"{reason} (run `make setup`)")


NODES = [SeedNode("node0", "10.244.0.0/24"), SeedNode("node1", "10.244.1.0/24")]

_STRINGS = {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}
_UUIDS = {"type": {"key": {"type": "uuid"}, "min": 0, "max": "unlimited"}}
PORT_GROUP_SCHEMA: dict[str, Any] = {
    "name": "OVN_Northbound",
    "version": "7.18.0",
    "tables": {
        "Port_Group": {
            "columns": {"name": {"type": "string"}, "external_ids": _STRINGS,
                        "ports": _UUIDS, "acls": _UUIDS},
        }
    },
}  # fmt: skip
"""A ``get_schema`` reply of an NB that has only Port_Group: enough for in-memory tests of
the writer and of python-ovs' IDL (no server)."""


@dataclass(frozen=True)
class Change:
    """Stands in for the plan module's change type (the adapter only needs these fields)."""

    action: str
    kind: str
    key: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def ext(key: str, node: str | None = "node0", resource: str = "Binding/web-fw") -> dict[str, str]:
    ids = {"osc.io/owner": "osc-gitops", "osc.io/resource": resource, "osc.io/key": key}
    if node:
        ids["osc.io/node"] = node
    return ids


def key_of(table: str, fields: dict[str, Any]) -> str:
    return str(fields["external_ids"]["osc.io/key"])


def creates(rows: dict[str, list[dict[str, Any]]]) -> list[Change]:
    return [Change("create", t, key_of(t, r), None, r) for t, rs in rows.items() for r in rs]


def connect(remote: str, **kwargs: Any) -> OvnNorthbound:
    return OvnNorthbound.connect(OvnSettings(remote=remote, **kwargs))


class NorthdWaitSeen(logging.Handler):
    """Set when the writer logs that it waits for ovn-northd before creating Port_Groups
    (``reconciler.adapters.ovn.northd_sync``)."""

    def __init__(self) -> None:
        super().__init__()
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("waiting for ovn-northd"):
            self.event.set()


@contextmanager
def northd_waits_seen() -> Iterator[NorthdWaitSeen]:
    """The writer's log watched at INFO for its wait for ovn-northd, restored afterwards."""
    logger = logging.getLogger("reconciler.adapters.ovn.writer")
    handler, level = NorthdWaitSeen(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
