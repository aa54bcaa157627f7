"""The ONE way a plan's changes reach the NB: take the write lock, send ONE transaction, wait for
its reply while the server answers, find out after a lost reply, send it once more if it did
not commit. Both writing adapters run :func:`write`; they differ only in the :class:`Channel`
they hand it:

- :class:`~reconciler.adapters.ovn.oneshot.OvnOneShot` (``apply``): a JSON-RPC session of its
  own (:mod:`~reconciler.adapters.ovn.rpc`), rows read with one ``select`` under the lock;
- :class:`~reconciler.adapters.ovn.northbound.OvnNorthbound` (the loop): the IDL's session
  (python-ovs, through :mod:`~reconciler.adapters.ovn.python_ovs`), rows from its cache.

Why the steps are what they are:

- Two reconcilers of one instance (a CronJob overlapping a loop, two replicas without leader
  election) must not interleave: both would plan the same creates and the second would insert
  duplicate ACLs (ACL has no unique column). ovsdb-server's named locks solve it in the
  database itself: the lock ``osc_gitops_<instance>`` (:func:`write_lock_name`) is taken
  before the transaction is built, the rows it refers to are read under it (its grant arrives
  after every update committed before it), and the transaction's first operation asserts it
  (the server refuses the commit if it was lost meanwhile). Locks are per server: with a Raft
  cluster they work because both channels talk only to the leader.
- The reply is waited for while the server answers liveness probes, and a lost reply is never
  guessed at: :mod:`~reconciler.adapters.ovn.commit` says why, and words every outcome.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from reconciler.adapters.ovn import commit
from reconciler.adapters.ovn.commit import Outcome, outcome
from reconciler.adapters.ovn.errors import OvnApplyError, OvnConnectError, OvnLockedError
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.tables import NbSchema
from reconciler.adapters.ovn.transaction import OvnChange, TransactionBuilder, WriteIndex
from reconciler.core.model.observed import OvnRow

__all__ = [
    "Channel",
    "LockRefused",
    "NotSent",
    "Pending",
    "write",
    "write_lock_name",
]


def write_lock_name(instance: str) -> str:
    """The OVSDB named lock two reconcilers of one instance serialise on.

    OVSDB lock names are ids (``[_a-zA-Z][_a-zA-Z0-9]*``; the server answers anything else
    with an error the IDL ignores), so ``-`` becomes ``_``: instance names are DNS-1123 labels
    without ``_``, so the mapping stays injective.
    """
    return "osc_gitops_" + instance.replace("-", "_")


class LockRefused(Exception):
    """The server answered the lock request with an error (the message is the error)."""


class NotSent(Exception):
    """The server did not take the whole request (the message says why): it was never
    executed, so nothing was committed."""


class Pending(Protocol):
    """A transaction on its way: what :func:`commit.await_reply` polls."""

    def poll(self, seconds: float) -> Mapping[str, Any] | None:
        """The reply if it arrives within ``seconds``, else ``None``; a dropped connection
        raises :class:`commit.ServerLost` here or makes :meth:`lost` true."""
        ...

    def lost(self) -> bool:
        """The connection the request went out on has dropped (no reply can come)."""
        ...


class Channel(Protocol):
    """One writer's way to the NB (one :func:`write`): a session that can hold the write lock
    and carry the transaction, and get a new one after a lost reply."""

    def probe(self) -> commit.Probe:
        """A liveness probe of the server the transaction went to (probed while its reply is
        slow: a busy server answers, a stopped one does not)."""
        ...

    @property
    def schema(self) -> NbSchema:
        """The server's NB schema (known once :meth:`lock` returned)."""
        ...

    @property
    def types(self) -> Mapping[str, Mapping[str, Any]]:
        """Its column types (:func:`~reconciler.adapters.ovn.python_ovs.column_types`)."""
        ...

    def lock(self, name: str, deadline: float) -> bool:
        """Connect if needed and ask for the lock ``name``: True when granted, False when
        another client holds it. Raises ``TimeoutError`` when the server has not answered by
        ``deadline``, :class:`LockRefused`, or the adapter's ``OvnConnectError``."""
        ...

    def rows(self) -> AbstractContextManager[WriteIndex]:
        """The live rows the transaction refers to, read under the lock; valid inside the
        ``with`` block (where the transaction is built)."""
        ...

    def send(self, params: list[Any]) -> Pending:
        """Send the ``transact``; raises :class:`NotSent` when the server did not take it."""
        ...

    def abandon(self, silent: bool) -> None:
        """The reply is lost: give up the session the transaction went on (``silent``: the
        server stopped answering; dropping the session makes it release our lock once it has
        executed whatever it received)."""
        ...

    def reread(self, name: str, deadline: float) -> Sequence[OvnRow] | None:
        """Our rows, read on a new session holding the lock ``name`` (granted only once the
        server has dropped the old session, after executing everything it received on it), or
        ``None`` when that has not happened by ``deadline``. May raise ``OSError`` or an
        ``OvnError`` (then it is tried again until the deadline)."""
        ...

    def release(self) -> None:
        """Give up the lock and the session (also after a failure, at any step)."""
        ...


