"""Errors of the Kubernetes adapter: one class per answer the code branches on.

Callers branch on the class (``except KubeNotFound``), never on an HTTP status number; the
status is kept on the exception for messages and tests."""

from __future__ import annotations

from reconciler.errors import ConflictError, EndpointError


class KubeError(EndpointError):
    """A Kubernetes API call failed; the message names the API server and the reason.

    Callers branch on the subclass (:class:`KubeNotFound`, :class:`KubeConflict`,
    :class:`KubeGone`, ...), never on ``status``, which is kept for the message and tests."""

    cause = "kubernetes"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KubeConnectError(KubeError):
    """The API server could not be reached or the client could not be configured."""


class KubeUnauthorized(KubeError):
    """401: the credentials were rejected."""


class KubeForbidden(KubeError):
    """403: the service account may not do this (RBAC)."""


class KubeNotFound(KubeError):
    """404: the object, or the whole API (KubeVirt/Multus not installed), does not exist."""


class KubeConflict(KubeError, ConflictError):
    """409: the object exists already, or changed since we read it."""


class KubeGone(KubeError):
    """410: a list continue token or watch resourceVersion expired; list again."""


_BY_STATUS: dict[int, type[KubeError]] = {
    401: KubeUnauthorized,
    403: KubeForbidden,
    404: KubeNotFound,
    409: KubeConflict,
    410: KubeGone,
}


def kube_error(message: str, status: int | None) -> KubeError:
    """The :class:`KubeError` subclass for an HTTP status (plain ``KubeError`` for others)."""
    return _BY_STATUS.get(status or 0, KubeError)(message, status=status)
