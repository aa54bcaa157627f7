"""What ``explain`` and ``status`` say of a VNF instance's traffic and of an unbound port, read
whole (``reconciler.core.views.traffic``): each verdict's line, each cause the node's binder
report gives, the counters per instance and how much of their history is kept."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.views.traffic import (
    CROSSED,
    QUIET,
    SILENT,
    UNKNOWN,
    BinderReport,
    CounterHistory,
    InstanceTraffic,
    NodeTraffic,
    instance_traffic,
    instance_traffic_line,
    node_traffic,
    unbound_cause,
    uncounted,
    verdict,
    verdict_text,
)

IN = "nf_firewall_node-1_in"
VM = "security/firewall-node-1"


# --- the history of counters -----------------------------------------------------------------


def history(*samples: tuple[float, dict[str, int]], window: float = 60.0) -> CounterHistory:
    out = CounterHistory(window=window)
    for at, totals in samples:
        out.add(at, totals)
    return out


def test_the_history_keeps_one_sample_older_than_the_window_and_the_newer_ones() -> None:
    ten_seconds = history(*((float(t), {"p": t}) for t in range(0, 80, 10)))
    assert [at for at, _ in ten_seconds.samples] == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]
    # one sample a whole window old, one in between, the newest: the oldest goes
    three = history((0.0, {"p": 0}), (5.0, {"p": 1}), (70.0, {"p": 2}))
    assert [at for at, _ in three.samples] == [5.0, 70.0]
    # two samples are always kept, however old the first
    assert [at for at, _ in history((0.0, {}), (500.0, {})).samples] == [0.0, 500.0]


def test_a_whole_window_counts_from_the_sample_exactly_a_window_old() -> None:
    assert history((0.0, {"p": 3}), (60.0, {"p": 3})).delta("p") == 0
    assert history((0.0, {"p": 3}), (60.0, {"p": 10})).delta("p") == 7
    assert history((0.0, {"p": 3}), (59.0, {"p": 3})).delta("p") is None, "not a minute yet"


def test_an_interface_newer_than_the_window_counts_from_zero() -> None:
    assert history((0.0, {}), (30.0, {"p": 2}), (61.0, {"p": 7})).delta("p") == 7


def test_counters_that_went_back_count_nothing() -> None:
    """An interface re-created (its VM restarted) starts from zero again."""
    assert history((0.0, {"p": 10}), (60.0, {"p": 4})).delta("p") == 0
    assert history((0.0, {"p": 10}), (5.0, {"p": 3})).delta("p") is None


def test_nothing_can_be_said_without_samples_of_the_key() -> None:
    assert CounterHistory().delta("p") is None
    assert history((0.0, {"p": 1}), (60.0, {"q": 1})).delta("p") is None, "gone from the newest"
    assert history((0.0, {"p": 1})).delta("p") is None, "one sample: no difference yet"
    assert history((0.0, {"p": 1}), (5.0, {"p": 4})).delta("p") == 3


def test_each_instance_has_its_counters_per_side_and_what_crossed_its_out_port() -> None:
    nics = [
        ("ids", "node-1", "ids-node-1", "in", "nf_ids_node-1_in"),
        ("firewall", "node-1", "firewall-node-1", "out", "nf_firewall_node-1_out"),
        ("firewall", "node-1", "firewall-node-1", "in", "nf_firewall_node-1_in"),
    ]
    counters = {
        "nf_firewall_node-1_out": {"tx_packets": 12, "rx_packets": 3},
        "nf_firewall_node-1_in": {"tx_packets": 7, "rx_packets": 9, "tx_bytes": 700,
                                  "rx_bytes": 900},
    }  # fmt: skip
    seen = history((0.0, {"nf_firewall_node-1_out": 2}), (60.0, {"nf_firewall_node-1_out": 12}))
    firewall, ids = instance_traffic(nics, counters, seen)
    assert firewall == InstanceTraffic(
        "firewall", "node-1", "firewall-node-1",
        {"in": {"rx_packets": 9, "rx_bytes": 900, "tx_packets": 7, "tx_bytes": 700},
         "out": {"rx_packets": 3, "rx_bytes": 0, "tx_packets": 12, "tx_bytes": 0}},
        10,
    )  # fmt: skip
    assert list(firewall.ports) == ["in", "out"]
    # no out port: nothing can be said of what crossed it; no counters: zeros
    assert ids == InstanceTraffic(
        "ids",
        "node-1",
        "ids-node-1",
        {"in": {"rx_packets": 0, "rx_bytes": 0, "tx_packets": 0, "tx_bytes": 0}},
        None,
    )
    assert firewall.to_json() == {
        "vnf": "firewall", "node": "node-1", "instance": "firewall-node-1",
        "ports": firewall.ports, "crossed_last_minute": 10,
    }  # fmt: skip


# --- verdicts and their lines ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("crossed", "talked", "expected"),
    [
        (3, None, CROSSED), (3, 0, CROSSED), (0, 5, SILENT), (0, 0, QUIET),
        (None, 5, UNKNOWN), (0, None, UNKNOWN), (None, None, UNKNOWN),
    ],
)  # fmt: skip
def test_the_verdict_of_an_instance(crossed: int | None, talked: int | None, expected: str) -> None:
    assert verdict(crossed, talked) == expected


def test_each_verdict_reads_as_one_line() -> None:
    assert verdict_text(CROSSED, 12, 40) == (
        "traffic crossed it in the last minute (12 pod packets into its out port)"
    )
    assert verdict_text(QUIET, 0, 0) == (
        "no traffic in the last minute, and its steered pods sent none either"
    )
    assert verdict_text(SILENT, 0, 42, ["shop_web-a", "shop_web-b"]) == (
        "NOTHING crossed it in the last minute while its steered pods (shop_web-a, shop_web-b) "
        "sent and received 42 packets: their traffic does not reach the VNF"
    )
    assert verdict_text(SILENT, 0, 42) == (
        "NOTHING crossed it in the last minute while its steered pods sent and received 42 "
        "packets: their traffic does not reach the VNF"
    )
    assert verdict_text(UNKNOWN, None, None) == (
        "traffic unknown (no binder counts it, or less than a minute of samples)"
    )


def test_a_silent_instance_names_five_of_its_pods_at_most() -> None:
    five = [f"shop_web-{i}" for i in range(5)]
    assert "pods (shop_web-0, shop_web-1, shop_web-2, shop_web-3, shop_web-4) sent" in (
        verdict_text(SILENT, 0, 9, five)
    )
    six = [*five, "shop_web-5"]
    assert "pods (shop_web-0, shop_web-1, shop_web-2, shop_web-3, shop_web-4, …) sent" in (
        verdict_text(SILENT, 0, 9, six)
    )


def binder_record(**fields: Any) -> dict[str, Any]:
    return {"role": "binder", "node": "node-1", "ok": True,
            "traffic_sampled_at": "2026-11-27T10:00:00Z", **fields}  # fmt: skip


def traffic_of(instance: str, crossed: int | None) -> dict[str, Any]:
    return {"vnf": "firewall", "node": "node-1", "instance": instance, "ports": {},
            "crossed_last_minute": crossed}  # fmt: skip


def test_explain_judges_an_instance_on_the_pods_steered_through_it() -> None:
    """``explain``'s traffic line of one instance: only the pods of the plan that are steered
    through it count as "its pods talked"."""
    pods = ["shop_web-1", "shop_web-2", "shop_quiet-3"]
    record = binder_record(
        traffic=[traffic_of("ids-node-1", 9), traffic_of("firewall-node-1", 0)],
        pods_talking={"shop_web-1": 5, "shop_web-2": 2, "shop_quiet-3": 0, "shop_other": 80},
    )
    fresh = BinderReport("node-1", record, fresh=True)
    assert instance_traffic_line(fresh, "firewall-node-1", pods) == (
        SILENT,
        "NOTHING crossed it in the last minute while its steered pods (shop_web-1, shop_web-2) "
        "sent and received 7 packets: their traffic does not reach the VNF",
    )
    assert instance_traffic_line(fresh, "ids-node-1", pods) == (
        CROSSED,
        "traffic crossed it in the last minute (9 pod packets into its out port)",
    )
    assert instance_traffic_line(fresh, "firewall-node-1", ["shop_quiet-3"]) == (
        QUIET,
        "no traffic in the last minute, and its steered pods sent none either",
    )
    no_talk = BinderReport("node-1", binder_record(traffic=[traffic_of("firewall-node-1", 0)]),
                           fresh=True)  # fmt: skip
    assert instance_traffic_line(no_talk, "firewall-node-1", pods)[0] == QUIET
    # the pods' counters not sampled yet: unknown, as status says (node_traffic), not quiet
    unsampled = BinderReport("node-1", {**no_talk.record, "traffic_sampled_at": None}, fresh=True)
    assert instance_traffic_line(unsampled, "firewall-node-1", pods)[0] == UNKNOWN
    not_yet = BinderReport("node-1", binder_record(traffic=[traffic_of("firewall-node-1", None)]),
                           fresh=True)  # fmt: skip
    assert instance_traffic_line(not_yet, "firewall-node-1", pods) == (
        UNKNOWN,
        "traffic unknown (no binder counts it, or less than a minute of samples)",
    )


def test_explain_says_why_an_instance_traffic_is_unknown() -> None:
    uncounting = "traffic unknown (no binder counts it on this node)"
    record = binder_record(traffic=[traffic_of("firewall-node-1", 4)])
    assert instance_traffic_line(None, "firewall-node-1", []) == (UNKNOWN, uncounting)
    assert instance_traffic_line(BinderReport("node-1"), "firewall-node-1", []) == (
        UNKNOWN,
        uncounting,
    )
    stale = BinderReport("node-1", record, fresh=False)
    assert instance_traffic_line(stale, "firewall-node-1", []) == (UNKNOWN, uncounting)
    fresh = BinderReport("node-1", record, fresh=True)
    assert instance_traffic_line(fresh, "ids-node-1", []) == (
        UNKNOWN,
        "traffic unknown (the binder does not count this instance)",
    )
    empty = BinderReport("node-1", binder_record(), fresh=True)
    assert instance_traffic_line(empty, "firewall-node-1", []) == (
        UNKNOWN,
        "traffic unknown (the binder does not count this instance)",
    )


# --- why a port is unbound ---------------------------------------------------------------------

NO_BINDER = (
    "the CNI did not set iface-id: ovs-cni older than commit 42291151 (v0.39.0, the latest "
    "release, and every release before it) reads the OVN port only from CNI_ARGS, which "
    "Multus and KubeVirt never fill with it, and no binder runs on node-1"
)


def cause(record: dict[str, Any] | None = None, fresh: bool = True, problem: str = "") -> str:
    return unbound_cause(IN, "node-1", VM, BinderReport("node-1", record, fresh, problem))


def test_an_unbound_port_without_a_binder_report_says_what_is_known() -> None:
    assert unbound_cause(IN, "node-1", VM, None) == (
        "the CNI did not set iface-id (ovs-cni up to v0.39.0 never does); whether a binder runs "
        "on node-1 was not looked up"
    )
    assert cause(problem="403 Forbidden") == (
        "the CNI did not set iface-id (ovs-cni up to v0.39.0 never does); whether a binder runs "
        "on node-1 is unknown: 403 Forbidden"
    )
    assert cause(None, fresh=False) == NO_BINDER
    assert cause(None, fresh=True) == NO_BINDER
    assert cause(binder_record(), fresh=False) == (
        NO_BINDER + " (its Lease node-1 stopped being renewed)"
    )


def test_an_unbound_port_names_what_the_binder_on_its_node_reports() -> None:
    assert cause(binder_record(ok=False, error="Open_vSwitch DB: Permission denied")) == (
        "the binder on node-1 fails: Open_vSwitch DB: Permission denied"
    )
    assert cause(binder_record(bound=[{"port": "nf_other_in", "interface": "x"},
                                      {"port": IN, "interface": "tap0"}])) == (
        f"the binder on node-1 set iface-id={IN} on OVS interface tap0, but OVN has not bound "
        "it yet: see ovn-controller on node-1 (its log, the chassis' registration in the "
        "Southbound DB)"
    )  # fmt: skip
    assert cause(binder_record(waiting=[{"port": "nf_other_in", "nic": "x"},
                                        {"port": IN, "nic": "data-in"}])) == (
        "the binder on node-1 waits: no OVS interface (or virt-launcher pod) for its NIC "
        "data-in yet: has the VM's virt-launcher pod started and its CNI run?"
    )  # fmt: skip
    newer = (
        "the binder on node-1 does not know the NIC yet (its VM or pod is newer than its last pass)"
    )
    assert cause(binder_record()) == newer
    assert cause(binder_record(bound=[{"port": "nf_other_in"}], waiting=[{"port": "x"}])) == newer


@pytest.mark.parametrize(
    "subject",
    [
        f"VirtualMachine {VM}",
        f"VirtualMachine {VM} NIC data-in",
        "pod security/virt-launcher-firewall-node-1-x7k2p",
    ],
)
def test_an_unbound_port_names_the_binder_skip_of_its_vm_or_launcher_pod(subject: str) -> None:
    skip = {"subject": subject, "reason": "mac-mismatch", "detail": "pod reports 02:00:00:00:00:99"}
    assert cause(binder_record(skipped=[skip], bound=[{"port": IN, "interface": "t"}])) == (
        "the binder on node-1 skipped it (mac-mismatch): pod reports 02:00:00:00:00:99"
    )


@pytest.mark.parametrize(
    "subject",
    [
        "VirtualMachine security/firewall-node-10",
        "VirtualMachine security/firewall-node-10 NIC data-in",
        "pod security/virt-launcher-firewall-node-10-x7k2p",
        "pod other/virt-launcher-firewall-node-1-x7k2p",
        "",
    ],
)
def test_a_skip_of_another_vm_is_not_the_cause(subject: str) -> None:
    skip = {"subject": subject, "reason": "mac-mismatch", "detail": "d"}
    assert cause(binder_record(skipped=[skip])).startswith("the binder on node-1 does not know")


# --- status: per node, without a plan --------------------------------------------------------


def test_status_judges_each_counted_instance_on_its_node_pods_whole() -> None:
    record = {
        "node": "node-1", "ok": True, "traffic_sampled_at": "2026-11-20T09:59:58Z",
        "pods_talking": {"shop_web-a": 40, "shop_client-c": 2},
        "traffic": [traffic_of("firewall-node-1", 12),
                    {"vnf": "ids", "instance": "ids-node-1", "crossed_last_minute": 0}],
    }  # fmt: skip
    silent, crossed = node_traffic(record)
    assert silent == NodeTraffic(
        "ids", "node-1", "ids-node-1", SILENT, 0, 42,
        "NOTHING crossed it in the last minute while 2 pod(s) on node-1 sent and received 42 "
        "packets: is their traffic steered? (osc-gitops explain a pod its Binding selects)",
    )  # fmt: skip
    assert crossed == NodeTraffic(
        "firewall", "node-1", "firewall-node-1", CROSSED, 12, 42,
        "traffic crossed it in the last minute (12 pod packets into its out port)",
    )  # fmt: skip
    assert silent.to_json() == {
        "vnf": "ids", "node": "node-1", "instance": "ids-node-1", "verdict": SILENT,
        "crossed_last_minute": 0, "pods_talked": 42, "text": silent.text,
    }  # fmt: skip


def test_status_says_quiet_and_unknown_whole() -> None:
    quiet = {
        "traffic_sampled_at": "t",
        "pods_talking": {},
        "traffic": [{"vnf": "fw", "instance": "fw-node-2", "crossed_last_minute": 0}],
    }
    assert node_traffic(quiet, "node-2") == [NodeTraffic(
        "fw", "node-2", "fw-node-2", QUIET, 0, 0,
        "no traffic in the last minute, and no pod on node-2 talked either",
    )]  # fmt: skip
    unsampled = {**quiet, "traffic_sampled_at": None, "pods_talking": {"shop_a": 3}}
    assert node_traffic(unsampled, "node-2") == [NodeTraffic(
        "fw", "node-2", "fw-node-2", UNKNOWN, 0, None,
        "traffic not known yet (less than a minute of samples)",
    )]  # fmt: skip
    odd = {
        "traffic_sampled_at": "t",
        "pods_talking": {"shop_a": 3},
        "traffic": [{"vnf": "fw", "instance": "fw-node-2", "crossed_last_minute": "5"}],
    }
    assert [(t.verdict, t.crossed_last_minute) for t in node_traffic(odd, "node-2")] == [
        (UNKNOWN, None)
    ], "a count that is no integer is not known"
    assert node_traffic({"traffic_sampled_at": "t"}) == []


def test_status_names_the_node_an_instance_was_counted_on() -> None:
    record = {"node": "node-1", "traffic_sampled_at": None,
              "traffic": [{"vnf": "fw", "node": "node-3", "instance": "fw-node-3"},
                          {"vnf": "fw", "instance": "fw-node-1"}]}  # fmt: skip
    assert [t.node for t in node_traffic(record, "node-9")] == ["node-1", "node-3"]
    del record["node"]
    assert [t.node for t in node_traffic(record, "node-9")] == ["node-3", "node-9"]
    entry = node_traffic({"traffic": [{"crossed_last_minute": 1}]}, "node-9")[0]
    assert (entry.vnf, entry.instance, entry.node) == ("", "", "node-9")
    assert node_traffic({"traffic": [{}]})[0].node == "", "no node named anywhere"


def test_status_lists_silent_instances_first_then_by_node_and_instance() -> None:
    def entry(instance: str, node: str, crossed: int) -> dict[str, Any]:
        return {"vnf": "fw", "node": node, "instance": instance, "crossed_last_minute": crossed}

    record = {"traffic_sampled_at": "t", "pods_talking": {"shop_a": 1}, "traffic": [
        entry("b-node-2", "node-2", 4), entry("a-node-2", "node-2", 0),
        entry("c-node-1", "node-1", 4), entry("z-node-1", "node-1", 0),
        entry("a-node-1", "node-1", 4),
    ]}  # fmt: skip
    assert [(t.instance, t.verdict) for t in node_traffic(record)] == [
        ("z-node-1", SILENT), ("a-node-2", SILENT),
        ("a-node-1", CROSSED), ("c-node-1", CROSSED), ("b-node-2", CROSSED),
    ]  # fmt: skip


def test_an_instance_no_binder_counts_is_listed_once_as_unknown() -> None:
    counted = [NodeTraffic("firewall", "node-1", "firewall-node-1", CROSSED, 4, 0, "")]
    instances = [
        {"vnf": "firewall", "node": "node-1"},
        {"vnf": "firewall", "node": "node-2", "health": "healthy"},
        {"vnf": "firewall", "node": "node-2", "instance": "b"},
        {"vnf": "", "node": "node-3"},
        {"vnf": "ids"},
        {"node": "node-4"},
    ]
    assert uncounted(instances, counted) == [NodeTraffic(
        "firewall", "node-2", "firewall-node-2", UNKNOWN, None, None,
        "traffic unknown: no binder on node-2 counts it (no fresh Lease "
        "osc-gitops-binder-node-2, or its NICs are not bound yet)",
    )]  # fmt: skip
