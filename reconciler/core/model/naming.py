"""Names of everything osc-gitops creates, derived only from validated names.

OVN names must be OVN identifiers (letters, digits, ``_`` and ``.``) because port-group names are
used inside ``match`` strings (``outport == @pg``, ``$pg_ip4``). Manifest names are DNS-1123
labels (``[a-z0-9-]``, no ``.``), node names DNS subdomains. We map ``-`` to ``_`` and join parts
with ``.``: since no part but the last (the node) can contain ``.``, and no input contains ``_``,
the mapping is injective: two different (instance, manifest, node) triples never share a name.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

from reconciler.core.model.ownership import DEFAULT_INSTANCE

_OVN_IDENT = re.compile(r"^[A-Za-z_.][A-Za-z0-9_.]*$")


class NameError_(ValueError):
    """A name that cannot be made safe (should be impossible after validation)."""


def _u(part: str) -> str:
    return part.replace("-", "_")


def instance_token(instance: str) -> str:
    """``osc`` for the default instance, ``osc_<instance>`` otherwise."""
    return "osc" if instance == DEFAULT_INSTANCE else f"osc_{_u(instance)}"


@lru_cache(maxsize=1 << 17)
def ovn_ident(instance: str, *parts: str) -> str:
    """Cached: a compile at 10k pods asks for the same 41,000 names on every pass."""
    name = ".".join([instance_token(instance), *(_u(p) for p in parts)])
    if not _OVN_IDENT.fullmatch(name):
        raise NameError_(f"cannot build a safe OVN identifier from {parts!r}")
    return name


def port_group(instance: str, group: str, node: str) -> str:
    return ovn_ident(instance, group, node)


SECOND = "b"
"""The second VNF instance of a node (``instancesPerNode: 2``). The first keeps the names it had
before a second one existed; the second's names add ``b``: VM ``<vnf>-<node>-b``, NADs
``<prefix>-<node>-b-in``/``-out``, LSPs ``nf_<vnf>_<node>_b_in``/``_out``, Network_Function
``osc.<vnf>.<node>._b``. In OVN names the marker is the part ``_b``, after the node: a node name
is a DNS subdomain, none of whose dot-separated labels can start with ``_`` (nor with ``-``),
so no first instance of any node is ever named like a second one (the names stay injective)."""
Slot = str
"""``""`` for a node's first VNF instance, :data:`SECOND` for its second."""
SLOTS: tuple[Slot, ...] = ("", SECOND)


def network_function(instance: str, vnf: str, node: str, slot: Slot = "") -> str:
    if slot:
        return ovn_ident(instance, vnf, node, f"_{slot}")
    return ovn_ident(instance, vnf, node)


def probe_group(instance: str, vnf: str, node: str, slot: Slot = "") -> str:
    """The Network_Function_Group that holds only one function, so that northd reports that
    function's own health (``network_function_active``) even while it is a standby: with two
    functions in a group, northd names only the one it made active. No ACL references it.
    ``probe`` is the last part: the steering groups end with a failure policy instead."""
    if slot:
        return ovn_ident(instance, vnf, node, f"_{slot}", "probe")
    return ovn_ident(instance, vnf, node, "probe")


def is_probe_group(name: str) -> bool:
    """Whether a Network_Function_Group name of ours is a :func:`probe_group`."""
    return name.endswith(".probe")


def network_function_group(instance: str, vnf: str, node: str, fallback: str) -> str:
    return ovn_ident(instance, vnf, node, fallback)


def vnf_port(vnf: str, node: str, side: str, slot: Slot = "") -> str:
    """LSP of a VNF data port: ``nf_<vnf>_<node>_<in|out>`` (the second instance of a node:
    ``nf_<vnf>_<node>_b_<in|out>``; neither name part can contain ``_``, so this is unambiguous).

    ``_`` never occurs in Kubernetes names, so this can never equal an OVN-Kubernetes pod LSP
    (``<namespace>_<pod>`` would need a pod name containing ``_``).
    """
    if slot:
        return f"nf_{vnf}_{node}_{slot}_{side}"
    return f"nf_{vnf}_{node}_{side}"


MAX_OBJECT_NAME = 253
"""A Kubernetes object name is a DNS subdomain: at most 253 characters."""
LAUNCHER_ROOM = 20
"""KubeVirt names a VM's pod ``virt-launcher-<vm>-<5 random>``: a VM name leaves room for it."""


def fit(name: str, limit: int) -> str:
    """``name`` itself when it has at most ``limit`` characters, else its head and 10 hex of
    its SHA-256 (stable, distinct for distinct names, still a DNS subdomain): node names may
    have 253 characters, and a VM's or NAD's name adds to it."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[: limit - len(digest) - 1].rstrip('-.')}-{digest}"


BINDER_LEASE_PREFIX = "osc-gitops-binder-"
"""Where the node binder of a node publishes its state: Lease ``osc-gitops-binder-<node>``."""


def binder_lease(node: str) -> str:
    """The node binder's status Lease of ``node`` (in the status namespace):
    ``osc-gitops-binder-<node>``, shortened by :func:`fit` as VM names are where that exceeds
    253 characters (node names up to 235 characters fit). The Lease carries the full node name
    in its ``osc.io/node-name`` annotation (``reconciler.core.model.ownership.
    NODE_NAME_ANNOTATION``), which readers take over the name."""
    return fit(f"{BINDER_LEASE_PREFIX}{node}", MAX_OBJECT_NAME)


def vm_name(vnf: str, node: str, slot: Slot = "") -> str:
    name = f"{vnf}-{node}-{slot}" if slot else f"{vnf}-{node}"
    return fit(name, MAX_OBJECT_NAME - LAUNCHER_ROOM)


def nad_name(prefix: str, node: str, side: str, slot: Slot = "") -> str:
    name = f"{prefix}-{node}-{slot}-{side}" if slot else f"{prefix}-{node}-{side}"
    return fit(name, MAX_OBJECT_NAME)


def mac_for(*parts: str) -> str:
    """A deterministic, locally administered unicast MAC (``0a:…``) for a VNF NIC."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return "0a:" + ":".join(f"{b:02x}" for b in digest[:5])
