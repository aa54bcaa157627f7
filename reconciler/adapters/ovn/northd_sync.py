"""Keeping a Port_Group's deletion and its re-creation apart for ovn-northd 25.09.0-25.09.3 and
26.03.0-26.03.1.

Those northds lose the Southbound row of a Port_Group that is deleted and created again under
the same name when one northd iteration handles both (two NB transactions while northd is busy
with something else): the NB holds the group, its ACLs' logical flows name it, but
ovn-controller finds no port in it and the ACLs match nothing until the group changes again
(``docs/upstream/northd-port-group-recreated.sh``; fixed upstream in 26.03.2 and 25.09.4). Our
Port_Groups are named from the manifests, so one comes back under its old name whenever its
(group, node) pair does: the last member unlabelled and labelled again under
``--empty-grace 0``, a Binding removed and restored, a VNF gone from a node and back. Lost
there, the group's pods would not be steered at all, while the plan says everything is in sync.

So on such a northd the writer keeps the two apart, with the NB's own sync counters (what
``ovn-nbctl --wait=sb`` uses): a transaction that deletes a Port_Group also increments
``NB_Global.nb_cfg``; before a transaction that creates a Port_Group, the writer waits until
``NB_Global.sb_cfg`` (written by northd once the Southbound holds what it computed from the NB
up to a given ``nb_cfg``) has caught up with ``nb_cfg``. A deletion of ours has then been
handled by an earlier northd iteration than the re-creation, in this process or any other.

Which northd serves the NB: ``NB_Global.options:northd_internal_version`` (written by northd,
``<OVN version>-<SB schema>-<actions>.<minor>``). Nothing is incremented or waited for
without it (an NB no northd has run on), on any other version, or when northd is in step (the
usual case: the wait costs one read). A northd that does not catch up within
``--ovn-timeout`` (stopped, or stuck) is not waited for longer: the creation goes ahead with
a warning (a northd that starts again recomputes everything, which is not affected).

Pure functions of rows; the writer (:mod:`~reconciler.adapters.ovn.writer`) does the reading
and the waiting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "NorthdState",
    "affected",
    "bump",
    "parse",
    "select",
    "touches",
]

TABLE = "NB_Global"
VERSION_KEY = "northd_internal_version"
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_FIXED_IN = {(25, 9): 4, (26, 3): 2}
"""The releases that had the bug, and the first patch release of each with the fix."""
_DEVELOPMENT = 90
"""``<release>.90``: the main branch after that release was branched (the fix landed in
26.03.90; such a build may predate it, so it counts as affected)."""


def affected(version: str | None) -> bool:
    """Whether the northd of ``northd_internal_version`` ``version`` loses a Port_Group
    re-created in the iteration that handles its deletion."""
    match = _VERSION.match(version or "")
    if match is None:
        return False
    major, minor, patch = (int(g) for g in match.groups())
    fixed = _FIXED_IN.get((major, minor))
    return fixed is not None and (patch < fixed or patch >= _DEVELOPMENT)


class _Change(Protocol):
    @property
    def action(self) -> str: ...

    @property
    def kind(self) -> str: ...


def touches(changes: Iterable[_Change]) -> tuple[bool, bool]:
    """``(deletes, creates)``: whether ``changes`` delete and create Port_Groups."""
    actions = {c.action for c in changes if c.kind == "Port_Group"}
    return "delete" in actions, "create" in actions


@dataclass(frozen=True, slots=True)
class NorthdState:
    """What the NB says of its northd."""

    uuid: str
    """The ``NB_Global`` row."""
    version: str | None
    nb_cfg: int
    sb_cfg: int

    @property
    def affected(self) -> bool:
        return affected(self.version)

    @property
    def in_step(self) -> bool:
        """northd has handled every NB change up to the last ``nb_cfg`` increment."""
        return self.sb_cfg >= self.nb_cfg


def select() -> dict[str, Any]:
    """The operation that reads :class:`NorthdState`."""
    return {"op": "select", "table": TABLE, "where": [],
            "columns": ["_uuid", "options", "nb_cfg", "sb_cfg"]}  # fmt: skip


def parse(result: Mapping[str, Any]) -> NorthdState | None:
    """:class:`NorthdState` from the result of :func:`select`; ``None`` without an
    ``NB_Global`` row (nothing to wait for: no northd ever ran)."""
    rows = result.get("rows") or []
    if len(rows) != 1:
        return None
    row = rows[0]
    options = row.get("options")
    pairs = options[1] if isinstance(options, list) and len(options) == 2 else []
    version = next((str(v) for k, v in pairs if k == VERSION_KEY), None)
    return NorthdState(
        uuid=str(row["_uuid"][1]),
        version=version,
        nb_cfg=int(row.get("nb_cfg") or 0),
        sb_cfg=int(row.get("sb_cfg") or 0),
    )


def bump(uuid: str) -> dict[str, Any]:
    """The operation that increments ``nb_cfg`` of the ``NB_Global`` row ``uuid``."""
    return {"op": "mutate", "table": TABLE, "where": [["_uuid", "==", ["uuid", uuid]]],
            "mutations": [["nb_cfg", "+=", 1]]}  # fmt: skip
