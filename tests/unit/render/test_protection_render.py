"""Protection changes first in every plan: text, the pull-request Markdown (with a Mermaid
diagram of each changed group's bindings) and the JSON contract (issue #24 item 1)."""

from __future__ import annotations

import json

from reconciler.cli.review import annotate
from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.planning.full import make_plan
from reconciler.core.views.protection import protection_changes
from reconciler.render import render
from reconciler.render.mermaid import diagram, group_bindings
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to, with_live

PODS = [("payments", f"api-{i}", f"node-{i % 2 + 1}", {"app": "api"}) for i in range(8)]
PODS += [("shop", "web-1", "node-1", {"app": "web"})]
BEFORE = desired(
    sg("payments", "app=api", namespaces=["payments"]),
    sg("web", "app=web"),
    vnf("ids"),
    binding("payments-ids", "payments", "ids", 10, failurePolicy="fail-open",
            traffic=[{"protocol": "tcp", "ports": [443, {"start": 8000, "end": 8080}]}]),
    binding("web-ids", "web", "ids", 5),
)  # fmt: skip
AFTER = desired(
    sg("payments", "app=api", namespaces=["paymnets"]),
    sg("web", "app=web"),
    vnf("ids"),
    binding("payments-ids", "payments", "ids", 10, failurePolicy="fail-open",
            traffic=[{"protocol": "tcp", "ports": [443, {"start": 8000, "end": 8080}]}]),
    binding("web-ids", "web", "ids", 5),
)  # fmt: skip


def reviewed_plan():
    base = cluster(PODS)
    live = with_live(base, apply_to({}, make_plan(BEFORE, base, CompileOptions())))
    plan = make_plan(AFTER, live, CompileOptions())
    changes = protection_changes(BEFORE, live, AFTER)
    basis = {"source": "base", "detail": "the manifests in b/"}
    return annotate(plan, AFTER, live, changes, basis, before=BEFORE)


def test_text_leads_with_the_protection_changes_grouped_by_namespace() -> None:
    text = render(reviewed_plan(), "text")
    head = text.index("Protection changes, compared with the manifests in b/:")
    assert head < text.index("osc-gitops will perform the following actions:")
    assert (
        "  Binding payments-ids (SecurityGroup payments → ids): 8 payments pods lose their ids; "
        "8 → 0 pods steered\n"
        "      - payments: 8 pods (api-0, api-1, api-2, …; node-1: 4, node-2: 4; via app=api)\n"
    ) in text
    assert "! Binding payments-ids stops steering 8 pods it steered before (payments: 8); " in text


def test_short_lists_name_every_pod() -> None:
    plan = reviewed_plan()
    meta = dict(plan.meta)
    meta["protection_changes"][0]["stop"] = meta["protection_changes"][0]["stop"][:2]
    text = render(plan, "text")
    assert "      - payments/api-0 on node-1 (via app=api)\n" in text


def test_markdown_leads_with_protection_then_diagrams_then_warnings_then_rows() -> None:
    md = render(reviewed_plan(), "markdown")
    order = [
        md.index("#### Protection changes"),
        md.index("```mermaid"),
        md.index("**Warnings**"),
        md.index("#### Rows"),
    ]
    assert order == sorted(order)
    assert "- 🔴 Binding payments-ids (SecurityGroup payments → ids): 8 payments pods lose " \
           "their ids; 8 → 0 pods steered" in md  # fmt: skip
    assert "- payments: 8 pods (api-0, api-1, api-2, …" in md
    assert "SecurityGroup `payments`:" in md
    # web-ids' steering is held (its VNF was never probed): pending, so its group is drawn
    assert "- 🟡 Binding web-ids (SecurityGroup web → ids): 1 pod of shop will be steered once " \
           "its VNFs are healthy" in md  # fmt: skip
    assert "SecurityGroup `web`:" in md


def test_the_mermaid_diagram_shows_order_direction_filters_policy_and_chain() -> None:
    lines = diagram("payments", group_bindings(AFTER, ["payments"])["payments"])
    assert lines[0] == "flowchart LR"
    assert 'sg(["SecurityGroup payments<br/>app=api<br/>in paymnets"])' in lines[1]
    edge = next(line for line in lines if "-->" in line)
    assert edge == (
        '  sg -->|"order 10 · exit-lport · tcp 443,8000-8080 · fail-open · '
        'after-network-policy"| b0h0'
    )
    chained = {"labels": ["app=web"], "namespaces": None, "bindings": [
        {"name": "c", "order": 1, "redirection": "both", "traffic": "all IP",
         "failurePolicy": "fail-close", "precedence": "after-network-policy",
         "vnfs": ["fw", "ids"]}]}  # fmt: skip
    chain = diagram("web", chained)
    assert "  b0h0 --> b0h1" in chain and '  b0h1["VNF ids"]' in chain


def test_json_has_protection_changes_before_the_changes() -> None:
    data = json.loads(render(reviewed_plan(), "json"))
    assert list(data)[:4] == ["format_version", "meta", "protection_changes", "changes"]
    change, pending = data["protection_changes"]
    assert (pending["binding"], pending["change"], len(pending["pending"])) == (
        "web-ids",
        "changed",
        1,
    )
    assert change["binding"] == "payments-ids" and change["change"] == "changed"
    assert change["steered_before"] == 8 and change["steered_after"] == 0 and not change["start"]
    assert change["stop"][0] == {"namespace": "payments", "pod": "api-0", "node": "node-1",
                                 "label": "app=api", "vnfs": ["ids"]}  # fmt: skip
    assert data["meta"]["protection_basis"] == {"source": "base", "detail": "the manifests in b/"}
    assert "protection_changes" not in data["meta"]


def test_unknown_basis_renders_as_unknown() -> None:
    base = cluster(PODS)
    plan = annotate(make_plan(AFTER, base, CompileOptions()), AFTER, base, None,
                    {"source": "none", "detail": "nothing to compare with"})  # fmt: skip
    assert "Protection changes: unknown (nothing to compare with)" in render(plan, "text")
    assert json.loads(render(plan, "json"))["protection_changes"] is None


def test_headline_of_a_chain_with_pods_starting_and_stopping() -> None:
    from reconciler.render.protection import headline

    pod = {"namespace": "shop", "pod": "web-1", "node": "node-1", "label": "app=web",
           "vnfs": ["ips", "firewall"]}  # fmt: skip
    other = {**pod, "namespace": "pay", "pod": "api-1"}
    change = {"binding": "web-chain", "security_group": "web", "vnfs": ["ips", "firewall"],
              "change": "changed", "start": [pod, other], "stop": [pod],
              "steered_before": 3, "steered_after": 4}  # fmt: skip
    assert headline(change) == (
        "Binding web-chain (SecurityGroup web → ips → firewall): 2 pods newly steered through "
        "chain ips → firewall, 1 shop pod loses its chain ips → firewall; 3 → 4 pods steered"
    )
