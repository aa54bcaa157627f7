"""What the node binder reads from Kubernetes: the VNF VMs of one node and their
virt-launcher pods, followed by watches.

Two reads, both scoped to the node, so a binder's Kubernetes traffic is proportional to the
node's VMs, never to the cluster:

- our ``VirtualMachine`` objects labelled for the node (``osc.io/node=<node>`` beside the
  ownership labels: the compiler labels every VM it makes);
- ``virt-launcher`` pods (label ``kubevirt.io=virt-launcher``) on the node (field selector
  ``spec.nodeName=<node>``: the API server filters).

The permissions are the node agent's own (``pods`` and ``virtualmachines`` list/watch): the
binder adds nothing to its RBAC. With :meth:`NodeVms.start` both are watched and kept in
memory (``on_change`` is called after each event); :meth:`NodeVms.read` answers from memory
then, else (``--once``) from a live list. :meth:`NodeVms.relist` refreshes both from the API
(the binder's periodic resync).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from reconciler.adapters.kube.client import KubeCluster, KubeSettings
from reconciler.adapters.kube.objects import (
    LAUNCHER_SELECTOR,
    launcher_pod_from_object,
    owned_object,
)
from reconciler.core.model.observed import KubeObject, LauncherPod

log = logging.getLogger(__name__)

__all__ = ["NodeVms"]


class NodeVms:
    """The VNF VMs of ``node`` owned by ``instance`` and the node's virt-launcher pods."""

    def __init__(self, settings: KubeSettings, node: str, instance: str) -> None:
        self.node = node
        self.instance = instance
        self._kube = KubeCluster(settings, node=node)
        self.server = self._kube.server
        self._lock = threading.Lock()
        self._vms: dict[str, dict[str, Any]] | None = None
        self._pods: dict[str, dict[str, Any]] | None = None
        self._threads: list[threading.Thread] = []

    def close(self) -> None:
        self._kube.close()

    @property
    def _vm_selector(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self._kube.owned_labels(self.instance).items())

    def _list(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        from reconciler.adapters.kube.errors import KubeNotFound

        try:
            vms, _ = self._kube.list_raw("VirtualMachine", None, self._vm_selector)
        except KubeNotFound:  # KubeVirt not installed: no VM of ours anywhere
            vms = []
        pods, _ = self._kube.list_raw("Pod", None, LAUNCHER_SELECTOR)
        return {_key(o): o for o in vms}, {_key(o): o for o in pods}

    def relist(self) -> None:
        """Replace both stores with a live list (raises ``KubeError``)."""
        vms, pods = self._list()
        with self._lock:
            self._vms, self._pods = vms, pods

    def read(self) -> tuple[list[KubeObject], list[LauncherPod]]:
        """The node's VMs of ours and its virt-launcher pods (memory when watched, else a
        live list; raises ``KubeError``)."""
        with self._lock:
            vms, pods = self._vms, self._pods
        if vms is None or pods is None:
            vms, pods = self._list()
        objs = sorted((owned_object("VirtualMachine", o) for o in vms.values()),
                      key=lambda o: (o.namespace, o.name))  # fmt: skip
        launchers = [p for p in map(launcher_pod_from_object, pods.values()) if p is not None]
        return objs, sorted(launchers, key=lambda p: (p.namespace, p.name))

    def start(self, stop: threading.Event, on_change: Callable[[], None]) -> None:
        """Watch both kinds in threads until ``stop``; ``on_change()`` after every change."""
        for kind, selector in (("VirtualMachine", self._vm_selector), ("Pod", LAUNCHER_SELECTOR)):
            thread = threading.Thread(
                target=self._follow, args=(kind, selector, stop, on_change), daemon=True,
                name=f"binder-watch-{kind}",
            )  # fmt: skip
            thread.start()
            self._threads.append(thread)

    def _follow(
        self, kind: str, selector: str, stop: threading.Event, on_change: Callable[[], None]
    ) -> None:
        attr = "_vms" if kind == "VirtualMachine" else "_pods"

        def listed(items: list[dict[str, Any]], _rv: str) -> None:
            with self._lock:
                setattr(self, attr, {_key(o): o for o in items})
            on_change()

        def event(etype: str, obj: dict[str, Any]) -> None:
            if etype == "RELIST":
                return  # the watch lists again and hands the items to listed()
            with self._lock:
                store = getattr(self, attr)
                if store is None:
                    store = {}
                    setattr(self, attr, store)
                if etype == "DELETED":
                    store.pop(_key(obj), None)
                else:
                    store[_key(obj)] = obj
            on_change()

        try:
            self._kube.watch(kind, event, stop, selector, on_list=listed)
        except Exception:  # a bug of ours in a callback: the resync keeps the binder going
            log.exception("binder watch of %s ended", kind)

    def join(self, timeout: float = 5.0) -> None:
        for thread in self._threads:
            thread.join(timeout)


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
