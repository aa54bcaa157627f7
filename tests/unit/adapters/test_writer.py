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
    """What becomes of one transaction: ``fate`` (see :class:`MemoryNb`); a read is answered
    ``answer`` at once."""

    fate: str
    polls: int = 0
    answer: dict[str, Any] | None = None

    def poll(self, seconds: float) -> dict[str, Any] | None:
        self.polls += 1
        if self.answer is not None:
            return self.answer
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
    ``lock``: what the lock request answers (True, False: another holder, or an exception).
    ``northd``: its ``NB_Global`` row (``version``, ``nb_cfg``, ``sb_cfg``), read by a
    ``select`` that meets no fate; its northd catches up (``sb_cfg = nb_cfg``) once it has
    been read ``catch_up`` times (never: ``None``)."""

    fates: list[str]
    lock_answer: bool | Exception = True
    northd: dict[str, Any] | None = None
    catch_up: int | None = None
    sent: list[str] = field(default_factory=list)
    transactions: list[list[dict[str, Any]]] = field(default_factory=list)
    reads: int = 0
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
        if params[1]["op"] == "select":
            return Pending("read", answer={"result": [{"rows": self._nb_global()}], "error": None})
        self.transactions.append(params[1:])
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

    def _nb_global(self) -> list[dict[str, Any]]:
        self.reads += 1
        if self.northd is None:
            return []
        if self.catch_up is not None and self.reads >= self.catch_up:
            self.northd["sb_cfg"] = self.northd["nb_cfg"]
        options = [["northd_internal_version", self.northd["version"]]]
        return [{"_uuid": ["uuid", "nb-global"], "options": ["map", options],
                 "nb_cfg": self.northd["nb_cfg"], "sb_cfg": self.northd["sb_cfg"]}]  # fmt: skip


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


# --- ovn-northd 26.03.1 loses a Port_Group deleted and re-created in one iteration ------------

DELETE = [Change("delete", "Port_Group", "osc_pg", PG, None)]
BUMP = {"op": "mutate", "table": "NB_Global", "where": [["_uuid", "==", ["uuid", "nb-global"]]],
        "mutations": [["nb_cfg", "+=", 1]]}  # fmt: skip


class Owned(NoRows):
    """The live rows: our Port_Group ``osc_pg``."""

    def owned(self, table: str, key: str) -> OwnedRow | None:
        return OwnedRow(uuid="0", external_ids=PG["external_ids"])


@dataclass
class OwnedNb(MemoryNb):
    @contextmanager
    def rows(self) -> Iterator[NoRows]:
        yield Owned()


def northd(version: str, nb_cfg: int = 7, sb_cfg: int = 7) -> dict[str, Any]:
    return {"version": version, "nb_cfg": nb_cfg, "sb_cfg": sb_cfg}


def test_deleting_a_port_group_asks_an_affected_northd_to_sync() -> None:
    nb = OwnedNb(["ok"], northd=northd("26.03.1-20.46.0-81.8"))
    write(nb, DELETE, SETTINGS)
    (ops,) = nb.transactions
    assert ops[0]["op"] == "assert" and ops[1]["op"] == "delete" and ops[-1] == BUMP


@pytest.mark.parametrize("version", ["26.03.2-20.46.0-81.8", "23.03.3-20.27.0-70.6", None])
def test_other_northds_are_left_alone(version: str | None) -> None:
    state = None if version is None else northd(version, nb_cfg=9, sb_cfg=3)
    deleting, creating = OwnedNb(["ok"], northd=state), MemoryNb(["ok"], northd=state)
    write(deleting, DELETE, SETTINGS)
    write(creating, CREATE, SETTINGS)  # northd behind: not waited for
    assert BUMP not in deleting.transactions[0]
    assert (creating.reads, creating.sent) == (1, ["ok"])


def test_creating_a_port_group_waits_until_an_affected_northd_is_in_step() -> None:
    nb = MemoryNb(["ok"], northd=northd("26.03.1-20.46.0-81.8", sb_cfg=6), catch_up=4)
    write(nb, CREATE, SETTINGS)
    assert (nb.reads, nb.sent) == (4, ["ok"])
    assert BUMP not in nb.transactions[0]


def test_a_northd_that_does_not_catch_up_is_waited_for_until_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nb = MemoryNb(["ok"], northd=northd("26.03.1-20.46.0-81.8", sb_cfg=6))
    with caplog.at_level("INFO", logger="reconciler.adapters.ovn.writer"):
        write(nb, CREATE, SETTINGS)
    assert nb.sent == ["ok"] and nb.reads > 2
    waited, gave_up = (r.getMessage() for r in caplog.records)
    assert waited.startswith("waiting for ovn-northd 26.03.1-20.46.0-81.8 to handle the NB's "
                             "earlier changes (NB_Global.sb_cfg 6 < nb_cfg 7)")  # fmt: skip
    assert gave_up.startswith(
        "ovn-northd 26.03.1-20.46.0-81.8 at unix:/in-memory.sock has not handled the NB's "
        "earlier changes within --ovn-timeout 0.3s (NB_Global.sb_cfg 6 < nb_cfg 7); creating "
        "Port_Groups anyway."
    )
