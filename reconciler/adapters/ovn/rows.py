"""How the NB rows we do not own become ``reconciler.core.model.observed`` values, and what a writer
needs to know of one of ours (:class:`OwnedRow`).

Shared by the IDL reader (:mod:`~reconciler.adapters.ovn.read_cache`) and the snapshot reader
(:mod:`~reconciler.adapters.ovn.snapshot`): each passes plain Python values of the columns, so
the rules (what a pod port is, which address is its MAC, where a switch's subnet is, which
NB_Global keys are ours) exist once and the two readers give equal results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.model import ownership
from reconciler.core.model.observed import NbGlobal, OvnRow, PodPort, Switch
from reconciler.core.model.target import (
    NB_GLOBAL,
    NB_GLOBAL_KEY,
    SVC_MONITOR_OPTIONS,
    svc_monitor_marker,
)

__all__ = ["OwnedRow", "is_ours", "nb_global", "parse_addresses", "pod_port", "switch"]


@dataclass(frozen=True, slots=True)
class OwnedRow:
    """One of our live rows, as the transaction builder needs it: its UUID and its
    ``external_ids`` (both readers' write indexes give it)."""

    uuid: str
    external_ids: Mapping[str, str]


def is_ours(external_ids: Mapping[str, str], instance: str) -> bool:
    """The row carries ``osc.io/owner=<instance>``."""
    return external_ids.get(ownership.OWNER) == instance


def parse_addresses(addresses: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """(MAC, IPs) of the first ``"<mac> <ip>..."`` entry of an LSP's ``addresses``."""
    for entry in addresses:
        parts = entry.split()
        if parts and parts[0].count(":") == 5:
            return parts[0], tuple(parts[1:])
    return None, ()


def pod_port(
    name: str,
    switch: str,
    external_ids: Mapping[str, str],
    addresses: Sequence[str],
    options: Mapping[str, str],
) -> PodPort | None:
    """The :class:`PodPort` of a Logical_Switch_Port, or ``None`` when OVN-Kubernetes did not
    make it for a pod (``external_ids:pod=true``). OVN-Kubernetes names it
    ``<namespace>_<pod>`` and keeps the pod's UID in ``options:iface-id-ver``."""
    if external_ids.get("pod") != "true":
        return None
    ns = external_ids.get("namespace", "")
    pod = name[len(ns) + 1 :] if ns and name.startswith(ns + "_") else name
    mac, ips = parse_addresses(addresses)
    return PodPort(
        name=name,
        switch=switch,
        namespace=ns,
        pod=pod,
        pod_uid=options.get("iface-id-ver"),
        mac=mac,
        ips=ips,
    )


def switch(name: str, other_config: Mapping[str, str], load_balancers: bool) -> Switch:
    """A Logical_Switch; OVN-Kubernetes keeps a node switch's subnet in
    ``other_config:subnet``."""
    return Switch(name=name, subnet=other_config.get("subnet"), load_balancers=load_balancers)


def nb_global(
    options: Mapping[str, str], external_ids: Mapping[str, str], instance: str
) -> tuple[NbGlobal, OvnRow | None]:
    """The cluster's ``NB_Global`` row as compile sees it (the service-monitor options,
    whoever set them, and every ``osc.io/`` marker), and the part ``instance`` owns in the
    symbolic form of ``reconciler.core.model.target``: the options its marker lists and the marker
    itself, or ``None`` without a marker (then nothing in the row is ours)."""
    view = NbGlobal(
        options={k: options[k] for k in SVC_MONITOR_OPTIONS if k in options},
        external_ids={
            k: v for k, v in sorted(external_ids.items()) if k.startswith(ownership.PREFIX)
        },
    )
    marker = svc_monitor_marker(instance)
    claim = external_ids.get(marker)
    if claim is None:
        return view, None
    keys = sorted({k for k in claim.split(",") if k in SVC_MONITOR_OPTIONS and k in options})
    fields = {"options": {k: options[k] for k in keys}, "external_ids": {marker: claim}}
    return view, OvnRow(table=NB_GLOBAL, key=NB_GLOBAL_KEY, fields=fields)
