"""Ownership markers: how osc-gitops recognises what it wrote.

Every OVN row and Kubernetes object the reconciler creates carries these keys (OVN rows in
``external_ids``, Kubernetes objects in ``metadata.labels``/``annotations``). Diff and prune only
ever consider objects whose ``OWNER`` key equals this instance's name, so rows written by
OVN-Kubernetes, by hand, or by another osc-gitops instance are never updated or deleted.

The prefix ``osc.io/`` deliberately avoids OVN-Kubernetes' ``k8s.ovn.org/*`` keys and its bare
``name``/``pod`` keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

PREFIX = "osc.io/"

OWNER = "osc.io/owner"
"""Instance name of the reconciler that owns the row (default ``osc-gitops``)."""

RESOURCE = "osc.io/resource"
"""``Kind/name`` of the manifest the row was compiled from (e.g. ``Binding/web-through-fw``)."""

NODE = "osc.io/node"
"""Kubernetes node a per-node row belongs to (absent for cluster-wide rows)."""

KEY = "osc.io/key"
"""Stable identity of the row inside its table, so the diff can pair target and live rows
(ACLs and router policies have no unique name column)."""

AGENT = "osc.io/agent"
"""Node whose agent (``osc-gitops run --node``) wrote the row and alone may change it; absent on
the rows of a central-NB run (``reconciler.core.planning.slicing`` says who owns what)."""

EMPTY_SINCE = "osc.io/empty-since"
"""On a per-node ``Port_Group`` whose group has no member on the node any more: when it became
empty (UTC, ISO 8601, seconds). The pair's rows are kept until ``CompileOptions.empty_grace``
has passed since (``reconciler.core.steering.presence``)."""

PRESENCE = "osc.io/presence"
"""``members`` on a per-node ``Port_Group`` written since a (group, node) pair has rows only
while the group has members on the node. An empty Port_Group that carries it was emptied by OVN
itself (its last member's LSP was deleted: ``Port_Group.ports`` holds weak references) and is
held; one without it is from before (deleted at once). Written with every write of the row but
never a reason for one (the diff ignores it, see :data:`WRITE_ONLY`), so upgrading touches no
Port_Group that has members."""

WRITE_ONLY: frozenset[str] = frozenset({PRESENCE})
"""Keys written whenever their row is written, but whose absence alone never makes the diff
rewrite a row."""

CHAIN = "osc.io/chain"
"""On the rows that wire a service chain (``reconciler.core.steering.chains``): its VNFs in
order, comma-separated (``ngfw,ids``)."""

REVISION = "osc.io/revision"
"""Git commit the row was last written from (set by the git source; optional)."""

ROLLOUT_PREFIX = "rollout.osc.io/"
"""Annotations on our VirtualMachines that hold a rolling update's state
(``reconciler.core.transitions.rollout``). Outside :data:`PREFIX` on purpose: they are not managed
fields, so an update of the VM from the plan never removes them and the diff never compares them."""

VNF_LABEL = "osc.io/vnf"
NODE_LABEL = "osc.io/node"
"""The node a VirtualMachine or NAD of ours is for, as a label value (:func:`node_label_value`:
the name itself up to 63 characters, a stable shortening beyond)."""
NODE_NAME_ANNOTATION = "osc.io/node-name"
"""The full node name, on objects whose :data:`NODE_LABEL` had to be shortened (node names may
have 253 characters, label values 63)."""
MAX_LABEL_VALUE = 63
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "osc-gitops"

DEFAULT_INSTANCE = "osc-gitops"


def node_label_value(node: str) -> str:
    """``node`` as a label value: itself when it fits (a node name of up to 63 characters is a
    valid label value), else its first characters and a hash of the whole name, 63 in all
    (``<prefix>-<10 hex of sha256>``): stable, distinct for distinct names, and a valid label
    value (it starts and ends with an alphanumeric character)."""
    if len(node) <= MAX_LABEL_VALUE:
        return node
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    head = node[: MAX_LABEL_VALUE - len(digest) - 1].rstrip("-.")
    return f"{head}-{digest}"


def node_annotations(node: str) -> dict[str, str]:
    """The full node name as :data:`NODE_NAME_ANNOTATION` where the label had to shorten it."""
    return {} if node_label_value(node) == node else {NODE_NAME_ANNOTATION: node}


def node_of(labels: Mapping[str, Any], annotations: Mapping[str, Any]) -> str | None:
    """The node one of our VirtualMachines or NADs is for: the full name of the annotation,
    else the label (``None`` when neither is a string)."""
    node = annotations.get(NODE_NAME_ANNOTATION) or labels.get(NODE_LABEL)
    return node if isinstance(node, str) else None
