"""How to reach the NB and which rows are ours: shared by the IDL adapter and the snapshot
reader (which must not need the IDL to be configured)."""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.core import ownership

__all__ = ["OvnSettings"]


@dataclass(frozen=True)
class OvnSettings:
    """How to reach the NB and which rows are ours."""

    remote: str
    """``tcp:h:p``, ``ssl:h:p``, ``unix:/path`` or a comma-separated list (Raft cluster)."""
    private_key: str | None = None
    certificate: str | None = None
    ca_cert: str | None = None
    timeout: float = 10.0
    """``--ovn-timeout``: seconds for connecting plus the initial sync (or one snapshot read),
    and for the write lock to be granted. It is *not* a deadline for a commit: a transaction
    is waited for as long as the server answers a liveness probe; this is how long the server
    may leave one unanswered before the apply gives up on it, and then how long it tries to
    find out whether the transaction committed (:mod:`~reconciler.adapters.ovn.commit`)."""
    instance: str = ownership.DEFAULT_INSTANCE
    """Value of ``osc.io/owner`` that marks our rows."""
