"""Traffic filters as plain data and as differences, and Network Function ids: stable, the lowest
free first, an id a leaving row holds last, and an error that says how the need adds up."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.desired import Traffic
from reconciler.core.model.observed import OvnRow
from reconciler.core.steering.base import MAX_OVN_ID, CompileError, allocate_ids, id_need
from reconciler.core.steering.common import filters_json, subtract
from tests.support.builders import binding, cluster, desired, sg, vnf


def t(protocol: str, *ports: object) -> Traffic:
    return Traffic.model_validate({"protocol": protocol, "ports": list(ports)})


def test_filters_as_json_keep_single_ports_and_name_ranges() -> None:
    assert filters_json(None) == [{"protocol": "any", "ports": []}]
    assert filters_json([t("tcp", 80, {"start": 8000, "end": 8080}), t("icmp")]) == [
        {"protocol": "tcp", "ports": [80, {"start": 8000, "end": 8080}]},
        {"protocol": "icmp", "ports": []},
    ]
    assert filters_json(t("udp", 53)) == [{"protocol": "udp", "ports": [53]}]


def words(filters: tuple[Traffic, ...]) -> list[dict[str, object]]:
    return filters_json(list(filters))


@pytest.mark.parametrize(
    ("filters", "taken", "left"),
    [
        ([t("tcp", {"start": 1, "end": 10})], [t("tcp", {"start": 1, "end": 9})],
         [{"protocol": "tcp", "ports": [10]}]),
        ([t("tcp", {"start": 1, "end": 10})], [t("tcp", 1, {"start": 3, "end": 9})],
         [{"protocol": "tcp", "ports": [2, 10]}]),
        ([t("tcp", {"start": 1, "end": 10})], [t("tcp", {"start": 1, "end": 10})], []),
        ([t("udp", 53)], [t("tcp", 53)], [{"protocol": "udp", "ports": [53]}]),
        ([t("icmp")], [t("icmp")], []),
        ([t("icmp")], [t("tcp")], [{"protocol": "icmp", "ports": []}]),
        ([t("any")], [t("any")], []),
    ],
)  # fmt: skip
def test_what_is_left_of_filters_after_others_took_their_share(
    filters: list[Traffic], taken: list[Traffic], left: list[dict[str, object]]
) -> None:
    assert words(subtract(filters, taken)) == left


def test_all_ip_minus_tcp_is_icmp_and_udp() -> None:
    assert words(subtract([t("any")], [t("tcp")])) == [
        {"protocol": "icmp", "ports": []},
        {"protocol": "udp", "ports": []},
    ]


def ports_of(filters: tuple[Traffic, ...] | list[Traffic]) -> set[int]:
    """Every TCP port the filters take, one by one (the set model of a port list)."""
    out: set[int] = set()
    for f in filters:
        ranges = [(p, p) if isinstance(p, int) else (p.start, p.end) for p in f.ports]
        for start, end in ranges or [(1, 65535)]:  # no ports: every port
            out.update(range(start, end + 1))
    return out


port_lists = st.lists(
    st.one_of(
        st.integers(1, 65535),
        st.tuples(st.integers(1, 65535), st.integers(0, 40)).map(
            lambda se: {"start": se[0], "end": min(65535, se[0] + se[1])}
        ),
    ),
    max_size=5,
)


@given(mine=port_lists, gone=port_lists)
def test_the_ports_left_are_exactly_those_taken_by_no_other(
    mine: list[object], gone: list[object]
) -> None:
    filters, taken = [t("tcp", *mine)], [t("tcp", *gone)]
    left = ports_of([f for f in subtract(filters, taken) if f.protocol.value == "tcp"])
    assert left == ports_of(filters) - ports_of(taken)


def test_how_an_id_need_adds_up() -> None:
    what = {"a": ("node-1", "firewall"), "b": ("node-1", "ids"), "c": ("node-2", "firewall")}
    assert id_need(["a", "b", "c"], what) == (
        "2 node(s) x up to 2 per node (firewall x 2, ids x 1)"
    )
    assert id_need(["a", "zzz"], what) == "2 node(s) x up to 1 per node (firewall x 1, other x 1)"
    assert id_need([], what) == "none"


def rows(ids: dict[str, int]) -> tuple[OvnRow, ...]:
    return tuple(OvnRow("Network_Function", n, {"name": n, "id": i}) for n, i in ids.items())


def test_ids_are_stable_and_new_rows_take_the_lowest_free() -> None:
    obs = replace(
        cluster([]), ovn_rows=rows({"b": 7, "old": 1}), used_ids={"Network_Function": (2,)}
    )
    got = allocate_ids("Network_Function", ["c", "b", "a", "a"], obs)
    # b keeps 7; 1 is held by a row this plan deletes (taken last), 2 by others
    assert got == {"a": 3, "b": 7, "c": 4}


def test_an_id_a_leaving_row_holds_is_given_out_last() -> None:
    free = {f"x{i}": i for i in range(1, MAX_OVN_ID + 1) if i not in (5,)}  # all but 5 in use
    obs = replace(cluster([]), ovn_rows=rows({**free, "gone": 5}))
    got = allocate_ids("Network_Function", [*free, "new"], obs)
    assert got["new"] == 5  # only the leaving row's id is left


def test_an_id_others_hold_is_not_kept() -> None:
    obs = replace(cluster([]), ovn_rows=rows({"a": 3}), used_ids={"Network_Function": (3,)})
    assert allocate_ids("Network_Function", ["a"], obs) == {"a": 1}
    weird = (OvnRow("Network_Function", "a", {"name": "a", "id": "3"}),)  # not an id
    assert allocate_ids("Network_Function", ["a"], replace(cluster([]), ovn_rows=weird)) == {"a": 1}


def test_every_id_up_to_the_last_is_given_out() -> None:
    names = [f"n{i:03}" for i in range(MAX_OVN_ID)]
    got = allocate_ids("Network_Function", names, cluster([]))
    assert sorted(got.values()) == list(range(1, MAX_OVN_ID + 1))


def test_exhausted_ids_say_how_the_need_adds_up() -> None:
    names = [f"n{i:03}" for i in range(MAX_OVN_ID + 1)]
    obs = replace(cluster([]), used_ids={"Network_Function": (9,)})
    what = {n: (f"node-{i % 2}", "firewall") for i, n in enumerate(names)}
    with pytest.raises(CompileError) as caught:
        allocate_ids("Network_Function", names, obs, what)
    assert str(caught.value) == (
        f"Network_Function ids exhausted: OVN allows ids 1-{MAX_OVN_ID} per Northbound DB and "
        f"this target needs {MAX_OVN_ID + 1} rows: 2 node(s) x up to 128 per node (firewall x "
        "256) (plus 1 taken by others); nothing was written. Bind fewer VNFs or chains per NB, "
        "run one NB per node (OVN-Kubernetes interconnect), or use --steering router-policy"
    )
    with pytest.raises(CompileError, match=r"needs 256 rows \(plus 1 taken by others\)"):
        allocate_ids("Network_Function", names, obs)


def test_function_groups_running_out_name_each_kind_of_group_the_target_needs() -> None:
    """A chain's entry and exit groups, the instances' groups and the probe groups of a VNF
    with a standby: an exhausted id space says how many of each, and what to set back."""
    want = desired(sg("web", "app=web"), vnf("fw", instancesPerNode=2), vnf("ips"),
                   binding("web-chain", "web", ["fw", "ips"], 10, redirection="both"))  # fmt: skip
    obs = cluster([("shop", "w", "node-1", {"app": "web"})], nf=True)
    nf = CompileOptions(steering="network-function")
    target = compile_target(want, obs, nf)
    probes = {
        r.key: r.fields
        for r in target.resources.values()
        if r.kind == "Network_Function_Group" and r.key.endswith(".probe")
    }
    assert {k: (f["fallback"], f["network_function"]) for k, f in probes.items()} == {
        "osc.fw.node_1.probe": ("fail-close", ["osc.fw.node_1"]),
        "osc.fw.node_1._b.probe": ("fail-close", ["osc.fw.node_1._b"]),
        "osc.fw.node_2.probe": ("fail-close", ["osc.fw.node_2"]),
        "osc.fw.node_2._b.probe": ("fail-close", ["osc.fw.node_2._b"]),
    }
    crowded = replace(obs, used_ids={"Network_Function_Group": tuple(range(1, 250))})
    with pytest.raises(CompileError) as caught:
        compile_target(want, crowded, nf)
    assert str(caught.value) == (
        "Network_Function_Group ids exhausted: OVN allows ids 1-255 per Northbound DB and this "
        "target needs 12 rows: 2 node(s) x up to 6 per node (chain fw -> ips (entry) fail-close "
        "x 2, chain fw -> ips (exit) fail-close x 2, fw fail-close x 2, fw probe x 4, ips "
        "fail-close x 2) (plus 249 taken by others); nothing was written. Bind fewer VNFs or "
        "chains per NB, run one NB per node (OVN-Kubernetes interconnect), or use --steering "
        "router-policy; instancesPerNode: 2 of VnfDeployment fw takes a second Network_Function "
        "and two probe Network_Function_Groups more per node: set it back to 1 where no standby "
        "is needed"
    )
    both = desired(sg("web", "app=web"), vnf("fw", instancesPerNode=2),
                   vnf("ips", instancesPerNode=2),
                   binding("web-chain", "web", ["fw", "ips"], 10, redirection="both"))  # fmt: skip
    with pytest.raises(CompileError, match="instancesPerNode: 2 of VnfDeployment fw, ips takes"):
        compile_target(both, crowded, nf)
