"""Security-manager notifications: one JSON POST per VNF instance deployed or removed (stdlib)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def post_json(url: str, payload: dict[str, Any], timeout: float = 5.0) -> None:
    """POST ``payload`` to ``url``; raise ``RuntimeError`` naming the URL on any failure."""
    data = json.dumps(payload, sort_keys=True).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if response.status >= 300:
                raise RuntimeError(f"security manager {url} answered HTTP {response.status}")
    except (urllib.error.URLError, OSError) as exc:
        raise RuntimeError(f"cannot notify security manager {url}: {exc}") from exc
