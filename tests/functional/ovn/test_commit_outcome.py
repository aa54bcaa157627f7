"""A transaction whose reply never arrives: both write paths find out what happened.

The NB is real; a proxy in front of it (``tests.reliability.nbproxy``) faults the connection at
the exact moment the write transaction passes: it withholds the request (nothing can have
committed), drops the server's reply (it committed), or the server is stopped with the request
in its socket. Each adapter (the loop's IDL-backed :class:`OvnNorthbound` and ``apply``'s
:class:`OvnOneShot`) must then say exactly what the NB shows, never guess, and never write a
row twice.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.ovn import ovsdb_rpc
from osc_gitops_sandbox.ovn.stack import OvnSandbox

from reconciler.adapters.ovn import OvnApplyError, OvnNorthbound, OvnOneShot, OvnSettings
from reconciler.adapters.ovn.commit import Outcome, outcome
from reconciler.core.model.observed import OvnRow
from tests.reliability.nbproxy import NbProxy
from tests.support.ovn import OVN_MARKS, Change, creates, ext

pytestmark = OVN_MARKS

Adapter = Callable[[OvnSettings], Any]
ADAPTERS: dict[str, Adapter] = {"idl": OvnNorthbound.connect, "one-shot": OvnOneShot.connect}


def rows(n: int) -> dict[str, list[dict[str, Any]]]:
    """A Port_Group with ``n`` ACLs (ACLs have no unique column: a second insert would
    duplicate them, which is what a blind retry does)."""
    return {
        "Port_Group": [{"name": "osc_pg", "ports": [], "external_ids": ext("osc_pg")}],
        "ACL": [
            {
                "port_group": "osc_pg",
                "name": f"osc-acl-{i}",
                "direction": "to-lport",
                "priority": 1000 + i,
                "tier": 0,
                "match": "outport == @osc_pg",
                "action": "allow-related",
                "network_function_group": None,
                "external_ids": ext(f"acl-{i}"),
            }
            for i in range(n)
        ],
    }


def our_acls(remote: str) -> list[str]:
    res = ovsdb_rpc.transact(
        remote,
        "OVN_Northbound",
        [{"op": "select", "table": "ACL", "where": [], "columns": ["external_ids"]}],
    )
    keys = []
    for row in res[0]["rows"]:
        ids = dict(ovsdb_rpc.from_atom(row["external_ids"]))
        if ids.get("osc.io/owner") == "osc-gitops":
            keys.append(ids["osc.io/key"])
    return sorted(keys)


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> Adapter:
    return ADAPTERS[request.param]


@pytest.fixture
def proxied(nb26: OvnSandbox, tmp_path: Path) -> Iterator[Callable[..., NbProxy]]:
    made: list[NbProxy] = []

    def make(mode: str, on_hit: Callable[[], None] | None = None) -> NbProxy:
        proxy = NbProxy(nb26.nb_remote, tmp_path / f"proxy{len(made)}.sock", mode, on_hit)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


def test_a_withheld_request_is_found_not_committed_and_sent_again(
    nb26: OvnSandbox, proxied: Callable[..., NbProxy], adapter: Adapter
) -> None:
    proxy = proxied("withhold")
    with adapter(OvnSettings(remote=proxy.remote, timeout=5)) as nb:
        nb.apply(creates(rows(3)))
        assert proxy.hit.is_set()
    assert our_acls(nb26.nb_remote) == ["acl-0", "acl-1", "acl-2"]


def test_a_lost_reply_is_found_committed_and_not_sent_again(
    nb26: OvnSandbox, proxied: Callable[..., NbProxy], adapter: Adapter
) -> None:
    proxy = proxied("drop-reply")
    with adapter(OvnSettings(remote=proxy.remote, timeout=5)) as nb:
        nb.apply(creates(rows(3)))
        assert proxy.hit.is_set()
        assert nb.last_commit is not None
    # exactly once: a blind retry would have duplicated every ACL
    assert our_acls(nb26.nb_remote) == ["acl-0", "acl-1", "acl-2"]


def test_a_stopped_server_is_unknown_and_the_next_apply_converges(
    nb26: OvnSandbox, proxied: Callable[..., NbProxy], adapter: Adapter
) -> None:
    assert nb26.nb is not None
    pid = nb26.nb.pid

    proxy = proxied("forward", lambda: os.kill(pid, signal.SIGSTOP))
    try:
        with adapter(OvnSettings(remote=proxy.remote, timeout=1.5)) as nb:
            started = time.monotonic()
            with pytest.raises(OvnApplyError) as err:
                nb.apply(creates(rows(2)))
            waited = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    message = str(err.value)
    assert proxy.remote in message
    assert "whether it committed is unknown" in message
    assert "the server did not answer within --ovn-timeout 1.5s" in message
    assert "the next run converges" in message
    # waited for the silence budget (and the attempt to find out), not forever
    assert 1.5 <= waited < 15
    # the stopped server executed the request when it resumed, or never: never a part of it
    assert our_acls(nb26.nb_remote) in ([], ["acl-0", "acl-1"])
    with adapter(OvnSettings(remote=nb26.nb_remote, timeout=5)) as nb:
        present = {(r.table, r.key) for r in nb.read().owned}
        todo = [c for c in creates(rows(2)) if (c.kind, c.key) not in present]
        nb.apply(todo)
    assert our_acls(nb26.nb_remote) == ["acl-0", "acl-1"]


def test_a_server_killed_holding_the_transaction_and_still_down_is_unknown(
    nb26: OvnSandbox, proxied: Callable[..., NbProxy], adapter: Adapter
) -> None:
    """The server dies with the transaction (it may or may not have committed it) and stays
    down longer than the apply may wait: the apply says it cannot know, in the documented
    words (issue #19: the IDL adapter raised a bare AssertionError from ``Idl.set_lock``), and
    once the server is back the next apply converges."""
    assert nb26.nb is not None
    server = nb26.nb

    def kill() -> None:
        server.stop(sig=signal.SIGKILL)
        proxy.refuse()  # connections now fail as the dead server's would

    proxy = proxied("drop-reply", kill)
    try:
        with (
            adapter(OvnSettings(remote=proxy.remote, timeout=1.5)) as nb,
            pytest.raises(OvnApplyError) as err,
        ):
            nb.apply(creates(rows(2)))
    finally:
        nb26.start_nb()
    assert proxy.hit.is_set()
    message = str(err.value)
    assert message.startswith(f"OVN NB transaction at {proxy.remote}: ")
    assert "whether it committed is unknown" in message
    assert "the server did not answer within --ovn-timeout 1.5s" in message
    assert our_acls(nb26.nb_remote) in ([], ["acl-0", "acl-1"])
    with adapter(OvnSettings(remote=nb26.nb_remote, timeout=5)) as nb:
        present = {(r.table, r.key) for r in nb.read().owned}
        nb.apply([c for c in creates(rows(2)) if (c.kind, c.key) not in present])
    assert our_acls(nb26.nb_remote) == ["acl-0", "acl-1"]


def test_a_briefly_stopped_server_is_waited_for(
    nb26: OvnSandbox, proxied: Callable[..., NbProxy], adapter: Adapter
) -> None:
    """A server that stops answering for less than the timeout (busy with a large commit
    looks the same from here) is waited for: no fixed deadline on the commit itself."""
    assert nb26.nb is not None
    pid = nb26.nb.pid

    def stall() -> None:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(2.0)
        os.kill(pid, signal.SIGCONT)

    proxy = proxied("forward", stall)
    with adapter(OvnSettings(remote=proxy.remote, timeout=4)) as nb:
        nb.apply(creates(rows(2)))
    assert our_acls(nb26.nb_remote) == ["acl-0", "acl-1"]


def _row(table: str, key: str, **fields: Any) -> OvnRow:
    return OvnRow(table=table, key=key, fields=fields)


def test_outcome_needs_all_or_none_of_the_changes() -> None:
    ids = {"osc.io/owner": "osc-gitops", "osc.io/key": "k"}
    changes = [
        Change("create", "Port_Group", "a", None, {"name": "a", "ports": []}),
        Change("delete", "Port_Group", "b", {"name": "b"}, None),
        Change(
            "update",
            "Logical_Router_Policy",
            "k",
            {"priority": 1, "match": "m", "external_ids": ids},
            {"priority": 2, "match": "m", "external_ids": ids},
        ),
    ]
    before = [_row("Port_Group", "b"), _row("Logical_Router_Policy", "k", priority=1, match="m")]
    after = [_row("Port_Group", "a"), _row("Logical_Router_Policy", "k", priority=2, match="m")]
    assert outcome(changes, before) is Outcome.NOT_COMMITTED
    assert outcome(changes, after) is Outcome.COMMITTED
    # another writer deleted what we were to create and restored what we deleted
    assert outcome(changes, [*after[1:], _row("Port_Group", "b")]) is Outcome.MIXED
    # the policy changed to something else meanwhile
    other = _row("Logical_Router_Policy", "k", priority=7, match="m")
    assert outcome(changes, [_row("Port_Group", "a"), other]) is Outcome.MIXED
