"""The process's local time zone, switched for one test (times we write must not depend on it)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def local_time_zone(name: str) -> Iterator[None]:
    """``TZ=name`` for the block, then the zone the process had (``time.tzset`` both ways)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()
