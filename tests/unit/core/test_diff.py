"""diff: minimal, typed changes; only owned state; no fighting over fields we do not manage."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from deepdiff import DeepDiff
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.compiling.compile import compile_target
from reconciler.core.compiling.diff import _LIST_INDEX, changed_paths, diff, live_state, project
from reconciler.core.model.observed import KubeObject, OvnRow, Pod, PodPort
from reconciler.core.model.target import Target
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to, with_live

NOW = 1_790_000_000.0

PODS = [
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-2", {"app": "web"}),
    ("shop", "db", "node-1", {"app": "db"}),
]
DESIRED = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))


def live_of(target: Target) -> dict:
    return {r.ident: copy.deepcopy(r.fields) for r in target}


def test_everything_is_created_then_nothing_changes():
    target = compile_target(DESIRED, cluster(PODS))
    plan = diff(target, {})
    assert plan.summary() == {"create": len(target), "update": 0, "delete": 0}
    assert diff(target, apply_to({}, plan)).empty


def test_a_pod_joining_is_exactly_one_port_group_ports_update():
    before = cluster(PODS)
    live = live_of(compile_target(DESIRED, before))
    joined = replace(
        before,
        pods=(*before.pods, Pod("shop", "web-3", "uid-3", "node-1", {"app": "web"})),
        pod_ports=(
            *before.pod_ports,
            PodPort("shop_web-3", "node-1", "shop", "web-3", "uid-3", None, ()),
        ),
    )
    plan = diff(compile_target(DESIRED, joined), live)
    assert [(c.action, c.kind, c.key, c.changed) for c in plan.changes] == [
        ("update", "Port_Group", "osc.web.node_1", ("['ports']",))
    ]
    change = plan.changes[0]
    assert change.before["ports"] == ["shop_web-1"]
    assert change.after["ports"] == ["shop_web-1", "shop_web-3"]


def test_a_pod_relabelled_out_leaves_its_group():
    """web-2 was web's last member on node-2. With a clock the pair is held: one update empties
    its Port_Group and records when (its ACL stays); without one, both go."""
    obs = cluster(PODS)
    live = live_of(compile_target(DESIRED, obs))
    relabelled = replace(
        with_live(obs, live),
        pods=tuple(
            replace(p, labels={"app": "other"}) if p.name == "web-2" else p for p in obs.pods
        ),
    )
    held = diff(compile_target(DESIRED, replace(relabelled, observed_at=NOW)), live)
    assert [(c.action, c.key, c.changed) for c in held.changes] == [
        ("update", "osc.web.node_2", ("['external_ids']['osc.io/empty-since']", "['ports']"))
    ]
    assert held.changes[0].after is not None and held.changes[0].after["ports"] == []
    gone = diff(compile_target(DESIRED, relabelled), live)
    assert sorted((c.action, c.key) for c in gone.changes) == [
        ("delete", "osc.web.node_2"),
        ("delete", "osc.web_fw.node_2.to"),
    ]


def test_a_removed_binding_prunes_its_steering_rows_only():
    obs = cluster(PODS)
    live = live_of(compile_target(DESIRED, obs))
    without = desired(sg("web", "app=web"), vnf("fw"))
    plan = diff(compile_target(without, obs), live)
    deleted = sorted((c.kind, c.key) for c in plan.changes)
    assert all(c.action == "delete" for c in plan.changes)
    kinds = {k for k, _ in deleted}
    # with the last health-checked function go its health check and the NB_Global options
    # osc-gitops set for it
    assert kinds == {
        "ACL",
        "Port_Group",
        "Network_Function",
        "Network_Function_Health_Check",
        "Network_Function_Group",
        "NB_Global",
    }
    assert plan.changes[0].origin  # deletes name the manifest the row came from


def test_a_vm_deleted_by_a_user_is_one_create():
    target = compile_target(DESIRED, cluster(PODS))
    live = live_of(target)
    del live[("VirtualMachine", "security/fw-node-2")]
    plan = diff(target, live)
    assert [(c.action, c.kind, c.key) for c in plan.changes] == [
        ("create", "VirtualMachine", "security/fw-node-2")
    ]


def test_revision_and_foreign_external_ids_are_not_drift():
    target = compile_target(DESIRED, cluster(PODS))
    live = live_of(target)
    for fields in live.values():
        if "external_ids" in fields:
            fields["external_ids"]["osc.io/revision"] = "abc123"
            fields["external_ids"]["neutron:whatever"] = "x"
    assert diff(target, live).empty


def test_manual_edit_of_an_owned_row_is_drift_and_repaired():
    target = compile_target(DESIRED, cluster(PODS))
    live = live_of(target)
    acl = live[("ACL", "osc.web_fw.node_1.to")]
    acl["action"] = "allow"
    acl["priority"] = 1
    plan = diff(target, live)
    assert [(c.action, c.key, c.changed) for c in plan.changes] == [
        ("update", "osc.web_fw.node_1.to", ("['action']", "['priority']"))
    ]


def test_server_defaults_on_kubernetes_objects_are_not_drift_but_user_edits_are():
    target = compile_target(DESIRED, cluster(PODS))
    live = live_of(target)
    vm = live[("VirtualMachine", "security/fw-node-1")]
    vm["spec"]["template"]["spec"]["domain"]["machine"] = {"type": "q35"}  # webhook default
    vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][1]["model"] = "virtio"
    assert diff(target, live).empty
    vm["spec"]["runStrategy"] = "Halted"  # somebody stopped it
    plan = diff(target, live)
    assert [(c.action, c.key, c.changed) for c in plan.changes] == [
        ("update", "security/fw-node-1", ("['spec']['runStrategy']",))
    ]


def test_owned_rows_no_longer_in_target_are_deleted_and_only_those():
    target = compile_target(DESIRED, cluster(PODS))
    stray = OvnRow(
        "Port_Group",
        "osc.gone.node_1",
        {
            "name": "osc.gone.node_1",
            "ports": [],
            "external_ids": {
                "osc.io/owner": "osc-gitops",
                "osc.io/resource": "SecurityGroup/gone",
                "osc.io/node": "node-1",
            },
        },
    )
    vm = KubeObject("VirtualMachine", "security", "old-node-1", {"metadata": {"labels": {}}})
    live = {**live_of(target), **live_state([stray], [vm])}
    plan = diff(target, live)
    assert sorted((c.action, c.kind, c.key) for c in plan.changes) == [
        ("delete", "Port_Group", "osc.gone.node_1"),
        ("delete", "VirtualMachine", "security/old-node-1"),
    ]
    pg = next(c for c in plan.changes if c.kind == "Port_Group")
    assert (pg.origin, pg.node) == ("SecurityGroup/gone", "node-1")


def test_project_keeps_only_specified_shape():
    live = {"a": 1, "b": {"c": 2, "d": 3}, "l": [{"x": 1, "y": 2}]}
    assert project(live, {"b": {"c": 0}, "l": [{"x": 0}]}) == {"b": {"c": 2}, "l": [{"x": 1}]}


_KEYS = st.sampled_from(["ports", "options", "is-nf", "osc.io/node", "a b", "it's", "1", ""]) | (
    st.integers(0, 2)
)
_SCALAR = st.none() | st.booleans() | st.integers(-1, 2) | st.sampled_from(["", "x", "1"])
_VALUE = st.recursive(
    _SCALAR | st.floats(allow_nan=True) | st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=2).map(tuple)
        | st.dictionaries(_KEYS, inner, max_size=3)
    ),
    max_leaves=8,
)
_ROW = st.dictionaries(_KEYS, _VALUE, max_size=4)


def _deepdiff_paths(before: Any, after: Any) -> tuple[str, ...]:
    paths = DeepDiff(before, after).affected_paths
    return tuple(sorted({_LIST_INDEX.sub("", p.removeprefix("root")) for p in paths}))


@settings(max_examples=600, deadline=None)
@given(before=_ROW, after=_ROW, edit=st.booleans())
def test_changed_paths_are_the_ones_deepdiff_finds(
    before: dict[Any, Any], after: dict[Any, Any], edit: bool
) -> None:
    """changed_paths works out the paths of the plain values OVN rows hold itself (DeepDiff
    is slow) and leaves anything else to DeepDiff: the paths must be DeepDiff's either way."""
    if edit:  # mostly alike, as an update's before and after are
        after = {**copy.deepcopy(before), **after}
    assert changed_paths(before, after) == _deepdiff_paths(before, after)


