"""What a plan says beside its changes, as types: findings, held steering, rollouts, VNF health.

These are the plan's *facts* (``reconciler.core.model.plan.Plan`` fields). Each has one JSON
form (``to_json``/``from_json``), which is the JSON plan's contract
(``reconciler.render.json_render``); renderers and ``explain`` read the types, never a dict.

A :class:`Finding` is one warning: worded once, where it is found (compile, a backend, a
transition, a scope), with a ``code`` saying what kind it is and the ``subject`` and ``node``
it concerns, so a view that needs some of them (``explain`` of one pod) filters the plan's
findings instead of deriving and wording them again. The JSON plan lists their ``text``
(``warnings``).

Pure data, the bottom layer of the core: no import of anything above ``model``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = [
    "HEALTHY",
    "NOT_HEALTHY",
    "UNKNOWN",
    "Code",
    "Finding",
    "Health",
    "Hold",
    "InstanceHealth",
    "Pending",
    "Protection",
    "ProtectionBasis",
    "UnboundPort",
    "VmRollout",
    "VnfRollout",
    "texts",
    "unique",
]

# ------------------------------------------------------------------------------- findings

Code = Literal[
    "network-policy",  # a NetworkPolicy selects steered pods (subject: NetworkPolicy/ns/name)
    "shadowed",  # an earlier binding takes every packet a binding would (subject: Binding/name)
    "first-match",  # an earlier binding takes part of a binding's traffic
    "tie",  # two bindings' rows have the same priority
    "unsteered",  # pods a binding cannot steer (no VNF instance on their node, ...)
    "placement",  # where VNFs can run (node names, node switches)
    "backend",  # what the chosen steering backend cannot do
    "load-balancer",  # steering beside Kubernetes Services' load balancers
    "health-check",  # VNF health checks and the probe addresses
    "node-traffic",  # what is left out of steering as node traffic (subject: Node/name)
    "nf-ids",  # the Network_Function id budget
    "transition",  # held steering and rollouts that cannot keep the old path
    "scope",  # node agents, the central owner, zones
    "typo",  # the typo guards of a review
    "route",  # a review: pods stay steered but stop crossing a VNF, or fail open
    "unused",  # a VnfDeployment no Binding refers to (subject: VnfDeployment/name)
    "ownership",  # objects with our labels where no manifest puts ours (subject: Namespace/name)
    "note",  # a warning read back from a saved JSON plan (its kind is not recorded there)
]


@dataclass(frozen=True, slots=True)
class Finding:
    """One warning of a plan: what kind (``code``), about what (``subject``: ``Kind/name`` of
    the manifest or object it concerns, empty when none), where (``node``, ``None`` for the
    whole cluster), and its one wording (``text``)."""

    code: Code
    subject: str
    node: str | None
    text: str


def texts(findings: Iterable[Finding]) -> tuple[str, ...]:
    """The wording of each finding (the JSON plan's ``warnings``)."""
    return tuple(f.text for f in findings)


def unique(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """``findings`` without a second one of the same wording, sorted by it (how compile has
    always listed its warnings)."""
    by_text = {f.text: f for f in findings}
    return tuple(by_text[t] for t in sorted(by_text))


# --------------------------------------------------------------------------- VNF health

Health = Literal["healthy", "not healthy", "unknown"]
HEALTHY: Health = "healthy"
NOT_HEALTHY: Health = "not healthy"
UNKNOWN: Health = "unknown"


@dataclass(frozen=True, slots=True)
class InstanceHealth:
    """One VNF instance (a VnfDeployment on one node) as OVN reports it (the plan's
    ``vnf_instances``).

    ``healthy`` only means something with a health check: without one OVN counts an instance
    healthy whenever its ports are bound, so it is reported ``unknown`` then."""

    vnf: str
    node: str
    health: Health
    detail: str = ""
    """Why it is ``unknown`` or ``not healthy``, for humans."""

    @property
    def healthy(self) -> bool | None:
        """True/False when OVN can tell, None when it cannot (the metric's 1/0/absent)."""
        if self.health == UNKNOWN:
            return None
        return self.health == HEALTHY

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InstanceHealth:
        return cls(data["vnf"], data["node"], data["health"], data.get("detail", ""))


@dataclass(frozen=True, slots=True)
class UnboundPort:
    """A data port of a running VNF VM that OVN has not bound (the plan's ``unbound``,
    ``reconciler.core.steering.port_binding.unbound_ports``): its LSP is not ``up``, so the
    instance never passes its health check and the steering onto it stays held."""

    vnf: str
    node: str
    vm: str
    """``<namespace>/<name>`` of the VirtualMachine."""
    port: str
    side: str
    cause: str

    def line(self) -> str:
        return (
            f"VnfDeployment/{self.vnf} on {self.node}: port {self.port} ({self.side}) of "
            f"VirtualMachine {self.vm}, which runs, is not bound: {self.cause}"
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnboundPort:
        return cls(
            str(data["vnf"]), str(data["node"]), str(data["vm"]), str(data["port"]),
            str(data.get("side", "")), str(data.get("cause", "")),
        )  # fmt: skip


# --------------------------------------------------------------------------- held steering

Ident = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Hold:
    """The steering of one binding on one node, held until its function groups are active
    (the plan's ``held``; ``reconciler.core.steering.network_function.gating``)."""

    binding: str
    node: str
    waiting_for: tuple[str, ...]
    """The VNF VMs (names) any of which, once healthy, would let the unit switch on (all of
    them with ``chain``)."""
    groups: tuple[str, ...]
    """The function groups the held ACLs steer to that northd has not reported active."""
    changes: tuple[Ident, ...]
    """The held changes (``(kind, key)``): the unit's ACL changes, and the deletes of function
    groups its live ACLs still steer to."""
    why: str = ""
    vnfs: tuple[str, ...] = ()
    """The VnfDeployments of those VMs (labels of the held-steering metric)."""
    chain: bool = False
    """The held ACLs steer through a chain: every one of ``waiting_for`` (its hops, in order)
    must become healthy, not any one."""

    @property
    def reason(self) -> str:
        """``waiting for firewall-node-2 to become healthy`` (what the plan, explain and status
        say)."""
        names = (" and " if self.chain else " or ").join(self.waiting_for)
        names = names or ", ".join(self.groups)
        why = f" ({self.why})" if self.why else ""
        return f"waiting for {names} to become healthy{why}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["changes"] = [list(i) for i in self.changes]
        data["waiting_for"] = list(self.waiting_for)
        data["groups"] = list(self.groups)
        data["vnfs"] = list(self.vnfs)
        data["reason"] = self.reason
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Hold:
        return cls(
            binding=str(data["binding"]),
            node=str(data["node"]),
            waiting_for=tuple(data.get("waiting_for") or ()),
            groups=tuple(data.get("groups") or ()),
            changes=tuple((str(k), str(n)) for k, n in data.get("changes") or ()),
            why=str(data.get("why") or ""),
            vnfs=tuple(data.get("vnfs") or ()),
            chain=bool(data.get("chain")),
        )


# -------------------------------------------------------------------------------- rollouts


@dataclass(frozen=True, slots=True)
class VmRollout:
    """One VirtualMachine of a VnfDeployment with a rollout under way."""

    key: str
    """``namespace/name``."""
    node: str
    slot: str
    function: str
    """Its Network_Function (what is drained from the node's steering groups)."""
    outdated: bool
    """Its live template differs from the manifests' (it needs a restart)."""
    released: bool = False
    """This plan writes its new template (it is ``restarting``)."""
    template: str = ""
    """The template hash it is being rolled to (of the manifests)."""
    phase: str | None = None
    since: str | None = None
    rolling_to: str | None = None
    """The template hash as annotated."""
    halted: str | None = None
    peer: str | None = None
    """The other function of its node (``instancesPerNode: 2``), which carries the traffic
    while this one is restarted."""
    image: str = ""
    """The image of the template it is being rolled to."""
    change: str = ""
    """What the new template changes, for people: ``image fw:1.0 → fw:1.1``, ``cpu 1 → 2``."""
    owner: str | None = None
    """The process rolling it (``rollout.osc.io/owner``: instance, host, pid), and since when
    (``rollout.osc.io/owner-since``)."""
    owner_since: str | None = None

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    @property
    def retargeted(self) -> bool:
        """Being rolled to another template than the manifests' (they changed mid-rollout):
        the rollout goes on from its phase with the new one."""
        return bool(self.phase and self.outdated and self.rolling_to and
                    self.rolling_to != self.template)  # fmt: skip


@dataclass(frozen=True, slots=True)
class VnfRollout:
    """A VnfDeployment whose VMs are being rolled (the plan's ``rollout`` entry;
    ``reconciler.core.transitions.rollout``)."""

    vnf: str
    max_unavailable: int
    deadline: float
    window: float
    instances_per_node: int
    nodes_total: int
    vms: tuple[VmRollout, ...] = ()

    @property
    def nodes_updated(self) -> int:
        pending = {vm.node for vm in self.vms if vm.outdated or vm.phase}
        return self.nodes_total - len(pending)

    @property
    def halted(self) -> str | None:
        return next((vm.halted for vm in self.vms if vm.halted), None)

    @property
    def owner(self) -> tuple[str, str | None] | None:
        """The process rolling it and since when (the first VM being rolled that names one)."""
        return next(((vm.owner, vm.owner_since) for vm in self.vms if vm.phase and vm.owner), None)

    @property
    def summary(self) -> str:
        """``VnfDeployment/firewall: 1 of 3 nodes updated`` and what happens now: the VM in
        progress, who rolls it since when, a template changed mid-rollout."""
        text = f"VnfDeployment/{self.vnf}: {self.nodes_updated} of {self.nodes_total} nodes updated"
        halted = self.halted
        if halted:
            return f"{text}; halted: {halted}"
        busy = [f"{vm.name} {vm.phase}" for vm in self.vms if vm.phase]
        owner = self.owner
        if owner is not None:
            busy.append(f"rolled by {owner[0]}" + (f" since {owner[1]}" if owner[1] else ""))
        text = f"{text} ({', '.join(busy)})" if busy else text
        moved = [vm.name for vm in self.vms if vm.retargeted]
        if moved:
            text += (
                f"; the template changed during the rollout: it goes on from {', '.join(moved)} "
                "with the new one (nodes already updated are rolled again after it)"
            )
        return text

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["nodes_updated"] = self.nodes_updated
        data["halted"] = self.halted
        data["summary"] = self.summary
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VnfRollout:
        names = VnfRollout.__dataclass_fields__
        fields = {k: data[k] for k in names if k in data and k != "vms"}
        vms = tuple(VmRollout(**vm) for vm in data.get("vms") or ())
        return cls(**fields, vms=vms)


# ---------------------------------------------------------------------------------- pending


@dataclass(frozen=True, slots=True)
class Pending:
    """A difference between the live state and the manifests that this plan does not write,
    but later passes will (the plan's ``pending``): a template change waiting for its rollout,
    a VM being rolled, steering held until a VNF instance is healthy. A plan with one is not
    converged (``plan`` exits 2)."""

    kind: str
    """``VirtualMachine`` or ``Binding``."""
    name: str
    """``namespace/name`` of a VM, the Binding's name."""
    node: str | None
    change: str
    """What differs: ``image fw:1.0 → fw:1.1, rolled node by node``."""
    why: str = ""
    """Why it is not written now, and what happens meanwhile."""

    @property
    def line(self) -> str:
        """``VirtualMachine osc-vnfs/fw-node-1: image fw:1.0 → fw:1.1, rolled node by node``."""
        where = f" on {self.node}" if self.kind == "Binding" and self.node else ""
        why = f" ({self.why})" if self.why else ""
        return f"{self.kind} {self.name}{where}: {self.change}{why}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pending:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


# ------------------------------------------------------------------------------ protection


@dataclass(frozen=True, slots=True)
class ProtectionBasis:
    """What a plan's protection changes are compared with (``meta.protection_basis``):
    ``live``, ``base``, ``nothing-applied`` or ``none``, and a sentence for people."""

    source: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "detail": self.detail}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProtectionBasis:
        return cls(str(data.get("source") or ""), str(data.get("detail") or ""))


@dataclass(frozen=True, slots=True)
class Protection:
    """Which pods start and stop being steered, per Binding, once the plan is applied
    (``reconciler.core.views.protection``), and what that is compared with. ``changes`` are
    in their JSON form (the plan's ``protection_changes``); ``None``: the plan cannot tell
    (``basis`` says why)."""

    changes: tuple[Mapping[str, Any], ...] | None
    basis: ProtectionBasis
