"""Security-manager notifications on the wire: one JSON POST each (stdlib ``http.client``).

What is sent and when is the engine's (``reconciler.engine.notifications``: the outbox that
debounces, retries and reports); the format is ``schemas/security-manager-notification.json``.
This module only carries one message and says how it went: any 2xx is delivered; anything
else raises :class:`SecurityManagerError` naming the manager, with ``retryable`` false when
the manager refused the message itself (a 4xx other than 408 and 429), so the outbox drops it
instead of sending it again for ever.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
import urllib.parse
from typing import Any

from reconciler.errors import EndpointError, one_line

__all__ = ["JsonPoster", "SecurityManagerError", "post_json"]

RETRYABLE_CLIENT_ERRORS = (408, 429)
"""4xx answers that say "later" rather than "never" (Request Timeout, Too Many Requests)."""


class SecurityManagerError(EndpointError):
    """A notification was not delivered; the message names the manager's URL."""

    cause = "security-manager"

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        # it may quote the manager's answer, which reaches status, apply's output and the logs:
        # one printable line (control characters and line breaks escaped)
        super().__init__(one_line(message))
        self.retryable = retryable


def _redacted(url: str) -> str:
    """``url`` without a password (``https://user:secret@host`` -> ``https://user@host``)."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.partition("@")
    if at and ":" in userinfo and "/" not in userinfo:
        return f"{scheme}{sep}{userinfo.split(':', 1)[0]}@{host}"
    return url


class JsonPoster:
    """POSTs JSON, keeping one HTTP/1.1 connection per manager open between messages (a pass
    can hand a manager thousands of member lists; a new TCP, and TLS, connection each would be
    most of the cost). The outbox calls one manager from one thread; the lock only guards the
    table of connections. Credentials in the URL (``https://user:secret@host/...``) are sent as
    HTTP basic authentication and never printed."""

    def __init__(self, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._connections: dict[tuple[str, str], http.client.HTTPConnection] = {}
        self._lock = threading.Lock()

    def _connection(self, scheme: str, netloc: str, host: str, port: int | None
                    ) -> tuple[http.client.HTTPConnection, bool]:  # fmt: skip
        with self._lock:
            conn = self._connections.get((scheme, netloc))
            if conn is not None:
                return conn, False
            if scheme == "https":
                conn = http.client.HTTPSConnection(host, port, timeout=self.timeout)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
            self._connections[(scheme, netloc)] = conn
            return conn, True

    def _drop(self, scheme: str, netloc: str) -> None:
        with self._lock:
            conn = self._connections.pop((scheme, netloc), None)
        if conn is not None:
            conn.close()

    def __call__(self, url: str, payload: dict[str, Any]) -> None:
        """POST ``payload`` to ``url`` within ``timeout`` seconds; raise
        :class:`SecurityManagerError` unless the answer is 2xx."""
        where = _redacted(url)
        parts = urllib.parse.urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise SecurityManagerError(f"security manager {where}: not an http(s) URL",
                                       retryable=False)  # fmt: skip
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            secret = urllib.parse.unquote(parts.password or "")
            headers["Authorization"] = (
                "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
            )
        data = json.dumps(payload, sort_keys=True).encode()
        for _ in range(2):
            conn, fresh = self._connection(parts.scheme, parts.netloc, parts.hostname, port)
            try:
                conn.request("POST", path, body=data, headers=headers)
                response = conn.getresponse()
                body = response.read(65536)
                if response.will_close or not response.isclosed():
                    self._drop(parts.scheme, parts.netloc)
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self._drop(parts.scheme, parts.netloc)
                if fresh:  # a kept connection the manager closed meanwhile: once more
                    raise SecurityManagerError(
                        f"cannot notify security manager {where}: {exc}"
                    ) from exc
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self._drop(parts.scheme, parts.netloc)
                raise SecurityManagerError(
                    f"cannot notify security manager {where}: {exc}"
                ) from exc
        status = response.status
        if 200 <= status < 300:
            return
        detail = body[:300].decode(errors="replace").strip()
        raise SecurityManagerError(
            f"security manager {where} answered HTTP {status}" + (f": {detail}" if detail else ""),
            retryable=status >= 500 or status in RETRYABLE_CLIENT_ERRORS or status < 400,
        )

    def close(self) -> None:
        with self._lock:
            connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            conn.close()


def post_json(url: str, payload: dict[str, Any], timeout: float = 5.0) -> None:
    """One POST on a connection of its own (:class:`JsonPoster` keeps connections)."""
    poster = JsonPoster(timeout)
    try:
        poster(url, payload)
    finally:
        poster.close()
