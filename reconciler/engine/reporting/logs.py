"""Logs of the long-running reconciler: JSON lines on stderr, each tagged with its reconcile.

One JSON object per line is what log collectors (Loki, Elasticsearch, Cloud Logging) parse
without configuration; ``reconcile_id`` ties together every line one reconcile wrote, across
modules and threads that run on its behalf.

Log lines carry text from outside (file and object names, API and git servers' messages): no
control character reaches the log raw. JSON escapes C0 itself; DEL, C1 controls and Unicode's
separators and bidirectional controls are written as ``\\uXXXX`` too. The text format escapes
them as :func:`reconciler.errors.printable` does, and keeps each value on its line.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
from typing import Any

from reconciler.errors import one_line

LOGGER = "osc_gitops.loop"
"""The logger every engine module writes to: the ``logger`` field of the loop's log lines."""

reconcile_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "reconcile_id", default=None
)
"""The id of the reconcile running in this context (set by the loop for each pass)."""

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg``, ``reconcile_id`` and
    every ``extra=`` field; exceptions as a single ``error`` string (no multi-line traces)."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = reconcile_id.get()
        if rid:
            data["reconcile_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            data["error"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        line = json.dumps(data, default=str, ensure_ascii=False)
        return _RAW_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


_RAW_CONTROL = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
"""What ``json.dumps(..., ensure_ascii=False)`` leaves raw that a terminal or viewer acts on."""


class TextFormatter(logging.Formatter):
    """For humans (``--log-format text``): time, level and message, then every ``extra=``
    field as ``key=value``, a list (a refused revision's ``file:line`` errors) one item per
    indented line, so the reason is never only in the JSON form."""

    def format(self, record: logging.LogRecord) -> str:
        line = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
            + f" {record.levelname} {one_line(record.getMessage())}"
        )
        items: list[str] = []
        for key, value in vars(record).items():
            if key in _STANDARD or key.startswith("_"):
                continue
            if isinstance(value, list | tuple):
                items.extend(f"    {one_line(str(item))}" for item in value)
                line += f" {key}={len(value)}"
            else:
                line += f" {key}={one_line(str(value))}"
        if record.exc_info and record.exc_info[1] is not None:
            error = one_line(f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}")
            line += f" error={error}"
        return "\n".join([line, *items])


def setup_logging(fmt: str = "json", level: str = "info") -> None:
    """Route every logger to stderr, JSON lines (or plain text for humans)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes", "ovsdbapp", "git"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
