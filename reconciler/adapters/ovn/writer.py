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
- On an ovn-northd that loses a Port_Group deleted and re-created in one of its iterations
  (25.09.0-25.09.3, 26.03.0-26.03.1), a transaction that deletes a Port_Group increments
  ``NB_Global.nb_cfg`` and one that creates a Port_Group waits for northd first:
  :mod:`~reconciler.adapters.ovn.northd_sync` says why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from reconciler.adapters.ovn import commit, northd_sync
from reconciler.adapters.ovn.commit import Outcome, outcome
from reconciler.adapters.ovn.errors import OvnApplyError, OvnConnectError, OvnLockedError
from reconciler.adapters.ovn.settings import OvnSettings
from reconciler.adapters.ovn.tables import DB_NAME, NbSchema
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

log = logging.getLogger(__name__)


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
        """Send a ``transact`` (the transaction, or a read before it); raises
        :class:`NotSent` when the server did not take it."""
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
        bump = _northd_apart(channel, changes, settings)
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
            if bump is not None:
                built.operations.append(northd_sync.bump(bump))
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


def _northd_apart(
    channel: Channel, changes: Sequence[OvnChange], settings: OvnSettings
) -> str | None:
    """On a northd that loses a Port_Group deleted and re-created in one iteration
    (:mod:`~reconciler.adapters.ovn.northd_sync`): when ``changes`` create a Port_Group, wait
    (up to ``--ovn-timeout``) until northd has handled the NB up to the last ``nb_cfg``
    increment; when they delete one, return the ``NB_Global`` row whose ``nb_cfg`` the
    transaction increments. ``None`` (nothing to increment) everywhere else."""
    deletes, creates = northd_sync.touches(changes)
    if not (deletes or creates):
        return None
    deadline = time.monotonic() + settings.timeout
    state = _read_northd(channel, settings, deadline)
    if state is None or not state.affected:
        return None
    uuid = state.uuid
    if creates and not state.in_step:
        target, version, seen = state.nb_cfg, state.version, state.sb_cfg
        log.info(
            "waiting for ovn-northd %s to handle the NB's earlier changes (NB_Global.sb_cfg "
            "%d < nb_cfg %d) before creating Port_Groups: it loses a Port_Group deleted and "
            "re-created in one of its iterations", version, seen, target,
        )  # fmt: skip
        pause = 0.005
        while seen < target and time.monotonic() + pause < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
            now = _read_northd(channel, settings, deadline)
            if now is None:
                break
            seen = now.sb_cfg
        if seen < target:
            log.warning(
                "ovn-northd %s at %s has not handled the NB's earlier changes within "
                "--ovn-timeout %gs (NB_Global.sb_cfg %d < nb_cfg %d); creating Port_Groups "
                "anyway. This northd loses a Port_Group deleted and re-created in one of its "
                "iterations (fixed in OVN 26.03.2 and 25.09.4): if one of them was deleted "
                "meanwhile, check that it has its Southbound row (docs/operations.md)",
                version, settings.remote, settings.timeout, seen, target,
            )  # fmt: skip
    return uuid if deletes else None


def _read_northd(
    channel: Channel, settings: OvnSettings, deadline: float
) -> northd_sync.NorthdState | None:
    """What the NB says of its northd, read on ``channel`` (under the write lock); ``None``
    when it cannot be read by ``deadline`` (the transaction's own send then meets whatever
    went wrong)."""
    try:
        pending = channel.send([DB_NAME, northd_sync.select()])
    except NotSent as exc:
        raise _not_sent(settings.remote, settings, str(exc)) from None
    reply = None
    while reply is None:
        left = deadline - time.monotonic()
        if left <= 0 or pending.lost():
            return None
        try:
            reply = pending.poll(min(left, 0.5))
        except commit.ServerLost:
            return None
    results = reply.get("result")
    if reply.get("error") is not None or not isinstance(results, list) or not results:
        return None
    first = results[0]
    return northd_sync.parse(first) if isinstance(first, Mapping) else None


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
