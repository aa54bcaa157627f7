"""The incremental planner gives the same changes as a full ``make_plan`` after any event sequence.

Events are what the warm loop sees between passes: pods labelled, created, deleted and recreated
(new UID), pod LSPs appearing late, someone editing or deleting our rows, a pod taking a VNF's
address, and our own applies. Unchanged objects are sometimes handed over as the same objects
(as the caches do) and sometimes as equal copies (a relist), so both comparison paths run.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.compile import CompileError, CompileOptions
from reconciler.core.incremental import IncrementalPlanner
from reconciler.core.observed import KubeObject, Observed, OvnRow, Pod, PodPort
from reconciler.core.plan import Plan
from reconciler.core.target import OVN_TABLES
from reconciler.engine.pipeline import make_plan
from tests.support.builders import binding, cluster, desired, sg, vnf
from tests.support.simulate import apply_to

NODES = ("node-1", "node-2", "node-3")
KEYS = ("app", "tier")
VALUES = ("web", "db")

DESIRED = desired(
    sg("web", "app=web"),
    sg("db", "tier=db", "app=db"),
    vnf("fw"),
    vnf("ips", nodeSelector={"zone": "a"}),
    binding("web-fw", "web", "fw", 10, redirection="both"),
    binding("web-ips", "web", "ips", 20),
    binding("db-fw", "db", "fw", 10, redirection="entry-lport"),
)
START = [
    ("shop", "a", "node-1", {"app": "web"}),
    ("shop", "b", "node-2", {"tier": "db"}),
    ("ops", "c", "node-3", {"app": "db"}),
    ("ops", "d", "node-1", {}),
]


def _observed(nf: bool) -> Observed:
    return cluster(START, nodes=NODES, nf=nf, node_labels={"node-1": {"zone": "a"}})


def _with_live(observed: Observed, live: dict[tuple[str, str], dict[str, Any]]) -> Observed:
    ovn = sorted(
        ((kind, key), fields) for (kind, key), fields in live.items() if kind in OVN_TABLES
    )
    rows = tuple(
        OvnRow(kind, key, fields)
        for (kind, key), fields in sorted(ovn, key=lambda i: OVN_TABLES.index(i[0][0]))
    )
    objs = tuple(
        KubeObject(kind, *key.split("/", 1), body)
        for (kind, key), body in sorted(live.items())
        if kind not in OVN_TABLES
    )
    kube = observed.kube_objects if objs == observed.kube_objects else objs
    return dataclasses.replace(observed, ovn_rows=rows, kube_objects=kube)


def _live(observed: Observed) -> dict[tuple[str, str], dict[str, Any]]:
    live = {(r.table, r.key): r.fields for r in observed.ovn_rows}
    for o in observed.kube_objects:
        live[(o.kind, f"{o.namespace}/{o.name}")] = o.body
    return live


event_st = st.one_of(
    st.tuples(
        st.just("label"),
        st.integers(0, 20),
        st.sampled_from(KEYS),
        st.sampled_from((*VALUES, None)),
    ),
    st.tuples(st.just("add"), st.integers(0, 20), st.sampled_from(NODES), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 20)),
    st.tuples(st.just("recreate"), st.integers(0, 20)),
    st.tuples(st.just("lsp-late"), st.integers(0, 20)),
    st.tuples(st.just("apply")),
    st.tuples(st.just("drift"), st.integers(0, 200), st.sampled_from(("ports", "delete"))),
    st.tuples(st.just("steal-vnf-ip"), st.integers(0, 20)),
    st.tuples(st.just("copy")),
)


def _step(observed: Observed, event: tuple[Any, ...], current: Plan | None) -> Observed:
    """One event; unchanged pods/ports/rows stay the very same objects, like the caches."""
    pods = list(observed.pods)
    ports = list(observed.pod_ports)
    kind = event[0]
    if kind == "label" and pods:
        i = event[1] % len(pods)
        labels = dict(pods[i].labels)
        if event[3] is None:
            labels.pop(event[2], None)
        else:
            labels[event[2]] = event[3]
        pods[i] = dataclasses.replace(pods[i], labels=labels)
    elif kind == "add":
        name = f"n{event[1]}"
        if not any(p.name == name for p in pods):
            uid = f"uid-{name}"
            pods.append(Pod("shop", name, uid, event[2], {"app": "web"}))
            if event[3]:  # the LSP may come later (OVN-Kubernetes lag)
                ip = f"10.244.{NODES.index(event[2]) + 1}.{100 + event[1]}"
                ports.append(PodPort(f"shop_{name}", event[2], "shop", name, uid, None, (ip,)))
    elif kind == "delete" and pods:
        gone = pods.pop(event[1] % len(pods))
        if event[1] % 2:
            ports = [p for p in ports if p.name != gone.lsp_name]
    elif kind == "recreate" and pods:
        i = event[1] % len(pods)
        pods[i] = dataclasses.replace(pods[i], uid=pods[i].uid + "x")
    elif kind == "lsp-late":
        have = {p.name for p in ports}
        for pod in pods:
            if pod.lsp_name not in have and pod.node:
                ip = f"10.244.{NODES.index(pod.node) + 1}.{200 + event[1]}"
                ports.append(
                    PodPort(pod.lsp_name, pod.node, pod.namespace, pod.name, pod.uid, None, (ip,))
                )
                break
    elif kind == "apply" and current is not None:
        return _with_live(observed, apply_to(_live(observed), current))
    elif kind == "drift" and observed.ovn_rows:
        rows = list(observed.ovn_rows)
        i = event[1] % len(rows)
        if event[2] == "delete":
            rows.pop(i)
        elif "ports" in rows[i].fields:
            fields = {**rows[i].fields, "ports": rows[i].fields["ports"][:-1] or ["stray"]}
            rows[i] = OvnRow(rows[i].table, rows[i].key, fields)
        return dataclasses.replace(observed, ovn_rows=tuple(rows))
    elif kind == "steal-vnf-ip" and ports:
        i = event[1] % len(ports)
        subnet_octet = NODES.index(ports[i].switch) + 1
        ports[i] = dataclasses.replace(ports[i], ips=(f"10.244.{subnet_octet}.254",))
    elif kind == "copy":  # a relist: equal, but new objects everywhere
        return Observed.from_json(observed.to_json())
    pods.sort(key=lambda p: (p.namespace, p.name))
    ports.sort(key=lambda p: p.name)
    return dataclasses.replace(observed, pods=tuple(pods), pod_ports=tuple(ports))


def _plan_or_error(fn: Any) -> Plan | str:
    try:
        return fn()
    except CompileError as exc:
        return f"CompileError: {exc}"


@settings(
    max_examples=int(os.environ.get("OSC_HYPOTHESIS_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    steering=st.sampled_from(["network-function", "router-policy"]),
    events=st.lists(event_st, min_size=1, max_size=14),
)
def test_incremental_plan_equals_full_plan(steering: str, events: list[tuple[Any, ...]]) -> None:
    options = CompileOptions(steering=steering)  # type: ignore[arg-type]
    observed = _observed(nf=steering == "network-function")
    planner = IncrementalPlanner()
    current: Plan | None = None
    for event in events:
        observed = _step(observed, event, current)
        full = _plan_or_error(lambda o=observed: make_plan(DESIRED, o, options))
        mine = _plan_or_error(lambda o=observed: planner.plan(DESIRED, o, options))
        if isinstance(full, str) or isinstance(mine, str):
            assert mine == full, f"after {event}"
            current = None
            continue
        assert mine.changes == full.changes, f"after {event} ({planner.last_mode})"
        assert mine.meta == full.meta
        current = full


def test_nothing_changed_returns_the_same_plan_object() -> None:
    options = CompileOptions(steering="router-policy")
    observed = _observed(nf=False)
    planner = IncrementalPlanner()
    first = planner.plan(DESIRED, observed, options)
    assert planner.last_mode == "full"
    observed = _with_live(observed, apply_to(_live(observed), first))
    converged = planner.plan(DESIRED, observed, options)
    assert converged.empty
    assert planner.last_mode == "full"  # our VMs and NADs appeared: Kubernetes objects changed
    again = planner.plan(DESIRED, observed, options)
    assert again is converged and planner.last_mode == "cached"


def test_one_pod_labelled_recomputes_only_its_node() -> None:
    options = CompileOptions(steering="router-policy")
    observed = _observed(nf=False)
    planner = IncrementalPlanner()
    observed = _with_live(
        observed, apply_to(_live(observed), planner.plan(DESIRED, observed, options))
    )
    assert planner.plan(DESIRED, observed, options).empty
    labelled = _step(observed, ("label", 3, "app", "web"), None)  # ops/d on node-1 joins web
    the_plan = planner.plan(DESIRED, labelled, options)
    assert planner.last_mode == "incremental"
    assert planner.last_dirty_nodes == {"node-1"}
    assert [(c.action, c.kind, c.key, c.changed) for c in the_plan.changes] == [
        ("update", "Port_Group", "osc.web.node_1", ("['ports']",))
    ]
    assert the_plan.changes[0].after is not None
    assert the_plan.changes[0].after["ports"] == ["ops_d", "shop_a"]


def test_new_manifests_or_nodes_compile_everything() -> None:
    options = CompileOptions(steering="router-policy")
    observed = _observed(nf=False)
    planner = IncrementalPlanner()
    planner.plan(DESIRED, observed, options)
    planner.plan(desired(*DESIRED.security_groups.values()), observed, options)
    assert planner.last_mode == "full" and planner.last_full_reason == "manifests changed"
    fewer = dataclasses.replace(observed, nodes=observed.nodes[:2])
    planner.plan(desired(*DESIRED.security_groups.values()), fewer, options)
    assert planner.last_mode == "full"
    assert planner.last_full_reason == "manifests changed"  # a new Desired object again


def test_a_failing_compile_leaves_no_stale_memory() -> None:
    options = CompileOptions(steering="router-policy")
    observed = _observed(nf=False)
    planner = IncrementalPlanner()
    planner.plan(DESIRED, observed, options)
    stolen = _step(observed, ("steal-vnf-ip", 0), None)
    with pytest.raises(CompileError, match="already used by a pod"):
        planner.plan(DESIRED, stolen, options)
    # The same broken input fails again (never a remembered success) ...
    with pytest.raises(CompileError):
        planner.plan(DESIRED, stolen, options)
    # ... and the repaired input plans exactly like a full compile.
    assert planner.plan(DESIRED, observed, options).changes == (
        make_plan(DESIRED, observed, options).changes
    )