def write(
    channel: Channel,
    changes: Sequence[OvnChange],
    settings: OvnSettings,
    revision: str | None = None,
) -> None:
    """Apply ``changes`` in ONE transaction on ``channel``; on any failure nothing is
    committed, and when the reply is lost the error says what the NB shows (committed, not
    committed, or unknown because the server did not answer)."""
    name = write_lock_name(settings.instance)
    remote = settings.remote
    try:
        _take_lock(channel, name, settings)
        for attempt in (1, 2):
            with channel.rows() as index:
                built = TransactionBuilder(
                    types=channel.types,
                    schema=channel.schema,
                    index=index,
                    instance=settings.instance,
                    remote=remote,
                    revision=revision,
                    lock=name,
                ).build(changes)
                del index
            try:
                pending = channel.send(built.params())
            except NotSent as exc:
                raise _not_sent(remote, settings, str(exc)) from None
            built.sent()
            try:
                reply = commit.await_reply(pending.poll, pending.lost, channel.probe, settings)
            except (commit.ServerLost, commit.ServerSilent) as exc:
                silent = isinstance(exc, commit.ServerSilent)
                why = commit.silence(settings) if silent else commit.LOST
                verdict = _find_out(channel, changes, name, silent, settings)
                if verdict is Outcome.COMMITTED:
                    return
                if verdict is Outcome.NOT_COMMITTED and attempt == 1:
                    continue
                raise commit.verdict_error(remote, verdict, why, settings) from None
            commit.check_reply(reply, built, remote, name)
            return
    finally:
        channel.release()


def _take_lock(channel: Channel, name: str, settings: OvnSettings) -> None:
    remote = settings.remote
    try:
        held = channel.lock(name, time.monotonic() + settings.timeout)
    except TimeoutError:
        raise OvnLockedError(
            f"cannot apply to OVN NB at {remote}: the server did not grant the "
            f"write lock {name!r} within {settings.timeout}s; nothing was written"
        ) from None
    except LockRefused as exc:
        raise OvnLockedError(
            f"cannot apply to OVN NB at {remote}: the server refused the write "
            f"lock {name!r} ({exc}); nothing was written"
        ) from None
    if not held:
        raise OvnLockedError(
            f"cannot apply to OVN NB at {remote}: another osc-gitops process holds "
            f"the write lock {name!r} (same --instance {settings.instance!r}); "
            "refusing to apply so the two do not interleave. Nothing was written; "
            "retry when it has finished, or give each reconciler its own --instance"
        )


def _not_sent(remote: str, settings: OvnSettings, why: str) -> OvnApplyError:
    return OvnApplyError(
        f"OVN NB transaction at {remote}: the server did not take the whole "
        f"transaction within --ovn-timeout {settings.timeout:g}s "
        f"({why}); not committed (a request the server did not fully "
        "receive is never executed); the next run applies it"
    )


def _find_out(
    channel: Channel,
    changes: Sequence[OvnChange],
    name: str,
    silent: bool,
    settings: OvnSettings,
) -> Outcome | None:
    """Whether the transaction whose reply was lost committed, judged by our rows once a new
    session holds the lock (from then on the old transaction can no longer commit); ``None``
    when that does not happen within ``--ovn-timeout`` (then nobody can tell)."""
    channel.abandon(silent)
    deadline = time.monotonic() + settings.timeout
    while time.monotonic() < deadline:
        rows: Iterable[OvnRow] | None
        try:
            rows = channel.reread(name, deadline)
        except (OSError, OvnConnectError, OvnLockedError, LockRefused):
            rows = None
        if rows is not None:
            return outcome(changes, rows)
        time.sleep(0.1)
    return None
