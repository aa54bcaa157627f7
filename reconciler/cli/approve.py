"""``apply``'s review step: show the plan (protection changes first) and ask before writing.

Terraform's habit: ``apply`` on a terminal prints the plan and asks; only ``yes`` goes ahead.
``--auto-approve`` skips the question, and without a terminal on stdin (CI, a CronJob, a pipe)
nothing is ever asked: the apply goes ahead as before, so automation is unchanged.

:class:`ReviewListener` is a pipeline listener (``reconciler.engine.pipeline.PassListener``):
the pipeline tells it the plan after planning and before any write, so it can annotate the plan
(``reconciler.cli.review``), ask, and stop the pass with :class:`ApplyCancelled` (nothing is
written). It passes every event on to the listener it wraps.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from reconciler.errors import Aborted

PROMPT = "Do you want to apply these changes? Only 'yes' will be accepted: "


class ApplyCancelled(Aborted):
    """The user did not answer ``yes``: nothing was written."""

    cause = "aborted"


def add_approve_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--auto-approve",
        action="store_true",
        help="do not ask before applying (apply asks only when stdin is a terminal)",
    )


def asks(args: argparse.Namespace, stdin: TextIO | None = None) -> bool:
    """Whether this apply asks for confirmation: stdin is a terminal and no --auto-approve."""
    stream = stdin if stdin is not None else sys.stdin
    try:
        interactive = stream.isatty()
    except (AttributeError, ValueError):
        interactive = False
    return interactive and not getattr(args, "auto_approve", False)


@dataclass
class ReviewListener:
    """Annotates the plan before it is applied; asks when :func:`asks` says so."""

    inner: Any
    annotate: Callable[[Any, Any], Any]
    ask: bool = field(kw_only=True)
    show: Callable[[Any], None] = field(kw_only=True)
    stdin: TextIO | None = field(default=None, kw_only=True)
    check: Callable[[Any, Any], None] | None = field(default=None, kw_only=True)
    """A saved plan's check: the live plan must be the saved one."""
    first: Any = field(default=None, init=False)
    plan: Any = field(default=None, init=False)
    """The annotated plan that was applied (``None`` until one was)."""
    shown: bool = field(default=False, init=False)

    def observed(self, observed: Any) -> None:
        self.first = observed
        self.inner.observed(observed)

    def applying(self, plan: Any) -> None:
        self.plan = self.annotate(plan, self.first)
        if self.check is not None:
            self.check(self.plan, self.first)
        if self.ask:
            self.show(self.plan)
            self.shown = True
            print(PROMPT, end="", file=sys.stderr, flush=True)
            stream = self.stdin if self.stdin is not None else sys.stdin
            answer = stream.readline().strip()
            if answer != "yes":
                raise ApplyCancelled("apply cancelled: nothing was written")
        self.inner.applying(plan)

    def applied(self, report: Any, observed: Any) -> None:
        self.inner.applied(report, observed)

    def settled(self, observed: Any) -> None:
        self.inner.settled(observed)
