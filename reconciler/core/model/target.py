"""The target: every row and object that should exist, in one symbolic, comparable form.

``compile`` produces a :class:`Target`; the OVN and Kubernetes adapters read what we own back
into the same form (``reconciler.core.model.observed.OvnRow`` / ``KubeObject``); ``diff`` compares
the two.

Symbolic form of each OVN table we write (``fields`` of a :class:`Resource`). References to other
rows are by *name* (tables with a unique ``name``) or by ``osc.io/key`` (ACL, router policy);
the OVN adapter resolves them to UUIDs when it writes and back to names when it reads.

``Logical_Switch`` (a service chain's link between two hops; key = name)
    ``name``, ``external_ids``. Every other switch (the node switches) is OVN-Kubernetes':
    read, never written, except for adding and removing our ports.
``Logical_Switch_Port`` (a VNF data port, or a chain's VLAN child port; key = name)
    ``name``, ``switch`` (name of the logical switch whose ``ports`` holds it: a node switch,
    where we only add/remove our port, or one of our link switches), ``addresses`` (list),
    ``port_security`` (list), ``options`` (dict), ``external_ids`` (dict); a chain's child
    ports also ``parent_name`` (the VNF NIC's LSP) and ``tag_request`` (the VLAN tag).
``Port_Group`` (key = name)
    ``name``, ``ports`` (sorted list of LSP names), ``external_ids``.
``ACL`` (key = ``osc.io/key``)
    ``port_group`` (name of the owned Port_Group whose ``acls`` holds it), ``name`` (<= 63
    chars), ``direction``, ``priority``, ``tier``, ``match``, ``action``,
    ``network_function_group`` (NFG name or ``None``), ``external_ids``.
``Network_Function`` (key = name)
    ``name``, ``id`` (1-255), ``inport``/``outport`` (LSP names), ``external_ids``.
``Network_Function_Health_Check`` (key = name, the name of its function)
    ``name``, ``network_function`` (name of the owned Network_Function whose ``health_check``
    holds it: the table is not a root table, so the row lives and dies with that reference),
    ``options`` (``interval``, ``timeout``, ``success_count``, ``failure_count``, as strings),
    ``external_ids``.
``Network_Function_Group`` (key = name)
    ``name``, ``id`` (1-255), ``mode`` (``inline``), ``fallback`` (``fail-open``|``fail-close``),
    ``network_function`` (sorted list of NF names), ``external_ids``.
``Logical_Router_Policy`` (key = ``osc.io/key``)
    ``router`` (name of the logical router whose ``policies`` holds it: not ours), ``priority``,
    ``match``, ``action`` (``reroute``), ``nexthops`` (list), ``external_ids``.
``NB_Global`` (key = ``options``; the cluster's one row, never ours as a whole)
    ``options``: only the keys of :data:`SVC_MONITOR_OPTIONS` this instance set;
    ``external_ids``: only this instance's marker, ``{svc_monitor_marker(instance): "<the keys
    it set, sorted, comma-separated>"}``. The marker is how a later pass (or prune) knows which
    values are ours to change and remove; values someone else set are never in this row.

Kubernetes objects (``VirtualMachine``, ``NetworkAttachmentDefinition``) use key
``<namespace>/<name>`` and ``fields`` = the managed body: ``{"metadata": {"labels": …,
"annotations": …}, "spec": …}`` (NADs: ``spec.config`` is the JSON string Multus reads).

``external_ids`` (of every table but ``NB_Global``) always hold ``osc.io/owner``,
``osc.io/resource``, ``osc.io/key`` and, for per-node rows, ``osc.io/node``. ``osc.io/revision``
is written but ignored by the diff: a new git commit alone does not rewrite rows it did not
change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.model.facts import Finding, texts

OVN_TABLES: tuple[str, ...] = (
    # Order matters: a table is created after the tables it references and deleted before them.
    "Logical_Switch",
    "Logical_Switch_Port",
    "Port_Group",
    "Network_Function",
    "Network_Function_Health_Check",
    "Network_Function_Group",
    "ACL",
    "Logical_Router_Policy",
    "NB_Global",
)
KUBE_KINDS: tuple[str, ...] = ("NetworkAttachmentDefinition", "VirtualMachine")

NB_GLOBAL = "NB_Global"
NB_GLOBAL_KEY = "options"
"""The key of the one ``NB_Global`` resource (the plan shows a change of ``NB_Global options``)."""
SVC_MONITOR_OPTIONS: tuple[str, ...] = ("svc_monitor_ip", "svc_monitor_ip_dst")
"""``NB_Global`` options northd needs before any Network_Function health check works: the source
and destination address of OVN's ICMP probe. Without both, no function is ever healthy."""
SVC_MONITOR_MARKER_PREFIX = "osc.io/svc-monitor."


def svc_monitor_marker(instance: str) -> str:
    """The ``NB_Global`` ``external_ids`` key that records which of :data:`SVC_MONITOR_OPTIONS`
    the osc-gitops ``instance`` set (one key per instance, so instances never share a claim)."""
    return f"{SVC_MONITOR_MARKER_PREFIX}{instance}"


@dataclass(frozen=True, slots=True)
class Resource:
    """One row or object that should exist."""

    kind: str
    key: str
    origin: str
    """``Kind/name`` of the manifest it came from (``osc.io/resource``)."""
    node: str | None
    fields: dict[str, Any]

    @property
    def is_ovn(self) -> bool:
        return self.kind in OVN_TABLES

    @property
    def ident(self) -> tuple[str, str]:
        return (self.kind, self.key)


@dataclass(frozen=True, slots=True)
class Target:
    """The compiled desired state plus what compile wants the user to know."""

    resources: dict[tuple[str, str], Resource] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()

    @classmethod
    def of(cls, resources: Iterable[Resource], findings: Iterable[Finding] = ()) -> Target:
        by_ident: dict[tuple[str, str], Resource] = {}
        for res in resources:
            if res.ident in by_ident:
                raise _collision(by_ident[res.ident], res)
            by_ident[res.ident] = res
        return cls(resources=dict(sorted(by_ident.items())), findings=tuple(findings))

    @property
    def warnings(self) -> tuple[str, ...]:
        """The findings' wording."""
        return texts(self.findings)

    def __iter__(self) -> Iterator[Resource]:
        return iter(self.resources.values())

    def __len__(self) -> int:
        return len(self.resources)


class NameCollision(ValueError):
    """Two resources compile made under one name (:func:`_collision` words it); compile
    raises it again as a ``CompileError`` (exit 1, one line, no traceback)."""


def _collision(first: Resource, second: Resource) -> NameCollision:
    """Kubernetes names are ``<vnf>-<node>`` (and ``<prefix>-<node>-in``): VNF ``fw`` on node
    ``edge-node-1`` and ``fw-edge`` on ``node-1`` are both ``fw-edge-node-1``. ``validate``
    refuses VNF names that can collide in one namespace; what it cannot know is the cluster's
    node names (``n`` and ``n-b`` with two instances per node)."""

    def who(res: Resource) -> str:
        return f"{res.origin} on node {res.node}" if res.node else res.origin

    return NameCollision(
        f"{who(first)} and {who(second)} would both be {first.kind} {first.key}: generated "
        "names are <vnf>-<node> (NetworkAttachmentDefinitions <dataNetwork>-<node>-in/-out, a "
        "second instance adds -b), so rename a VnfDeployment or its spec.dataNetwork, or give "
        "it another spec.namespace"
    )
