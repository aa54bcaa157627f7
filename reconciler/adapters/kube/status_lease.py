"""Status Leases: where node agents and the central owner publish their state, and where
``osc-gitops status --all-nodes`` reads it.

One ``coordination.k8s.io/v1`` Lease per publisher (the decision and the RBAC built for it:
``docs/operations.md``, "Interconnect clusters"):

- a node agent's is ``osc-gitops-agent-<node>`` in ``osc-gitops-agents`` (the name the
  overlay's ValidatingAdmissionPolicy allows that agent, and nothing else), with an
  ``ownerReference`` to its Node so the garbage collector removes it with the node;
- the central owner's (``run --kubernetes-only``) is ``osc-gitops-central`` beside its leader
  Lease, so every agent can be compared with the revision the central side applied.

``spec.renewTime`` is the heartbeat (``spec.leaseDurationSeconds`` says how old it may get
before a reader calls the publisher silent), ``spec.holderIdentity`` the pod, and the state a
JSON annotation, :data:`STATUS_ANNOTATION`. A node's Leases also carry the full node name
(annotation ``osc.io/node-name``, label ``osc.io/node`` as VMs have them): where
``osc-gitops-agent-<node>`` or ``osc-gitops-binder-<node>`` would exceed 253 characters (node
names over 235), the name is shortened as VM names are (``reconciler.core.model.naming.fit``)
and readers take the node from the annotation. Only what this module writes is changed: other
annotations and labels on the Lease stay.

It uses its own ``ApiClient`` (as the leader Lease does), so a heartbeat never waits behind a
big list.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.adapters.kube.client import KubeSettings
from reconciler.adapters.kube.lease import LeaseError, api_client
from reconciler.core.model import naming, ownership
from reconciler.core.planning.zoned import OBSERVED_ANNOTATION
from reconciler.errors import EndpointError

log = logging.getLogger(__name__)

__all__ = [
    "AGENT_LEASE_PREFIX",
    "CENTRAL_LEASE",
    "STATUS_ANNOTATION",
    "PublishedStatus",
    "StatusLease",
    "StatusLeaseError",
    "StatusReader",
    "agent_lease_name",
]

STATUS_ANNOTATION = "osc.io/agent-status"
"""The Lease annotation holding the publisher's state as JSON."""
AGENT_LEASE_PREFIX = "osc-gitops-agent-"
CENTRAL_LEASE = "osc-gitops-central"


def agent_lease_name(node: str) -> str:
    """``osc-gitops-agent-<node>``, shortened as VM names are (``reconciler.core.model.naming.
    fit``) where that exceeds 253 characters; the Lease keeps the full node name in its
    ``osc.io/node-name`` annotation (:class:`StatusLease` ``owner_node``)."""
    return naming.fit(f"{AGENT_LEASE_PREFIX}{node}", naming.MAX_OBJECT_NAME)


