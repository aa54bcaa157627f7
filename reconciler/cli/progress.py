"""What ``apply --wait`` prints while it waits (issue 33): one progress block redrawn in place on
a terminal; without one (CI, a CronJob's log, a pipe), a line per change of state only.

Each pass hands over the lines of what is not ready (``reconciler.engine.wait.unready``): a line's
text before its first ``": "`` names what it is about (a VM, a held binding, a rollout), the rest
says its state. Numbers of seconds in a state ("booting for 12 s") change every pass and are no
change of state.
"""

from __future__ import annotations

import re
import shutil
from typing import TextIO

__all__ = ["WaitProgress"]

MAX_LINES = 12
"""Lines of the block below its head on a terminal; the rest is counted."""
_SECONDS = re.compile(r"\b\d+(?:\.\d+)?\s?s\b")


def _key(line: str) -> str:
    return line.partition(": ")[0]


def _state(line: str) -> str:
    return _SECONDS.sub("N s", line)


class WaitProgress:
    """Prints the waiting of ``apply --wait`` on ``stream`` (``tty``: redraw in place)."""

    def __init__(self, stream: TextIO, tty: bool, width: int | None = None) -> None:
        self.stream = stream
        self.tty = tty
        self.width = width
        self._drawn = 0
        self._states: dict[str, str] = {}

    def update(self, elapsed: float, lines: list[str]) -> None:
        if self.tty:
            self._redraw(elapsed, lines)
        else:
            self._log(elapsed, lines)

    def finish(self) -> None:
        """Remove the block (a terminal): what follows replaces it."""
        if self.tty and self._drawn:
            self.stream.write(f"\033[{self._drawn}F\033[J")
            self.stream.flush()
        self._drawn = 0

    def _redraw(self, elapsed: float, lines: list[str]) -> None:
        width = self.width or shutil.get_terminal_size((120, 24)).columns
        head = f"waiting {elapsed:.0f} s: {len(lines)} not ready" if lines else "ready"
        block = [head, *(f"  {line}" for line in lines[:MAX_LINES])]
        if len(lines) > MAX_LINES:
            block.append(f"  … {len(lines) - MAX_LINES} more")
        # one terminal row per line (a wrapped line would break the redraw)
        block = [line if len(line) < width else line[: max(1, width - 2)] + "…" for line in block]
        up = f"\033[{self._drawn}F\033[J" if self._drawn else ""
        self.stream.write(up + "".join(f"{line}\n" for line in block))
        self.stream.flush()
        self._drawn = len(block)

    def _log(self, elapsed: float, lines: list[str]) -> None:
        now = {_key(line): line for line in lines}
        out: list[str] = []
        for key, line in now.items():
            before = self._states.get(key)
            if before is None or _state(before) != _state(line):
                out.append(f"waiting {elapsed:.1f}s: {line}")
        for key in (k for k in self._states if k not in now):
            out.append(f"waiting {elapsed:.1f}s: done: {key.strip()}")
        self._states = now
        if out:
            self.stream.write("".join(f"{line}\n" for line in out))
            self.stream.flush()
