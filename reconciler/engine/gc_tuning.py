"""Garbage-collector settings for a process that holds a large, long-lived cache.

At 10,000 pods the OVN IDL mirror, the pod cache and a compiled target are millions of Python
objects that live as long as the process. CPython's default thresholds (700, 10, 10) then run a
full collection every time the heap grew by a quarter, and each one walks every tracked object:
in profiles of ``compile`` + ``diff`` at that scale those collections took more than half of
the time, landing on whatever function happened to allocate a dict (``docs/benchmarks.md``).

Like mypy, we raise the young-generation threshold so collections are rare and cheap, and
``settle()`` freezes what survived a big pass (``gc.freeze``: the caches), so later collections
no longer walk it. Reference counting still frees everything that is not in a cycle at once;
cycles are still collected, only less often.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 200_000


def tune() -> None:
    """Call once at process start (the CLI does; the benchmark does for its in-process runs)."""
    gc.set_threshold(YOUNG_THRESHOLD, 30, 30)


def settle() -> None:
    """Collect once, then move every surviving object out of the collector's view: call after a
    pass that built long-lived state (a full compile, a connect with its initial sync)."""
    gc.collect()
    gc.freeze()
