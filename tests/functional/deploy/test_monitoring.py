"""The alerts and the dashboard in ``deploy/monitoring/`` stay true to what the loop serves.

A rule on a metric nobody exports never fires, and a panel on a renamed label stays empty
without an error anywhere; both would be found on the day they were needed. So:

- every metric, selector label and grouping label the rules and the dashboard name is served on
  ``/metrics`` by the real :class:`MetricsServer`, fed by a real :class:`Loop` over the
  in-memory fakes through passes that apply, repair drift and fail to converge (so the labelled
  series exist, with the label values the loop really emits, e.g. ``cause="not-converged"``);
- ``promtool check rules`` accepts the rules and every dashboard query, and ``promtool test
  rules`` runs ``deploy/monitoring/prometheusrule.test.yaml`` (Debian's ``prometheus`` package,
  installed by ``make setup``; these two fail without it);
- the kustomization builds, each alert has a severity, a summary, a description and a runbook
  link to a heading that exists in docs/operations.md, whose alerts table lists it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.plan import Change
from reconciler.engine.loop import Loop, LoopConfig
from reconciler.engine.notifications import NotifySettings, Outbox
from reconciler.engine.pipeline import NotConverged
from reconciler.engine.reporting.metrics import Metrics, MetricsServer, PrometheusReporter
from tests.support.builders import cluster
from tests.support.fakes import FakeKube, FakeOvn, FakeSource, Journal
from tests.support.manifests import GROUP_WEB, HEADER, VNF_FW
from tests.support.paths import REPO

MONITORING = REPO / "deploy" / "monitoring"
RULES = MONITORING / "prometheusrule.yaml"
RULE_TESTS = MONITORING / "prometheusrule.test.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
OPERATIONS = REPO / "docs" / "operations.md"

REQUIRED_ALERTS = {
    "OscGitopsReconcileFailing",
    "OscGitopsNotConverged",
    "OscGitopsDriftRepairedRepeatedly",
    "OscGitopsVnfInstanceUnhealthy",
    "OscGitopsNfIdBudgetHigh",
    "OscGitopsVnfInstanceNotReady",
    "OscGitopsRolloutHalted",
    "OscGitopsVnfPortUnbound",
    "OscGitopsSecurityManagerFailing",
}
TARGET_LABELS = {"job", "instance", "namespace", "pod"}
"""Labels Prometheus adds per scrape target (``namespace``/``pod`` with the PodMonitor), not the
loop: queries may join and match on them, and templates may print them."""

GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$job": ".*", "$instance": ".*"}

METRIC_NAME = re.compile(r"\bosc_gitops_[a-z0-9_]+\b")
SELECTOR = re.compile(r"\b(osc_gitops_[a-z0-9_]+)\{([^}]*)\}")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
TEMPLATE_LABEL = re.compile(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)")
LEGEND_LABEL = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")

BINDING = (
    HEADER + "kind: Binding\nmetadata: {name: web-firewall}\n"
    "spec: {securityGroup: web, vnf: firewall, order: 10}\n"
)
MANAGED_FW = VNF_FW.replace(
    "image: quay.io/example/fw:1}",
    "image: quay.io/example/fw:1, securityManager: {url: 'https://secmgr.example.com/events'}}",
)
POLICIES = "---\n".join((GROUP_WEB, MANAGED_FW, BINDING))
"""The firewall on every node, bound to the pods labelled app=web, with a security manager."""


# ------------------------------------------------------------------------------ the artefacts


def load_rules() -> list[dict[str, Any]]:
    document = YAML(typ="safe").load(RULES.read_text(encoding="utf-8"))
    assert document["apiVersion"] == "monitoring.coreos.com/v1"
    assert document["kind"] == "PrometheusRule"
    return [rule for group in document["spec"]["groups"] for rule in group["rules"]]


def load_dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return dashboard


def dashboard_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            yield panel
        yield from panel.get("panels", [])


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the dashboard, Grafana's variables replaced by values
    Prometheus accepts; ``label_values(SELECTOR, LABEL)`` variables contribute their selector."""
    exprs = [t["expr"] for p in dashboard_panels(dashboard) for t in p["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            call = re.fullmatch(r"label_values\((.+),\s*\w+\)", variable["query"]["query"])
            assert call, variable["query"]
            exprs.append(call.group(1))
    for name, value in sorted(GRAFANA_VARIABLES.items(), key=lambda kv: -len(kv[0])):
        exprs = [e.replace(name, value) for e in exprs]
    return exprs


def all_queries() -> list[str]:
    return [rule["expr"] for rule in load_rules()] + dashboard_queries(load_dashboard())


def github_anchor(heading: str) -> str:
    """The id GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


# ------------------------------------------------------------------------------ /metrics, live


class ForgetfulOvn(FakeOvn):
    """An NB whose transactions succeed but leave nothing behind while ``forget`` is set, as
    when another writer undoes ours at once: the pass's verify finds its plan still to do."""

    forget = False

    def apply(self, changes: Sequence[Change], revision: str | None = None) -> None:
        if self.forget:
            self.transactions += 1
            return
        super().apply(changes, revision)


def scraped_metrics(tmp: Path) -> dict[str, dict[str, set[str]]]:
    """Sample name -> label -> values, scraped over HTTP from a :class:`MetricsServer` whose
    :class:`Metrics` a real loop fed: an initial apply, a drift repair that does not converge,
    and the repair that does."""
    observed = cluster(
        [("shop", "web-1", "node-1", {"app": "web"}), ("shop", "db-1", "node-2", {"app": "db"})]
    )
    journal = Journal()
    kube = FakeKube(observed.pods, observed.nodes, observed.network_policies, journal)
    ovn = ForgetfulOvn(
        observed.switches, observed.routers, observed.pod_ports, observed.capabilities, journal
    )
    (tmp / "c1").mkdir()
    (tmp / "c1" / "policies.yaml").write_text(POLICIES, encoding="utf-8")
    source = FakeSource()
    source.publish("c1", tmp / "c1")
    metrics = Metrics()
    config = LoopConfig(CompileOptions(), status_file=tmp / "status.json", watch=False,
                        lag_retries=())  # fmt: skip
    # settle: no gc.freeze() of this test process's heap (reconciler.engine.gc_tuning)
    reporter = PrometheusReporter(metrics)
    told: list[dict[str, Any]] = []
    outbox = Outbox(lambda url, payload: told.append(payload), NotifySettings(debounce=0.0),
                    reporter=reporter)  # fmt: skip
    loop = Loop(config, source, kube, ovn, reporter=reporter, outbox=outbox,
                settle=lambda: None)  # fmt: skip

    loop.refresh_source()
    assert loop.reconcile_pass("start").result == "applied"
    table, key = next(k for k in ovn.rows if k[0] == "Port_Group")
    ovn.drift(table, key, ports=[])
    ovn.forget = True
    failed = loop.reconcile_pass("interval")
    assert (failed.result, failed.cause) == ("error", NotConverged.cause)
    ovn.forget = False
    assert loop.reconcile_pass("retry").result == "applied"
    # a running VNF VM whose port OVN has not bound (no binder, ovs-cni v0.39.0)
    vm = next(iter(kube.objects("VirtualMachine")))
    kube.set_status("VirtualMachine", *vm.split("/"), {"printableStatus": "Running"})
    ovn.ports_up = {"nf_firewall_node-1_in": False, "nf_firewall_node-1_out": True}
    loop.reconcile_pass("interval")
    # a rolling update under way (a new image): its gauges are served too
    (tmp / "c2").mkdir()
    (tmp / "c2" / "policies.yaml").write_text(POLICIES.replace("fw:1", "fw:2"), encoding="utf-8")
    source.publish("c2", tmp / "c2")
    loop.refresh_source()
    assert loop.reconcile_pass("git").ok

    assert outbox.flush(30) and told, "the security manager was told"
    outbox.close()
    server = MetricsServer("127.0.0.1:0", metrics, loop.health, loop.readiness).start()
    try:
        with urllib.request.urlopen(f"http://{server.address}/metrics", timeout=10) as reply:
            assert reply.status == 200
            text = reply.read().decode()
    finally:
        server.stop()
    served: dict[str, dict[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = served.setdefault(sample.name, {})
            for name, value in sample.labels.items():
                labels.setdefault(name, set()).add(value)
    return served


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[str]]]:
    return scraped_metrics(tmp_path_factory.mktemp("monitoring"))


def test_every_metric_the_rules_and_the_dashboard_use_is_served(
    served: dict[str, dict[str, set[str]]],
) -> None:
    used = {name for expr in all_queries() for name in METRIC_NAME.findall(expr)}
    assert used, "no metric found in the queries"
    assert used <= set(served), f"not served on /metrics: {sorted(used - set(served))}"
    # what the alerts are about is all there, drift and not-converged included
    for name in ("osc_gitops_drift_detected_total", "osc_gitops_vnf_instance_healthy",
                 "osc_gitops_nf_ids_used", "osc_gitops_nf_ids_limit",
                 "osc_gitops_unbound_vnf_ports",
                 "osc_gitops_reconcile_duration_seconds_bucket"):  # fmt: skip
        assert name in used


def test_every_label_the_queries_match_group_or_print_exists(
    served: dict[str, dict[str, set[str]]],
) -> None:
    every_label = {label for labels in served.values() for label in labels} | TARGET_LABELS
    for expr in all_queries():
        for metric, matchers in SELECTOR.findall(expr):
            for label, op, value in MATCHER.findall(matchers):
                if label in TARGET_LABELS:
                    continue
                assert label in served[metric], f"{metric} has no label {label!r}: {expr}"
                if op == "=":
                    assert value in served[metric][label], (
                        f"{metric}{{{label}={value!r}}} is never served "
                        f"(values: {sorted(served[metric][label])}): {expr}"
                    )
        for grouping in GROUPING.findall(expr):
            for label in filter(None, (part.strip() for part in grouping.split(","))):
                assert label in every_label, f"no metric has a label {label!r}: {expr}"

    printed = [
        text for rule in load_rules() for text in (*rule["annotations"].values(), rule["expr"])
    ]
    for label in {m for text in printed for m in TEMPLATE_LABEL.findall(text)}:
        assert label in every_label, f"alert templates print $labels.{label}, never set"
    legends = [t.get("legendFormat", "") for p in dashboard_panels(load_dashboard())
               for t in p["targets"]]  # fmt: skip
    for label in {m for text in legends for m in LEGEND_LABEL.findall(text)}:
        assert label in every_label, f"a legend prints {{{{{label}}}}}, never set"


# ------------------------------------------------------------------------------ the rules


def test_each_alert_says_how_bad_what_and_where_to_read_on() -> None:
    rules = load_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)) and set(names) >= REQUIRED_ALERTS
    docs = OPERATIONS.read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", "", docs, flags=re.MULTILINE | re.DOTALL)
    anchors = {github_anchor(h) for h in re.findall(r"^#+ (.+)$", prose, flags=re.MULTILINE)}
    for rule in rules:
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        annotations = rule["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(annotations), rule["alert"]
        assert "$labels.instance" in annotations["description"], rule["alert"]
        page, _, anchor = annotations["runbook_url"].partition("#")
        assert page == "docs/operations.md" and anchor in anchors, annotations["runbook_url"]
        row = rf"^\| `{rule['alert']}` \({rule['labels']['severity']}\) \|"
        assert re.search(row, docs, flags=re.MULTILINE), f"{rule['alert']}: no row in the table"
    by_name = {rule["alert"]: rule for rule in rules}
    unhealthy = by_name["OscGitopsVnfInstanceUnhealthy"]["annotations"]
    assert "$labels.vnf" in unhealthy["summary"] and "$labels.node" in unhealthy["summary"]


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not installed (Debian package prometheus): run `make setup`")
    return found


def run_promtool(*args: str | Path, cwd: Path) -> None:
    done = subprocess.run([promtool(), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def write_rules_file(directory: Path) -> Path:
    """The PrometheusRule's ``spec``: the plain rule file promtool reads."""
    document = YAML(typ="safe").load(RULES.read_text(encoding="utf-8"))
    path = directory / "rules.yaml"
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    with path.open("w", encoding="utf-8") as out:
        yaml.dump(document["spec"], out)
    return path


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    run_promtool("check", "rules", write_rules_file(tmp_path), cwd=tmp_path)


def test_promtool_unit_tests_of_the_alerts_pass(tmp_path: Path) -> None:
    write_rules_file(tmp_path)
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    tested = YAML(typ="safe").load(RULE_TESTS.read_text(encoding="utf-8"))
    covered = {case["alertname"] for test in tested["tests"] for case in test["alert_rule_test"]}
    assert {"OscGitopsVnfInstanceUnhealthy", "OscGitopsNfIdBudgetHigh",
            "OscGitopsVnfInstanceNotReady", "OscGitopsRolloutHalted",
            "OscGitopsVnfPortUnbound"} <= covered  # fmt: skip
    run_promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)


def test_promtool_accepts_every_dashboard_query(tmp_path: Path) -> None:
    """promtool parses PromQL only inside rule files: each query becomes a recording rule."""
    queries = dashboard_queries(load_dashboard())
    rules = [{"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(queries)]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    run_promtool("check", "rules", path, cwd=tmp_path)


# ------------------------------------------------------------------ the dashboard, kustomize


def test_the_dashboard_is_a_grafana_model_on_a_datasource_variable() -> None:
    dashboard = load_dashboard()
    assert dashboard["uid"] == "osc-gitops" and dashboard["schemaVersion"] >= 36
    assert "id" not in dashboard, "an id would overwrite whatever dashboard has it on import"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    uses_datasource = {"type": "prometheus", "uid": "${datasource}"}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {(grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"])
                for dy in range(grid["h"])}  # fmt: skip
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
    panels = list(dashboard_panels(dashboard))
    for panel in panels:
        assert panel["datasource"] == uses_datasource, panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == uses_datasource and target["expr"], panel["title"]
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == uses_datasource
    # what the dashboard is for: each of these is on it
    text = json.dumps([t["expr"] for p in panels for t in p["targets"]])
    for metric in ("reconciles_total", "errors_total", "last_success_timestamp_seconds",
                   "changes_applied_total", "vnf_instance_healthy", "nf_ids_used",
                   "reconcile_duration_seconds_bucket", "drift_detected_total"):  # fmt: skip
        assert f"osc_gitops_{metric}" in text, metric


def kustomize(directory: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    out = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True,
                         text=True, timeout=60, check=True).stdout  # fmt: skip
    return [d for d in YAML(typ="safe").load_all(out) if d]


def test_the_monitoring_kustomization_builds_offline() -> None:
    docs = {d["kind"]: d for d in kustomize(MONITORING)}
    assert set(docs) == {"PrometheusRule", "PodMonitor", "ConfigMap"}
    rule = YAML(typ="safe").load(RULES.read_text(encoding="utf-8"))
    assert docs["PrometheusRule"]["spec"] == rule["spec"]
    config_map = docs["ConfigMap"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["osc-gitops.json"]) == load_dashboard()


@pytest.mark.parametrize("overlay", ["central-nb/deployment", "interconnect"])
def test_the_pod_monitor_scrapes_every_long_running_workload(overlay: str) -> None:
    monitor = next(d for d in kustomize(MONITORING) if d["kind"] == "PodMonitor")["spec"]
    workloads = [
        d for d in kustomize(REPO / "deploy" / "overlays" / overlay)
        if d["kind"] in ("Deployment", "DaemonSet")
    ]  # fmt: skip
    assert workloads
    port = monitor["podMetricsEndpoints"][0]["port"]
    for workload in workloads:
        where = f"{workload['kind']} {workload['metadata']['name']}"
        assert workload["metadata"]["namespace"] in monitor["namespaceSelector"]["matchNames"]
        pod = workload["spec"]["template"]
        assert monitor["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        container = pod["spec"]["containers"][0]
        assert port in [p["name"] for p in container["ports"]], where
        assert "--metrics-addr=0.0.0.0:9090" in container["args"], where
