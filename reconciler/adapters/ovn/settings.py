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
    """Seconds for connect + initial sync, and for each transaction."""
    instance: str = ownership.DEFAULT_INSTANCE
    """Value of ``osc.io/owner`` that marks our rows."""
