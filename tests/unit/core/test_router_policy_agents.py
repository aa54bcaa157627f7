"""router-policy under node agents (``--node``): an entry-lport policy an agent writes can never
match (it names its own node's pods going to its own subnet), so the plan says so, per
binding; exit-lport bindings and central runs get no such warning, and the rows stay as they
were (no upgrade churn)."""

from __future__ import annotations

import pytest

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.planning.full import compile_plan
from reconciler.core.planning.slicing import NodeScope
from tests.support.builders import binding, cluster, desired, sg, vnf

PODS = [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "web-2", "node-2", {"app": "web"})]
RP = CompileOptions(steering="router-policy")


def _agent_plan(redirection: str, node: str = "node-1"):  # type: ignore[no-untyped-def]
    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, redirection=redirection))  # fmt: skip
    scope = NodeScope(node)
    view = scope.view(cluster(PODS, nf=False))
    return compile_plan(want, view.observed, scope.options(RP))


@pytest.mark.parametrize("redirection", ["entry-lport", "both"])
def test_an_agent_says_its_entry_lport_policies_never_match(redirection: str) -> None:
    planned = _agent_plan(redirection)
    (note,) = [f for f in planned.target.findings if "cannot steer entry-lport" in f.text]
    kept = " Its exit-lport part is steered." if redirection == "both" else ""
    assert (note.code, note.subject, note.node) == ("backend", "Binding/web-fw", "node-1")
    assert note.text == (
        f"Binding web-fw ({redirection}): router-policy run as a node agent (--node node-1) "
        "cannot steer entry-lport traffic: the policy node-1's agent writes matches node-1's "
        "pods going to node-1's own subnet, traffic that never crosses the router, and their "
        "traffic to other nodes would need policies in those nodes' slices naming node-1's "
        f"pods, which no agent writes (measured in zone mode: not steered).{kept} Use "
        "network-function steering (OVN >= 26.03), or protect the destination pods exit-lport"
    )
    policy = next(r for r in planned.target if r.key == "osc.web_fw.node_1.from")
    assert policy.fields["match"] == "ip4.dst == 10.244.1.0/24 && ip4.src == $osc.web.node_1_ip4"


def test_no_warning_for_exit_lport_or_a_central_run() -> None:
    assert not [w for w in _agent_plan("exit-lport").target.warnings if "node agent" in w]
    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("web-fw", "web", "fw", 10, redirection="both"))  # fmt: skip
    central = compile_plan(want, cluster(PODS, nf=False), RP)
    assert not [w for w in central.target.warnings if "node agent" in w]
    matches = {
        r.key: r.fields["match"] for r in central.target if r.kind == "Logical_Router_Policy"
    }
    assert matches["osc.web_fw.node_1.from"].endswith("{$osc.web.node_1_ip4, $osc.web.node_2_ip4}")


def test_an_agent_warns_about_each_entry_lport_binding_whatever_comes_before() -> None:
    want = desired(sg("web", "app=web"), vnf("fw"),
                   binding("a-exit", "web", "fw", 5, redirection="exit-lport"),
                   binding("b-entry", "web", "fw", 10, redirection="entry-lport"))  # fmt: skip
    scope = NodeScope("node-1")
    planned = compile_plan(want, scope.view(cluster(PODS, nf=False)).observed, scope.options(RP))
    assert [f.subject for f in planned.target.findings if "node agent" in f.text] == [
        "Binding/b-entry"
    ]
