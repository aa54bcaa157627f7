"""What the hostile-input suite shares: the real ``osc-gitops`` as a process (a hang must end
in a failed test, not a stuck suite) and small manifest sets."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import POLICIES

EXE = Path(sys.executable).with_name("osc-gitops")

CONTROL = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))]
"""Characters no line we print may carry raw (C0 but tab and newline, DEL, C1)."""


@dataclass
class Run:
    code: int
    out: str
    err: str
    seconds: float


def osc(*args: object, timeout: float = 60, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> Run:  # fmt: skip
    """``osc-gitops ARGS`` in a process of its own, stdout and stderr through pipes (so
    ``/proc/self/fd/1`` is a pipe, as in CI), killed after ``timeout`` seconds."""
    started = time.monotonic()
    done = subprocess.run(
        [str(EXE), *map(str, args)],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def policies(folder: Path) -> Path:
    """A copy of the example policies in ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    for file in POLICIES.rglob("*.yaml"):
        target = folder / file.relative_to(POLICIES)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(file.read_text())
    return folder


def raw_controls(text: str) -> list[str]:
    """The control characters ``text`` carries raw (see :data:`CONTROL`)."""
    return sorted({c for c in text if c in CONTROL})
