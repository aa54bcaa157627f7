"""``instancesPerNode: 2``: a second VM per node with stable names, both in the node's function
groups, a probe group per function, the NF id budget counting them and saying so when it runs
out; the first instance keeps today's names (nothing changes for ``instancesPerNode: 1``)."""

from __future__ import annotations

import hashlib

import pytest

from reconciler.core.compiling.compile import CompileError, CompileOptions, compile_target
from reconciler.core.model import naming
from reconciler.core.model.observed import KubeObject
from reconciler.core.model.target import Target
from reconciler.core.steering import id_budget
from reconciler.core.transitions.rollout import restart_needed
from tests.support.builders import binding, cluster, desired, sg, vnf

NF = CompileOptions(steering="network-function")
PODS = [("shop", "web-1", "node-1", {"app": "web"})]


def rows(target: Target, kind: str) -> dict[str, dict]:
    return {r.key: r.fields for r in target if r.kind == kind}


def two(**spec: object):
    return desired(sg("web", "app=web"), vnf("fw", instancesPerNode=2, **spec),
                   binding("web-fw", "web", "fw", 10, redirection="both"))  # fmt: skip


def test_the_second_instance_has_stable_names_and_joins_the_nodes_groups() -> None:
    target = compile_target(two(), cluster(PODS), NF)
    assert set(rows(target, "VirtualMachine")) == {
        "security/fw-node-1", "security/fw-node-1-b", "security/fw-node-2", "security/fw-node-2-b",
    }  # fmt: skip
    vm = rows(target, "VirtualMachine")["security/fw-node-1-b"]
    networks = vm["spec"]["template"]["spec"]["networks"]
    assert [n["multus"]["networkName"] for n in networks if "multus" in n] == [
        "fw-node-1-b-in",
        "fw-node-1-b-out",
    ]
    assert vm["metadata"]["annotations"]["osc.io/ports"] == (
        "in=nf_fw_node-1_b_in,out=nf_fw_node-1_b_out"
    )
    macs = {i["macAddress"] for v in rows(target, "VirtualMachine").values()
            for i in v["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]
            if "macAddress" in i}  # fmt: skip
    assert len(macs) == 8  # every NIC its own MAC
    nfs = rows(target, "Network_Function")
    assert nfs["osc.fw.node_1._b"]["inport"] == "nf_fw_node-1_b_in"
    groups = rows(target, "Network_Function_Group")
    assert groups["osc.fw.node_1.fail_close"]["network_function"] == [
        "osc.fw.node_1",
        "osc.fw.node_1._b",
    ]
    # one probe group per function: northd reports each VM's health, the standby's too
    assert groups["osc.fw.node_1.probe"]["network_function"] == ["osc.fw.node_1"]
    assert groups["osc.fw.node_1._b.probe"]["network_function"] == ["osc.fw.node_1._b"]
    assert set(rows(target, "Network_Function_Health_Check")) == set(nfs)
    budget = id_budget(target, cluster(PODS))
    assert {t: (b["used"], b["max"]) for t, b in budget.items()} == {
        "Network_Function": (4, 255),
        "Network_Function_Group": (6, 255),
    }
    # how ours add up: two functions and three groups on each of two nodes
    assert {t: (b["ours"], b["nodes"], b["per_node"]) for t, b in budget.items()} == {
        "Network_Function": (4, 2, 2),
        "Network_Function_Group": (6, 2, 3),
    }


def test_one_instance_per_node_keeps_todays_rows() -> None:
    one = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    target = compile_target(one, cluster(PODS), NF)
    assert set(rows(target, "VirtualMachine")) == {"security/fw-node-1", "security/fw-node-2"}
    assert set(rows(target, "Network_Function_Group")) == {
        "osc.fw.node_1.fail_close",
        "osc.fw.node_2.fail_close",
    }  # no probe groups: the steering group tells the one function's health


def test_second_instance_names_never_collide_with_a_first_instance() -> None:
    # node names are DNS subdomains: none of their labels starts with "_"
    assert naming.network_function("osc-gitops", "fw", "node-1", naming.SECOND) == (
        "osc.fw.node_1._b"
    )
    assert naming.network_function("osc-gitops", "fw", "node-1.b") == "osc.fw.node_1.b"
    probe = naming.probe_group("osc-gitops", "fw", "node-1")
    assert naming.is_probe_group(probe)
    assert not naming.is_probe_group(
        naming.network_function_group("osc-gitops", "fw", "node-1.probe", "fail-close")
    )


def test_an_id_budget_two_instances_would_exceed_is_named_before_anything_is_written() -> None:
    nodes = tuple(f"node-{i}" for i in range(1, 91))  # 90 groups; 270 with a standby
    big = cluster([("shop", "web-1", "node-1", {"app": "web"})], nodes=nodes)
    compile_target(desired(sg("web", "app=web"), vnf("fw"),
                           binding("web-fw", "web", "fw", 10)), big, NF)  # fmt: skip
    with pytest.raises(CompileError) as err:
        compile_target(two(), big, NF)
    message = str(err.value)
    assert "Network_Function_Group ids exhausted" in message
    assert "instancesPerNode: 2 of VnfDeployment fw" in message
    assert "set it back to 1 where no standby is needed" in message


def test_router_policy_cannot_fail_over_and_says_so() -> None:
    target = compile_target(two(), cluster(PODS), CompileOptions(steering="router-policy"))
    assert set(rows(target, "VirtualMachine")) == {"security/fw-node-1", "security/fw-node-2"}
    assert any("instancesPerNode: 2" in w and "router-policy" in w for w in target.warnings)


def vm(**status: object) -> KubeObject:
    return KubeObject("VirtualMachine", "ns", "fw-node-1", {}, status=dict(status))


def test_restart_needed_follows_kubevirts_generations() -> None:
    assert restart_needed(vm()) is True  # no KubeVirt status: restart to be sure
    assert restart_needed(vm(desiredGeneration=2)) is True  # half a status: likewise
    assert restart_needed(vm(observedGeneration=2)) is True
    behind = {"generation": 3, "desiredGeneration": 2, "observedGeneration": 2}
    assert restart_needed(vm(**behind)) is None  # KubeVirt has not seen the new template
    due = {"generation": 3, "desiredGeneration": 3, "observedGeneration": 2}
    assert restart_needed(vm(**due)) is True
    assert restart_needed(vm(**due, stateChangeRequests=2)) is False  # already requested
    done = {"generation": 3, "desiredGeneration": 3, "observedGeneration": 3}
    assert restart_needed(vm(**done)) is False


def test_the_first_instance_is_the_default_of_every_name() -> None:
    assert naming.probe_group("osc-gitops", "fw", "node-1") == "osc.fw.node_1.probe"
    assert (
        naming.probe_group("osc-gitops", "fw", "node-1", naming.SECOND) == "osc.fw.node_1._b.probe"
    )
    assert naming.nad_name("fw", "node-1", "in") == "fw-node-1-in"
    assert naming.nad_name("fw", "node-1", "in", naming.SECOND) == "fw-node-1-b-in"
    assert naming.port_group("osc-gitops", "web", "node-1") == "osc.web.node_1"
    assert naming.port_group("blue-team", "web", "node-1") == "osc_blue_team.web.node_1"


def test_a_name_too_long_keeps_its_head_and_ten_hex_of_its_sha256() -> None:
    def ten_hex(name: str) -> str:
        return hashlib.sha256(name.encode()).hexdigest()[:10]

    assert naming.fit("a" * 20, 20) == "a" * 20
    assert naming.fit("a" * 21, 20) == "a" * 9 + "-" + ten_hex("a" * 21)
    dotted = "a" * 8 + "." + "b" * 20  # its head ends with the dot: left out
    assert naming.fit(dotted, 20) == "a" * 8 + "-" + ten_hex(dotted)
