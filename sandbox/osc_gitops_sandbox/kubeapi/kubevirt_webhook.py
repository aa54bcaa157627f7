"""KubeVirt's mutating webhook on VirtualMachines, as virt-api runs it
(``pkg/virt-api/webhooks/mutating-webhook/mutators/vm-mutator.go``, ``pkg/defaults``):

- on **create** only, ``spec.template.spec.domain.firmware.uuid`` and ``.serial`` when empty
  (fresh UUIDs: the guest's SMBIOS identity, which VNF licences are tied to; "Only assign a
  new-style firmware UUID when the VM is created");
- on **every create and update**, ``spec.template.spec.architecture`` (the cluster's default,
  ``amd64`` here) and ``spec.template.spec.domain.machine.type`` (``q35`` for amd64) when
  empty.

As on a real API server it runs after the request's fields were attributed
(:mod:`~osc_gitops_sandbox.kubeapi.managed_fields`): what it sets belongs to no field manager,
so no server-side apply removes it. A client that sends ``firmware: null`` in a merge patch
does remove it (and, on update, gets no new one): the bug the reconciler had.
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["ARCHITECTURE", "MACHINE_TYPE", "mutate_vm"]

ARCHITECTURE = "amd64"
MACHINE_TYPE = "q35"


def mutate_vm(operation: str, vm: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """The webhook's change to ``vm`` (a :data:`~osc_gitops_sandbox.kubeapi.store.Mutator`)."""
    template = (vm.get("spec") or {}).get("template")
    if not isinstance(template, dict):
        return vm  # KubeVirt's validating webhook refuses it later
    spec = template.setdefault("spec", {})
    domain = spec.setdefault("domain", {})
    if operation == "CREATE":
        firmware = domain.get("firmware") or {}
        firmware.setdefault("uuid", str(uuid.uuid4()))
        firmware.setdefault("serial", str(uuid.uuid4()))
        domain["firmware"] = firmware
    spec.setdefault("architecture", ARCHITECTURE)
    machine = domain.get("machine") or {}
    if not machine.get("type"):
        machine["type"] = MACHINE_TYPE
    domain["machine"] = machine
    return vm
