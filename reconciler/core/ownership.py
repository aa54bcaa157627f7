"""Ownership markers: how osc-gitops recognises what it wrote.

Every OVN row and Kubernetes object the reconciler creates carries these keys (OVN rows in
``external_ids``, Kubernetes objects in ``metadata.labels``/``annotations``). Diff and prune only
ever consider objects whose ``OWNER`` key equals this instance's name, so rows written by
OVN-Kubernetes, by hand, or by another osc-gitops instance are never updated or deleted.

The prefix ``osc.io/`` deliberately avoids OVN-Kubernetes' ``k8s.ovn.org/*`` keys and its bare
``name``/``pod`` keys.
"""

from __future__ import annotations

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
the rows of a central-NB run (``reconciler.core.slicing`` says who owns what)."""

REVISION = "osc.io/revision"
"""Git commit the row was last written from (set by the git source; optional)."""

ROLLOUT_PREFIX = "rollout.osc.io/"
"""Annotations on our VirtualMachines that hold a rolling update's state
(``reconciler.core.rollout``). Outside :data:`PREFIX` on purpose: they are not managed fields,
so an update of the VM from the plan never removes them and the diff never compares them."""

VNF_LABEL = "osc.io/vnf"
NODE_LABEL = "osc.io/node"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "osc-gitops"

DEFAULT_INSTANCE = "osc-gitops"
