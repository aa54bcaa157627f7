"""The reliability suite's figures: each scenario calls :func:`record` after its assertions;
``conftest.pytest_terminal_summary`` prints them as one table."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Figures:
    scenarios: int = 0
    faults: int = 0
    converged: int = 0
    data_lost: int = 0
    foreign_changed: int = 0
    notes: list[str] = field(default_factory=list)


FIGURES: dict[str, Figures] = {}


def record(
    area: str,
    *,
    faults: int,
    converged: bool,
    data_lost: int = 0,
    foreign_changed: int = 0,
    scenarios: int = 1,
) -> None:
    """Add one scenario's outcome to the summary table (call it after the assertions)."""
    fig = FIGURES.setdefault(area, Figures())
    fig.scenarios += scenarios
    fig.faults += faults
    fig.converged += scenarios if converged else 0
    fig.data_lost += data_lost
    fig.foreign_changed += foreign_changed
