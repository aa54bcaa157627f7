"""Steering backends: how a binding becomes OVN rows, and the registry of them.

- ``network_function``: OVN Network Function insertion (OVN >= 26.03): Port_Group + ACL with
  ``network_function_group`` -> Network_Function_Group -> Network_Function (the node VNF's ports).
- ``router_policy``: ``Logical_Router_Policy`` ``reroute`` on the cluster router (any OVN), for
  routed (inter-node) traffic only.

Both share the per-node Port_Group of a security group, the match builder and the priority rules
in ``common``. Each implements ``base.SteeringBackend``, the only thing ``compile``, the
planners, the transitions, the views and the CLI know of a backend: a new backend is one module
here plus its line in :data:`BACKENDS`. Health as OVN reports it (:class:`HealthIndex`) and the
NF id budget are read from the Network Function backend's rows, the only ones with health
checks and ids; they are exported here so that nobody outside this package names a backend.
Whether OVN bound the VNF VMs' data ports (``port_binding``) holds for every backend; the
health index hands it out too.
"""

from __future__ import annotations

from reconciler.core.model.observed import OvnCapabilities
from reconciler.core.steering.base import CompileError, CompileOptions, SteeringBackend
from reconciler.core.steering.network_function.backend import NetworkFunction
from reconciler.core.steering.network_function.health import (
    HEALTH_CHECK_TABLE,
    HealthIndex,
    MemberHealth,
    instances_in,
    why_not_healthy,
)
from reconciler.core.steering.network_function.ids import NF_ID_TABLES, id_budget, live_id_budget
from reconciler.core.steering.port_binding import UNBOUND_CAUSE, unbound_ports
from reconciler.core.steering.router_policy import RouterPolicy

__all__ = [
    "BACKENDS",
    "DEFAULT_STEERING",
    "HEALTH_CHECK_TABLE",
    "NF_ID_TABLES",
    "STEERING_CHOICES",
    "UNBOUND_CAUSE",
    "HealthIndex",
    "MemberHealth",
    "SteeringBackend",
    "backend_for",
    "check_options",
    "default_backend",
    "id_budget",
    "instances_in",
    "live_id_budget",
    "select_backend",
    "unbound_ports",
    "why_not_healthy",
]

BACKENDS: dict[str, SteeringBackend] = {
    backend.name: backend
    for backend in (
        # The first one is the default (see select_backend).
        NetworkFunction(),
        RouterPolicy(),
    )
}
"""Every steering backend by name (``--steering``)."""
STEERING_CHOICES: tuple[str, ...] = tuple(BACKENDS)
DEFAULT_STEERING: str = next(iter(BACKENDS))
"""The backend used when none is asked for: the first registered one."""


def backend_for(name: str) -> SteeringBackend:
    """The registered backend called ``name``."""
    backend = BACKENDS.get(name)
    if backend is None:
        raise CompileError(
            f"unknown steering backend {name!r}: choose one of {', '.join(sorted(BACKENDS))}"
        )
    return backend


def select_backend(
    requested: str | None, capabilities: OvnCapabilities, *, has_bindings: bool
) -> SteeringBackend:
    """The backend a compile uses: the one asked for (else :data:`DEFAULT_STEERING`) when this
    OVN supports it.

    When it does not, and there are bindings to steer, compile refuses with the backend's own
    reason rather than quietly steering less (router-policy steers routed traffic only, a weaker
    promise the user must choose). With nothing to steer there is nothing to refuse: the first
    backend this OVN supports deploys the VNFs.
    """
    wanted = backend_for(requested) if requested is not None else BACKENDS[DEFAULT_STEERING]
    if wanted.available(capabilities):
        return wanted
    fallback = next((b for b in BACKENDS.values() if b.available(capabilities)), None)
    if has_bindings or fallback is None:
        raise CompileError(wanted.unavailable_reason(capabilities))
    return fallback


def check_options(options: CompileOptions) -> None:
    """Refuse options any registered backend cannot use, before anything connects (the
    backend is chosen only once the NB's schema is known)."""
    for backend in BACKENDS.values():
        backend.check_options(options)


def default_backend(capabilities: OvnCapabilities) -> SteeringBackend:
    """The backend ``--steering`` unset gives on this OVN when there is nothing to refuse: the
    default if available, else the first registered one that is (for a demo or a help text)."""
    return select_backend(None, capabilities, has_bindings=False)
