"""A rolling update's drain in Network Function rows (``SteeringBackend.drain`` of the
network-function backend): which steering groups hold a drained function, planned or live, and
what each becomes, whatever the plan was about to do with them."""

from __future__ import annotations

from typing import Any

from reconciler.core.model.observed import Observed, OvnRow
from reconciler.core.model.plan import Change
from reconciler.core.model.target import Resource
from reconciler.core.steering import backend_for

NFG = "Network_Function_Group"
GROUP = "osc.fw.node_1.fail_close"
PROBE = "osc.fw.node_1._b.probe"
A, B = "osc.fw.node_1", "osc.fw.node_1._b"
DRAINED = {("fw", "node-1"): {B}}


def group(
    *functions: str, node: str = "node-1", origin: str = "VnfDeployment/fw"
) -> dict[str, Any]:
    return {
        "name": GROUP, "id": 7, "mode": "inline", "fallback": "fail-close",
        "network_function": list(functions),
        "external_ids": {"osc.io/resource": origin, "osc.io/node": node, "osc.io/key": GROUP},
    }  # fmt: skip


def live(*rows: tuple[str, dict[str, Any]]) -> Observed:
    return Observed(ovn_rows=tuple(OvnRow(NFG, key, fields) for key, fields in rows))


def update(key: str, before: dict[str, Any], after: dict[str, Any]) -> Change:
    return Change("update", NFG, key, "VnfDeployment/fw", "node-1", before, after,
                  ("network_function",))  # fmt: skip


def drain(changes: list[Change], observed: Observed, drained: Any = None) -> Any:
    return backend_for("network-function").drain(
        changes, DRAINED if drained is None else drained, observed
    )


def test_a_live_group_is_rewritten_without_the_drained_function() -> None:
    seen = live((GROUP, group(A, B)))
    found = drain([], seen)
    assert found.touched == {(NFG, GROUP)}
    assert found.kept == ()
    ((row, was),) = found.rows
    assert row == Resource(NFG, GROUP, "VnfDeployment/fw", "node-1", group(A))
    assert was == seen.ovn_rows[0], "diffed against the live row"


def test_a_group_the_plan_updates_is_drained_from_the_planned_row() -> None:
    """The manifests changed the group (its fallback, say) while one of its functions is being
    rolled: the plan's row, without the drained function, wins over the live one."""
    before, after = group(A, B), {**group(A, B), "fallback": "fail-open"}
    seen = live((GROUP, before))
    found = drain([update(GROUP, before, after)], seen)
    ((row, was),) = found.rows
    assert row.fields == {**group(A), "fallback": "fail-open"}
    assert was == seen.ovn_rows[0]


def test_a_group_only_planned_is_drained_too() -> None:
    created = Change("create", NFG, GROUP, "VnfDeployment/fw", "node-1", None, group(A, B))
    found = drain([created], live())
    assert found.touched == {(NFG, GROUP)}
    ((row, was),) = found.rows
    assert (row.fields["network_function"], was) == ([A], None)


def test_a_planned_delete_of_a_drained_group_is_kept_and_the_others_still_drained() -> None:
    other = "osc.fw.node_1.fail_open"
    deleted = Change("delete", NFG, GROUP, "VnfDeployment/fw", "node-1", group(A, B), None)
    seen = live((GROUP, group(A, B)), (other, {**group(A, B), "name": other}))
    found = drain([deleted], seen)
    assert found.touched == {(NFG, GROUP), (NFG, other)}
    assert found.kept == (deleted,)
    assert [(r.key, r.fields["network_function"]) for r, _ in found.rows] == [(other, [A])]


def test_a_group_is_never_left_empty_and_a_probe_group_keeps_its_function() -> None:
    seen = live((GROUP, group(B)), (PROBE, {**group(B), "name": PROBE}))
    found = drain([], seen)
    assert found.touched == {(NFG, GROUP)}, "the probe group keeps health known"
    ((row, _),) = found.rows
    assert row.fields["network_function"] == [B]


def test_groups_without_a_drained_function_and_other_rows_are_left_alone() -> None:
    untouched = "osc.fw.node_2.fail_close"
    acl = Change("update", "ACL", GROUP, "SecurityGroup/web", "node-1",
                 {"network_function": [B]}, {"network_function": [A, B]}, ("x",))  # fmt: skip
    seen = live((untouched, {**group("osc.fw.node_2"), "name": untouched}))
    found = drain([acl], seen)
    assert (found.touched, found.kept, found.rows) == (frozenset(), (), ())
    # a planned row without the drained function hides the live one that has it
    planned = update(GROUP, group(A, B), group(A))
    assert drain([planned], live((GROUP, group(A, B)))).touched == frozenset()
    # nothing drained: nothing touched
    assert drain([], live((GROUP, group(A, B))), drained={}).touched == frozenset()


def test_the_drained_row_keeps_the_node_and_manifest_of_its_group() -> None:
    """The node decides which agent writes the row, the origin what the plan names."""
    seen = live((GROUP, group(A, B, node="node-7", origin="VnfDeployment/other")))
    ((row, _),) = drain([], seen).rows
    assert (row.node, row.origin) == ("node-7", "VnfDeployment/other")
