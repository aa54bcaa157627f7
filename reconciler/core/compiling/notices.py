"""Which members each security manager should hold, and the messages that tell it (pure).

The seeds' security manager learnt each security group's members so the VNF's policy could use
them; osc-gitops tells a VnfDeployment's ``securityManager`` the same, per Binding and node: the
Binding's SecurityGroup's pods on that node (namespace, name, addresses), i.e. the pods whose
traffic the VNF's instance there inspects. :func:`member_notices` says what every manager should
hold now, from the manifests and what one pass read; the engine's outbox
(``reconciler.engine.notifications``) sends what changed, debounced and retried. The message
format is :mod:`reconciler.core.model.notices` (``schemas/security-manager-notification.json``).

- Keys are ``(url, binding, vnf, node)``: a chain's every hop with a manager is told, each its
  own. Nodes are those where the VNF runs (its ``nodeSelector``), members or not, so a manager
  also learns that a node has none (an empty list).
- Members are the pods OVN knows as the group's (the same rule as the Port_Group's members:
  ``compile.members_by_group_and_node``), with the addresses of their logical switch ports.
- Nothing here is computed unless some VnfDeployment has a ``securityManager``
  (:func:`wanted`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from reconciler.core.compiling.compile import members_by_group_and_node
from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed

__all__ = [
    "MEMBERS",
    "Member",
    "MemberKey",
    "MemberNotice",
    "member_notices",
    "members_payloads",
    "wanted",
]

MEMBERS = "members"
MemberKey = tuple[str, str, str, str]
"""``(url, binding, vnf, node)``: one manager's view of one Binding on one node."""
Member = tuple[str, str, tuple[str, ...]]
"""``(namespace, name, addresses)``."""


class MemberNotice(NamedTuple):
    """What the manager at ``url`` should hold for Binding ``binding`` through ``vnf`` on
    ``node``: the ``group``'s members there, sorted by namespace and name. (A named tuple: a
    pass may make 20,000 of them, 200 bindings on 100 nodes.)"""

    url: str
    binding: str
    group: str
    vnf: str
    node: str
    members: tuple[Member, ...] = ()

    @property
    def key(self) -> MemberKey:
        return (self.url, self.binding, self.vnf, self.node)

    def emptied(self) -> MemberNotice:
        """The same notice without members (what a manager is told when the Binding, the VNF on
        that node, or the manager itself is gone from the manifests)."""
        return MemberNotice(self.url, self.binding, self.group, self.vnf, self.node)

    @property
    def digest(self) -> str:
        """SHA-256 of the content (group, VNF, every member): equal digests, equal content."""
        text = json.dumps([self.group, self.vnf, self.members], separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def wanted(desired: Desired) -> bool:
    """Whether any VnfDeployment has a security manager (else nobody is told anything)."""
    return any(v.spec.securityManager is not None for v in desired.vnfs.values())


def member_notices(
    desired: Desired, observed: Observed, skip_nodes: Iterable[str] = ()
) -> dict[MemberKey, MemberNotice]:
    """Every ``(url, binding, vnf, node)`` a manager should hold now (see the module
    docstring), for the nodes of ``observed`` but ``skip_nodes`` (held by node agents, who
    tell their own)."""
    if not wanted(desired):
        return {}
    skipped = set(skip_nodes)
    managed = {name: vnf for name, vnf in desired.vnfs.items() if vnf.spec.securityManager}
    runs_on = {
        name: [
            n.name for n in observed.nodes
            if n.name not in skipped
            and all(n.labels.get(k) == v for k, v in vnf.spec.nodeSelector.items())
        ]
        for name, vnf in managed.items()
    }  # fmt: skip
    groups = {
        b.spec.securityGroup for b in desired.bindings.values()
        if any(name in managed for name in b.spec.vnfs)
    }  # fmt: skip
    if not groups:
        return {}
    # Not mutated (equivalent): ``groups`` only narrows the look-up to the groups read below
    members = members_by_group_and_node(
        desired, observed.pods, observed.pod_ports, groups  # pragma: no mutate
    )  # fmt: skip
    by_group: dict[str, dict[str, tuple[Member, ...]]] = {
        group: {
            node: tuple(  # an LSP's addresses are bare IPs ("<mac> <ip>...")
                (p.namespace, p.pod, p.ips)
                for p in sorted(ports, key=lambda p: (p.namespace, p.pod))
            )
            for node, ports in by_node.items()
        }
        for group, by_node in members.items()
    }
    notices: dict[MemberKey, MemberNotice] = {}
    for name, binding in sorted(desired.bindings.items()):
        group = binding.spec.securityGroup
        # Not mutated (equivalent): every group of ``groups`` is in ``by_group`` (the manifest
        # loader refuses a Binding of an undeclared group), so the default is never used
        pods = by_group.get(group, {})  # pragma: no mutate
        for vnf_name in binding.spec.vnfs:
            if vnf_name not in managed:
                continue
            url = managed[vnf_name].spec.securityManager.url  # type: ignore[union-attr]
            for node in runs_on[vnf_name]:
                notices[(url, name, vnf_name, node)] = MemberNotice(
                    url, name, group, vnf_name, node, pods.get(node, ())
                )
    return notices


def members_payloads(notice: MemberNotice, sequence: int, limit: int) -> list[dict[str, Any]]:
    """The ``members`` message(s) telling ``notice`` under ``sequence``: one, or (more than
    ``limit`` members) one part per ``limit`` members, each carrying the sequence, its part
    number and the count of parts and members (``schemas/security-manager-notification.json``)."""
    limit = max(1, limit)
    chunks = [notice.members[i : i + limit] for i in range(0, len(notice.members), limit)] or [()]
    digest = notice.digest
    return [
        {
            "event": MEMBERS,
            "sequence": sequence,
            "binding": notice.binding,
            "securityGroup": notice.group,
            "vnf": notice.vnf,
            "node": notice.node,
            "members": [
                {"namespace": ns, "name": pod, "addresses": list(addresses)}
                for ns, pod, addresses in chunk
            ],
            "memberCount": len(notice.members),
            "part": number,
            "parts": len(chunks),
            "digest": digest,
        }
        for number, chunk in enumerate(chunks, start=1)
    ]