# What diffs really compare: rows and bodies of plain values (string keys of the characters OVN
# column and key names use; strings, integers, booleans, None; lists of strings, and in
# Kubernetes bodies lists of mappings), and an ``after`` that is ``before`` with a few edits.
# Every such pair is one changed_paths works out without DeepDiff, except where a list holds
# mappings or numbers; the edits reach inside those lists too.
_NAME = st.sampled_from(["name", "ports", "options", "is-nf", "osc.io/node", "macAddress", "a_b"])
_LEAF = st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "x", "y", "1"])
_STRINGS = st.lists(st.sampled_from(["a", "b", "c"]), max_size=3)
_PLAIN_VALUE = st.recursive(
    _LEAF | _STRINGS,
    lambda inner: (
        st.dictionaries(_NAME, inner, max_size=4)
        | st.lists(st.dictionaries(_NAME, inner, min_size=1, max_size=3), min_size=1, max_size=3)
    ),
    max_leaves=10,
)
_PLAIN_ROW = st.dictionaries(_NAME, _PLAIN_VALUE, min_size=1, max_size=5)


@st.composite
def _edited(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with some of its parts replaced, added or removed, at any depth."""
    if isinstance(value, dict) and value and draw(st.integers(0, 3)):
        out = dict(value)
        for key in draw(st.lists(st.sampled_from(sorted(value)), max_size=2, unique=True)):
            action = draw(st.sampled_from(["edit", "edit", "replace", "remove"]))
            if action == "edit":
                out[key] = draw(_edited(value[key]))
            elif action == "replace":
                out[key] = draw(_PLAIN_VALUE)
            else:
                del out[key]
        if draw(st.booleans()):
            out[draw(_NAME)] = draw(_PLAIN_VALUE)
        return out
    if isinstance(value, list) and value and draw(st.integers(0, 3)):
        out_list = list(value)
        i = draw(st.integers(0, len(value) - 1))
        out_list[i] = draw(_edited(value[i]))
        return out_list
    return draw(_PLAIN_VALUE) if draw(st.booleans()) else copy.deepcopy(value)


@st.composite
def _update(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    before = draw(_PLAIN_ROW)
    return before, draw(_edited(before))


@settings(max_examples=400, deadline=None)
@given(pair=_update())
def test_changed_paths_of_plain_updates_are_the_ones_deepdiff_finds(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The rows and bodies an update really compares: a mapping edited here and there, lists
    of mappings edited inside. changed_paths reads most of them without DeepDiff; the paths
    must be DeepDiff's all the same (a list of mappings is looked into, a list of strings is
    one path)."""
    before, after = pair
    assert changed_paths(before, after) == _deepdiff_paths(before, after)


@pytest.mark.parametrize(
    ("before", "after", "paths"),
    [
        ({"l": [{"x": 1}]}, {"l": [{"x": 2}]}, ("['l'][0]['x']",)),
        ({"l": [{"x": "a"}, {"y": 1}]}, {"l": [{"x": "a"}, {"y": 1, "z": 2}]}, ("['l'][1]['z']",)),
        ({"l": [1, 2]}, {"l": [1, 3]}, ("['l']",)),
        ({"l": ["a", "b"]}, {"l": ["b", "a"]}, ("['l']",)),
        ({"d": {"k": "v"}}, {"d": None}, ("['d']",)),
        ({"a": 1, "b": True}, {"a": 1, "b": False}, ("['b']",)),
        # a value of a type OVN rows do not hold, changed to another type: one path
        ({"a": 1.5, "b": "x"}, {"a": "1.5", "b": "x"}, ("['a']",)),
        ({"a": {"b": "x"}}, {"a": {"b": 2.5}}, ("['a']['b']",)),
        ({"a": 1.5, "b": [1.0]}, {"a": 2.5, "b": [1.0]}, ("['a']",)),
    ],
)
def test_changed_paths_look_into_lists_of_mappings_only(
    before: dict[str, Any], after: dict[str, Any], paths: tuple[str, ...]
) -> None:
    assert changed_paths(before, after) == paths == _deepdiff_paths(before, after)


def test_changed_paths_of_a_port_group_update() -> None:
    before = {"name": "pg", "ports": ["a", "b"], "external_ids": {"osc.io/node": "n1"}}
    after = {"name": "pg", "ports": ["a", "b", "c"], "external_ids": {"osc.io/node": "n2"}}
    assert changed_paths(before, after) == ("['external_ids']['osc.io/node']", "['ports']")
