"""In-memory simulation for pure-core tests: apply a plan to a live state, and play the events a
warm loop sees between passes, to check that plans converge and that the incremental planner
plans exactly like a full ``make_plan``.

Events: pods labelled, created, deleted and recreated (new UID), pod LSPs appearing late, someone
editing or deleting our rows, a pod taking a VNF's address, and our own applies. Unchanged objects
are sometimes handed over as the same objects (as the caches do) and sometimes as equal copies (a
relist), so both of the planner's comparison paths run.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from hypothesis import strategies as st

from reconciler.core.compiling.compile import CompileError, CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import KubeObject, NbGlobal, Observed, OvnRow, Pod, PodPort
from reconciler.core.model.plan import Plan
from reconciler.core.model.target import OVN_TABLES
from reconciler.core.planning.full import make_plan
from reconciler.core.planning.incremental import IncrementalPlanner
from tests.support.builders import binding, cluster, desired, sg, vnf

Live = dict[tuple[str, str], dict[str, Any]]
Event = tuple[Any, ...]

NODES = ("node-1", "node-2", "node-3")


# The scenario both planner test modules (test_incremental, test_steering) play events on:
# two groups on three nodes, a VNF on every node and one on node-1 only, all three directions.
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


def scenario_observed(nf: bool = False) -> Observed:
    """The scenario's cluster as observed before any event (node-1 is in zone a)."""
    return cluster(START, nodes=NODES, nf=nf, node_labels={"node-1": {"zone": "a"}})


"""The nodes of the event simulation; node ``node-<i>`` has the pod subnet ``10.244.<i>.0/24``."""
KEYS = ("app", "tier")
VALUES = ("web", "db")


def apply_to(live: Live, plan: Plan) -> Live:
    out = copy.deepcopy(live)
    for change in plan.changes:
        ident = (change.kind, change.key)
        if change.action == "delete":
            del out[ident]
        else:
            assert change.after is not None
            out[ident] = copy.deepcopy(change.after)
    return out


def live_of(observed: Observed) -> Live:
    """The owned live state (OVN rows and Kubernetes objects) of ``observed``."""
    live = {(r.table, r.key): r.fields for r in observed.ovn_rows}
    for o in observed.kube_objects:
        live[(o.kind, f"{o.namespace}/{o.name}")] = o.body
    return live


def with_live(observed: Observed, live: Live) -> Observed:
    """``observed`` with this owned live state (Kubernetes objects kept as the same tuple when
    equal, as the informer cache does)."""
    ovn = sorted(
        ((kind, key), fields) for (kind, key), fields in live.items() if kind in OVN_TABLES
    )
    rows = tuple(
        OvnRow(kind, key, fields)
        for (kind, key), fields in sorted(ovn, key=lambda i: OVN_TABLES.index(i[0][0]))
    )
    objs = tuple(
        KubeObject(kind, key.partition("/")[0], key.partition("/")[2], body)
        for (kind, key), body in sorted(live.items())
        if kind not in OVN_TABLES
    )
    kube = observed.kube_objects if objs == observed.kube_objects else objs
    return dataclasses.replace(observed, ovn_rows=rows, kube_objects=kube)


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
    st.tuples(st.just("northd"), st.integers(0, 3)),
)


def step(observed: Observed, event: Event, current: Plan | None) -> Observed:
    """One event; unchanged pods/ports/rows stay the very same objects, like the caches.

    ``("delete", i)`` deletes a pod and, for an even ``i``, leaves its LSP behind (OVN-Kubernetes
    lag), so a pod added again under that name on another node makes two LSPs of one name.
    """
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
        return with_live(observed, apply_to(live_of(observed), current))
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
    elif kind == "northd":  # health changes: all healthy, or one node's functions not
        down = [r.key for r in observed.ovn_rows if r.table == "Network_Function"]
        return northd_healthy(observed, down[event[1] :: 4] if event[1] else ())
    pods.sort(key=lambda p: (p.namespace, p.name))
    ports.sort(key=lambda p: p.name)
    return dataclasses.replace(observed, pods=tuple(pods), pod_ports=tuple(ports))


def plan_or_error(fn: Callable[[], Plan]) -> Plan | str:
    try:
        return fn()
    except CompileError as exc:
        return f"CompileError: {exc}"


def check_incremental_equals_full(
    desired: Desired,
    observed: Observed,
    options: CompileOptions,
    events: Sequence[Event],
    planner: IncrementalPlanner | None = None,
) -> IncrementalPlanner:
    """Play ``events`` from ``observed``; after each, the planner's plan (or error) must equal
    ``make_plan``'s. Returns the planner, to look at how it planned the last event."""
    planner = planner or IncrementalPlanner()
    current: Plan | None = None
    for event in events:
        observed = step(observed, event, current)
        full = plan_or_error(partial(make_plan, desired, observed, options))
        mine = plan_or_error(partial(planner.plan, desired, observed, options))
        if isinstance(full, str) or isinstance(mine, str):
            assert mine == full, f"after {event}"
            current = None
            continue
        assert mine.changes == full.changes, f"after {event} ({planner.last_mode})"
        assert mine.meta == full.meta
        current = full
    return planner


def northd_healthy(observed: Observed, unhealthy: Sequence[str] = ()) -> Observed:
    """Play northd judging every Network_Function of ours healthy (but ``unhealthy``): each
    function group's first healthy member is its active function, as the adapter reads it."""
    active: dict[str, str | None] = {}
    nb_global = observed.nb_global
    for row in observed.ovn_rows:
        if row.table == "Network_Function_Group":
            up = [nf for nf in row.fields.get("network_function") or () if nf not in unhealthy]
            active[row.key] = up[0] if up else None
        elif row.table == "NB_Global":  # the options we set, read back as the adapter does
            nb_global = NbGlobal(dict(row.fields["options"]), dict(row.fields["external_ids"]))
    return dataclasses.replace(observed, nf_active=active, nb_global=nb_global)


def converge(
    desired: Desired, observed: Observed, options: CompileOptions, passes: int = 4
) -> Observed:
    """``observed`` after ``apply`` passes with every VNF instance healthy (held steering is
    switched on by the pass after northd reports its group active), until nothing is left."""
    for _ in range(passes):
        plan = make_plan(desired, observed, options)
        if plan.empty and not plan.meta.get("held"):
            return observed
        observed = northd_healthy(with_live(observed, apply_to(live_of(observed), plan)))
    raise AssertionError(f"not converged after {passes} passes")
