"""Discovery documents of the Kubernetes API emulator (``/version``, ``/api``, ``/api/v1``,
``/apis``, ``/apis/<group>[/<version>]``) in the legacy form, which kubectl accepts when its
aggregated-discovery ``Accept`` is answered with plain ``application/json``; and the protocol of
an API group served by someone else (an aggregated API such as KubeVirt's subresources).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from osc_gitops_sandbox.kubeapi.resources import VERBS, ResourceType

__all__ = ["ApiExtension", "discovery", "resource_list"]


class ApiExtension(Protocol):
    """An API group served by someone else behind this server, as an aggregated API
    (``APIService``) is in a real cluster: KubeVirt's ``subresources.kubevirt.io`` is served by
    virt-api, not by the kube-apiserver. See :meth:`KubeApiServer.add_extension`."""

    group: str
    version: str

    def resources(self) -> list[dict[str, Any]]:
        """The ``APIResource`` entries discovery lists for ``group/version``."""
        ...

    def handle(
        self, method: str, namespace: str | None, rest: list[str], body: Any
    ) -> tuple[int, Any]:
        """Serve one request below ``/apis/<group>/<version>/[namespaces/<ns>/]``: ``rest`` is
        the rest of the path, ``body`` the decoded body (``None`` when there is none).
        Returns ``(HTTP status, JSON document or None for an empty body)``; raises
        :class:`ApiError` for a ``kind: Status`` answer."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def discovery(
    path: str,
    types: Sequence[ResourceType],
    extensions: Mapping[tuple[str, str], ApiExtension],
    address: str,
) -> dict[str, Any] | None:
    """The discovery document served at ``path`` (``None``: not a discovery path), in the
    legacy form; ``address`` is the server's ``host:port``."""
    if path == "/version":
        return {
            "major": "1",
            "minor": "32",
            "gitVersion": "v1.32.0-osc-sandbox",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z",
            "goVersion": "go1.23",
            "compiler": "gc",
            "platform": "linux/amd64",
        }
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }
    if path == "/api/v1":
        return resource_list("", "v1", types, extensions)
    groups: dict[str, list[str]] = {}
    for group, version in [*((rt.group, rt.version) for rt in types), *extensions]:
        if group:
            groups.setdefault(group, [])
            if version not in groups[group]:
                groups[group].append(version)

    def group_doc(name: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in groups[name]]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": name,
            "versions": versions,
            "preferredVersion": versions[0],
        }

    if path == "/apis":
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [group_doc(g) for g in groups],
        }
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
        return group_doc(parts[1])
    if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], ()):
        return resource_list(parts[1], parts[2], types, extensions)
    return None


def resource_list(
    group: str,
    version: str,
    types: Sequence[ResourceType],
    extensions: Mapping[tuple[str, str], ApiExtension],
) -> dict[str, Any]:
    """The ``APIResourceList`` of ``group/version``."""
    resources = [
        {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": VERBS,
            "shortNames": list(rt.short_names),
        }
        for rt in types
        if rt.group == group and rt.version == version
    ]
    extension = extensions.get((group, version))
    if extension is not None:
        resources += extension.resources()
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
