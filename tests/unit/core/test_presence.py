"""Rows only where there are members (issue #20): a (group, node) pair has its Port_Group and the
rows on it while the group has a member pod on the node, or while it is held after its last
member left (``reconciler.core.steering.presence``), in the full compile and in the incremental
planner alike; an NB written before this rule upgrades by deleting its empty Port_Groups."""

from __future__ import annotations

import dataclasses
import os
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import CompileOptions, compile_full, compile_target
from reconciler.core.model import ownership as own
from reconciler.core.model.observed import Observed
from reconciler.core.model.target import Resource
from reconciler.core.planning.full import make_plan
from reconciler.core.planning.incremental import IncrementalPlanner
from reconciler.core.steering.presence import (
    ABSENT,
    PRESENT,
    PairState,
    check_gates,
    format_since,
    gate_rows,
    pair_state,
    parse_since,
)
from reconciler.errors import InternalError
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.clock import local_time_zone
from tests.support.simulate import (
    DESIRED,
    Event,
    apply_to,
    converge,
    event_st,
    live_of,
    plan_or_error,
    scenario_observed,
    step,
    with_live,
)

EXAMPLES = int(os.environ.get("OSC_HYPOTHESIS_EXAMPLES", "120"))
NOW = 1_790_000_000.0
GRACE = 30.0
NF = CompileOptions(steering="network-function", empty_grace=GRACE)
RP = CompileOptions(steering="router-policy", empty_grace=GRACE)
PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "db-2", "node-2", {"app": "db"}),
]
WEB_FW = desired(
    sg("web", "app=web"),
    sg("db", "app=db"),
    vnf("fw"),
    binding("web-fw", "web", "fw", 10, redirection="both"),
    binding("db-fw", "db", "fw", 10),
)


def _kinds(target: Any, node: str) -> list[tuple[str, str]]:
    return sorted((r.kind, r.key) for r in target if r.is_ovn and r.node == node)


# --------------------------------------------------------------------------- the rule


def test_the_rule_per_pair() -> None:
    live = {"ports": ["shop_a"], "external_ids": {}}
    since = format_since(NOW - 10)
    held_live = {"ports": [], "external_ids": {own.EMPTY_SINCE: since}}
    assert pair_state(2, None, NOW, GRACE) is PRESENT
    assert pair_state(1, held_live, NOW, GRACE) is PRESENT  # back: the marker goes
    assert pair_state(0, None, NOW, GRACE) is ABSENT
    assert pair_state(0, live, NOW, GRACE) == PairState(True, format_since(NOW), clock=True)
    assert pair_state(0, held_live, NOW, GRACE) == PairState(True, since, expires=NOW + 20)
    assert pair_state(0, held_live, NOW + 20, GRACE) is ABSENT  # the grace ran out
    assert pair_state(0, {"ports": [], "external_ids": {}}, NOW, GRACE) is ABSENT  # old shape
    bad = {"ports": [], "external_ids": {own.EMPTY_SINCE: "yesterday"}}
    assert pair_state(0, bad, NOW, GRACE) is ABSENT
    assert pair_state(0, live, None, GRACE) is ABSENT  # no clock: no grace
    assert pair_state(0, live, NOW, 0) is ABSENT
    assert parse_since(format_since(NOW)) == NOW
    assert format_since(NOW) == "2026-09-21T14:13:20Z"


def test_a_grace_of_under_a_second_still_holds_an_emptied_pair() -> None:
    live = {"ports": ["shop_a"], "external_ids": {}}
    assert pair_state(0, live, NOW, 0.5) == PairState(True, format_since(NOW), clock=True)
    assert pair_state(0, live, NOW, -1) is ABSENT


def test_the_marker_is_utc_whatever_the_local_time_zone() -> None:
    """Every process that plans reads the same moment from the marker: a node agent in another
    time zone than the central owner holds a pair exactly as long."""
    with local_time_zone("Asia/Tokyo"):
        assert format_since(NOW) == "2026-09-21T14:13:20Z"
        assert parse_since("2026-09-21T14:13:20Z") == NOW


