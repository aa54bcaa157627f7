"""Telling OVN-Kubernetes generations apart from their NB rows (issue 29), as plain data; the
same on a real ovsdb-server: tests/functional/reconcile/test_ovn_kubernetes_generations.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.core.compiling.compile import CompileError, compile_target
from reconciler.core.model.observed import Observed, OvnCapabilities
from reconciler.core.model.ovn_kubernetes import OvnKubernetesRows, evidence, refusal
from tests.support.builders import binding, cluster, desired, sg, vnf

OWNER = {
    "k8s.ovn.org/owner-controller": "default-network-controller",
    "k8s.ovn.org/owner-type": "Cluster",
    "k8s.ovn.org/name": "clusterPortGroup",
    "k8s.ovn.org/id": "default-network-controller:Cluster:clusterPortGroup",
}
NO_REROUTE = "ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16"


def test_evidence_counts_only_rows_that_are_not_ours() -> None:
    rows = evidence(
        [
            ("a13298398610555951118", OWNER),
            ("clusterPortGroup", {"name": "clusterPortGroup"}),
            ("osc.web.node_1", {"osc.io/owner": "osc-gitops", "name": "looks-legacy"}),
            ("handmade", {"owner": "a human"}),
        ],
        [
            (102, "allow", NO_REROUTE, {}),
            (102, "allow", "x", {"k8s.ovn.org/name": "n"}),
            (2099, "reroute", "ip4.dst == $osc.web", {}),
        ],
    )
    assert rows == OvnKubernetesRows(
        owner_keyed=1,
        name_only=("clusterPortGroup",),
        name_only_count=1,
        ownerless_no_reroute=(NO_REROUTE,),
    )


@pytest.mark.parametrize(
    ("rows", "schema", "refused"),
    [
        (OvnKubernetesRows(), "5.31.0", None),  # no OVN-Kubernetes: a plain OVN
        (OvnKubernetesRows(owner_keyed=3), "7.18.0", None),  # main
        (OvnKubernetesRows(owner_keyed=3), "7.11.0", None),  # v1.1.0 (OVN 25.03)
        (OvnKubernetesRows(owner_keyed=3), "7.3.0", "v1.0.x or older"),  # OVN 24.03
        (OvnKubernetesRows(owner_keyed=3, ownerless_no_reroute=(NO_REROUTE,)), "7.18.0", "v1.0.x"),
        (OvnKubernetesRows(name_only=("clusterPortGroup",), name_only_count=4), "7.18.0",
         "older than v1.0 (Port_Groups keyed by external_ids:name without "
         "k8s.ovn.org/owner-controller: clusterPortGroup and 3 more)"),
    ],
)  # fmt: skip
def test_refusal_by_generation(rows: OvnKubernetesRows, schema: str, refused: str | None) -> None:
    why = refusal(rows, schema)
    if refused is None:
        assert why is None
        return
    assert why is not None and refused in why
    assert "Upgrade OVN-Kubernetes to v1.1.0 or later" in why and "nothing was written" in why


def test_compile_refuses_before_planning_anything() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    obs = replace(cluster([("shop", "web-1", "node-1", {"app": "web"})]),
                  ovn_kubernetes=OvnKubernetesRows(ownerless_no_reroute=(NO_REROUTE,)))  # fmt: skip
    with pytest.raises(CompileError, match=r"OVN-Kubernetes v1\.0\.x"):
        compile_target(want, obs)
    # the evidence survives a snapshot file (plan --observed refuses the same)
    again = Observed.from_json(obs.to_json())
    assert again.ovn_kubernetes == obs.ovn_kubernetes
    # the Kubernetes side alone (--kubernetes-only) reads no NB: nothing to judge
    none = OvnCapabilities(schema_version="", network_function=False)
    k8s_only = replace(obs, ovn_kubernetes=OvnKubernetesRows(), capabilities=none)
    assert refusal(k8s_only.ovn_kubernetes, "") is None


def test_compile_judges_owner_keyed_rows_by_the_nb_schema_it_reads() -> None:
    """Owner keys alone do not tell v1.0.x from v1.1.0: the NB's schema does (OVN 24.03's
    7.3.0 refused, OVN 25.03's 7.11.0 not)."""
    want = desired(sg("web", "app=web"), vnf("fw"), binding("web-fw", "web", "fw", 10))
    obs = replace(cluster([("shop", "web-1", "node-1", {"app": "web"})]),
                  ovn_kubernetes=OvnKubernetesRows(owner_keyed=3))  # fmt: skip
    old = replace(obs, capabilities=replace(obs.capabilities, schema_version="7.3.0"))
    with pytest.raises(CompileError, match=r"OVN-Kubernetes v1\.0\.x or older .* NB schema 7\.3"):
        compile_target(want, old)
    new = replace(obs, capabilities=replace(obs.capabilities, schema_version="7.11.0"))
    assert compile_target(want, new)


def test_evidence_counts_every_owner_keyed_group_after_one_of_ours() -> None:
    ours = ("osc.web.node_1", {"osc.io/owner": "osc-gitops"})
    rows = evidence([ours, ("a1", OWNER), ("a2", OWNER)], [])
    assert rows == OvnKubernetesRows(owner_keyed=2)


SAYS = (
    "this Northbound DB is managed by {}: its start-up sync fails on a Port_Group it does not "
    "own without external_ids:name and deletes the ACLs without its owner key, so it could not "
    "restart beside osc-gitops' rows. Upgrade OVN-Kubernetes to v1.1.0 or later (Network "
    "Function steering: its main branch with OVN 26.03); nothing was written"
)


@pytest.mark.parametrize(
    ("rows", "schema", "seen"),
    [
        (OvnKubernetesRows(name_only=("a", "b"), name_only_count=2), "7.18.0",
         "OVN-Kubernetes older than v1.0 (Port_Groups keyed by external_ids:name without "
         "k8s.ovn.org/owner-controller: a, b)"),
        (OvnKubernetesRows(ownerless_no_reroute=(NO_REROUTE, "x")), "7.18.0",
         f"OVN-Kubernetes v1.0.x (EgressIP's priority-102 router policies without owner keys: "
         f"{NO_REROUTE})"),
        (OvnKubernetesRows(owner_keyed=3), "7.3.0",
         "OVN-Kubernetes v1.0.x or older (its owner-keyed rows on NB schema 7.3.0, older than "
         "the 7.11.0 of OVN 25.03 that OVN-Kubernetes v1.1.0 ships)"),
    ],
)  # fmt: skip
def test_each_refusal_is_one_line_naming_what_was_seen(
    rows: OvnKubernetesRows, schema: str, seen: str
) -> None:
    assert refusal(rows, schema) == SAYS.format(seen)
