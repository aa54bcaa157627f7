"""The status file behind ``osc-gitops status``: what was last applied, when, and how it went.

Decision: a small JSON file (``<cache-dir>/status/<instance>.json``), written atomically
(temp file + rename) after every apply/run attempt. Why not only the ``osc.io/revision`` values
on the owned rows? Rows record successes only, and only for rows that *changed*: a commit that
changes nothing rewrites no row, so the rows would keep showing an older commit. The file also
records refusals (invalid commit), an unreachable source, and the last good commit. The same
facts are exported as metrics (``osc_gitops_applied_revision_info``, ``..._last_success_...``)
for when the file is out of reach (a CronJob's ``emptyDir``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reconciler.errors import UserError

RESULTS = ("applied", "unchanged", "error", "refused", "source-unreachable", "standby")


@dataclass
class Status:
    """One instance's latest outcome. ``revision`` = the commit the live state matches (the
    last good one), ``attempted`` = the last commit seen (differs when it was refused)."""

    instance: str
    result: str = "unknown"
    message: str = ""
    revision: str | None = None
    revision_applied_at: str | None = None
    attempted: str | None = None
    source: str | None = None
    ref: str | None = None
    updated_at: str | None = None
    changes: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Status:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def status_path(cache_dir: str | Path, instance: str) -> Path:
    return Path(cache_dir) / "status" / f"{instance}.json"


def write(path: Path, status: Status) -> None:
    """Atomic write; errors are the caller's to log (a status file must never stop a loop)."""
    status.updated_at = now_iso()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".status-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(status.to_json(), fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: Path) -> Status:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"no status at {path}: nothing was applied with this --cache-dir and --instance yet"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read status file {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UserError(f"{path} is not an osc-gitops status file: {exc}") from exc
    if not isinstance(data, dict) or "instance" not in data:
        raise UserError(f"{path} is not an osc-gitops status file")
    return Status.from_json(data)


def render_text(status: Status) -> str:
    lines = [
        f"instance:        {status.instance}",
        f"result:          {status.result}" + (f" — {status.message}" if status.message else ""),
        f"applied commit:  {status.revision or '(none)'}",
        f"applied at:      {status.revision_applied_at or '(never)'}",
    ]
    if status.attempted and status.attempted != status.revision:
        lines.append(f"latest commit:   {status.attempted} (not applied: {status.result})")
    if status.source:
        lines.append(
            f"source:          {status.source}" + (f" @ {status.ref}" if status.ref else "")
        )
    if status.changes:
        summary = ", ".join(f"{k} {v}" for k, v in sorted(status.changes.items()))
        lines.append(f"last changes:    {summary}")
    lines.append(f"updated at:      {status.updated_at or '(unknown)'}")
    lines.extend(f"  {e}" for e in status.errors[:50])
    return "\n".join(lines) + "\n"