def test_a_held_pair_s_anchor_gets_its_marker_and_keeps_the_rest() -> None:
    pg = Resource(
        "Port_Group",
        "osc.web.node_1",
        "SecurityGroup/web",
        "node-1",
        {"name": "osc.web.node_1", "ports": [], "external_ids": {"osc.io/key": "k"}},
    )
    acl = Resource("ACL", "osc.web.to", "Binding/web-fw", "node-1", {"external_ids": {}})
    gates = {pg.ident: ("web", "node-1"), acl.ident: ("web", "node-1")}
    held = PairState(True, since="2026-09-21T14:13:20Z")
    marked, kept = gate_rows([pg, acl], gates, {("web", "node-1"): held})
    assert marked == Resource("Port_Group", "osc.web.node_1", "SecurityGroup/web", "node-1", {
        "name": "osc.web.node_1", "ports": [],
        "external_ids": {"osc.io/key": "k", own.EMPTY_SINCE: "2026-09-21T14:13:20Z"},
    })  # fmt: skip
    assert kept is acl
    assert gate_rows([pg, acl], gates, {("web", "node-1"): ABSENT}) == []


def test_a_backend_that_gates_rows_wrongly_is_an_internal_error() -> None:
    pg = Resource("Port_Group", "osc.web.node_1", "SecurityGroup/web", "node-1", {})
    acl = Resource("ACL", "osc.web.to", "Binding/web-fw", "node-2", {})
    pair = ("web", "node-1")
    with pytest.raises(InternalError) as wrong_node:
        check_gates([pg, acl], {pg.ident: pair, acl.ident: pair})
    assert str(wrong_node.value) == (
        "ACL osc.web.to of node node-2 is gated by the pair ('web', 'node-1'): a row can only "
        "depend on the members of its own node"
    )
    twin = Resource("Port_Group", "osc.web.node_1.b", "SecurityGroup/web", "node-1", {})
    with pytest.raises(InternalError, match="has no single Port_Group of its group"):
        check_gates([pg, twin], {pg.ident: pair, twin.ident: pair})
    other = Resource("Port_Group", "osc.web.node_1", "SecurityGroup/db", "node-1", {})
    with pytest.raises(InternalError, match="has no single Port_Group of its group"):
        check_gates([other], {other.ident: pair})
    with pytest.raises(InternalError, match="gated pairs without a Port_Group"):
        check_gates([acl], {acl.ident: ("web", "node-2")})
    assert check_gates([pg, acl], {pg.ident: pair}) == {pair: pg}


def test_a_pair_has_rows_only_with_members() -> None:
    """web has a member on node-1 only, db on node-2 only: each node carries the Port_Group and
    ACLs of its own group, with exactly the fields they had when every pair had rows."""
    compiled = compile_full(WEB_FW, cluster(PODS), NF)
    assert [i for i in _kinds(compiled.target, "node-1") if i[0] in ("ACL", "Port_Group")] == [
        ("ACL", "osc.web_fw.node_1.from"),
        ("ACL", "osc.web_fw.node_1.to"),
        ("ACL", "osc.web_fw.node_1.to.crossed"),
        ("Port_Group", "osc.web.node_1"),
    ]
    assert [i for i in _kinds(compiled.target, "node-2") if i[0] in ("ACL", "Port_Group")] == [
        ("ACL", "osc.db_fw.node_2.to"),
        ("ACL", "osc.db_fw.node_2.to.crossed"),  # fw is entered from-lport by web-fw
        ("Port_Group", "osc.db.node_2"),
    ]
    # the rows per VNF and node are there whether or not a pair is
    assert {(k, n) for k, n in _kinds(compiled.target, "node-2") if k != "ACL"} >= {
        ("Network_Function", "osc.fw.node_2"),
        ("Network_Function_Group", "osc.fw.node_2.fail_close"),
        ("Logical_Switch_Port", "nf_fw_node-2_in"),
    }
    for ident, res in compiled.target.resources.items():
        assert compiled.potential[ident] == res  # present rows are the potential ones
    absent = set(compiled.potential) - set(compiled.target.resources)
    assert sorted(absent) == [
        ("ACL", "osc.db_fw.node_1.to"),
        ("ACL", "osc.db_fw.node_1.to.crossed"),
        ("ACL", "osc.web_fw.node_2.from"),
        ("ACL", "osc.web_fw.node_2.to"),
        ("ACL", "osc.web_fw.node_2.to.crossed"),
        ("Port_Group", "osc.db.node_1"),
        ("Port_Group", "osc.web.node_2"),
    ]


