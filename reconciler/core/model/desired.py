"""The manifest contract: pydantic models are the single source of truth.

``schemas/*.json`` are generated from these classes (``osc-gitops schema``), and a test fails when
they drift. Every string that can reach an OVN ``match`` or a Kubernetes label selector is
constrained here to a safe alphabet (Kubernetes' own label and name syntax), so nothing a user
writes is ever pasted into a match unchecked.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    field_validator,
    model_validator,
)
from pydantic.json_schema import WithJsonSchema

API_VERSION: Final = "osc.io/v1alpha1"
KINDS = ("SecurityGroup", "VnfDeployment", "Binding")
MAX_ORDER = 999
"""Orders map onto 1000 ACL/router-policy priorities; see ``reconciler.core.steering``."""
DEFAULT_ORDER = 100
"""A Binding's ``order`` when omitted. A fixed number, not "after every explicit order": a
binding's place (and its OVN priority) must not move when another binding is added elsewhere.
100 sits after the small orders people write (5, 10, 20) and leaves room on both sides; two
bindings of one group that both omit it clash like any two equal orders, so the chain order never
depends on file order."""
# Health-check defaults for a bump-in-the-wire firewall: a probe every second, and an instance
# counts as failed after two probes in a row went unanswered (a single lost probe is not an
# outage) and as healthy again after one answered probe.
HEALTH_INTERVAL = 1
HEALTH_TIMEOUT = 1
HEALTH_SUCCESS_COUNT = 1
HEALTH_FAILURE_COUNT = 2

# Kubernetes syntax (apimachinery/pkg/util/validation).
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_IMAGE = re.compile(r"^[a-z0-9]+([._/:@-][A-Za-z0-9_.-]+)*$")


def check_label_key(key: str) -> str:
    """Validate a Kubernetes label key (optional DNS-subdomain prefix, then a 63-char name)."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        raise ValueError(
            f"label key {key!r}: prefix {prefix!r} must be a DNS subdomain "
            "(lowercase letters, digits, '-' and '.', at most 253 characters)"
        )
    if not _LABEL_NAME.fullmatch(name):
        raise ValueError(
            f"label key {key!r}: name {name!r} {_label_fault(name)}; it must be "
            "1-63 characters of letters, digits, '-', '_' or '.', starting and ending with a "
            "letter or digit"
        )
    return key


_LABEL_CHARS = re.compile(r"[-A-Za-z0-9_.]")


def _label_fault(text: str) -> str:
    """What exactly is wrong with a label name or value (one cause, not the whole rule): a
    character, emptiness (a name's: an empty value is valid and never asked about), the
    length, or the first/last character."""
    bad = next((c for c in text if not _LABEL_CHARS.fullmatch(c)), None)
    if bad is not None:
        shown = {" ": "a space", "\t": "a tab", "\n": "a line break"}.get(bad, repr(bad))
        return f"contains {shown}"
    if not text:
        return "is empty"
    if len(text) > 63:
        return f"is {len(text)} characters long, more than 63"
    return "must start and end with a letter or digit"


def check_label_value(value: str) -> str:
    """Validate a Kubernetes label value (empty, or 63 chars of ``[A-Za-z0-9-_.]``)."""
    if not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"label value {value!r} {_label_fault(value)}; it must be at most 63 "
            "characters of letters, digits, '-', '_' or '.', starting and ending with a letter or "
            "digit"
        )
    return value


def check_label_term(term: str) -> str:
    """``key=value``, both parts in Kubernetes label syntax (the seeds' member label format)."""
    key, eq, value = term.partition("=")
    if not eq:
        raise ValueError(f"label {term!r} must have the form key=value")
    check_label_key(key)
    check_label_value(value)
    return term


def check_label_map(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        check_label_key(key)
        check_label_value(value)
    return labels


def check_quantity(value: str) -> str:
    if not _QUANTITY.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a Kubernetes quantity (for example 512Mi, 2Gi, 1.5G, 500m)"
        )
    return value


Name = Annotated[str, StringConstraints(pattern=DNS1123_LABEL, min_length=1, max_length=63)]
"""A DNS-1123 label: manifest names, namespaces (Kubernetes' own rule for both)."""
# Patterns mirrored into the JSON Schema so editors flag bad labels while typing; the Python
# validators above stay the authority (and give the better messages).
_LABEL_KEY_JS = (
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
)
_LABEL_VALUE_JS = r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?"

