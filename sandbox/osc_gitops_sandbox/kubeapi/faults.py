"""Failure injection for the Kubernetes API emulator (reliability tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Faults"]


class Faults:
    """Failure injection for reliability tests; thread-safe, shared by all requests.

    - :meth:`fail` — the next ``count`` matching requests get ``status`` (500, 503, 429 with
      ``Retry-After``, 403 with a real-looking Forbidden message, ...) instead of being served;
    - :meth:`delay` — matching requests sleep ``seconds`` before being served (``count`` times,
      or forever when ``count`` is ``None``);
    - :meth:`drop_watches` — every open watch stream is closed abruptly (no terminating chunk),
      as when a load balancer or the apiserver dies mid-stream;
    - :meth:`clear` — forget all injected faults.

    A request matches when ``method`` (if given) equals its HTTP method and ``path_contains``
    (if given) is a substring of its path (query string included).
    """

    def __init__(self, on_drop: Callable[[], None] | None = None) -> None:
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self._failures: list[dict[str, Any]] = []
        self._delays: list[dict[str, Any]] = []
        self._drop_generation = 0

    def fail(
        self,
        count: int = 1,
        status: int = 500,
        *,
        retry_after: int | None = None,
        method: str | None = None,
        path_contains: str | None = None,
        message: str | None = None,
    ) -> None:
        with self._lock:
            self._failures.append(
                {
                    "count": count,
                    "status": status,
                    "retry_after": retry_after,
                    "method": method,
                    "path": path_contains,
                    "message": message,
                }
            )

    def delay(
        self,
        seconds: float,
        *,
        count: int | None = None,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        with self._lock:
            self._delays.append(
                {"seconds": seconds, "count": count, "method": method, "path": path_contains}
            )

    def drop_watches(self) -> None:
        with self._lock:
            self._drop_generation += 1
        if self._on_drop is not None:
            self._on_drop()  # wake idle watches so they drop now, not at their next poll

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
            self._delays.clear()

    @property
    def drop_generation(self) -> int:
        return self._drop_generation

    @staticmethod
    def _matches(rule: dict[str, Any], method: str, path: str) -> bool:
        if rule["method"] and rule["method"].upper() != method:
            return False
        return not (rule["path"] and rule["path"] not in path)

    def take_failure(self, method: str, path: str) -> dict[str, Any] | None:
        with self._lock:
            for rule in self._failures:
                if rule["count"] > 0 and self._matches(rule, method, path):
                    rule["count"] -= 1
                    return dict(rule)
            self._failures = [r for r in self._failures if r["count"] > 0]
        return None

    def take_delay(self, method: str, path: str) -> float:
        with self._lock:
            for rule in self._delays:
                if (rule["count"] is None or rule["count"] > 0) and self._matches(
                    rule, method, path
                ):
                    if rule["count"] is not None:
                        rule["count"] -= 1
                    return float(rule["seconds"])
        return 0.0
