"""Errors of the OVN Northbound adapter, and the wording both NB readers share.

Every class is an :class:`reconciler.errors.EndpointError` (metric cause ``ovn``) whose message
names the NB endpoint, so the CLI prints it as one line without a traceback. A held or lost
write lock is also a :class:`reconciler.errors.ConflictError`: retrying later is the answer.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable

from reconciler.errors import ConflictError, EndpointError

__all__ = [
    "OvnApplyError",
    "OvnCapabilityError",
    "OvnConnectError",
    "OvnError",
    "OvnLockedError",
    "OvnSnapshotError",
    "OvsDbError",
    "connect_error",
    "tls_failure",
]


class OvnError(EndpointError):
    """Base class; the message always names the NB endpoint."""

    cause = "ovn"


class OvnConnectError(OvnError):
    """The NB could not be reached or did not finish its initial sync within the timeout."""

    electing: bool = False
    """Some member answered but was not the Raft leader (or not in the cluster): a leader is
    probably being elected, and trying again soon may succeed."""


class OvnCapabilityError(OvnError):
    """The server's NB schema lacks a table/column the requested rows need."""


class OvnApplyError(OvnError):
    """The transaction failed; nothing was committed."""


class OvnLockedError(OvnApplyError, ConflictError):
    """Another process holds this instance's write lock on the NB; nothing was written."""


class OvnSnapshotError(OvnError):
    """The server answered the snapshot transaction with an error (message names the NB)."""


class OvsDbError(OvnError):
    """A node's Open_vSwitch database (the node binder's) could not be reached, read or
    written; the message names its socket."""

    cause = "ovs"


def connect_error(
    remote: str, reasons: Iterable[str], *, electing: bool = False
) -> OvnConnectError:
    """No member of ``remote`` could be used: one message with every member's reason."""
    error = OvnConnectError(f"cannot connect to OVN NB at {remote}: {'; '.join(reasons)}")
    error.electing = electing
    return error


def tls_failure(member: str, exc: ssl.SSLError, what: str = "TLS handshake failed") -> str:
    """The user-facing reason a TLS connection to ``member`` failed (both NB readers)."""
    reason = getattr(exc, "verify_message", None) or exc.reason or str(exc)
    return f"{member}: {what} ({reason}; check --ovn-ca-cert)"