LabelTerm = Annotated[
    str,
    AfterValidator(check_label_term),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": f"^{_LABEL_KEY_JS}={_LABEL_VALUE_JS}$",
            "description": "A Kubernetes label as key=value, e.g. app=web or example.com/tier=db.",
        }
    ),
]
LabelMap = Annotated[
    dict[str, str],
    AfterValidator(check_label_map),
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"pattern": f"^{_LABEL_KEY_JS}$"},
            "additionalProperties": {"type": "string", "pattern": f"^{_LABEL_VALUE_JS}$"},
        }
    ),
]
Quantity = Annotated[
    str,
    AfterValidator(check_quantity),
    WithJsonSchema({"type": "string", "pattern": _QUANTITY.pattern}),
]


class _Strict(BaseModel):
    """Unknown fields are errors: a typo (``failurepolicy``) must not silently mean the default."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Metadata(_Strict):
    name: Name = Field(description="DNS-1123 label, unique per kind.")
    labels: LabelMap = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


SpecT = TypeVar("SpecT", bound=_Strict)


class _Resource(_Strict, Generic[SpecT]):
    """What every kind has around its spec, as Kubernetes objects do; each kind narrows
    ``kind`` to its own name (a field keeps its place when a subclass narrows it)."""

    apiVersion: Literal["osc.io/v1alpha1"] = API_VERSION
    kind: str
    metadata: Metadata
    spec: SpecT


# --- SecurityGroup ---------------------------------------------------------------------------


class SecurityGroupSpec(_Strict):
    labels: list[LabelTerm] = Field(
        min_length=1,
        description="key=value labels; a pod carrying ANY of them is a member (keys may differ).",
    )
    namespaces: list[Name] | None = Field(
        default=None, description="Namespaces to look in; omitted means all namespaces."
    )
    description: str | None = None

    @field_validator("labels")
    @classmethod
    def _unique_labels(cls, labels: list[str]) -> list[str]:
        dupes = sorted({t for t in labels if labels.count(t) > 1})
        if dupes:
            raise ValueError(f"duplicate labels: {', '.join(dupes)}")
        return labels

    def label_pairs(self) -> list[tuple[str, str]]:
        return [(k, v) for k, _, v in (t.partition("=") for t in self.labels)]


class SecurityGroup(_Resource[SecurityGroupSpec]):
    """Pods to protect, chosen by labels (OR across the list)."""

    kind: Literal["SecurityGroup"] = "SecurityGroup"


# --- VnfDeployment ---------------------------------------------------------------------------


class SecurityManager(_Strict):
    url: Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$", max_length=2048)] = Field(
        description=(
            "Notified (HTTP POST, JSON: schemas/security-manager-notification.json) when a VNF "
            "instance is deployed or removed, and, per Binding and node, of the SecurityGroup's "
            "members whenever they change."
        )
    )


class HealthCheck(_Strict):
    """How OVN probes each VNF instance: an ICMP echo sent into the instance's in port must come
    back on its out port (a bump-in-the-wire VNF passes). The failurePolicy of the Bindings
    through the VNF acts on the result; without a probe OVN counts an instance healthy whenever
    its ports are bound, so a VNF that stops forwarding would swallow fail-open traffic too."""

    enabled: bool = Field(
        default=True,
        strict=True,
        description=(
            "Probe the instances. false: OVN cannot tell a dead VNF from a live one, so the "
            "failure policy of the Bindings through this VNF never acts (the plan warns)."
        ),
    )
    interval: int = Field(
        default=HEALTH_INTERVAL, ge=1, le=300, strict=True,
        description="Seconds between probes (OVN options:interval).",
    )  # fmt: skip
    timeout: int = Field(
        default=HEALTH_TIMEOUT, ge=1, le=300, strict=True,
        description="Seconds to wait for a probe's reply (OVN options:timeout).",
    )  # fmt: skip
    successCount: int = Field(
        default=HEALTH_SUCCESS_COUNT, ge=1, le=100, strict=True,
        description="Consecutive answered probes before an instance counts as healthy again.",
    )  # fmt: skip
    failureCount: int = Field(
        default=HEALTH_FAILURE_COUNT, ge=1, le=100, strict=True,
        description="Consecutive unanswered probes before an instance counts as failed.",
    )  # fmt: skip


MAX_INSTANCES_PER_NODE = 2
"""A node's Network_Function_Group is active/standby (northd sends everything to one healthy
member), so a second VM per node is a standby; a third would add nothing but ids and memory."""
DEFAULT_BOOT_SECONDS = 120
"""Seconds a VNF VM is expected to take to boot until its guest forwards (a real VM: tens of
seconds; an appliance: a minute or two)."""
DEFAULT_PROGRESS_DEADLINE = 600
"""Seconds a restarted VNF instance may take to be seen healthy before a rolling update halts
(Kubernetes Deployments' ``progressDeadlineSeconds`` default)."""


class UpdateStrategy(_Strict):
    """How a spec change that needs a VM restart (image, cpu, memory, ...) rolls out: KubeVirt
    does not restart a running VM when its template changes, so osc-gitops restarts the VMs
    itself, node by node (the DaemonSet word, ``maxUnavailable``), each one only after the
    previous ones are seen healthy by OVN again."""

    maxUnavailable: int = Field(
        default=1, strict=True, le=1000, json_schema_extra={"minimum": 1},
        description=(
            "Nodes whose VNF instances are restarted at the same time (at least 1). With "
            "instancesPerNode: 2 a node keeps a healthy instance throughout."
        ),
    )  # fmt: skip
    progressDeadlineSeconds: int = Field(
        default=DEFAULT_PROGRESS_DEADLINE, ge=1, le=86400, strict=True,
        description=(
            "Seconds a restarted instance may take until OVN reports it healthy; past it the "
            "rollout halts (no further node is restarted) and says so."
        ),
    )  # fmt: skip

    @field_validator("maxUnavailable")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        if value < 1:
            raise ValueError(
                f"maxUnavailable must be at least 1 (got {value}): with 0 no VM could ever be "
                "restarted, so a changed image, cpu or memory would never take effect"
            )
        return value


class VnfDeploymentSpec(_Strict):
    namespace: Name = Field(description="Namespace the VirtualMachines live in.")
    nodeSelector: LabelMap = Field(
        default_factory=dict, description="Node labels (AND); empty means every node."
    )
    image: Annotated[str, StringConstraints(max_length=512)] = Field(
        description="KubeVirt containerDisk image of the VNF."
    )
    cpu: int = Field(default=1, ge=1, le=64, strict=True, description="Virtual CPU cores.")
    memory: Quantity = Field(default="1Gi", description="Guest memory, a Kubernetes quantity.")
    dataNetwork: Name | None = Field(
        default=None,
        description=(
            "Name prefix of the Multus NetworkAttachmentDefinitions that attach the VM's two data "
            "NICs (in/out) to OVN: osc-gitops creates '<dataNetwork>-<node>-in' and '-out' "
            "(type ovs on br-int, bound to the VNF's OVN ports). Default: '<vnf name>'."
        ),
    )
    securityManager: SecurityManager | None = None
    cloudInitUserData: Annotated[str, StringConstraints(max_length=32768)] | None = Field(
        default=None,
        description=(
            "cloud-init user data for the guest (KubeVirt's cloudInitNoCloud volume), e.g. to "
            "bridge its two data NICs; at most 32 KiB. Omitted: no cloud-init volume."
        ),
    )
    healthCheck: HealthCheck = Field(
        default_factory=HealthCheck,
        description="How OVN probes each instance, so a Binding's failurePolicy can act.",
    )
    instancesPerNode: int = Field(
        default=1, strict=True,
        json_schema_extra={"enum": [1, MAX_INSTANCES_PER_NODE]},
        description=(
            "VNF VMs per node: 1, or 2 for an active and a standby (both members of the node's "
            "Network_Function_Group; OVN fails over when the active one fails its probe)."
        ),
    )  # fmt: skip
    updateStrategy: UpdateStrategy = Field(
        default_factory=UpdateStrategy,
        description="How a change that needs a VM restart rolls out (node by node).",
    )
    bootSeconds: int = Field(
        default=DEFAULT_BOOT_SECONDS, ge=1, le=86400, strict=True,
        description=(
            "Seconds a VM of this VNF may take from its start until its guest forwards (its "
            "boot allowance). Steering held for a new instance longer than this plus the health "
            "check's detection time means pods stay unprotected for longer than a boot: "
            "status and the OscGitopsVnfInstanceNotReady alert say so."
        ),
    )  # fmt: skip

    @field_validator("instancesPerNode")
    @classmethod
    def _instances(cls, value: int) -> int:
        if value not in (1, MAX_INSTANCES_PER_NODE):
            raise ValueError(
                f"instancesPerNode must be 1 or {MAX_INSTANCES_PER_NODE} (got {value}): a node's "
                "Network_Function_Group is active/standby, so one VM serves the traffic and a "
                "second one stands by; more would never carry traffic"
            )
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, image: str) -> str:
        if not _IMAGE.fullmatch(image):
            raise ValueError(f"{image!r} is not a container image reference")
        return image


