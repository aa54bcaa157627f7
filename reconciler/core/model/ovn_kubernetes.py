"""Which OVN-Kubernetes wrote an NB, from its own rows: never write beside one that would break.

OVN-Kubernetes before v1.1.0 (v1.0.x, and its main branch before 7c75baeaf, 2025-05-15) runs
a start-up ``syncDb`` that treats every row without its owner key
(``k8s.ovn.org/owner-controller``) as a legacy row of its own
(``go-controller/pkg/ovn/default_network_controller.go`` ``syncDb``,
``external_ids_syncer/{acl,port_group,address_set}``):

- a Port_Group without ``external_ids:name`` makes ``SyncPortGroups`` return an error: ovnkube-
  controller does not start (one with ``name`` is adopted: renamed and rewritten);
- every remaining owner-less ACL is removed from every switch and port group, and every tier-0
  ACL moved to tier 2.

Every row osc-gitops writes is owner-less in that sense. So before writing, the NB's own rows
say which generation runs there (no NB row carries OVN-Kubernetes' version):

- **pre-v1.0**: Port_Groups keyed by ``external_ids:name`` alone (``clusterPortGroup``,
  ``<ns>_<policy>``), the shape v1.0's syncer converts;
- **v1.0.x**: owner-keyed rows like newer releases, but EgressIP's no-reroute router policies
  (priority 102, ``allow``) without any external_ids (v1.1.0 gave them owner keys,
  1642012bf), or an NB schema older than 7.11.0 (OVN 25.03, the OVN v1.1.0 ships; v1.0.x
  ships 24.03, NB 7.3.0) under owner-keyed rows;
- anything else (no OVN-Kubernetes rows, or owner-keyed ones on NB >= 7.11) is fine.

The adapters read the evidence (:class:`OvnKubernetesRows`: Port_Groups' ``external_ids``,
priority-102 router policies) once per connection; :func:`refusal` judges it. A v1.0.x NB
without EgressIP's policies on an OVN newer than 24.03 (a custom build) is the case rows cannot
tell; docs/operations.md says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

OWNER_CONTROLLER = "k8s.ovn.org/owner-controller"
NO_REROUTE_PRIORITY = 102
"""``types.DefaultNoRereoutePriority``: EgressIP's "pod to pod / join / node" allow policies."""
FIRST_SAFE = "v1.1.0"
"""The first OVN-Kubernetes release whose start-up leaves other writers' rows alone."""
FIRST_SAFE_SCHEMA = (7, 11, 0)
"""NB schema of OVN 25.03, what OVN-Kubernetes v1.1.0 ships (v1.0.x: OVN 24.03, NB 7.3.0)."""
EXAMPLES = 3


@dataclass(frozen=True, slots=True)
class OvnKubernetesRows:
    """What OVN-Kubernetes' own rows in one NB look like (plain data, see the module)."""

    owner_keyed: int = 0
    """Port_Groups carrying ``k8s.ovn.org/owner-controller`` (OVN-Kubernetes >= v1.0)."""
    name_only: tuple[str, ...] = ()
    """Port_Groups (up to :data:`EXAMPLES`, by name) keyed by ``external_ids:name`` without an
    owner key and not ours: the pre-v1.0 shape."""
    name_only_count: int = 0
    ownerless_no_reroute: tuple[str, ...] = ()
    """Matches of priority-102 ``allow`` router policies without external_ids (v1.0.x)."""

    @property
    def present(self) -> bool:
        return bool(self.owner_keyed or self.name_only_count or self.ownerless_no_reroute)


def evidence(
    port_groups: Iterable[tuple[str, Mapping[str, str]]],
    router_policies: Iterable[tuple[int, str, str, Mapping[str, str]]],
    own_prefix: str = "osc.io/",
) -> OvnKubernetesRows:
    """From the NB's Port_Groups ``(name, external_ids)`` and router policies ``(priority,
    action, match, external_ids)``."""
    owner_keyed, name_only = 0, []
    for name, ids in port_groups:
        if any(k.startswith(own_prefix) for k in ids):
            continue
        if ids.get(OWNER_CONTROLLER):
            owner_keyed += 1
        elif ids.get("name"):
            name_only.append(name)
    no_reroute = sorted(
        match
        for priority, action, match, ids in router_policies
        if priority == NO_REROUTE_PRIORITY and action == "allow" and not ids
    )
    return OvnKubernetesRows(
        owner_keyed=owner_keyed,
        name_only=tuple(sorted(name_only)[:EXAMPLES]),
        name_only_count=len(name_only),
        ownerless_no_reroute=tuple(no_reroute[:EXAMPLES]),
    )


def _schema(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in version.split("."))
    except ValueError:
        return None


def refusal(rows: OvnKubernetesRows, schema_version: str) -> str | None:
    """Why nothing may be written to this NB (one line), or ``None``."""
    seen: str | None = None
    if rows.name_only_count:
        names = ", ".join(rows.name_only)
        more = f" and {rows.name_only_count - len(rows.name_only)} more" if (
            rows.name_only_count > len(rows.name_only)
        ) else ""  # fmt: skip
        seen = (
            f"OVN-Kubernetes older than v1.0 (Port_Groups keyed by external_ids:name without "
            f"k8s.ovn.org/owner-controller: {names}{more})"
        )
    elif rows.ownerless_no_reroute:
        seen = (
            "OVN-Kubernetes v1.0.x (EgressIP's priority-102 router policies without owner "
            f"keys: {rows.ownerless_no_reroute[0]})"
        )
    elif rows.owner_keyed:
        parsed = _schema(schema_version)
        if parsed is not None and parsed < FIRST_SAFE_SCHEMA:
            seen = (
                f"OVN-Kubernetes v1.0.x or older (its owner-keyed rows on NB schema "
                f"{schema_version}, older than the {'.'.join(map(str, FIRST_SAFE_SCHEMA))} of "
                "OVN 25.03 that OVN-Kubernetes v1.1.0 ships)"
            )
    if seen is None:
        return None
    return (
        f"this Northbound DB is managed by {seen}: its start-up sync fails on a Port_Group it "
        "does not own without external_ids:name and deletes the ACLs without its owner key, so "
        f"it could not restart beside osc-gitops' rows. Upgrade OVN-Kubernetes to {FIRST_SAFE} "
        "or later (Network Function steering: its main branch with OVN 26.03); nothing was "
        "written"
    )
