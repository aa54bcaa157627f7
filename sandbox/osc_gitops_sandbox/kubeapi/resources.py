"""The resources the Kubernetes API emulator serves: one :class:`ResourceType` per kind.

Adding a kind is one line in :data:`RESOURCE_TYPES`; discovery, routing, the OpenAPI documents
and the Table columns are derived from it (see :mod:`osc_gitops_sandbox.kubeapi.server`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RESOURCE_TYPES", "VERBS", "ResourceType", "group_resource"]


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource: everything discovery, routing and validation need."""

    group: str  # "" = core
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    fields: frozenset[str] = frozenset()
    """Extra field-selector fields beyond ``metadata.name``/``metadata.namespace``."""
    body: tuple[str, ...] = ("spec", "status")
    """Its top-level fields besides ``apiVersion``, ``kind`` and ``metadata`` (a ConfigMap has
    ``data``, a Role ``rules``): what its schema declares, unchecked inside."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def field_selectors(self) -> frozenset[str]:
        return self.fields | {"metadata.name", "metadata.namespace"}


VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("ns",), frozenset({"status.phase"})),
    ResourceType(
        "", "v1", "pods", "Pod", True, ("po",), frozenset({"spec.nodeName", "status.phase"})
    ),
    ResourceType("", "v1", "nodes", "Node", False, ("no",)),
    ResourceType("kubevirt.io", "v1", "virtualmachines", "VirtualMachine", True, ("vm", "vms")),
    ResourceType(
        "kubevirt.io",
        "v1",
        "virtualmachineinstances",
        "VirtualMachineInstance",
        True,
        ("vmi", "vmis"),
        frozenset({"status.phase", "status.nodeName"}),
    ),
    ResourceType(
        "k8s.cni.cncf.io",
        "v1",
        "network-attachment-definitions",
        "NetworkAttachmentDefinition",
        True,
        ("net-attach-def",),
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, ("netpol",)),
    # What `kubectl apply -k deploy/...` creates (stored, never run: no controller plays them),
    # so an install can be tried on the emulator as on an empty cluster.
    ResourceType(
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        True,
        ("cm",),
        body=("data", "binaryData", "immutable"),
    ),
    ResourceType(
        "", "v1", "secrets", "Secret", True, body=("data", "stringData", "type", "immutable")
    ),
    ResourceType(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        True,
        ("sa",),
        body=("automountServiceAccountToken", "secrets", "imagePullSecrets"),
    ),
    ResourceType("apps", "v1", "deployments", "Deployment", True, ("deploy",)),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",)),
    ResourceType("batch", "v1", "cronjobs", "CronJob", True, ("cj",)),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",)),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        False,
        body=("rules", "aggregationRule"),
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        False,
        body=("roleRef", "subjects"),
    ),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, body=("rules",)),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        True,
        body=("roleRef", "subjects"),
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
)


def group_resource(rt: ResourceType) -> str:
    """``plural.group`` (``plural`` for the core group), as messages and ``kubectl`` name it."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural
