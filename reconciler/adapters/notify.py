"""Security-manager notifications on the wire: one JSON POST each (stdlib ``urllib``).

What is sent and when is the engine's (``reconciler.engine.notifications``: the outbox that
debounces, retries and reports); the format is ``schemas/security-manager-notification.json``.
This module only carries one message and says how it went: any 2xx is delivered; anything
else raises :class:`SecurityManagerError` naming the manager, with ``retryable`` false when
the manager refused the message itself (a 4xx other than 408 and 429), so the outbox drops it
instead of sending it again for ever.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from typing import Any

from reconciler.errors import EndpointError

__all__ = ["SecurityManagerError", "post_json"]

RETRYABLE_CLIENT_ERRORS = (408, 429)
"""4xx answers that say "later" rather than "never" (Request Timeout, Too Many Requests)."""


class SecurityManagerError(EndpointError):
    """A notification was not delivered; the message names the manager's URL."""

    cause = "security-manager"

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


def _redacted(url: str) -> str:
    """``url`` without a password (``https://user:secret@host`` -> ``https://user@host``)."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.partition("@")
    if at and ":" in userinfo and "/" not in userinfo:
        return f"{scheme}{sep}{userinfo.split(':', 1)[0]}@{host}"
    return url


def post_json(url: str, payload: dict[str, Any], timeout: float = 5.0) -> None:
    """POST ``payload`` to ``url`` within ``timeout`` seconds; raise
    :class:`SecurityManagerError` unless the answer is 2xx."""
    data = json.dumps(payload, sort_keys=True).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    where = _redacted(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(65536)
            if not 200 <= response.status < 300:
                raise SecurityManagerError(
                    f"security manager {where} answered HTTP {response.status}"
                )
    except urllib.error.HTTPError as exc:
        retryable = exc.code >= 500 or exc.code in RETRYABLE_CLIENT_ERRORS
        detail = ""
        with contextlib.suppress(OSError):
            detail = exc.read(300).decode(errors="replace").strip()
        raise SecurityManagerError(
            f"security manager {where} answered HTTP {exc.code}"
            + (f": {detail}" if detail else ""),
            retryable=retryable or exc.code < 400,
        ) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise SecurityManagerError(f"cannot notify security manager {where}: {reason}") from exc