class StatusLeaseError(LeaseError):
    """A status Lease could not be read or written (RBAC, missing namespace, API down)."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class StatusLease:
    """Publishes one publisher's state into its Lease (see the module docstring)."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        *,
        identity: str,
        duration: float,
        owner_node: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = max(1, round(duration))
        self.owner_node = owner_node
        self._leases = client.CoordinationV1Api(api)
        self._core = client.CoreV1Api(api)

    @classmethod
    def for_settings(
        cls, settings: KubeSettings, namespace: str, name: str, **kwargs: Any
    ) -> StatusLease:
        return cls(api_client(settings), namespace, name, **kwargs)

    @property
    def where(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    def _error(self, exc: ApiException, verb: str) -> StatusLeaseError:
        hint = " (check the RBAC: leases get/create/update)" if exc.status == 403 else ""
        return StatusLeaseError(f"cannot {verb} {self.where}: {exc.status} {exc.reason}{hint}")

    def _owner_reference(self) -> list[client.V1OwnerReference] | None:
        """A reference to the agent's Node (found with a ``list`` by name: the agent's RBAC has
        no ``get`` on nodes), so the Lease goes when the node goes. None when unknown."""
        if self.owner_node is None:
            return None
        try:
            nodes = self._core.list_node(field_selector=f"metadata.name={self.owner_node}")
        except ApiException as exc:
            log.warning("%s: cannot find Node %s for its owner reference: %s",
                        self.where, self.owner_node, exc.reason)  # fmt: skip
            return None
        found = [n for n in nodes.items or () if n.metadata and n.metadata.uid]
        if not found:
            return None
        return [
            client.V1OwnerReference(
                api_version="v1", kind="Node", name=self.owner_node, uid=found[0].metadata.uid
            )
        ]

    def _spec(self, spec: client.V1LeaseSpec | None) -> client.V1LeaseSpec:
        spec = spec or client.V1LeaseSpec()
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = self.duration
        spec.renew_time = _now()
        return spec

    def publish(self, status: Mapping[str, Any], observed: str | None = None) -> None:
        """Write ``status`` into the annotation and renew the heartbeat (create the Lease the
        first time); ``observed`` (an agent's encoded view of its zone) into
        :data:`~reconciler.core.planning.zoned.OBSERVED_ANNOTATION` when given. Raises
        :class:`StatusLeaseError`; the caller decides that a status it cannot publish never
        stops reconciling."""
        text = json.dumps(dict(status), sort_keys=True, separators=(",", ":"))
        written = {STATUS_ANNOTATION: text}
        labels: dict[str, str] = {}
        if self.owner_node is not None:
            # the full node name: a long one is shortened in the Lease's name
            written[ownership.NODE_NAME_ANNOTATION] = self.owner_node
            labels[ownership.NODE_LABEL] = ownership.node_label_value(self.owner_node)
        if observed is not None:
            written[OBSERVED_ANNOTATION] = observed
        for _ in range(3):
            try:
                lease = self._leases.read_namespaced_lease(self.name, self.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise self._error(exc, "get") from None
                body = client.V1Lease(
                    metadata=client.V1ObjectMeta(
                        name=self.name,
                        namespace=self.namespace,
                        annotations=written,
                        labels=labels or None,
                        owner_references=self._owner_reference(),
                    ),
                    spec=self._spec(None),
                )
                try:
                    self._leases.create_namespaced_lease(self.namespace, body)
                    return
                except ApiException as exc2:
                    if exc2.status == 409:
                        continue  # created meanwhile (a restarted agent's old pod): update it
                    raise self._error(exc2, "create") from None
            meta = lease.metadata or client.V1ObjectMeta()
            meta.annotations = {**(meta.annotations or {}), **written}
            if labels:
                meta.labels = {**(meta.labels or {}), **labels}
            lease.metadata = meta
            lease.spec = self._spec(lease.spec)
            try:
                self._leases.replace_namespaced_lease(self.name, self.namespace, lease)
                return
            except ApiException as exc:
                if exc.status == 409:
                    continue  # someone wrote in between: read again
                raise self._error(exc, "update") from None
            except Exception as exc:
                raise StatusLeaseError(f"cannot update {self.where}: {exc}") from exc
        raise StatusLeaseError(f"cannot update {self.where}: it kept changing (409 Conflict)")


@dataclass(frozen=True)
class PublishedStatus:
    """One status Lease as read back: its name, heartbeat and the published state."""

    name: str
    holder: str | None
    renewed_at: dt.datetime | None
    duration: float | None
    status: dict[str, Any] | None
    """The annotation's JSON, ``None`` when missing or unreadable."""
    problem: str = ""
    """Why ``status`` is ``None`` although the Lease exists."""
    observed: str | None = None
    """A node agent's encoded view of its zone (``reconciler.core.planning.zoned``), if
    published."""

    def age(self, now: dt.datetime) -> float | None:
        """Seconds since the last heartbeat."""
        if self.renewed_at is None:
            return None
        return (now - self.renewed_at).total_seconds()


def _published(lease: client.V1Lease) -> PublishedStatus:
    meta = lease.metadata or client.V1ObjectMeta()
    spec = lease.spec or client.V1LeaseSpec()
    raw = (meta.annotations or {}).get(STATUS_ANNOTATION)
    status: dict[str, Any] | None = None
    problem = ""
    if raw is None:
        problem = f"no {STATUS_ANNOTATION} annotation"
    else:
        try:
            loaded = json.loads(raw)
            status = loaded if isinstance(loaded, dict) else None
            problem = "" if status is not None else f"{STATUS_ANNOTATION} is not a JSON object"
        except ValueError as exc:
            problem = f"{STATUS_ANNOTATION} is not JSON: {exc}"
    renewed = spec.renew_time
    if isinstance(renewed, dt.datetime) and renewed.tzinfo is None:
        renewed = renewed.replace(tzinfo=dt.UTC)
    duration = spec.lease_duration_seconds
    return PublishedStatus(
        name=str(meta.name),
        holder=spec.holder_identity,
        renewed_at=renewed if isinstance(renewed, dt.datetime) else None,
        duration=float(duration) if duration else None,
        status=status,
        problem=problem,
        observed=(meta.annotations or {}).get(OBSERVED_ANNOTATION),
    )


class StatusReader:
    """Reads the status Leases back (``osc-gitops status --all-nodes``)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._leases = client.CoordinationV1Api(api)

    @classmethod
    def for_settings(cls, settings: KubeSettings) -> StatusReader:
        return cls(api_client(settings))

    def agents(
        self, namespace: str, prefix: str = AGENT_LEASE_PREFIX
    ) -> dict[str, PublishedStatus]:
        """Every agent's status Lease in ``namespace`` by node name (one ``list``); with
        ``prefix`` ``osc-gitops-binder-``: every node binder's."""
        try:
            leases = self._leases.list_namespaced_lease(namespace, _request_timeout=(10, 30))
        except ApiException as exc:
            raise EndpointError(
                f"cannot list Leases in namespace {namespace}: {exc.status} {exc.reason}"
                + (" (check the RBAC: leases list)" if exc.status == 403 else "")
            ) from None
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            host = self._leases.api_client.configuration.host
            raise EndpointError(
                f"cannot list Leases in namespace {namespace} at {host}: {exc}"
            ) from None
        out: dict[str, PublishedStatus] = {}
        for lease in leases.items or ():
            meta = lease.metadata or client.V1ObjectMeta()
            name = meta.name or ""
            if name.startswith(prefix):
                # the full node name where the Lease's name had to shorten it
                full = (meta.annotations or {}).get(ownership.NODE_NAME_ANNOTATION)
                out[full or name.removeprefix(prefix)] = _published(lease)
        return out

    def one(self, namespace: str, name: str) -> PublishedStatus | None:
        """One status Lease, or ``None`` when it does not exist."""
        try:
            return _published(self._leases.read_namespaced_lease(name, namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise EndpointError(
                f"cannot get Lease {namespace}/{name}: {exc.status} {exc.reason}"
                + (" (check the RBAC: leases get)" if exc.status == 403 else "")
            ) from None
