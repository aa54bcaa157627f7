"""Errors of the Kubernetes API emulator, answered as ``kind: Status`` documents."""

from __future__ import annotations

from typing import Any

from osc_gitops_sandbox.kubeapi.resources import ResourceType, group_resource

__all__ = ["ApiError", "not_found"]


class ApiError(Exception):
    """An error answered as a ``kind: Status`` document."""

    REASONS = {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        410: "Gone",
        415: "UnsupportedMediaType",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
    }

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or self.REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def not_found(rt: ResourceType, name: str) -> ApiError:
    """The 404 of a missing object, worded as the real server words it."""
    return ApiError(
        404,
        f'{group_resource(rt)} "{name}" not found',
        details={"name": name, "group": rt.group, "kind": rt.plural},
    )
