"""What a scope (``reconciler.core.planning.slicing``) needs from the live world, and the guards
that keep it inside its part: read what the scope reads, never write what it may not.

- :func:`observe_in` reads the live state a scope plans from: a central run and a node agent
  read Kubernetes and their NB (an agent's Kubernetes adapter already asks only for its node's
  pods, by field selector); ``--kubernetes-only`` reads nodes (with the subnets OVN-Kubernetes
  annotated) and the objects it owns, and never touches OVN or pods.
- :data:`NO_OVN` stands in for the NB of a scope without one: any use is a bug of ours.
- :class:`ReadOnlyKube` is an agent's Kubernetes writer: any write is a bug of ours. The scope
  already drops every Kubernetes change from an agent's plan; this makes the rule hold even if
  that ever broke.
- :func:`require_node` refuses a node agent whose node the live state does not have (not a
  Kubernetes node, or no logical switch of it in the NB read): such an agent would plan nothing,
  and an empty plan must never make a misdirected agent look converged.

How a scope's plan is made from what it reads is the pipeline's (``reconciler.engine.pipeline``:
one planning step for every pass, verify and ``osc-gitops plan``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from reconciler.core.model.observed import Observed, OvnState
from reconciler.core.model.plan import Change
from reconciler.core.planning.slicing import NodeScope, Scope, kubernetes_observed
from reconciler.engine.providers import KubeReader, KubeWriter, NodeNetworkReader, OvnReader
from reconciler.errors import InternalError, UserError

__all__ = [
    "NO_OVN",
    "NoOvn",
    "NodeNotFound",
    "ReadOnlyKube",
    "observe",
    "observe_in",
    "observe_verify",
    "require_node",
    "writer_for",
]


def observe(kube: KubeReader, ovn: OvnReader, instance: str) -> Observed:
    """Read both live systems into one plain snapshot (the OVN read waits for initial sync),
    stamped with the wall clock (``Observed.observed_at``: how long an emptied pair is held)."""
    return _observe(kube, ovn, instance, inputs=None)


def observe_verify(
    scope: Scope, kube: KubeReader, ovn: OvnReader, instance: str, first: Observed
) -> Observed:
    """The verify read after an apply: what ``scope`` plans from, with everything we may have
    written read again and the inputs we never write taken from ``first`` (the read the applied
    plan was made from, before the scope's view).

    Re-read: the NB snapshot (our rows, and OVN-Kubernetes' switches, routers and pod ports,
    which come in the same snapshot) and the Kubernetes objects we own (NADs, VMs). Reused:
    pods, nodes and NetworkPolicies. Why this still proves convergence: the verify asks whether
    our writes landed, i.e. whether planning the same input against the live state of what we
    write leaves nothing to do; a write of ours that was lost, or someone else editing our rows
    or objects meanwhile, still shows. A pod, node or NetworkPolicy that changed meanwhile is new
    input for the next pass, not a failure of this one. Listing them again was the larger part
    of the verify's Kubernetes time (50,000 ``Pod`` values built again at 50k pods). A scope that
    does not read OVN (``--kubernetes-only``) reads as :func:`observe_in` does: nodes and owned
    objects only, both cheap."""
    if not scope.reads_ovn:
        return observe_in(scope, kube, ovn, instance)
    return _observe(kube, ovn, instance, inputs=first)


def _observe(kube: KubeReader, ovn: OvnReader, instance: str, inputs: Observed | None) -> Observed:
    """:func:`observe`, or with ``inputs``' pods, nodes and NetworkPolicies instead of listing
    them (:func:`observe_verify`)."""
    observed_at = time.time()
    state = ovn.read()
    objects = [
        *kube.list_owned("NetworkAttachmentDefinition", instance),
        *kube.list_owned("VirtualMachine", instance),
    ]
    if inputs is not None:
        pods, nodes, policies = inputs.pods, inputs.nodes, inputs.network_policies
    else:
        pods, nodes = tuple(kube.list_pods()), tuple(kube.list_nodes())
        policies = tuple(kube.network_policies())
    return Observed(
        pods=pods,
        nodes=nodes,
        kube_objects=tuple(objects),
        pod_ports=state.pod_ports,
        switches=state.switches,
        routers=state.routers,
        ovn_rows=state.owned,
        used_ids=dict(state.used_ids or {}),
        network_policies=policies,
        capabilities=state.capabilities,
        nb_global=state.nb_global,
        nf_active=state.nf_active,
        ports_up=state.ports_up,
        ports_chassis=state.ports_chassis,
        ovn_kubernetes=state.ovn_kubernetes,
        observed_at=observed_at,
    )


def observe_in(scope: Scope, kube: KubeReader, ovn: OvnReader, instance: str) -> Observed:
    """The live state ``scope`` plans from, before its view (:meth:`Scope.view`)."""
    if scope.reads_ovn:
        return observe(kube, ovn, instance)
    if not isinstance(kube, NodeNetworkReader):
        raise InternalError(f"{type(kube).__name__} cannot list node subnets (--kubernetes-only)")
    objects = [
        *kube.list_owned("NetworkAttachmentDefinition", instance),
        *kube.list_owned("VirtualMachine", instance),
    ]
    return kubernetes_observed(kube.list_node_subnets(), objects)


class NodeNotFound(UserError):
    """``--node NAME`` names a node the cluster or the NB does not have (kubectl's
    ``nodes "NAME" not found``): an error, never an empty plan."""

    cause = "node-not-found"


def _names(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", … {len(names) - limit} more" if len(names) > limit else "")


def require_node(scope: Scope, observed: Observed) -> None:
    """Refuse (:class:`NodeNotFound`) a node agent's pass or plan whose node is not among the
    Kubernetes nodes of ``observed`` (the whole read, before the scope's view: an agent's
    adapter lists its own Node only, a snapshot all of them), or has no logical switch in the
    NB read (OVN-Kubernetes names a node's switch after the node). Why an error and not a
    warning: an agent pointed at the wrong node (a typo in ``--node``, the wrong
    ``OSC_NODE_NAME``, the NB of another zone) would otherwise plan nothing, print "No changes"
    and exit 0, so it looks converged while it protects nothing; a node that is not set up yet
    fails the pass, and the loop retries it after its backoff."""
    if not isinstance(scope, NodeScope):
        return
    node = scope.node
    nodes = sorted(n.name for n in observed.nodes)
    if node not in nodes:
        known = f" (its nodes: {_names(nodes)})" if nodes else ""
        raise NodeNotFound(
            f'--node {node}: nodes "{node}" not found in the Kubernetes cluster{known}; give '
            "the name of the node this agent runs on (kubectl get nodes)"
        )
    switches = sorted(s.name for s in observed.switches)
    if node not in switches:
        holds = f"its logical switches: {_names(switches)}" if switches else "it has none"
        raise NodeNotFound(
            f'--node {node}: the OVN Northbound DB has no logical switch "{node}" ({holds}); '
            f"--ovn-nb must be the NB of {node}'s zone, or OVN-Kubernetes has not set the node "
            "up yet"
        )


class NoOvn:
    """The NB of a scope that has none (``--kubernetes-only``). Reading or writing it is a bug:
    the scope neither observes OVN nor keeps an OVN change in its plans."""

    def read(self) -> OvnState:
        raise InternalError("--kubernetes-only has no OVN Northbound to read")

    def apply(self, changes: Sequence[Change], revision: str | None = None) -> None:
        raise InternalError(
            f"--kubernetes-only has no OVN Northbound: refusing to apply {len(changes)} change(s)"
        )

    def close(self) -> None:
        pass


NO_OVN = NoOvn()


class ReadOnlyKube:
    """A node agent's Kubernetes writer: it writes nothing (see the module docstring)."""

    def _refuse(self, what: str, kind: str, namespace: str, name: str) -> InternalError:
        return InternalError(
            f"a node agent never writes Kubernetes: refusing to {what} {kind} {namespace}/{name}"
        )

    def create(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object:
        raise self._refuse("create", kind, namespace, name)

    def replace_managed(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> object:
        raise self._refuse("update", kind, namespace, name)

    def delete(self, kind: str, namespace: str, name: str) -> object:
        raise self._refuse("delete", kind, namespace, name)


def writer_for(scope: Scope, kube: KubeWriter) -> KubeWriter:
    """``kube``, or :class:`ReadOnlyKube` for a scope that may not write Kubernetes."""
    return kube if scope.writes_kubernetes else ReadOnlyKube()
