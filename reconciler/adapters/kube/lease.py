"""Leader election through a ``coordination.k8s.io/v1`` Lease, with the official client.

Same algorithm as client-go's ``leaderelection`` (what kube-controller-manager uses), in short:

- A replica *acquires* the Lease when it does not exist (create), when it names no holder
  (released), or when the record has not changed for ``leaseDurationSeconds`` **as observed on
  this replica's monotonic clock** (so clock skew between nodes cannot make two leaders).
- The holder *renews* (updates ``renewTime``) every ``renew_interval``. Every write carries the
  ``resourceVersion`` it read, so two replicas racing for an expired Lease cannot both win: the
  API server answers 409 to the second.
- :meth:`LeaseLock.held` is a local, cheap check: "my last successful renewal is younger than
  the lease duration minus a safety margin". The loop calls :meth:`LeaseLock.confirm` (a fresh
  renewal on the server) right before each apply and :meth:`held` before every single write,
  so a replica that lost the lease stops writing at once.
- :meth:`release` clears the holder on clean shutdown, so the next replica takes over at once
  instead of waiting for the lease to expire.

It lives apart from :mod:`reconciler.adapters.kube.client` (its own ``ApiClient``, hence its own
connection pool): a renewal never waits behind a 10,000-pod list.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from reconciler.adapters.kube.client import KubeSettings
from reconciler.errors import EndpointError

log = logging.getLogger(__name__)

__all__ = ["LeaseError", "LeaseLock", "LeaseSettings", "default_identity"]


class LeaseError(EndpointError):
    """The Lease API could not be used (RBAC, missing namespace, unreachable server)."""

    cause = "lease"


def default_identity() -> str:
    """``hostname-pid``: unique per replica (the pod name is the hostname in Kubernetes)."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class LeaseSettings:
    name: str = "osc-gitops"
    namespace: str = "osc-gitops"
    identity: str = ""
    lease_duration: float = 15.0
    """Seconds a silent holder keeps the lease (``leaseDurationSeconds``)."""
    renew_interval: float = 2.0
    """How often the holder renews; a candidate retries this often too."""
    margin: float = 0.25
    """Fraction of ``lease_duration`` a holder gives up early: it stops writing before anybody
    else may consider the lease expired."""