def test_router_policy_keeps_every_port_group_of_a_group_it_steers_entry_lport() -> None:
    """An entry-lport router policy names the address set of the group's Port_Group on every
    node, so those stay; an exit-lport-only group has rows where it has members."""
    want = desired(
        sg("web", "app=web"),
        sg("db", "app=db"),
        vnf("fw"),
        binding("web-fw", "web", "fw", 10, redirection="entry-lport"),
        binding("db-fw", "db", "fw", 10),
    )
    target = compile_target(want, cluster(PODS), RP)
    keys = {(r.kind, r.key) for r in target if r.kind in ("Port_Group", "Logical_Router_Policy")}
    assert keys == {
        ("Port_Group", "osc.web.node_1"),
        ("Port_Group", "osc.web.node_2"),  # no member, named by the entry policies
        ("Logical_Router_Policy", "osc.web_fw.node_1.from"),
        ("Logical_Router_Policy", "osc.web_fw.node_2.from"),
        ("Port_Group", "osc.db.node_2"),
        ("Logical_Router_Policy", "osc.db_fw.node_2.to"),
    }


# --------------------------------------------------------------------------- upgrade


@pytest.mark.parametrize("options", [NF, RP], ids=["network-function", "router-policy"])
def test_the_old_row_shape_upgrades_by_deleting_empty_port_groups_and_their_rows(
    options: CompileOptions,
) -> None:
    """Before this rule every pair where the VNF ran had its rows, empty or not (they are the
    potential rows, without ``osc.io/presence``). The first plan after the upgrade deletes the
    empty Port_Groups and the rows on them, creates nothing and changes nothing."""
    observed = cluster(PODS, nf=options.steering == "network-function")
    compiled = compile_full(WEB_FW, observed, options)
    old = {ident: _without_presence(res.fields) for ident, res in compiled.potential.items()}
    upgraded = dataclasses.replace(with_live(observed, old), observed_at=NOW)
    plan = make_plan(WEB_FW, upgraded, options)
    assert {c.action for c in plan.changes} == {"delete"}
    gone = {(c.kind, c.key) for c in plan.changes}
    assert gone == set(compiled.potential) - set(compiled.target.resources)
    assert {kind for kind, _ in gone} <= {"Port_Group", "ACL", "Logical_Router_Policy"}
    assert all(not old[("Port_Group", key)]["ports"] for kind, key in gone if kind == "Port_Group")
    after = with_live(upgraded, apply_to(live_of(upgraded), plan))
    assert make_plan(WEB_FW, after, options).empty


def _without_presence(fields: dict[str, Any]) -> dict[str, Any]:
    if "external_ids" not in fields:
        return dict(fields)  # a Kubernetes object
    ids = {k: v for k, v in fields["external_ids"].items() if k != own.PRESENCE}
    return {**fields, "external_ids": ids}


# --------------------------------------------------------------------------- held pairs


def _live_after_apply(observed: Observed, options: CompileOptions) -> Observed:
    """After ``apply`` with every VNF healthy (steering is switched on once northd reports
    it, issue 22)."""
    return converge(WEB_FW, observed, options)


def _relabel(observed: Observed, pod: str, labels: dict[str, str], now: float) -> Observed:
    pods = tuple(
        dataclasses.replace(p, labels=labels) if p.name == pod else p for p in observed.pods
    )
    return dataclasses.replace(observed, pods=pods, observed_at=now)


