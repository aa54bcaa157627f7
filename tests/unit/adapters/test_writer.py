"""The one NB write algorithm (``reconciler.adapters.ovn.writer.write``) against an NB in
memory: a channel whose transactions commit, lose their reply, stall, go silent or die, in
resolvelib's style (the fake is a few lines inside the test, not a mock). The real channels
(the IDL's session, a raw session) are tested against real servers in tests/functional/ovn and
tests/reliability; here every path of the algorithm runs in milliseconds, including the ones a
real server makes hard to hit on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from reconciler.adapters.ovn import OvnApplyError, OvnLockedError, OvnSettings
from reconciler.adapters.ovn.commit import ServerLost
from reconciler.adapters.ovn.python_ovs import column_types
from reconciler.adapters.ovn.rows import OwnedRow
from reconciler.adapters.ovn.tables import NbSchema
from reconciler.adapters.ovn.writer import LockRefused, NotSent, write, write_lock_name
from reconciler.core.model.observed import OvnRow
from tests.support.ovn import PORT_GROUP_SCHEMA, Change, ext

SETTINGS = OvnSettings(remote="unix:/in-memory.sock", timeout=0.3)
PG = {"name": "osc_pg", "ports": [], "external_ids": ext("osc_pg")}
CREATE = [Change("create", "Port_Group", "osc_pg", None, PG)]
OK = {"result": [{}, {"uuid": ["uuid", "0"]}], "error": None}  # the assert, the insert


class NoRows:
    """The live rows: none yet (the transaction creates the only one)."""

    def named(self, table: str, name: str) -> str | None:
        return None

    def owned(self, table: str, key: str) -> OwnedRow | None:
        return None

    def parent_of(self, table: str, child: str) -> str | None:
        return None

    def singleton(self, table: str) -> str | None:
        return None


@dataclass
class Probe:
    alive: bool

    def heard(self, wait: float) -> bool:
        return self.alive

    def close(self) -> None:
        pass


@dataclass
class Pending:
    """What becomes of one transaction: ``fate`` (see :class:`MemoryNb`)."""

    fate: str
    polls: int = 0

    def poll(self, seconds: float) -> dict[str, Any] | None:
        self.polls += 1
        if self.fate == "ok" or (self.fate == "stall" and self.polls > 20):
            return OK
        if self.fate in ("lost", "lost-after-commit", "dies"):
            raise ServerLost()
        return None  # "stall" (the server answers probes), "silent" (it does not)

    def lost(self) -> bool:
        return False


@dataclass
class MemoryNb:
    """An NB in memory as a writer's channel. Each transaction sent meets the next ``fates``:
    ``ok``; ``lost`` (the connection drops before the server took it); ``lost-after-commit``
    (it committed, the reply is lost); ``stall`` (slow, but the server answers probes);
    ``silent`` (no answer, no probe answered); ``dies`` (lost, and the server stays down).
    ``lock``: what the lock request answers (True, False: another holder, or an exception)."""

    fates: list[str]
    lock_answer: bool | Exception = True
    sent: list[str] = field(default_factory=list)
    committed: bool = False
    released: int = 0
    schema: ClassVar[NbSchema] = NbSchema(PORT_GROUP_SCHEMA)
    types: ClassVar[dict[str, dict[str, Any]]] = column_types(PORT_GROUP_SCHEMA)

    def lock(self, name: str, deadline: float) -> bool:
        if isinstance(self.lock_answer, Exception):
            raise self.lock_answer
        return self.lock_answer

    @contextmanager
    def rows(self) -> Iterator[NoRows]:
        yield NoRows()

    def send(self, params: list[Any]) -> Pending:
        fate = self.fates.pop(0)
        if fate == "not-sent":
            raise NotSent("Broken pipe")
        self.sent.append(fate)
        self.committed |= fate in ("ok", "stall", "lost-after-commit")
        return Pending(fate)

    def probe(self) -> Probe:
        return Probe(alive=self.sent[-1] == "stall")

    def abandon(self, silent: bool) -> None:
        pass

    def reread(self, name: str, deadline: float) -> list[OvnRow] | None:
        if self.sent[-1] == "dies":
            return None  # still down: the lock is never granted again in time
        return [OvnRow("Port_Group", "osc_pg", PG)] if self.committed else []

    def release(self) -> None:
        self.released += 1


def error_of(nb: MemoryNb, kind: type[OvnApplyError] = OvnApplyError) -> str:
    """The message of the error ``write`` raises on ``nb``."""
    with pytest.raises(kind) as err:
        write(nb, CREATE, SETTINGS)
    return str(err.value)


def test_a_transaction_is_sent_once_under_the_lock() -> None:
    nb = MemoryNb(["ok"])
    write(nb, CREATE, SETTINGS)
    assert (nb.sent, nb.committed, nb.released) == (["ok"], True, 1)


def test_another_holder_of_the_lock_refuses_the_write_word_for_word() -> None:
    nb = MemoryNb(["ok"], lock_answer=False)
    assert error_of(nb, OvnLockedError) == (
        "cannot apply to OVN NB at unix:/in-memory.sock: another osc-gitops process holds the "
        "write lock 'osc_gitops_osc_gitops' (same --instance 'osc-gitops'); refusing to apply "
        "so the two do not interleave. Nothing was written; retry when it has finished, or "
        "give each reconciler its own --instance"
    )
    assert (nb.sent, nb.released) == ([], 1)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (TimeoutError(), "the server did not grant the write lock 'osc_gitops_osc_gitops' "
                         "within 0.3s; nothing was written"),
        (LockRefused("syntax error"), "the server refused the write lock "
                                      "'osc_gitops_osc_gitops' (syntax error); nothing was "
                                      "written"),
    ],
)  # fmt: skip
def test_a_lock_not_granted_writes_nothing(answer: Exception, says: str) -> None:
    nb = MemoryNb(["ok"], lock_answer=answer)
    assert error_of(nb, OvnLockedError) == f"cannot apply to OVN NB at unix:/in-memory.sock: {says}"
    assert (nb.sent, nb.released) == ([], 1)


def test_a_lost_reply_of_a_committed_transaction_is_not_sent_again() -> None:
    nb = MemoryNb(["lost-after-commit", "ok"])
    write(nb, CREATE, SETTINGS)
    assert nb.sent == ["lost-after-commit"]  # a blind resend would create the row twice


def test_a_transaction_lost_before_it_committed_is_sent_once_more() -> None:
    nb = MemoryNb(["lost", "ok"])
    write(nb, CREATE, SETTINGS)
    assert nb.sent == ["lost", "ok"]


def test_lost_twice_is_not_committed_and_says_so() -> None:
    nb = MemoryNb(["lost", "lost", "ok"])
    assert "the connection was lost before the reply, twice; not committed" in error_of(nb)
    assert (nb.sent, nb.released) == (["lost", "lost"], 1)


def test_a_slow_server_that_answers_probes_is_waited_for() -> None:
    nb = MemoryNb(["stall"])
    write(nb, CREATE, SETTINGS)
    assert nb.sent == ["stall"] and nb.committed


def test_a_silent_server_is_found_out_after_the_timeout() -> None:
    nb = MemoryNb(["silent", "ok"])
    write(nb, CREATE, SETTINGS)  # it did not commit: sent once more
    assert nb.sent == ["silent", "ok"]


def test_a_server_that_dies_and_stays_down_is_unknown_word_for_word() -> None:
    nb = MemoryNb(["dies"])
    assert error_of(nb) == (
        "OVN NB transaction at unix:/in-memory.sock: the connection was lost before the "
        "server answered; whether it committed is unknown: the server did not answer within "
        "--ovn-timeout 0.3s; the next run converges"
    )
    assert nb.released == 1


def test_a_transaction_the_server_did_not_take_is_not_committed() -> None:
    nb = MemoryNb(["not-sent"])
    said = error_of(nb)
    assert "did not take the whole transaction within --ovn-timeout 0.3s (Broken pipe)" in said
    assert "; not committed" in said
    assert nb.released == 1


def test_the_lock_name_is_an_ovsdb_id() -> None:
    assert write_lock_name("osc-gitops") == "osc_gitops_osc_gitops"
