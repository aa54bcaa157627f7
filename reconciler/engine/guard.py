"""The write guard: no write starts unless this replica may still write.

A long-running replica can lose the right to write at any moment: SIGTERM arrives, or the Lease
expires (a network partition, a paused process) and another replica takes over. The guard is
asked twice: once before an apply starts (:meth:`WriteGuard.before_apply`, which may renew the
Lease on the server), and before every single write (:meth:`WriteGuard.before_write`, cheap). A
refusal raises :class:`reconciler.errors.Aborted`, so the OVN transaction (one atomic commit) is
either not started or runs to completion: nothing is ever half-written by a replica that lost
its turn.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from reconciler.core.model.plan import Change
from reconciler.engine.providers import KubeWriter, LeaseProvider, OvnWriter
from reconciler.errors import Aborted


class WriteGuard(Protocol):
    def before_apply(self) -> None:
        """Raise :class:`Aborted` unless an apply may start now."""
        ...

    def before_write(self, what: str) -> None:
        """Raise :class:`Aborted` unless the write ``what`` (a method name) may start now."""
        ...


class LoopGuard:
    """The loop's rules: not while shutting down, and only while the Lease (if any) is held."""

    def __init__(self, stopping: threading.Event, lease: LeaseProvider | None) -> None:
        self.stopping = stopping
        self.lease = lease

    def before_apply(self) -> None:
        if self.stopping.is_set():
            raise Aborted("shutting down: apply not started")
        if self.lease is not None and not self.lease.confirm():
            raise Aborted(f"{self.lease.where} is no longer held: apply not started")

    def before_write(self, what: str) -> None:
        if self.stopping.is_set():
            raise Aborted(f"shutting down: {what} not started")
        if self.lease is not None and not self.lease.held():
            raise Aborted(f"lost {self.lease.where}: {what} not started")


class GuardedKube:
    """A :class:`KubeWriter` that asks the guard before every write."""

    def __init__(self, inner: KubeWriter, guard: WriteGuard) -> None:
        self.inner = inner
        self.guard = guard

    def create(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object:
        self.guard.before_write("create")
        return self.inner.create(kind, namespace, name, body)

    def replace_managed(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object:
        self.guard.before_write("replace_managed")
        return self.inner.replace_managed(kind, namespace, name, body)

    def delete(self, kind: str, namespace: str, name: str) -> object:
        self.guard.before_write("delete")
        return self.inner.delete(kind, namespace, name)


class GuardedOvn:
    """An :class:`OvnWriter` that asks the guard before its transaction."""

    def __init__(self, inner: OvnWriter, guard: WriteGuard) -> None:
        self.inner = inner
        self.guard = guard

    def apply(self, changes: Sequence[Change], revision: str | None = None) -> None:
        self.guard.before_write("apply")
        self.inner.apply(changes, revision=revision)