def test_an_emptied_pair_is_held_then_deleted_and_a_return_reuses_its_rows() -> None:
    """db's last member leaves node-2: one update empties its Port_Group and records when; the
    plan is then empty for the grace period; a member coming back within it is one update
    again (no Port_Group or ACL re-created); once the grace has run out, the rows go."""
    live = _live_after_apply(dataclasses.replace(cluster(PODS, nf=True), observed_at=NOW), NF)
    left = _relabel(live, "db-2", {}, NOW + 1)
    plan = make_plan(WEB_FW, left, NF)
    assert [(c.action, c.kind, c.key) for c in plan.changes] == [
        ("update", "Port_Group", "osc.db.node_2")
    ]
    assert plan.changes[0].after is not None
    assert plan.changes[0].after["external_ids"][own.EMPTY_SINCE] == format_since(NOW + 1)
    held = with_live(left, apply_to(live_of(left), plan))
    assert make_plan(WEB_FW, dataclasses.replace(held, observed_at=NOW + 30), NF).empty

    back = _relabel(held, "db-2", {"app": "db"}, NOW + 20)
    again = make_plan(WEB_FW, back, NF)
    assert [(c.action, c.key, c.changed) for c in again.changes] == [
        ("update", "osc.db.node_2", ("['external_ids']['osc.io/empty-since']", "['ports']"))
    ]

    expired = make_plan(WEB_FW, dataclasses.replace(held, observed_at=NOW + 1 + GRACE), NF)
    assert sorted((c.action, c.key) for c in expired.changes) == [
        ("delete", "osc.db.node_2"),
        ("delete", "osc.db_fw.node_2.to"),
        ("delete", "osc.db_fw.node_2.to.crossed"),
    ]


def test_a_group_emptied_by_ovn_itself_is_held_too() -> None:
    """A deleted pod's LSP goes with it, and OVSDB drops it from ``Port_Group.ports`` (weak
    references) before we see anything: the group is empty without our marker, but it carries
    ``osc.io/presence``, so it is held like one we emptied (not deleted as the old shape is)."""
    live = _live_after_apply(dataclasses.replace(cluster(PODS, nf=True), observed_at=NOW), NF)
    gone = dataclasses.replace(
        live,
        pods=tuple(p for p in live.pods if p.name != "db-2"),
        pod_ports=tuple(p for p in live.pod_ports if p.pod != "db-2"),
        observed_at=NOW + 1,
    )
    emptied = _weak_refs(gone)
    assert live_of(emptied)[("Port_Group", "osc.db.node_2")]["ports"] == []
    plan = make_plan(WEB_FW, emptied, NF)
    assert [(c.action, c.key, c.changed) for c in plan.changes] == [
        ("update", "osc.db.node_2", ("['external_ids']['osc.io/empty-since']",))
    ]


