"""How to reach the NB and which rows are ours: shared by the IDL adapter and the snapshot
reader (which must not need the IDL to be configured)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from reconciler.adapters.ovn.errors import connect_error
from reconciler.core.model import ownership

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "OvnSettings"]

DEFAULT_MAX_REPLY_BYTES = 256 * 1024 * 1024
"""Largest OVSDB message read (``--ovn-max-reply-mib``). A snapshot of an NB with 10,000 pod
ports, 4,000 Port_Groups and 16,000 ACLs is one 16.8 MB reply (measured, ``bench/rpc_select.py``'s
NB), and decoding costs about 8 times its size in memory: 256 MiB admits NBs some 15 times that
large (interconnect NBs hold one node's share) while a server that never stops sending
(gigabytes of RSS within seconds, unbounded) is cut off with an error naming it."""


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
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    """Largest message read from the server (:data:`DEFAULT_MAX_REPLY_BYTES`)."""

    def tls_files(self) -> tuple[str, str, str]:
        """``(private_key, certificate, ca_cert)`` for an ``ssl:`` remote; all three must be
        given and exist (one rule for the IDL's stream and the snapshot reader's context)."""
        key, cert, ca = self.private_key, self.certificate, self.ca_cert
        if not (key and cert and ca):
            raise connect_error(
                self.remote, ["an ssl: remote needs private_key, certificate and ca_cert"]
            )
        for path in (key, cert, ca):
            if not os.path.isfile(path):
                raise connect_error(self.remote, [f"file not found: {path}"])
        return key, cert, ca
