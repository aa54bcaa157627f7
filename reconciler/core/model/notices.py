"""What a security manager is told: the JSON a VnfDeployment's ``securityManager.url`` receives.

The contract of the notifications (one HTTP POST each, ``Content-Type: application/json``), as
pydantic models so that ``schemas/security-manager-notification.json`` is generated from them
(``osc-gitops schema --write``; a test fails when the file drifts) and a receiver can validate
what it gets. Three events, told apart by ``event``:

- ``deployed`` / ``removed``: a VNF instance (its VirtualMachine) was created or deleted.
- ``members``: the current members of a Binding's SecurityGroup on one node (the pods whose
  traffic the VNF's instance on that node inspects), sent whenever they change, and once when a
  sender starts (it does not know what a receiver holds). A list longer than the sender's limit
  comes in ``parts`` messages of one ``sequence``; a receiver applies a sequence once it holds
  every part of it.

``sequence`` increases with every notification a sender makes (derived from its clock in
microseconds, so it keeps increasing across restarts): per (binding, VNF, node), a receiver
applies a ``members`` sequence only if it is newer than the one it applied last, and drops
older ones (a retry that arrives after a newer notification). A retry resends the very same
message (same ``sequence``), so receiving one twice changes nothing; ``digest`` lets a
receiver that already holds these members skip the work.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "EVENTS",
    "InstanceNotification",
    "Member",
    "MembersNotification",
    "Notification",
]

EVENTS = ("deployed", "removed", "members")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Member(_Strict):
    """One pod of the group on the node."""

    namespace: str = Field(description="The pod's namespace.")
    name: str = Field(description="The pod's name.")
    addresses: list[str] = Field(
        description="The pod's IP addresses, as OVN knows them (its logical switch port).",
    )


class MembersNotification(_Strict):
    """The members of a Binding's SecurityGroup on one node, for the VNF instance(s) there."""

    event: Literal["members"]
    sequence: int = Field(ge=1, description="Increases with every notification of a sender.")
    binding: str = Field(description="The Binding (metadata.name).")
    securityGroup: str = Field(description="The Binding's SecurityGroup.")
    vnf: str = Field(description="The VnfDeployment (a hop of the Binding's chain).")
    node: str = Field(description="The node: the members are the group's pods on it.")
    members: list[Member] = Field(
        description="The group's pods on the node (this part of them), by namespace and name."
    )
    memberCount: int = Field(ge=0, description="Members in all parts of this sequence.")
    part: int = Field(ge=1, description="Which part of the list this is (1-based).")
    parts: int = Field(ge=1, description="How many parts carry this sequence's list.")
    digest: str = Field(
        pattern=r"^sha256:[0-9a-f]{64}$",
        description=(
            "SHA-256 of the whole member list (every part) with the group and VNF: equal "
            "digests, equal content."
        ),
    )


class InstanceNotification(_Strict):
    """A VNF instance (VirtualMachine) was deployed or removed."""

    event: Literal["deployed", "removed"]
    sequence: int = Field(ge=1, description="Increases with every notification of a sender.")
    vnf: str = Field(description="The VnfDeployment.")
    node: str | None = Field(description="The node the instance runs on.")
    virtualMachine: str = Field(description="namespace/name of the VirtualMachine.")
    ovnPorts: dict[str, str] = Field(
        description="The instance's OVN logical switch ports: in, out (Network Function)."
    )


Notification = Annotated[MembersNotification | InstanceNotification, Field(discriminator="event")]
"""Any notification, told apart by ``event``."""