def test_the_first_member_on_a_node_is_one_incremental_pass() -> None:
    """The warm loop's path: a pod labelled into a group that has no member on its node yet
    makes that node dirty, and the plan creates the pair's Port_Group and ACLs, nothing
    else; when it leaves, the pair is held, and the pass after the grace deletes them."""
    planner = IncrementalPlanner()
    observed = _live_after_apply(dataclasses.replace(cluster(PODS, nf=True), observed_at=NOW), NF)
    assert planner.plan(WEB_FW, observed, NF).empty

    joined = _relabel(observed, "db-2", {"app": "web"}, NOW + 1)  # web's first member there
    plan = planner.plan(WEB_FW, joined, NF)
    assert (planner.last_mode, planner.last_dirty_nodes) == ("incremental", {"node-2"})
    assert sorted((c.action, c.kind, c.key) for c in plan.changes) == [
        ("create", "ACL", "osc.web_fw.node_2.from"),
        ("create", "ACL", "osc.web_fw.node_2.to"),
        ("create", "ACL", "osc.web_fw.node_2.to.crossed"),
        ("create", "Port_Group", "osc.web.node_2"),
        ("update", "Port_Group", "osc.db.node_2"),  # db's last member left: held
    ]
    assert plan.changes == make_plan(WEB_FW, joined, NF).changes
    applied = with_live(joined, apply_to(live_of(joined), plan))
    assert planner.plan(WEB_FW, applied, NF).empty
    assert planner.last_mode == "incremental"  # our own rows came back changed
    quiet = dataclasses.replace(applied, observed_at=NOW + 10)
    assert planner.plan(WEB_FW, quiet, NF).empty and planner.last_mode == "cached"

    due = dataclasses.replace(applied, observed_at=NOW + 1 + GRACE)
    plan = planner.plan(WEB_FW, due, NF)
    assert (planner.last_mode, planner.last_dirty_nodes) == ("incremental", {"node-2"})
    assert sorted((c.action, c.key) for c in plan.changes) == [
        ("delete", "osc.db.node_2"),
        ("delete", "osc.db_fw.node_2.to"),
        ("delete", "osc.db_fw.node_2.to.crossed"),
    ]


# --------------------------------------------------------------------------- the property

tick_st = st.tuples(st.just("tick"), st.sampled_from((0.5, 7.0, 20.0, 40.0)))


def _step(observed: Observed, event: Event, current: Any) -> Observed:
    if event[0] == "tick":
        assert observed.observed_at is not None
        return dataclasses.replace(observed, observed_at=observed.observed_at + event[1])
    return _weak_refs(step(observed, event, current))


def _weak_refs(observed: Observed) -> Observed:
    """As OVSDB does: ``Port_Group.ports`` holds weak references, so an LSP deleted (by
    OVN-Kubernetes, with its pod) leaves every Port_Group that held it."""
    lsps = {p.name for p in observed.pod_ports}
    rows = []
    for row in observed.ovn_rows:
        ports = row.fields.get("ports") if row.table == "Port_Group" else None
        if ports and not set(ports) <= lsps:
            kept = [p for p in ports if p in lsps]
            row = dataclasses.replace(row, fields={**row.fields, "ports": kept})
        rows.append(row)
    if all(a is b for a, b in zip(rows, observed.ovn_rows, strict=True)):
        return observed
    return dataclasses.replace(observed, ovn_rows=tuple(rows))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steering=st.sampled_from(["network-function", "router-policy"]),
    events=st.lists(st.one_of(event_st, tick_st), min_size=1, max_size=16),
)
def test_incremental_equals_full_while_pairs_appear_and_disappear_with_the_clock(
    steering: str, events: list[Event]
) -> None:
    """The planner's event scenario (pods labelled, added, deleted, recreated, LSPs late or
    left behind, drift, our applies, relists) with a clock that moves: pairs appear with a
    first member, are held when emptied and go when the grace runs out; after every event the
    incremental plan equals a full compile's."""
    options = CompileOptions(steering=steering, empty_grace=GRACE)
    observed = dataclasses.replace(
        scenario_observed(nf=steering == "network-function"), observed_at=NOW
    )
    planner = IncrementalPlanner()
    current = None
    for event in events:
        observed = _step(observed, event, current)
        full = plan_or_error(partial(make_plan, DESIRED, observed, options))
        mine = plan_or_error(partial(planner.plan, DESIRED, observed, options))
        if isinstance(full, str) or isinstance(mine, str):
            assert mine == full, f"after {event}"
            current = None
            continue
        assert mine.changes == full.changes, f"after {event} ({planner.last_mode})"
        current = full


# --------------------------------------------------------------------------- deadlines

PODS_3 = [*PODS, ("shop", "web-2", "node-2", {"app": "web"})]
"""web and db each with a member on node-2: two pairs there that can be held at once."""


def _planned(planner: IncrementalPlanner, observed: Observed) -> Any:
    """The planner's plan of ``observed``, checked against a full compile's."""
    plan = planner.plan(WEB_FW, observed, NF)
    assert plan.changes == make_plan(WEB_FW, observed, NF).changes, planner.last_mode
    return plan


