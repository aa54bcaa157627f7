"""Fixtures: a git remote made with plain git and a seeded sandbox (``tests.fixtures.gitops``),
and the loop's JSON log."""

import io
import logging
from collections.abc import Iterator

import pytest

from reconciler.engine.reporting.logs import LOGGER, JsonFormatter
from tests.fixtures.gitops import cluster, remote  # noqa: F401


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The loop's log lines, as ``run`` writes them (JSON)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