class VnfDeployment(_Resource[VnfDeploymentSpec]):
    """A security VNF run as one KubeVirt VirtualMachine on every (selected) node."""

    kind: Literal["VnfDeployment"] = "VnfDeployment"


# --- Binding ---------------------------------------------------------------------------------


class Redirection(StrEnum):
    EXIT_LPORT = "exit-lport"
    """Traffic leaving the switch towards the protected pods (a to-lport ACL)."""
    ENTRY_LPORT = "entry-lport"
    """Traffic entering the switch from the protected pods (a from-lport ACL)."""
    BOTH = "both"


class FailurePolicy(StrEnum):
    FAIL_CLOSE = "fail-close"
    FAIL_OPEN = "fail-open"


class Precedence(StrEnum):
    AFTER_NETWORK_POLICY = "after-network-policy"
    """Tier 3: NetworkPolicy keeps deciding first; flows it allows are not steered. Safe default:
    osc-gitops never weakens a deny the cluster already has."""
    BEFORE_NETWORK_POLICY = "before-network-policy"
    """Tier 1: every flow of the group is steered, but NetworkPolicy denies no longer apply to it
    (the VNF becomes the enforcer)."""


class Protocol(StrEnum):
    TCP = "tcp"
    UDP = "udp"
    ICMP = "icmp"
    ANY = "any"