def _settled(planner: IncrementalPlanner, observed: Observed) -> Observed:
    """``observed`` planned and applied, then read back a second later (the held pair's
    marker live: its deadline known)."""
    applied = with_live(observed, apply_to(live_of(observed), _planned(planner, observed)))
    assert observed.observed_at is not None
    later = dataclasses.replace(applied, observed_at=observed.observed_at + 1)
    assert _planned(planner, later).empty
    return later


def _start(pods: list[tuple[str, str, str, dict[str, str]]]) -> Observed:
    return _live_after_apply(dataclasses.replace(cluster(pods, nf=True), observed_at=NOW), NF)


@pytest.mark.parametrize("learnt_by", ["full", "incremental"])
@pytest.mark.parametrize("first", ["db-2", "web-2"])
def test_a_node_is_woken_at_the_earliest_deadline_of_its_held_pairs(
    first: str, learnt_by: str
) -> None:
    """Two pairs held on node-2, emptied 10 s apart: the pass at the first one's deadline
    re-plans node-2 and deletes that pair's rows, whichever pair left first and whether the
    deadlines were learnt pass by pass or all at once by a new process's full compile."""
    second = "web-2" if first == "db-2" else "db-2"
    planner = IncrementalPlanner()
    observed = _start(PODS_3)
    assert _planned(planner, observed).empty
    observed = _settled(planner, _relabel(observed, first, {}, NOW + 1))
    observed = _settled(planner, _relabel(observed, second, {}, NOW + 11))
    if learnt_by == "full":
        planner = IncrementalPlanner()
        assert _planned(planner, observed).empty and planner.last_mode == "full"
    due = dataclasses.replace(observed, observed_at=NOW + 1 + GRACE)
    plan = _planned(planner, due)
    assert (planner.last_mode, planner.last_dirty_nodes) == ("incremental", {"node-2"})
    group = "db" if first == "db-2" else "web"
    assert ("delete", f"osc.{group}.node_2") in [(c.action, c.key) for c in plan.changes]
    assert {c.action for c in plan.changes} == {"delete"}


def test_a_deadline_on_one_node_outlives_pod_events_on_another() -> None:
    planner = IncrementalPlanner()
    observed = _start(PODS)
    assert _planned(planner, observed).empty
    observed = _settled(planner, _relabel(observed, "db-2", {}, NOW + 1))  # due at NOW + 31
    observed = _settled(planner, _relabel(observed, "web-1", {}, NOW + 5))  # due at NOW + 35
    plan = _planned(planner, dataclasses.replace(observed, observed_at=NOW + 1 + GRACE))
    assert planner.last_dirty_nodes == {"node-2"}
    assert ("delete", "osc.db.node_2") in [(c.action, c.key) for c in plan.changes]


@pytest.mark.parametrize("fresh", [False, True])
def test_a_pair_just_emptied_is_re_marked_at_each_new_clock_value_until_its_marker_is_live(
    fresh: bool,
) -> None:
    """Until the plan that empties a pair is applied, the pair is held from *now*: a pass at
    a later clock value writes that value (the node is re-planned on every new clock), also
    when a new process's full compile was the first to see the pair emptied."""
    planner = IncrementalPlanner()
    observed = _start(PODS)
    assert _planned(planner, observed).empty
    if fresh:
        planner = IncrementalPlanner()
    left = _planned(planner, _relabel(observed, "db-2", {}, NOW + 1))
    assert planner.last_mode == ("full" if fresh else "incremental") and left.changes
    later = _planned(planner, _relabel(observed, "db-2", {}, NOW + 2))
    assert (planner.last_mode, planner.last_dirty_nodes) == ("incremental", {"node-2"})
    (change,) = later.changes
    assert change.after is not None
    assert change.after["external_ids"][own.EMPTY_SINCE] == format_since(NOW + 2)
