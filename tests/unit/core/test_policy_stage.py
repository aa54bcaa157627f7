"""One stage with OVN-Kubernetes' policy (issue 29): from-lport steering ACLs are evaluated
after the load balancer, where OVN-Kubernetes' egress NetworkPolicy ACLs are, and the plan's
NetworkPolicy warnings name the direction a policy governs. The packets:
tests/datapath/test_policy_stage.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.adapters.kube.objects import network_policy_from_object
from reconciler.core.compiling.compile import CompileOptions, compile_target
from reconciler.core.model.desired import Precedence
from reconciler.core.model.observed import NetworkPolicy, Observed
from reconciler.core.steering.common import network_policy_effects
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "db-1", "node-2", {"app": "db"})]
BEFORE, AFTER = Precedence.BEFORE_NETWORK_POLICY, Precedence.AFTER_NETWORK_POLICY


def acls(redirection: str, precedence: str = "after-network-policy") -> dict[str, dict]:
    want = desired(
        sg("web", "app=web"), vnf("fw"),
        binding("web-fw", "web", "fw", 10, redirection=redirection, precedence=precedence),
    )  # fmt: skip
    return {r.fields["direction"]: r.fields for r in compile_target(want, cluster(PODS))
            if r.kind == "ACL"}  # fmt: skip


@pytest.mark.parametrize("precedence", ["before-network-policy", "after-network-policy"])
def test_from_lport_steering_is_evaluated_after_the_load_balancer(precedence: str) -> None:
    rows = acls("both", precedence)
    tier = 1 if precedence == "before-network-policy" else 3
    assert rows["from-lport"]["options"] == {"apply-after-lb": "true"}
    assert rows["from-lport"]["tier"] == rows["to-lport"]["tier"] == tier
    assert "options" not in rows["to-lport"]  # to-lport ACLs are after the LB anyway


def test_router_policy_rows_have_no_acl_options() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10,
                                                            redirection="both"))  # fmt: skip
    target = compile_target(want, cluster(PODS, nf=False), CompileOptions(steering="router-policy"))
    assert not [r for r in target if r.kind == "ACL"]


def test_network_policy_effects_are_direction_specific() -> None:
    egress_only, ingress_only = ("Egress",), ("Ingress",)
    assert network_policy_effects(egress_only, {("to-lport", AFTER)}, tiered=True) == []
    assert network_policy_effects(ingress_only, {("from-lport", BEFORE)}, tiered=True) == []
    assert network_policy_effects(egress_only, {("from-lport", BEFORE)}, tiered=True) == [
        "from them (entry-lport), its denies do not apply to steered flows (before-network-policy)"
    ]
    both = network_policy_effects(
        ("Ingress", "Egress"), {("to-lport", AFTER), ("from-lport", BEFORE)}, tiered=True
    )
    assert both == [
        "towards them (exit-lport), flows it allows are not steered (precedence "
        "after-network-policy)",
        "from them (entry-lport), its denies do not apply to steered flows (before-network-policy)",
    ]
    (routed,) = network_policy_effects(ingress_only, {("to-lport", BEFORE)}, tiered=False)
    assert "it decides first whatever the precedence" in routed


def _with_policy(policy: NetworkPolicy) -> Observed:
    return replace(cluster(PODS), network_policies=(policy,))


def test_the_plan_warns_only_where_a_policy_and_the_steering_meet() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, redirection="entry-lport"))  # fmt: skip
    selecting = {"matchLabels": {"app": "web"}}
    ingress = NetworkPolicy("shop", "in", selecting, ("Ingress",))
    egress = NetworkPolicy("shop", "out", selecting, ("Egress",))
    quiet = "\n".join(compile_target(want, _with_policy(ingress)).warnings)
    assert "NetworkPolicy shop/in" not in quiet  # ingress policy, pods steered from-lport only
    loud = "\n".join(compile_target(want, _with_policy(egress)).warnings)
    assert (
        "NetworkPolicy shop/out selects 1 steered pod(s): from them (entry-lport), flows it "
        "allows are not steered (precedence after-network-policy)" in loud
    )


def test_policy_types_as_kubernetes_defaults_them() -> None:
    def types(spec: dict) -> tuple[str, ...]:
        obj = {"metadata": {"namespace": "shop", "name": "p"}, "spec": spec}
        return network_policy_from_object(obj).policy_types

    assert types({"podSelector": {}}) == ("Ingress",)
    assert types({"podSelector": {}, "egress": [{}]}) == ("Ingress", "Egress")
    assert types({"podSelector": {}, "policyTypes": ["Egress"]}) == ("Egress",)
    obs = replace(cluster(PODS), network_policies=(NetworkPolicy("shop", "p", {}, ("Egress",)),))
    assert Observed.from_json(obs.to_json()).network_policies == obs.network_policies


def test_a_policy_the_steering_never_meets_does_not_hide_the_next_one() -> None:
    """Policies are judged one by one (sorted by namespace and name): ``shop/in`` governs only
    ingress, which these pods are not steered in, and says nothing; ``shop/out`` after it is
    still told."""
    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, redirection="entry-lport"))  # fmt: skip
    selecting = {"matchLabels": {"app": "web"}}
    policies = (
        NetworkPolicy("shop", "in", selecting, ("Ingress",)),
        NetworkPolicy("shop", "out", selecting, ("Egress",)),
    )
    target = compile_target(want, replace(cluster(PODS), network_policies=policies))
    assert [f.subject for f in target.findings if f.code == "network-policy"] == [
        "NetworkPolicy/shop/out"
    ]


def test_a_policy_governing_both_directions_names_both_effects_in_one_finding() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, redirection="both"))  # fmt: skip
    policy = NetworkPolicy("shop", "both", {"matchLabels": {"app": "web"}}, ("Ingress", "Egress"))
    (finding,) = [f for f in compile_target(want, _with_policy(policy)).findings
                  if f.code == "network-policy"]  # fmt: skip
    assert finding.text == (
        "NetworkPolicy shop/both selects 1 steered pod(s): towards them (exit-lport), flows it "
        "allows are not steered (precedence after-network-policy); from them (entry-lport), "
        "flows it allows are not steered (precedence after-network-policy)"
    )
