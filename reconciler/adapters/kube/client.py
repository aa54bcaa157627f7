"""Kubernetes adapter: the only module that imports the official ``kubernetes`` client.

It turns the API into the plain data of :mod:`reconciler.core.observed` and performs the few writes
the reconciler needs (VirtualMachines and NetworkAttachmentDefinitions it owns). Why it looks
the way it does:

- Big lists are read with ``_preload_content=False`` + ``json.loads``: deserialising 10,000 pods
  into model objects costs ~3x more than the raw JSON, and we only need a few fields.
- Every list is paginated (``limit``/``continue``) so a large cluster never forces one huge
  response; a ``410 Gone`` while paging (the snapshot was compacted) restarts the list.
- Transient answers (429 with ``Retry-After``, 5xx) are retried a few times with backoff;
  everything else becomes a :class:`KubeError` whose message names the API server URL and
  quotes the server's ``Status`` message (a 403 says which verb/resource was refused).
- Writes only touch the *managed* fields (labels, ``osc.io/*`` annotations, spec) so status and
  fields other controllers set survive, and a stale read causes a 409 that we retry.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from reconciler.core.observed import KubeObject, NetworkPolicy, Node, Pod
from reconciler.core.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER, PREFIX
from reconciler.errors import ConflictError, EndpointError

log = logging.getLogger(__name__)

__all__ = [
    "KINDS",
    "WATCHABLE",
    "KubeCluster",
    "KubeConnectError",
    "KubeError",
    "KubeSettings",
]


@dataclass(frozen=True)
class KubeSettings:
    """How to reach the API server. Precedence: ``in_cluster``, then ``server`` (explicit URL
    with ``token``/``token_file``/``ca_file``), then ``kubeconfig`` (``None`` = ``$KUBECONFIG``
    or ``~/.kube/config``) with an optional ``context``. TLS verification is on unless
    ``insecure_skip_tls_verify`` is set. ``timeout`` bounds every non-watch request."""

    kubeconfig: str | None = None
    context: str | None = None
    server: str | None = None
    token: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False
    in_cluster: bool = False
    timeout: float = 10.0


class KubeError(EndpointError):
    """A Kubernetes API call failed; the message names the API server and the reason.

    Callers branch on the subclass (:class:`KubeNotFound`, :class:`KubeConflict`,
    :class:`KubeGone`, ...), never on ``status``, which is kept for the message and tests."""

    cause = "kubernetes"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KubeConnectError(KubeError):
    """The API server could not be reached or the client could not be configured."""


class KubeUnauthorized(KubeError):
    """401: the credentials were rejected."""


class KubeForbidden(KubeError):
    """403: the service account may not do this (RBAC)."""


class KubeNotFound(KubeError):
    """404: the object, or the whole API (KubeVirt/Multus not installed), does not exist."""


class KubeConflict(KubeError, ConflictError):
    """409: the object exists already, or changed since we read it."""


class KubeGone(KubeError):
    """410: a list continue token or watch resourceVersion expired; list again."""


_BY_STATUS: dict[int, type[KubeError]] = {
    401: KubeUnauthorized,
    403: KubeForbidden,
    404: KubeNotFound,
    409: KubeConflict,
    410: KubeGone,
}


def kube_error(message: str, status: int | None) -> KubeError:
    """The :class:`KubeError` subclass for an HTTP status (plain ``KubeError`` for others)."""
    return _BY_STATUS.get(status or 0, KubeError)(message, status=status)


@dataclass(frozen=True, slots=True)
class _Kind:
    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        return base


KINDS: dict[str, _Kind] = {
    "Pod": _Kind("", "v1", "pods"),
    "Node": _Kind("", "v1", "nodes", namespaced=False),
    "Namespace": _Kind("", "v1", "namespaces", namespaced=False),
    "VirtualMachine": _Kind("kubevirt.io", "v1", "virtualmachines"),
    "NetworkAttachmentDefinition": _Kind("k8s.cni.cncf.io", "v1", "network-attachment-definitions"),
    "NetworkPolicy": _Kind("networking.k8s.io", "v1", "networkpolicies"),
    "Lease": _Kind("coordination.k8s.io", "v1", "leases"),
}
"""Kinds the adapter reads or writes, by ``kind``; one line per kind."""

WATCHABLE = frozenset(
    {"Pod", "VirtualMachine", "NetworkAttachmentDefinition", "Node", "NetworkPolicy"}
)
"""Kinds :meth:`KubeCluster.watch` serves (what the loop and ``adapters.kube_cache`` follow)."""

_RETRYABLE = frozenset({429, 500, 502, 503, 504})
_VERB = {"GET": "list", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def merge_patch_for(live: Any, target: Any) -> Any:
    """The RFC 7386 merge patch that turns ``live`` into ``target`` (``None`` removes a key).

    Lists and scalars are replaced whole, which is what merge patch can express.
    """
    if not isinstance(live, dict) or not isinstance(target, dict):
        return target
    patch: dict[str, Any] = {}
    for key in live.keys() - target.keys():
        patch[key] = None
    for key, value in target.items():
        if key not in live:
            patch[key] = value
        elif live[key] != value:
            patch[key] = merge_patch_for(live[key], value)
    return patch


def managed_body(obj: dict[str, Any]) -> dict[str, Any]:
    """The fields the reconciler manages: labels, ``osc.io/*`` annotations and spec."""
    meta = obj.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(PREFIX)}
    return {
        "metadata": {"labels": dict(meta.get("labels") or {}), "annotations": annotations},
        "spec": obj.get("spec") or {},
    }


class KubeCluster:
    """One API server, through the official client. Thread-safe for concurrent calls."""

    page_size: int = 500
    """Items per list page; small values are useful in tests."""
    retries: int = 3
    """Extra attempts for 429/5xx answers (``Retry-After`` honoured, capped at 10 s)."""
    retry_backoff: float = 0.1
    """First delay between retries without ``Retry-After``; doubles each attempt (max 2 s)."""

    def __init__(self, settings: KubeSettings) -> None:
        self.settings = settings
        cfg = client.Configuration()
        where = "in-cluster service account"
        try:
            if settings.in_cluster:
                config.load_incluster_config(client_configuration=cfg)
            elif settings.server:
                where = settings.server
                cfg.host = settings.server.rstrip("/")
                token = settings.token
                if token is None and settings.token_file:
                    token = Path(settings.token_file).read_text().strip()
                if token:
                    cfg.api_key = {"authorization": f"Bearer {token}"}
                if settings.ca_file:
                    cfg.ssl_ca_cert = settings.ca_file
            else:
                where = (
                    f"kubeconfig {settings.kubeconfig or '(default: $KUBECONFIG, ~/.kube/config)'}"
                )
                if settings.context:
                    where += f" context {settings.context!r}"
                config.load_kube_config(
                    config_file=settings.kubeconfig,
                    context=settings.context,
                    client_configuration=cfg,
                )
        except (ConfigException, OSError, ValueError) as exc:
            raise KubeConnectError(
                f"cannot configure the Kubernetes client from {where}: {exc}"
            ) from exc
        if settings.insecure_skip_tls_verify:
            cfg.verify_ssl = False
        # Retry only connection setup in urllib3 (cheap, hides nothing); status-based retries
        # (429/5xx) are ours, so they honour Retry-After and end in a clear message.
        cfg.retries = urllib3.Retry(
            total=2,
            connect=2,
            read=0,
            redirect=0,
            status=0,
            backoff_factor=0.05,
            respect_retry_after_header=False,
        )
        self.server: str = cfg.host
        self._api = client.ApiClient(cfg)
        self._core = client.CoreV1Api(self._api)

    def close(self) -> None:
        """Release pooled connections."""
        self._api.close()

    def __enter__(self) -> KubeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ low level

    def _error(self, exc: Exception, method: str, path: str) -> KubeError:
        if isinstance(exc, ApiException):
            message = exc.reason or ""
            try:
                status = json.loads(exc.body or b"{}")
                message = status.get("message") or message
            except (ValueError, TypeError):
                pass
            if exc.status == 403:
                return KubeForbidden(
                    f"Kubernetes API server {self.server} refused {_VERB.get(method, method)} "
                    f"{path}: {message} (check the RBAC of the reconciler's service account)",
                    status=403,
                )
            if exc.status == 401:
                return KubeUnauthorized(
                    f"Kubernetes API server {self.server} rejected our credentials (401 "
                    f"Unauthorized) for {method} {path}: check the token or kubeconfig user",
                    status=401,
                )
            return kube_error(
                f"Kubernetes API server {self.server}: {method} {path} failed with "
                f"{exc.status}: {message}",
                exc.status,
            )
        reason = _root_cause(exc)
        return KubeConnectError(
            f"cannot reach Kubernetes API server {self.server} ({method} {path}): {reason}"
        )

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        stream: bool = False,
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        """One call through the official client's ``call_api``; JSON in, parsed JSON out
        (or the raw urllib3 response when ``stream``). Retries 429/5xx and raises KubeError."""
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        attempt = 0
        while True:
            try:
                resp = self._api.call_api(
                    path,
                    method,
                    query_params=params,
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    # a (connect, read) pair: the client silently ignores a float timeout
                    _request_timeout=timeout or (self.settings.timeout, self.settings.timeout),
                )
            except ApiException as exc:
                if exc.status in _RETRYABLE and attempt < self.retries and not stream:
                    attempt += 1
                    time.sleep(_retry_delay(exc, attempt, self.retry_backoff))
                    continue
                raise self._error(exc, method, path) from None
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise self._error(exc, method, path) from None
            response = resp[0] if isinstance(resp, tuple) else resp
            if stream:
                return response
            data = response.data
            return json.loads(data) if data else None

    def _list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """All items of a list, page by page; restarts once the continue token expired (410).

        Returns the items and the list's resourceVersion (a watch can start from it)."""
        k = KINDS[kind]
        path = k.path(namespace)
        for _ in range(5):
            items: list[dict[str, Any]] = []
            cont: str | None = None
            try:
                while True:
                    page = self._request(
                        "GET",
                        path,
                        query={
                            "labelSelector": label_selector,
                            "limit": self.page_size,
                            "continue": cont,
                        },
                    )
                    items.extend(page.get("items") or [])
                    cont = (page.get("metadata") or {}).get("continue")
                    if not cont:
                        return items, str(page["metadata"].get("resourceVersion", ""))
            except KubeGone:
                if cont:
                    log.info("list of %s expired while paging; listing again", path)
                    continue
                raise
        raise KubeError(f"Kubernetes API server {self.server}: list {path} kept expiring (410)")

    # ------------------------------------------------------------------ reads

    def list_pods(
        self, namespaces: Sequence[str] | None = None, label_selector: str | None = None
    ) -> list[Pod]:
        """Pods (all namespaces, or only ``namespaces``), sorted by namespace and name."""
        raw: list[dict[str, Any]] = []
        for ns in _namespaces(namespaces):
            raw.extend(self._list("Pod", ns, label_selector)[0])
        pods = {p.uid: p for p in map(_pod, raw)}
        return sorted(pods.values(), key=lambda p: (p.namespace, p.name))

    def pods_for_labels(
        self, labels: Sequence[tuple[str, str]], namespaces: Sequence[str] | None = None
    ) -> list[Pod]:
        """Pods carrying *any* of ``labels`` (OR), in ``namespaces`` if given.

        A label selector can only AND, so we send one set-based selector per key
        (``key in (v1,v2)``) and union the answers, de-duplicated by UID: a pod that matches
        two labels is returned once.
        """
        by_key: dict[str, list[str]] = {}
        for key, value in labels:
            values = by_key.setdefault(key, [])
            if value not in values:
                values.append(value)
        found: dict[str, Pod] = {}
        for key, values in sorted(by_key.items()):
            selector = f"{key} in ({','.join(sorted(values))})"
            for pod in self.list_pods(namespaces, selector):
                found[pod.uid] = pod
        return sorted(found.values(), key=lambda p: (p.namespace, p.name))

    def list_nodes(self) -> list[Node]:
        items, _ = self._list("Node")
        nodes = [
            Node(name=o["metadata"]["name"], labels=dict(o["metadata"].get("labels") or {}))
            for o in items
        ]
        return sorted(nodes, key=lambda n: n.name)

    def list_owned(self, kind: str, instance: str) -> list[KubeObject]:
        """Objects of ``kind`` this instance owns (both ownership labels), managed fields only.

        An absent API (KubeVirt or Multus not installed: 404) means nothing is owned."""
        _check_kind(kind)
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{OWNER}={instance}"
        try:
            items, _ = self._list(kind, None, selector)
        except KubeNotFound:
            return []
        objs = [
            KubeObject(
                kind=kind,
                namespace=o["metadata"].get("namespace", ""),
                name=o["metadata"]["name"],
                body=managed_body(o),
            )
            for o in items
        ]
        return sorted(objs, key=lambda o: (o.namespace, o.name))

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The whole object, or ``None`` when it does not exist."""
        path = KINDS[kind].path(namespace, name)
        try:
            result: dict[str, Any] = self._request("GET", path)
        except KubeNotFound:
            return None
        return result

    def list_network_policies(self) -> list[dict[str, Any]]:
        """All NetworkPolicies as dicts (for plan warnings); ``[]`` if the API is absent."""
        try:
            items, _ = self._list("NetworkPolicy")
        except KubeNotFound:
            return []
        return items

    def network_policies(self) -> list[NetworkPolicy]:
        """:meth:`list_network_policies` as :class:`reconciler.core.observed.NetworkPolicy`."""
        return sorted(
            (
                NetworkPolicy(
                    namespace=o["metadata"].get("namespace", ""),
                    name=o["metadata"]["name"],
                    pod_selector=dict((o.get("spec") or {}).get("podSelector") or {}),
                )
                for o in self.list_network_policies()
            ),
            key=lambda n: (n.namespace, n.name),
        )

    # ------------------------------------------------------------------ writes

    def create(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> Any:
        """Create ``kind`` from the managed ``body`` (see :mod:`reconciler.core.target`).

        Returns the server's answer (the created object, with its resourceVersion) so a cache
        can write it through before the watch event arrives."""
        _check_kind(kind)
        k = KINDS[kind]
        meta = dict(body.get("metadata") or {})
        meta.update({"name": name, "namespace": namespace})
        obj = {**body, "apiVersion": k.api_version, "kind": kind, "metadata": meta}
        return self._request("POST", k.path(namespace), body=obj)

    def replace_managed(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> Any:
        """Make the managed fields equal ``body``: one merge patch computed against the live
        object (labels and ``osc.io/*`` annotations not in ``body`` are removed; other
        annotations, status and server fields are untouched), guarded by the live
        resourceVersion; a concurrent change (409) is retried on a fresh read.

        Returns the object as the server has it afterwards (the patch answer, or the live
        object when nothing had to change)."""
        _check_kind(kind)
        path = KINDS[kind].path(namespace, name)
        for _ in range(5):
            live = self.get(kind, namespace, name)
            if live is None:
                raise KubeNotFound(
                    f"Kubernetes API server {self.server}: {kind} {namespace}/{name} "
                    "disappeared before it could be updated",
                    status=404,
                )
            current = managed_body(live)
            target = {
                "metadata": {
                    "labels": dict((body.get("metadata") or {}).get("labels") or {}),
                    "annotations": dict((body.get("metadata") or {}).get("annotations") or {}),
                },
                "spec": body.get("spec") or {},
            }
            patch = merge_patch_for(current, target)
            if not patch:
                return live
            patch.setdefault("metadata", {})["resourceVersion"] = live["metadata"][
                "resourceVersion"
            ]
            try:
                return self._request(
                    "PATCH", path, body=patch, content_type="application/merge-patch+json"
                )
            except KubeConflict:
                continue
        raise KubeConflict(
            f"Kubernetes API server {self.server}: {kind} {namespace}/{name} kept changing "
            "while we updated it (409 Conflict)",
            status=409,
        )

    def delete(self, kind: str, namespace: str, name: str) -> Any:
        """Delete; an object already gone (404) is fine (returns ``None`` then).

        Otherwise returns the server's answer: the deleted object (still carrying
        ``deletionTimestamp`` when finalizers keep it alive) or a ``Status``."""
        _check_kind(kind)
        try:
            return self._request("DELETE", KINDS[kind].path(namespace, name))
        except KubeNotFound:
            return None

    # ------------------------------------------------------------------ watch

    def watch(
        self,
        kind: str,
        on_event: Callable[[str, dict[str, Any]], None],
        stop: threading.Event,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        *,
        read_timeout: float | None = None,
        backoff: tuple[float, float] = (0.1, 10.0),
        on_list: Callable[[list[dict[str, Any]], str], None] | None = None,
        on_status: Callable[[bool], None] | None = None,
    ) -> None:
        """Deliver ``on_event(type, object)`` (ADDED/MODIFIED/DELETED) until ``stop`` is set.

        Without ``resource_version`` it lists first (to get one); then it watches with
        bookmarks, resuming from the last resourceVersion seen (bookmarks move it forward)
        after a stream ends, breaks or stalls for ``read_timeout`` seconds (default
        ``timeout_seconds + 30``: the server must have ended it by then). When the server
        says the resourceVersion is gone (410) it calls ``on_event("RELIST", {})`` and lists
        again. Other errors back off exponentially within ``backoff`` (min, max) seconds.
        Setting ``stop`` interrupts a blocked read at once. An exception raised by
        ``on_event`` (or ``on_list``) ends the watch and propagates (a caller bug must not be
        retried forever).

        ``on_list(items, resourceVersion)``, if given, receives the items of every list the
        watch makes (the first one without ``resource_version``, and each one after a RELIST):
        an informer cache replaces its store with them instead of listing a second time.

        ``on_status(connected)``, if given, hears (changes only) ``True`` when a watch stream is
        open and ``False`` when it ended (for any reason, even the server's normal timeout: the next
        one opens a moment later) or a list/watch request failed: a cache decides from it
        whether its store is still current (it never hears of an outage otherwise, since the
        watch retries quietly).
        """
        if kind not in WATCHABLE:
            raise ValueError(f"watch supports {', '.join(sorted(WATCHABLE))}, not {kind!r}")
        read_timeout = read_timeout if read_timeout is not None else timeout_seconds + 30.0
        current: list[Any] = []
        done = threading.Event()
        guard = threading.Thread(
            target=_close_on_stop, args=(stop, done, current), daemon=True, name="kube-watch-stop"
        )
        guard.start()
        try:
            self._watch_loop(
                kind,
                on_event,
                stop,
                label_selector,
                resource_version,
                timeout_seconds,
                read_timeout,
                backoff,
                current,
                on_list,
                on_status,
            )
        finally:
            done.set()
            current.clear()

    def _watch_loop(
        self,
        kind: str,
        on_event: Callable[[str, dict[str, Any]], None],
        stop: threading.Event,
        label_selector: str | None,
        resource_version: str | None,
        timeout_seconds: int,
        read_timeout: float,
        backoff: tuple[float, float],
        current: list[Any],
        on_list: Callable[[list[dict[str, Any]], str], None] | None = None,
        on_status: Callable[[bool], None] | None = None,
    ) -> None:
        path = KINDS[kind].path()
        status = _StatusReporter(on_status)
        rv = resource_version
        delay = backoff[0]
        while not stop.is_set():
            try:
                if rv is None:
                    items, rv = self._list(kind, None, label_selector)
                    if on_list is not None:
                        on_list(items, rv)
                resp = self._request(
                    "GET",
                    path,
                    query={
                        "watch": "true",
                        "allowWatchBookmarks": "true",
                        "resourceVersion": rv,
                        "labelSelector": label_selector,
                        "timeoutSeconds": timeout_seconds,
                    },
                    stream=True,
                    timeout=(self.settings.timeout, read_timeout),
                )
                current[:] = [resp]
                status(True)
                try:
                    if stop.is_set():
                        break
                    for event in _events(resp):
                        etype = event.get("type")
                        obj = event.get("object") or {}
                        if etype == "ERROR":
                            if obj.get("code") == 410:
                                rv = None
                                on_event("RELIST", {})
                                break
                            raise kube_error(
                                f"Kubernetes API server {self.server}: watch {path} failed: "
                                f"{obj.get('message')}",
                                obj.get("code"),
                            )
                        new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if new_rv:
                            rv = new_rv
                        if etype != "BOOKMARK":
                            on_event(str(etype), obj)
                        delay = backoff[0]
                        if stop.is_set():
                            break
                finally:
                    current.clear()
                    resp.release_conn()
                    status(False)
                delay = backoff[0]
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                status(False)
                if stop.is_set():
                    break
                log.warning("watch %s%s broke (%s); resuming", self.server, path, _root_cause(exc))
                stop.wait(delay)
                delay = min(delay * 2, backoff[1])
            except KubeError as exc:
                status(False)
                if stop.is_set():
                    break
                if isinstance(exc, KubeGone):
                    rv = None
                    on_event("RELIST", {})
                    continue
                log.warning("watch %s: %s; retrying in %.1fs", path, exc, delay)
                stop.wait(delay)
                delay = min(delay * 2, backoff[1])


class _StatusReporter:
    """Calls ``on_status`` on changes only (a stream that breaks ends *and* fails; an outage
    fails every retry), so the listener hears True/False alternately."""

    def __init__(self, on_status: Callable[[bool], None] | None) -> None:
        self.on_status = on_status
        self.last: bool | None = None

    def __call__(self, connected: bool) -> None:
        if self.on_status is not None and connected is not self.last:
            self.last = connected
            self.on_status(connected)


def _close_on_stop(stop: threading.Event, done: threading.Event, current: list[Any]) -> None:
    """Unblock a watch read as soon as ``stop`` is set (instead of waiting for data); exits
    with the watch (``done``) so an exception in a callback leaves no thread behind."""
    while not stop.wait(0.2):
        if done.is_set():
            return
    for resp in list(current):
        try:
            resp.shutdown()
        except Exception:  # already closed or finished: nothing to interrupt
            log.debug("watch response already closed")


def _events(resp: Any) -> Iterator[dict[str, Any]]:
    """Newline-delimited JSON events from a chunked watch response."""
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)


def _check_kind(kind: str) -> None:
    if kind not in ("VirtualMachine", "NetworkAttachmentDefinition", "Pod", "Lease"):
        raise ValueError(f"unsupported kind {kind!r}")


def _namespaces(namespaces: Sequence[str] | None) -> list[str | None]:
    if not namespaces:
        return [None]
    return list(dict.fromkeys(namespaces))


def _pod(obj: dict[str, Any]) -> Pod:
    meta = obj["metadata"]
    return Pod(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta.get("uid", ""),
        node=(obj.get("spec") or {}).get("nodeName") or None,
        labels=dict(meta.get("labels") or {}),
    )


def _retry_delay(exc: ApiException, attempt: int, base: float) -> float:
    header = (exc.headers or {}).get("Retry-After") if exc.headers else None
    if header:
        try:
            return min(float(header), 10.0)
        except ValueError:
            pass
    return min(base * 2 ** (attempt - 1), 2.0)


def _root_cause(exc: BaseException) -> str:
    """The innermost useful reason (``Connection refused``) instead of urllib3's wrapper text."""
    seen = exc
    while True:
        inner = getattr(seen, "reason", None)
        if isinstance(inner, BaseException) and inner is not seen:
            seen = inner
            continue
        nxt = seen.__cause__ or seen.__context__
        if nxt is not None and nxt is not seen:
            seen = nxt
            continue
        break
    text = str(seen)
    if "Connection refused" in text or isinstance(seen, ConnectionRefusedError):
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return f"TLS certificate verification failed ({text})"
    return text or type(seen).__name__
