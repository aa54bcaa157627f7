"""The security managers' outbox (``engine.notifications``) with an in-memory manager: what is
delivered, coalesced, retried with the same sequence, dropped when refused, split, and that a
pass never waits for a manager; and what the pipeline hands it per scope.

Waits are for conditions (``flush``, an event), never durations: the only bounds are hang
detectors."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import jsonschema

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.compiling.notices import MemberKey, MemberNotice
from reconciler.core.planning.slicing import NodeScope
from reconciler.engine.notifications import (
    NotifySettings,
    Outbox,
    load_told,
    manager_label,
    save_told,
)
from reconciler.engine.pipeline import reconcile
from reconciler.manifests import schema
from tests.support.builders import binding, desired, sg, vnf
from tests.unit.engine.scenario import fake_world

URL = "https://user:secret@secmgr.example:8443/events?token=x"
SCHEMA = json.loads((Path(__file__).parents[3] / "schemas" / schema.NOTIFICATION_FILE).read_text())
HANG = 10.0
"""Seconds after which a wait counts as a hang (never reached when the code is right)."""


class Manager:
    """A security manager in memory: records what it gets; ``down`` raises like a refused
    connection, ``refuse`` like a 4xx; ``gate`` (when set) holds every POST until opened."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.down = 0
        """How many of the next attempts fail."""
        self.refuse = False
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def post(self, url: str, payload: dict[str, Any]) -> None:
        jsonschema.validate(payload, SCHEMA)
        self.attempts.append(payload)
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(HANG), "the test never opened the gate"
        if self.down:
            self.down -= 1
            raise ConnectionRefusedError("connection refused")
        if self.refuse:
            exc = RuntimeError("HTTP 400: bad request")
            exc.retryable = False  # type: ignore[attr-defined]
            raise exc
        self.got.append(payload)


class Reporter:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []
        self.backlog: list[tuple[str, int, bool | None]] = []

    def notification_sent(self, manager: str, event: str, result: str) -> None:
        self.sent.append((manager, event, result))

    def notification_backlog(self, manager: str, pending: int, up: bool | None) -> None:
        self.backlog.append((manager, pending, up))


def notice(*pods: str, node: str = "node-1", binding_name: str = "web-ips") -> MemberNotice:
    members = tuple(("shop", p, (f"10.244.1.{i + 5}",)) for i, p in enumerate(pods))
    return MemberNotice(URL, binding_name, "web", "ips", node, members)


def state(*notices: MemberNotice) -> dict[MemberKey, MemberNotice]:
    return {n.key: n for n in notices}


def outbox(manager: Manager, **settings: Any) -> Outbox:
    values = {"debounce": 60.0, "debounce_max": 60.0, "backoff": 0.01, "backoff_max": 0.02}
    return Outbox(manager.post, NotifySettings(**{**values, **settings}))


def names(payload: dict[str, Any]) -> list[str]:
    return [m["name"] for m in payload["members"]]


def test_members_are_delivered_as_the_schema_says_and_a_burst_ends_in_one_message() -> None:
    manager = Manager()
    box = outbox(manager)  # a long debounce: only flush() sends
    try:
        for pods in (["web-1"], ["web-1", "web-2"], ["web-2"], ["web-2", "web-3"]):
            box.members(state(notice(*pods)))
        assert manager.attempts == [], "debounced: nothing before the window closes"
        assert box.flush(HANG)
        (only,) = manager.got
        assert names(only) == ["web-2", "web-3"] and only["memberCount"] == 2
        assert (only["binding"], only["securityGroup"], only["vnf"], only["node"]) == (
            "web-ips", "web", "ips", "node-1",
        )  # fmt: skip
        box.members(state(notice("web-2", "web-3")))
        assert box.flush(HANG) and len(manager.got) == 1, "the manager holds it already"
    finally:
        box.close()


def test_without_flush_a_change_is_delivered_once_the_debounce_window_closes() -> None:
    manager = Manager()
    box = outbox(manager, debounce=0.01, debounce_max=0.05)
    try:
        box.members(state(notice("web-1")))
        assert manager.entered.wait(HANG)
        assert box.flush(HANG) and names(manager.got[0]) == ["web-1"]
    finally:
        box.close()


