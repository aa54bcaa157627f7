"""Plans for pull requests in interconnect clusters: one snapshot file for all zones.

A reviewer must see per node what a change of the manifests does, and the CI job that plans a
pull request cannot reach every node's NB socket. Decision: **each node agent
publishes its observed slice** (gzip + base64 JSON in its status Lease, annotation
``osc.io/agent-observed``; see :func:`encode_slice`) after the passes that change it, and
``osc-gitops snapshot --all-nodes`` assembles one *zoned snapshot* file from those slices and
a read of the Kubernetes side. ``osc-gitops plan --observed FILE`` plans each zone as its agent
would (:class:`~reconciler.core.planning.slicing.NodeScope`) and the Kubernetes side as the central
owner would, and merges the plans: the pull-request workflow does not change.

The trade-off, against diffing what the base branch compiles with what the pull request
compiles: a snapshot shows what will really change on each node, including drift and rows an
agent has not applied yet, with each zone's own Network_Function ids, but each zone is as old
as its agent's last publish (the file says when) and a node whose agent never published is
left out with a warning. A compile-level diff would need no agent at all but could not see
live rows, ids or drift, and would have to guess which pods have OVN ports.

Format (``format_version`` 1)::

    {"format_version": 1, "kind": "zoned",
     "central": <Observed: nodes, kube_objects, network_policies, switches from node subnets>,
     "zones": {"node-1": {"published_at": "...", "revision": "...",
                          "observed": <Observed: the agent's view of its zone>}, ...},
     "missing": ["node-3", ...]}

Pure: no I/O.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.core.compiling.compile import CompileOptions
from reconciler.core.model.desired import Desired
from reconciler.core.model.facts import Finding, InstanceHealth
from reconciler.core.model.observed import (
    SNAPSHOT_FORMAT_VERSION,
    Observed,
    check_node_name,
    check_text,
)
from reconciler.core.model.plan import Plan
from reconciler.core.planning.full import compile_plan
from reconciler.core.planning.slicing import KubernetesScope, NodeScope, Scope, object_node
from reconciler.core.transitions.health import plan_report

__all__ = [
    "OBSERVED_ANNOTATION",
    "SLICE_FIELDS",
    "SLICE_LIMIT",
    "ZonedSnapshot",
    "decode_slice",
    "encode_slice",
    "is_zoned",
    "zoned_plan",
]

OBSERVED_ANNOTATION = "osc.io/agent-observed"
SLICE_LIMIT = 200_000
"""Bytes of an encoded slice an agent publishes at most (a Lease's annotations hold 256 KiB
in all); a bigger one is not published, and the zone is missing from snapshots."""
ZONED = "zoned"
SLICE_FIELDS = (
    "pods", "pod_ports", "switches", "routers", "ovn_rows", "used_ids", "capabilities",
    "nb_global", "nf_active", "ports_up", "ports_chassis",
)  # fmt: skip
"""What an agent publishes of its view: its zone as the agent saw it at one moment (its
pods and their LSPs together). Nodes, NetworkPolicies and the central owner's objects are read
from Kubernetes when the snapshot is assembled."""


def encode_slice(observed: Observed) -> str:
    """An agent's view of its zone (the :data:`SLICE_FIELDS` of ``observed``), gzip + base64."""
    data = observed.to_json()
    kept = {k: data[k] for k in SLICE_FIELDS}
    kept["format_version"] = SNAPSHOT_FORMAT_VERSION
    raw = json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()
    return base64.b64encode(gzip.compress(raw, mtime=0)).decode("ascii")


def decode_slice(text: str) -> Observed:
    """Inverse of :func:`encode_slice`; raises ``ValueError`` on anything else."""
    try:
        data = json.loads(gzip.decompress(base64.b64decode(text, validate=True)))
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"not an encoded observed slice: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("not an encoded observed slice")
    return Observed.from_json(data)


def is_zoned(data: Mapping[str, Any]) -> bool:
    """Whether a snapshot file's JSON is a zoned snapshot."""
    return data.get("kind") == ZONED


@dataclass(frozen=True)
class Zone:
    observed: Observed
    published_at: str | None = None
    revision: str | None = None


