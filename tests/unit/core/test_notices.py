"""What each security manager should hold (``core.compiling.notices``) and the messages that
tell it, checked against the published schema (``schemas/security-manager-notification.json``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema

from reconciler.core.compiling.notices import MemberNotice, member_notices, members_payloads
from reconciler.manifests import schema
from tests.support.builders import binding, cluster, desired, sg, vnf

URL = "https://secmgr.example/events"
SCHEMA = json.loads((Path(__file__).parents[3] / "schemas" / schema.NOTIFICATION_FILE).read_text())
MANAGED = {"securityManager": {"url": URL}}
WEB_IPS = (sg("web", "app=web"), vnf("ips", **MANAGED), binding("web-ips", "web", "ips", 10))
PODS = cluster([
    ("shop", "web-1", "node-1", {"app": "web"}),
    ("shop", "web-2", "node-1", {"app": "web"}),
    ("shop", "db-1", "node-2", {"app": "db"}),
    ("other", "web-9", "node-2", {"app": "web"}),
])  # fmt: skip


def valid(payload: dict[str, object]) -> None:
    jsonschema.validate(payload, SCHEMA)


def test_per_binding_and_node_the_groups_members_with_their_addresses() -> None:
    want = desired(
        sg("web", "app=web"), vnf("ips", **MANAGED), binding("web-ips", "web", "ips", 10)
    )
    notices = member_notices(want, PODS)
    assert sorted(notices) == [(URL, "web-ips", "ips", "node-1"), (URL, "web-ips", "ips", "node-2")]
    node1 = notices[(URL, "web-ips", "ips", "node-1")]
    assert node1.group == "web" and node1.vnf == "ips"
    assert node1.members == (("shop", "web-1", ("10.244.1.5",)), ("shop", "web-2", ("10.244.1.6",)))
    assert notices[(URL, "web-ips", "ips", "node-2")].members == (
        ("other", "web-9", ("10.244.2.8",)),
    )


def test_nodes_without_members_are_told_so_and_unselected_nodes_not_at_all() -> None:
    db = desired(sg("db", "app=db"), vnf("ips", **MANAGED), binding("db-ips", "db", "ips", 10))
    notices = member_notices(db, PODS)
    assert notices[(URL, "db-ips", "ips", "node-1")].members == ()
    assert [m[1] for m in notices[(URL, "db-ips", "ips", "node-2")].members] == ["db-1"]
    only1 = desired(sg("db", "app=db"), vnf("ips", nodeSelector={"zone": "a"}, **MANAGED),
                    binding("db-ips", "db", "ips", 10))  # fmt: skip
    labelled = cluster([("shop", "db-1", "node-2", {"app": "db"})],
                       node_labels={"node-1": {"zone": "a"}})  # fmt: skip
    assert sorted(k[3] for k in member_notices(only1, labelled)) == ["node-1"]
    assert sorted(k[3] for k in member_notices(db, PODS, skip_nodes=["node-2"])) == ["node-1"]


def test_nothing_without_a_security_manager_and_each_managed_hop_of_a_chain() -> None:
    plain = desired(sg("web", "app=web"), vnf("ips"), binding("web-ips", "web", "ips", 10))
    assert member_notices(plain, PODS) == {}
    other = "http://fw-manager.example/osc"
    chain = desired(
        sg("web", "app=web"), vnf("fw", securityManager={"url": other}), vnf("ips", **MANAGED),
        vnf("plain"), binding("web-chain", "web", ["fw", "ips", "plain"], 10),
    )  # fmt: skip
    keys = sorted(member_notices(chain, PODS))
    assert [(k[0], k[2]) for k in keys if k[3] == "node-1"] == [(other, "fw"), (URL, "ips")]


def test_a_pod_ovn_does_not_know_as_that_pod_is_no_member() -> None:
    want = desired(
        sg("web", "app=web"), vnf("ips", **MANAGED), binding("web-ips", "web", "ips", 10)
    )
    stale = cluster([("shop", "web-1", "node-1", {"app": "web"})])
    recreated = dataclasses.replace(
        stale, pods=tuple(dataclasses.replace(p, uid="new-uid") for p in stale.pods)
    )
    assert member_notices(want, recreated)[(URL, "web-ips", "ips", "node-1")].members == ()


def test_a_long_list_is_split_into_parts_of_one_sequence_never_cut() -> None:
    members = tuple(("shop", f"web-{i:03}", (f"10.0.{i // 250}.{i % 250}",)) for i in range(25))
    notice = MemberNotice(URL, "web-ips", "web", "ips", "node-1", members)
    parts = members_payloads(notice, 1795786712112096, limit=10)
    assert [(p["part"], p["parts"], len(p["members"])) for p in parts] == [
        (1, 3, 10), (2, 3, 10), (3, 3, 5),
    ]  # fmt: skip
    assert {p["sequence"] for p in parts} == {1795786712112096}
    assert {p["digest"] for p in parts} == {notice.digest}
    assert {p["memberCount"] for p in parts} == {25}
    names = [m["name"] for p in parts for m in p["members"]]
    assert names == [m[1] for m in members], "every member once, in order"
    for part in parts:
        valid(part)
    (empty,) = members_payloads(notice.emptied(), 7, limit=10)
    assert empty["members"] == [] and (empty["part"], empty["parts"]) == (1, 1)
    valid(empty)


def test_the_digest_follows_the_content_only() -> None:
    one = MemberNotice(URL, "b", "web", "ips", "n", (("shop", "a", ("10.0.0.1",)),))
    assert one.digest == MemberNotice("other-url", "b2", "web", "ips", "n2", one.members).digest
    assert one.digest != MemberNotice(URL, "b", "web", "ips", "n", ()).digest
    assert one.digest != MemberNotice(URL, "b", "api", "ips", "n", one.members).digest


def test_each_notice_names_the_manager_binding_vnf_and_node_of_its_key() -> None:
    want = desired(
        sg("web", "app=web"), vnf("ips", **MANAGED), binding("web-ips", "web", "ips", 10)
    )
    notices = member_notices(want, PODS)
    assert notices
    for key, notice in notices.items():
        assert notice.key == key
        assert (notice.url, notice.binding, notice.vnf, notice.node) == key


def test_a_managed_hop_after_an_unmanaged_one_is_told_too() -> None:
    chain = desired(
        sg("web", "app=web"), vnf("plain"), vnf("ips", **MANAGED),
        binding("web-chain", "web", ["plain", "ips"], 10),
    )  # fmt: skip
    assert sorted(member_notices(chain, PODS)) == [
        (URL, "web-chain", "ips", "node-1"), (URL, "web-chain", "ips", "node-2"),
    ]  # fmt: skip


def test_a_limit_below_one_sends_one_member_per_part() -> None:
    members = (("shop", "a", ("10.0.0.1",)), ("shop", "b", ("10.0.0.2",)))
    notice = MemberNotice(URL, "web-ips", "web", "ips", "node-1", members)
    for limit in (0, -3, 1):
        parts = members_payloads(notice, 1, limit=limit)
        assert [(p["part"], p["parts"], len(p["members"])) for p in parts] == [(1, 2, 1), (2, 2, 1)]