def test_a_down_manager_gets_the_same_message_again_with_backoff_and_status_says_so() -> None:
    manager = Manager()
    manager.down = 3
    reporter = Reporter()
    box = Outbox(manager.post, NotifySettings(debounce=60, backoff=0.01, backoff_max=0.02),
                 reporter=reporter)  # fmt: skip
    try:
        box.members(state(notice("web-1")))
        assert box.flush(HANG)
        assert len(manager.attempts) == 4
        assert len({a["sequence"] for a in manager.attempts}) == 1, "a retry is the same message"
        assert names(manager.got[0]) == ["web-1"]
        (status,) = box.status()
        assert status["manager"] == "https://secmgr.example:8443/events", "no credentials"
        assert (status["up"], status["delivered"], status["failed"], status["pending"]) == (
            True, 1, 3, 0,
        )  # fmt: skip
        label = manager_label(URL)
        assert reporter.sent == [(label, "members", "failed")] * 3 + [
            (label, "members", "delivered")
        ]
        assert reporter.backlog[-1] == (label, 0, True)
    finally:
        box.close()


def test_while_a_manager_fails_newer_members_replace_the_waiting_ones() -> None:
    manager = Manager()
    manager.down = 1_000_000
    box = outbox(manager, backoff=0.01, backoff_max=0.01)
    try:
        box.members(state(notice("web-1")))
        assert not box.flush(0.2)
        (failing,) = box.status()
        assert failing["up"] is False and failing["failing_since"] and failing["pending"] == 1
        assert "connection refused" in failing["last_error"]
        first = manager.attempts[0]["sequence"]
        box.members(state(notice("web-2")))
        manager.down = 0
        assert box.flush(HANG)
        # An attempt already under way when the state changed may still land, but never
        # after the newer list, and never under a newer sequence: a receiver ends with web-2.
        assert names(manager.got[-1]) == ["web-2"] and manager.got[-1]["sequence"] > first
        assert [names(p) for p in manager.got[:-1]] in ([], [["web-1"]])
        sequences = [p["sequence"] for p in manager.got]
        assert sequences == sorted(set(sequences))
    finally:
        box.close()


def test_a_refused_message_is_dropped_not_retried_and_the_next_change_goes_out() -> None:
    manager = Manager()
    manager.refuse = True
    box = outbox(manager)
    try:
        box.members(state(notice("web-1")))
        assert box.flush(HANG)
        assert len(manager.attempts) == 1 and manager.got == []
        (status,) = box.status()
        assert (status["rejected"], status["up"], status["pending"]) == (1, True, 0)
        manager.refuse = False
        box.members(state(notice("web-1", "web-2")))
        assert box.flush(HANG) and names(manager.got[0]) == ["web-1", "web-2"]
    finally:
        box.close()


def test_a_pass_never_waits_for_a_slow_manager() -> None:
    manager = Manager()
    manager.gate = threading.Event()
    box = outbox(manager, debounce=0.0, debounce_max=0.0)
    try:
        box.send(URL, {"event": "deployed", "vnf": "ips", "node": "node-1",
                       "virtualMachine": "osc-vnfs/ips-node-1", "ovnPorts": {}})  # fmt: skip
        assert manager.entered.wait(HANG), "the manager is busy with the event"
        done = threading.Event()

        def a_pass() -> None:  # what a reconcile hands over while the manager hangs
            box.members(state(notice("web-1")))
            box.send(URL, {"event": "removed", "vnf": "ips", "node": "node-1",
                           "virtualMachine": "osc-vnfs/ips-node-1", "ovnPorts": {}})  # fmt: skip
            box.status()
            done.set()

        threading.Thread(target=a_pass, daemon=True).start()
        assert done.wait(HANG), "members()/send()/status() waited for the manager"
        assert not manager.gate.is_set() and len(manager.attempts) == 1
        manager.gate.set()
        assert box.flush(HANG)
        assert [p["event"] for p in manager.got] == ["deployed", "removed", "members"]
        sequences = [p["sequence"] for p in manager.got]
        assert sequences[0] < sequences[1] and sequences[2] > sequences[0]
    finally:
        if manager.gate is not None:
            manager.gate.set()
        box.close()