@dataclass(frozen=True)
class ZonedSnapshot:
    """The live state of an interconnect cluster, zone by zone (see the module docstring)."""

    central: Observed
    zones: dict[str, Zone] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    """OVN nodes without a published slice."""

    @classmethod
    def assemble(
        cls, central: Observed, slices: Mapping[str, tuple[Observed, str | None, str | None]],
        missing: tuple[str, ...] = (),
    ) -> ZonedSnapshot:  # fmt: skip
        """``central``: the Kubernetes side (nodes, owned objects, NetworkPolicies); ``slices``:
        node -> (its agent's view, when published, its revision)."""
        zones = {}
        for node, (view, at, revision) in sorted(slices.items()):
            mine = tuple(o for o in central.kube_objects if object_node(o) == node)
            full = replace(view, nodes=central.nodes, network_policies=central.network_policies,
                           kube_objects=mine)  # fmt: skip
            zones[node] = Zone(full, at, revision)
        return cls(central, zones, tuple(sorted(missing)))

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": SNAPSHOT_FORMAT_VERSION,
            "kind": ZONED,
            "central": self.central.to_json(),
            "zones": {
                node: {
                    "published_at": zone.published_at,
                    "revision": zone.revision,
                    "observed": zone.observed.to_json(),
                }
                for node, zone in self.zones.items()
            },
            "missing": list(self.missing),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ZonedSnapshot:
        if not is_zoned(data) or data.get("format_version") != SNAPSHOT_FORMAT_VERSION:
            raise ValueError(
                f"not a zoned snapshot of format_version {SNAPSHOT_FORMAT_VERSION} "
                f"(kind {data.get('kind')!r}, format_version {data.get('format_version')!r})"
            )
        # the whole file at once, so an error names its place in it (zones.node-1.observed...);
        # Observed.from_json checks the observed states again, which costs a walk, not a read
        check_text(dict(data), "snapshot")
        for node in dict(data.get("zones") or {}):
            check_node_name(node, f"zones[{node!r}]")
        for node in data.get("missing") or ():
            check_node_name(node, "missing[]")
        zones = {
            str(node): Zone(
                Observed.from_json(zone["observed"]),
                zone.get("published_at"),
                zone.get("revision"),
            )
            for node, zone in dict(data.get("zones") or {}).items()
        }
        missing = tuple(str(n) for n in data.get("missing") or ())
        return cls(Observed.from_json(data["central"]), zones, missing)


def _plan_of(
    scope: Scope, desired: Desired, observed: Observed, options: CompileOptions
) -> tuple[Plan, dict[str, Any]]:
    """A scope's full plan of ``observed``, and what the plan reports beside its changes."""
    view = scope.view(observed)
    planned = compile_plan(scope.desired(desired), view.observed, scope.options(options))
    report = plan_report(planned.target, view.observed, planned.health) if scope.reads_ovn else {}
    return scope.restrict(planned.plan, view), report


def zoned_plan(
    desired: Desired,
    snapshot: ZonedSnapshot,
    options: CompileOptions,
    *,
    node: str | None = None,
    kubernetes_only: bool = False,
) -> Plan:
    """The plan of every zone (as its agent would make it) and of the Kubernetes side (as the
    central owner would), merged into one; or of one zone only (``node``), or of the Kubernetes
    side only (``kubernetes_only``)."""
    plans: list[Plan] = []
    warnings: list[Finding] = []
    instances: list[InstanceHealth] = []
    schemas: set[str] = set()
    steering: set[str] = set()
    if kubernetes_only:
        names: list[str] = []
    elif node is not None:
        names = [node]
    else:
        names = sorted(snapshot.zones)
        warnings.extend(
            Finding(
                "scope",
                f"Node/{name}",
                name,
                f"node {name}: its agent has published no observed slice, so its OVN changes "
                "are not in this plan",
            )
            for name in snapshot.missing
        )
    for name in names:
        zone = snapshot.zones.get(name)
        if zone is None:
            text = f"node {name}: not in this snapshot (no observed slice published)"
            warnings.append(Finding("scope", f"Node/{name}", name, text))
            # equivalent as ``break``: only a single asked-for node (``node=``) can be missing
            continue  # pragma: no mutate
        scope = NodeScope(name, report_kubernetes=False)
        plan, report = _plan_of(scope, desired, zone.observed, options)
        plans.append(plan)
        instances.extend(report.get("vnf_instances") or ())
        schemas.add(plan.nb_schema or "")
        steering.add(plan.steering or "")
    zone_plans = list(plans)
    central_plan: Plan | None = None
    if node is None:
        central_plan, _ = _plan_of(KubernetesScope(), desired, snapshot.central, options)
        plans.append(central_plan)
    changes = sorted((c for p in plans for c in p.changes), key=lambda c: c.sort_key)
    for plan in plans:
        warnings.extend(plan.findings)
    scope_name = (
        "kubernetes-only" if kubernetes_only
        else f"node {node}" if node is not None
        else f"interconnect, {len(snapshot.zones)} zone(s)"
    )  # fmt: skip
    # steering held in each zone; the rollouts as the central owner (who restarts VMs) sees them
    return Plan(
        tuple(changes),
        tuple({f.text: f for f in warnings}.values()),
        instance=options.instance,
        steering=", ".join(sorted(s for s in steering if s)) or None,
        nb_schema=", ".join(sorted(s for s in schemas if s)) or None,
        scope=scope_name,
        zones={n: snapshot.zones[n].published_at for n in names if n in snapshot.zones},
        vnf_instances=tuple(instances),
        held=tuple(hold for plan in zone_plans for hold in plan.held),
        rollouts=central_plan.rollouts if central_plan is not None else (),
    )