def api_client(settings: KubeSettings) -> client.ApiClient:
    """An ``ApiClient`` configured like :class:`reconciler.adapters.kube.client.KubeCluster`."""
    cfg = client.Configuration()
    try:
        if settings.in_cluster:
            config.load_incluster_config(client_configuration=cfg)
        elif settings.server:
            cfg.host = settings.server.rstrip("/")
            token = settings.token
            if token is None and settings.token_file:
                with open(settings.token_file, encoding="utf-8") as fh:
                    token = fh.read().strip()
            if token:
                cfg.api_key = {"authorization": f"Bearer {token}"}
            if settings.ca_file:
                cfg.ssl_ca_cert = settings.ca_file
        else:
            config.load_kube_config(
                config_file=settings.kubeconfig,
                context=settings.context,
                client_configuration=cfg,
            )
    except (ConfigException, OSError, ValueError) as exc:
        raise LeaseError(f"cannot configure the Kubernetes client for the Lease: {exc}") from exc
    if settings.insecure_skip_tls_verify:
        cfg.verify_ssl = False
    return client.ApiClient(cfg)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaseLock:
    """One replica's view of the Lease. Call :meth:`try_acquire_or_renew` periodically (the
    loop runs :meth:`run` in a thread); ask :meth:`held` before writing."""

    def __init__(self, api: client.ApiClient, settings: LeaseSettings) -> None:
        self.settings = settings
        self.identity = settings.identity or default_identity()
        self._api = client.CoordinationV1Api(api)
        self._lock = threading.Lock()
        self._renewed_at: float | None = None  # monotonic time of our last successful write
        self._observed: tuple[Any, ...] | None = None  # (holder, renewTime, transitions)
        self._observed_at = 0.0
        self.transitions = 0
        self.on_change: list[Any] = []  # callbacks(held: bool)
        self._was_held = False

    @property
    def where(self) -> str:
        return f"Lease {self.settings.namespace}/{self.settings.name}"

    # ---------------------------------------------------------------- state

    def held(self) -> bool:
        """True while our last renewal is younger than ``lease_duration * (1 - margin)``."""
        renewed = self._renewed_at
        if renewed is None:
            return False
        limit = self.settings.lease_duration * (1 - self.settings.margin)
        return time.monotonic() - renewed < limit

    def _set_held(self, held: bool) -> None:
        if held != self._was_held:
            self._was_held = held
            log.info(
                "%s %s",
                "acquired" if held else "lost",
                self.where,
                extra={"identity": self.identity, "leader": held},
            )
            for callback in list(self.on_change):
                callback(held)

    # ---------------------------------------------------------------- server

    def _spec(self, acquire: dt.datetime | None, transitions: int) -> client.V1LeaseSpec:
        return client.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=max(1, round(self.settings.lease_duration)),
            acquire_time=acquire,
            renew_time=_now(),
            lease_transitions=transitions,
        )

    def try_acquire_or_renew(self) -> bool:
        """One round of the election; returns whether we hold the lease afterwards."""
        with self._lock:
            started = time.monotonic()
            ok = self._round()
            if ok:
                self._renewed_at = started
            elif self._renewed_at is not None and not self.held():
                self._renewed_at = None
            held = self.held()
        self._set_held(held)
        return held

    def _round(self) -> bool:
        name, ns = self.settings.name, self.settings.namespace
        try:
            lease = self._api.read_namespaced_lease(name, ns)
        except ApiException as exc:
            if exc.status != 404:
                raise self._error(exc, "get") from None
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=name, namespace=ns),
                spec=self._spec(_now(), 0),
            )
            try:
                self._api.create_namespaced_lease(ns, body)
            except ApiException as exc2:
                if exc2.status == 409:
                    return False  # another replica created it first
                raise self._error(exc2, "create") from None
            return True
        spec = lease.spec or client.V1LeaseSpec()
        record = (spec.holder_identity, spec.renew_time, spec.lease_transitions)
        now = time.monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = spec.holder_identity or ""
        mine = holder == self.identity
        duration = float(spec.lease_duration_seconds or self.settings.lease_duration)
        expired = now - self._observed_at >= duration
        if holder and not mine and not expired:
            self._renewed_at = None
            return False
        transitions = int(spec.lease_transitions or 0)
        if not mine:
            transitions += 1
        lease.spec = self._spec(spec.acquire_time if mine else _now(), transitions)
        try:
            self._api.replace_namespaced_lease(name, ns, lease)
        except ApiException as exc:
            if exc.status == 409:
                return False  # somebody else wrote first; re-read next round
            raise self._error(exc, "update") from None
        self.transitions = transitions
        return True

    def confirm(self) -> bool:
        """A fresh renewal on the server (called right before an apply). Any error = not held."""
        try:
            return self.try_acquire_or_renew() and self.held()
        except Exception as exc:  # LeaseError or a connection error: not confirmed
            log.warning("%s: %s", self.where, exc)
            return False

    def release(self) -> None:
        """Give the lease up (clean shutdown) so another replica takes over at once."""
        with self._lock:
            was = self._renewed_at is not None
            self._renewed_at = None
            if not was:
                return
            try:
                lease = self._api.read_namespaced_lease(self.settings.name, self.settings.namespace)
                spec = lease.spec or client.V1LeaseSpec()
                if spec.holder_identity == self.identity:
                    spec.holder_identity = None
                    spec.renew_time = _now()
                    # 1 s (not 0): the API server validates a positive duration.
                    spec.lease_duration_seconds = 1
                    lease.spec = spec
                    self._api.replace_namespaced_lease(
                        self.settings.name, self.settings.namespace, lease
                    )
            except ApiException as exc:
                log.warning("could not release %s: %s", self.where, exc.reason)
            except Exception as exc:  # shutting down: never fail the exit for this
                log.warning("could not release %s: %s", self.where, exc)
        self._set_held(False)

    def run(self, stop: threading.Event) -> None:
        """Acquire/renew every ``renew_interval`` until ``stop``; errors are logged, retried."""
        while not stop.is_set():
            try:
                self.try_acquire_or_renew()
            except LeaseError as exc:
                log.warning("%s", exc)
                if not self.held():
                    self._renewed_at = None
                    self._set_held(False)
            except Exception as exc:  # connection errors from urllib3: keep trying
                log.warning("%s: %s", self.where, exc)
                if not self.held():
                    self._renewed_at = None
                    self._set_held(False)
            stop.wait(self.settings.renew_interval)

    def _error(self, exc: ApiException, verb: str) -> LeaseError:
        hint = " (check the RBAC: leases get/create/update)" if exc.status == 403 else ""
        return LeaseError(f"cannot {verb} {self.where}: {exc.status} {exc.reason}{hint}")