def test_a_list_above_the_limit_goes_in_parts_and_a_vanished_key_is_emptied_once() -> None:
    manager = Manager()
    box = outbox(manager, max_members=2)
    try:
        gone = notice("x", binding_name="old-binding")
        box.members(state(notice("a", "b", "c", "d", "e"), gone))
        assert box.flush(HANG)
        parts = [p for p in manager.got if p["binding"] == "web-ips"]
        assert [(p["part"], p["parts"], names(p)) for p in parts] == [
            (1, 3, ["a", "b"]), (2, 3, ["c", "d"]), (3, 3, ["e"]),
        ]  # fmt: skip
        assert len({p["sequence"] for p in parts}) == 1
        manager.got.clear()
        box.members(state(notice("a", "b", "c", "d", "e")))  # old-binding left the manifests
        assert box.flush(HANG)
        (emptied,) = manager.got
        assert (emptied["binding"], emptied["members"], emptied["memberCount"]) == (
            "old-binding", [], 0,
        )  # fmt: skip
        manager.got.clear()
        box.members(state(notice("a", "b", "c", "d", "e")))
        assert box.flush(HANG) and manager.got == [], "forgotten once told"
    finally:
        box.close()


def test_sequences_keep_increasing_across_senders_from_the_clock() -> None:
    ticks = iter([1000.0, 1000.0, 1000.0, 999.0])
    first = Outbox(Manager().post, wall=lambda: next(ticks))
    a, b, c = (first.next_sequence() for _ in range(3))
    assert a == 1_000_000_000 and b == a + 1 and c == a + 2, "same microsecond: still increasing"
    assert first.next_sequence() == c + 1, "a clock going back does not go back"
    restarted = Outbox(Manager().post, wall=lambda: 1000.5)
    assert restarted.next_sequence() > c


class Sink:
    """What the pipeline hands the outbox."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.told: list[dict[MemberKey, MemberNotice]] = []

    def send(self, url: str, payload: dict[str, Any]) -> None:
        self.events.append((url, payload))

    def members(self, notices: dict[MemberKey, MemberNotice]) -> None:
        self.told.append(dict(notices))


MANAGED = desired(
    sg("web", "app=web"), vnf("firewall", securityManager={"url": "http://sm.example/e"}),
    binding("web-fw", "web", "firewall", 10),
)  # fmt: skip


def test_the_pipeline_tells_members_after_every_pass_of_a_scope_that_reads_pods() -> None:
    kube, ovn = fake_world()
    sink = Sink()
    reconcile(MANAGED, kube, ovn, CompileOptions(), notices=sink)
    assert [e["event"] for _, e in sink.events] == ["deployed", "deployed"]
    (told,) = sink.told
    assert {k[3]: [m[1] for m in n.members] for k, n in told.items()} == {
        "node-1": ["web-1"], "node-2": [],
    }  # fmt: skip
    reconcile(MANAGED, kube, ovn, CompileOptions(), notices=sink)  # nothing to apply
    assert len(sink.told) == 2 and sink.told[1] == told, "told again: the outbox drops it"

    agent = Sink()
    reconcile(MANAGED, kube, ovn, CompileOptions(), notices=agent, scope=NodeScope("node-2"))
    assert [k[3] for k in agent.told[0]] == ["node-2"] and agent.events == []


def test_a_one_shot_run_tells_only_what_changed_since_the_last_one(tmp_path: Path) -> None:
    manager = Manager()
    first = outbox(manager)
    try:
        first.members(state(notice("web-1"), notice("x", binding_name="old-binding")))
        assert first.flush(HANG, retry=False)
        save_told(tmp_path / "told.json", first.told())
    finally:
        first.close()
    manager.got.clear()
    second = outbox(manager)
    try:
        second.remember(load_told(tmp_path / "told.json"))
        second.members(state(notice("web-1"), notice("web-3", node="node-2")))
        assert second.flush(HANG, retry=False)
        told = sorted((p["binding"], p["node"], names(p)) for p in manager.got)
        assert told == [("old-binding", "node-1", []), ("web-ips", "node-2", ["web-3"])]
    finally:
        second.close()
    assert load_told(tmp_path / "missing.json") == [], "no memory: everything is told"


def test_a_one_shot_flush_tries_a_down_manager_once() -> None:
    manager = Manager()
    manager.down = 1_000_000
    box = outbox(manager, backoff=60.0, backoff_max=60.0)
    try:
        box.members(state(notice("web-1")))
        assert box.flush(HANG, retry=False) is False
        assert len(manager.attempts) == 1
        assert box.told() == [], "nothing delivered: the next run tells it"
    finally:
        box.close()