PortNumber = Annotated[int, Field(ge=1, le=65535, strict=True)]
"""Strict, like every number and boolean of the contract: ``true``, ``"443"`` and ``443.0`` are
refused, never coerced (a security rule must not be built from a guessed value; ``true`` would
become port 1)."""


class PortRange(_Strict):
    start: PortNumber
    end: PortNumber

    @model_validator(mode="after")
    def _ordered(self) -> PortRange:
        if self.start > self.end:
            raise ValueError(f"port range start {self.start} is greater than end {self.end}")
        return self


class Traffic(_Strict):
    """A structured filter; compiled to an OVN match by osc-gitops, never a raw match string."""

    model_config = ConfigDict(
        **_Strict.model_config,
        # The schema says what _ports_need_l4 checks, so editors and the loader agree.
        json_schema_extra={
            "if": {"required": ["ports"], "properties": {"ports": {"minItems": 1}}},
            "then": {
                "required": ["protocol"],
                "properties": {"protocol": {"enum": ["tcp", "udp"]}},
            },
        },
    )

    protocol: Protocol = Protocol.ANY
    ports: list[PortNumber | PortRange] = Field(
        default_factory=list, description="Destination ports (tcp/udp only); empty means all."
    )

    @model_validator(mode="after")
    def _ports_need_l4(self) -> Traffic:
        if self.ports and self.protocol not in (Protocol.TCP, Protocol.UDP):
            raise ValueError(f"ports need protocol tcp or udp, not {self.protocol.value}")
        return self


def _traffic_form(value: Any) -> str | None:
    """Which form of ``traffic`` was written: one filter (a mapping) or a list of them."""
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict | Traffic):
        return "mapping"
    return None


TrafficFilters = Annotated[
    Annotated[Traffic, Tag("mapping")] | Annotated[list[Traffic], Tag("list"), Field(min_length=1)],
    Discriminator(
        _traffic_form,
        custom_error_type="traffic_type",
        custom_error_message="expected a mapping {protocol, ports} or a list of them",
    ),
]
"""``spec.traffic``: one filter, or a non-empty list of filters (a packet matching any of them is
steered). The discriminator validates only the form written, so an error inside a list item is
reported once, at the item, not also as "expected a mapping"."""


def _vnf_form(value: Any) -> str | None:
    """Which form of ``vnf`` was written: one name, or a list of them (a chain)."""
    if isinstance(value, list | tuple):
        return "chain"
    if isinstance(value, str):
        return "name"
    return None


class ChainHop(_Strict):
    """One VNF of a chain, with a failure policy of its own."""

    name: Name = Field(description="The VnfDeployment.")
    failurePolicy: FailurePolicy | None = Field(
        default=None,
        description=(
            "What happens to the chain's traffic on a node where this VNF is not healthy: "
            "fail-open skips it (the rest of the chain still applies), fail-close drops the "
            "traffic. Omitted: the Binding's failurePolicy."
        ),
    )


def _hop_form(value: Any) -> str | None:
    """Which form a hop of a chain was written in: a name, or ``{name, failurePolicy}``."""
    if isinstance(value, str):
        return "name"
    if isinstance(value, dict | ChainHop):
        return "hop"
    return None


HopRef = Annotated[
    Annotated[Name, Tag("name")] | Annotated[ChainHop, Tag("hop")],
    Discriminator(
        _hop_form,
        custom_error_type="hop_type",
        custom_error_message="expected a VnfDeployment name or a mapping {name, failurePolicy}",
    ),
]

