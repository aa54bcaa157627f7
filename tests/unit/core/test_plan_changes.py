"""What a plan's changes and facts are as data (``reconciler.core.model.plan``): when two
changes are the same change (``osc-gitops apply FILE`` compares a saved plan with a fresh one),
how a fact is declared, and a saved plan's protection read back."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from reconciler.core.model.facts import Protection, ProtectionBasis, UnboundPort
from reconciler.core.model.plan import Change, Plan, changes_between, fact

PG = Change(
    "create",
    "Port_Group",
    "osc.web.node_1",
    "SecurityGroup/web",
    "node-1",
    None,
    {"name": "osc.web.node_1", "ports": ["a", "b"], "external_ids": {"x": "1", "y": "é"}},
)
ACL = Change("update", "ACL", "osc.web_fw.node_1.to", "Binding/web-fw", "node-1",
             {"priority": 1}, {"priority": 2}, ("priority",))  # fmt: skip
GONE = Change("delete", "VirtualMachine", "security/fw-node-2", "VnfDeployment/fw", "node-2",
              {"spec": {}}, None)  # fmt: skip


def read_back(change: Change) -> Change:
    """The change as a saved plan gives it back: through JSON, keys sorted, lists for tuples."""
    data = json.loads(json.dumps(dataclasses.asdict(change), sort_keys=True))
    return Change(**{**data, "changed": data["changed"]})


def test_a_saved_plan_read_back_has_the_same_changes() -> None:
    saved = [read_back(c) for c in (PG, ACL, GONE)]
    assert list(saved[0].after or {}) != list(PG.after or {}), "keys in another order"
    assert changes_between(saved, [GONE, PG, ACL]) == ([], [])
    assert PG.canonical() == read_back(PG).canonical()


def test_what_a_fresh_plan_changes_that_the_saved_one_did_not_and_the_other_way() -> None:
    moved = dataclasses.replace(ACL, after={"priority": 3})
    assert changes_between([PG, ACL], [PG, moved, GONE]) == (
        ["delete VirtualMachine security/fw-node-2", "update ACL osc.web_fw.node_1.to"],
        ["update ACL osc.web_fw.node_1.to"],
    )
    assert changes_between([GONE, ACL], []) == (
        [],
        ["delete VirtualMachine security/fw-node-2", "update ACL osc.web_fw.node_1.to"],
    )


def test_every_part_of_a_change_makes_it_another_change() -> None:
    others = [
        dataclasses.replace(ACL, action="create"), dataclasses.replace(ACL, kind="X"),
        dataclasses.replace(ACL, key="k"), dataclasses.replace(ACL, origin="Binding/b"),
        dataclasses.replace(ACL, node=None), dataclasses.replace(ACL, before={"priority": 0}),
        dataclasses.replace(ACL, after={"priority": 9}),
        dataclasses.replace(ACL, changed=("priority", "match")),
    ]  # fmt: skip
    assert len({c.canonical() for c in (ACL, *others)}) == len(others) + 1
    assert json.loads(ACL.canonical()) == [
        "update", "ACL", "osc.web_fw.node_1.to", "Binding/web-fw", "node-1", {"priority": 1},
        {"priority": 2}, ["priority"],
    ]  # fmt: skip


def test_a_fact_is_a_field_with_its_meta_key_item_type_and_default() -> None:
    @dataclasses.dataclass(frozen=True)
    class Facts:
        plain: str | None = fact("plain_key")
        ports: tuple[UnboundPort, ...] = fact("ports_key", UnboundPort, ())

    plain, ports = dataclasses.fields(Facts)
    assert (dict(plain.metadata), plain.default) == ({"json": "plain_key", "item": None}, None)
    assert (dict(ports.metadata), ports.default) == ({"json": "ports_key", "item": UnboundPort}, ())
    assert Facts() == Facts(None, ())


def test_a_saved_plan_without_a_review_has_no_protection() -> None:
    assert Plan().with_meta({}).protection is None
    assert Plan().with_meta({"instance": "osc-gitops"}) == Plan(instance="osc-gitops")


def test_a_saved_plan_that_could_not_tell_its_protection_keeps_why() -> None:
    basis = {"source": "none", "detail": "no live state was read"}
    read = Plan().with_meta({"protection_basis": basis, "protection_changes": None})
    assert read.protection == Protection(None, ProtectionBasis("none", "no live state was read"))
    changes: list[dict[str, Any]] = [{"binding": "web-fw", "start": ["shop/web-1"], "stop": []}]
    read = Plan().with_meta({"protection_changes": changes})
    assert read.protection == Protection(tuple(changes), ProtectionBasis("", ""))


def test_a_review_without_group_diagrams_still_has_its_protection_in_meta() -> None:
    plan = Plan(instance="i", protection=Protection((), ProtectionBasis("live", "now")))
    assert plan.meta == {
        "instance": "i", "protection_changes": [],
        "protection_basis": {"source": "live", "detail": "now"},
    }  # fmt: skip
    assert list(plan.meta) == ["instance", "protection_changes", "protection_basis"]