VnfChain = Annotated[
    Annotated[Name, Tag("name")] | Annotated[list[HopRef], Tag("chain"), Field(min_length=1)],
    Discriminator(
        _vnf_form,
        custom_error_type="vnf_type",
        custom_error_message="expected a VnfDeployment name or a list of them (a chain)",
    ),
]
"""``spec.vnf``: one VnfDeployment, or a non-empty list of distinct ones, a chain that a packet
crosses in list order (``reconciler.core.steering.chains``), each a name or ``{name,
failurePolicy}``. A list of one is the single form."""


class BindingSpec(_Strict):
    securityGroup: Name
    vnf: VnfChain = Field(
        description=(
            "The VnfDeployment to steer through, or a list of them: a chain, crossed in list "
            "order by traffic to the group's pods and by traffic from them alike (replies take "
            "the reverse path)."
        )
    )
    redirection: Redirection = Redirection.EXIT_LPORT
    failurePolicy: FailurePolicy = FailurePolicy.FAIL_CLOSE
    order: int = Field(
        default=DEFAULT_ORDER,
        ge=0,
        le=MAX_ORDER,
        strict=True,
        description=(
            "Position among the bindings of one group (lower first); unique per group. "
            f"Omitted: {DEFAULT_ORDER}."
        ),
    )
    precedence: Precedence = Precedence.AFTER_NETWORK_POLICY
    steerNodeTraffic: bool = Field(
        default=False,
        strict=True,
        description=(
            "Also steer node traffic: kubelet probes from the node's management port (the "
            "node subnet's .2) and traffic from or to OVN-Kubernetes' join and transit "
            "subnets. Off by default: a fail-close VNF outage must not fail the liveness "
            "probes of every protected pod on the node."
        ),
    )
    traffic: TrafficFilters | None = Field(
        default=None,
        description=(
            "What to steer: one {protocol, ports} filter or a list of them (a packet matching "
            "any is steered); omitted means all IP traffic."
        ),
    )

    @property
    def vnfs(self) -> tuple[str, ...]:
        """The VNFs a packet crosses, in order (one for the single form)."""
        if isinstance(self.vnf, str):
            return (self.vnf,)
        return tuple(h if isinstance(h, str) else h.name for h in self.vnf)

    @property
    def hop_policies(self) -> tuple[FailurePolicy, ...]:
        """Each VNF's failure policy, in :attr:`vnfs` order: its own, else the Binding's."""
        if isinstance(self.vnf, str):
            return (self.failurePolicy,)
        return tuple(
            h.failurePolicy if isinstance(h, ChainHop) and h.failurePolicy else self.failurePolicy
            for h in self.vnf
        )

    @property
    def is_chain(self) -> bool:
        """Two VNFs or more (a list of one is the single form)."""
        return len(self.vnfs) > 1

    @property
    def vnf_text(self) -> str:
        """The VNF or the chain, for messages: ``firewall``, ``ngfw -> ids``."""
        return " -> ".join(self.vnfs)

    @property
    def order_is_default(self) -> bool:
        """``order`` was omitted (it is :data:`DEFAULT_ORDER`); messages say so."""
        return "order" not in self.model_fields_set

    def traffic_filters(self) -> tuple[Traffic, ...]:
        """The filters, whichever form was written; omitted = one filter that takes every IP
        packet (``Traffic()``: protocol ``any``, all ports)."""
        if self.traffic is None:
            return (Traffic(),)
        if isinstance(self.traffic, Traffic):
            return (self.traffic,)
        return tuple(self.traffic)


class Binding(_Resource[BindingSpec]):
    """Steer a security group's traffic through a VNF."""

    kind: Literal["Binding"] = "Binding"


Manifest = SecurityGroup | VnfDeployment | Binding
MODEL_BY_KIND: dict[str, type[SecurityGroup] | type[VnfDeployment] | type[Binding]] = {
    "SecurityGroup": SecurityGroup,
    "VnfDeployment": VnfDeployment,
    "Binding": Binding,
}


class Desired(BaseModel):
    """All manifests of one source (a folder or a git commit), validated and cross-checked."""

    model_config = ConfigDict(frozen=True)

    security_groups: dict[str, SecurityGroup] = Field(default_factory=dict)
    vnfs: dict[str, VnfDeployment] = Field(default_factory=dict)
    bindings: dict[str, Binding] = Field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not (self.security_groups or self.vnfs or self.bindings)

    def all(self) -> list[Any]:
        return [*self.security_groups.values(), *self.vnfs.values(), *self.bindings.values()]
