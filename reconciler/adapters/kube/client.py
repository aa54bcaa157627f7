"""Kubernetes adapter: the only module that imports the official ``kubernetes`` client.

It turns the API into the plain data of :mod:`reconciler.core.model.observed` and performs the few
writes the reconciler needs (VirtualMachines and NetworkAttachmentDefinitions it owns). Why it looks
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
- A node agent (``KubeCluster(settings, node=N)``) sees only its node's share: pods through the
  field selector ``spec.nodeName=N`` (lists and watches, so the API server filters, not us), its
  own Node object through ``metadata.name=N`` (an agent plans its node only; a thousand agents
  each listing a thousand nodes would be a million objects per restart of the fleet) and owned
  objects through the ``osc.io/node=N`` label.

It stays one module (a little over 600 lines) on purpose: reads, writes and the watch loop
all go through :meth:`KubeCluster._request` and its error mapping, and the node agent's
selectors must apply to lists and watches alike; split, the private request path would have to
become public for the pieces to share it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from reconciler.adapters.kube.errors import (
    KubeConflict,
    KubeConnectError,
    KubeError,
    KubeForbidden,
    KubeGone,
    KubeNotFound,
    KubeUnauthorized,
    kube_error,
)
from reconciler.adapters.kube.objects import (
    KINDS,
    VM_SUBRESOURCES,
    WATCHABLE,
    check_writable_kind,
    managed_body,
    merge_patch_for,
    network_policy_from_object,
    node_from_object,
    node_subnet,
    owned_object,
    pod_from_object,
)
from reconciler.adapters.kube.watch_stream import StatusReporter, close_on_stop, watch_events
from reconciler.core.model.observed import KubeObject, NetworkPolicy, Node, Pod
from reconciler.core.model.ownership import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NODE_LABEL,
    OWNER,
    node_label_value,
)

log = logging.getLogger(__name__)

__all__ = [
    "KINDS",
    "WATCHABLE",
    "KubeCluster",
    "KubeConflict",
    "KubeConnectError",
    "KubeError",
    "KubeForbidden",
    "KubeGone",
    "KubeNotFound",
    "KubeSettings",
    "KubeUnauthorized",
    "managed_body",
    "merge_patch_for",
    "pod_from_object",
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


_RETRYABLE = frozenset({429, 500, 502, 503, 504})
FIELD_MANAGER = "osc-gitops"
"""The field manager of every VirtualMachine and NAD write (server-side apply): the fields it
states are ours, everything else stays with whoever set it."""
APPLY_PATCH = "application/apply-patch+yaml"
_VERB = {"GET": "list", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class KubeCluster:
    """One API server, through the official client. Thread-safe for concurrent calls."""

    page_size: int = 500
    """Items per list page; small values are useful in tests."""
    retries: int = 3
    """Extra attempts for 429/5xx answers (``Retry-After`` honoured, capped at 10 s)."""
    retry_backoff: float = 0.1
    """First delay between retries without ``Retry-After``; doubles each attempt (max 2 s)."""
    concurrent_writes: int = 8
    """Independent writes an apply may have in flight at once (``reconciler.engine.apply``):
    safe, since calls are thread-safe and within the client's connection pool (10 by default
    on 2 cores, 5 per core)."""

    def __init__(self, settings: KubeSettings, *, node: str | None = None) -> None:
        self.settings = settings
        self.node = node
        """Only this node's pods and owned objects are read (a node agent); ``None``: all."""
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

    def field_selector(self, kind: str) -> str | None:
        """The field selector every list and watch of ``kind`` carries: for a node agent,
        ``spec.nodeName=<node>`` on pods and ``metadata.name=<node>`` on nodes; else none."""
        if self.node is None:
            return None
        if kind == "Pod":
            return f"spec.nodeName={self.node}"
        if kind == "Node":
            return f"metadata.name={self.node}"
        return None

    def list_raw(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """All items of a list, page by page; restarts once the continue token expired (410).
        ``field_selector`` defaults to :meth:`field_selector` of the kind.

        Returns the items and the list's resourceVersion (a watch can start from it)."""
        k = KINDS[kind]
        fields = field_selector if field_selector is not None else self.field_selector(kind)
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
                            "fieldSelector": fields,
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
            raw.extend(self.list_raw("Pod", ns, label_selector)[0])
        pods = {p.uid: p for p in map(pod_from_object, raw)}
        return sorted(pods.values(), key=lambda p: (p.namespace, p.name))

    def list_nodes(self) -> list[Node]:
        items, _ = self.list_raw("Node")
        return sorted((node_from_object(o) for o in items), key=lambda n: n.name)

    def list_node_subnets(self) -> list[tuple[Node, str | None]]:
        """Every node with its default-network pod subnet (``k8s.ovn.org/node-subnets``;
        ``None`` until OVN-Kubernetes has given it one), sorted by node name."""
        items, _ = self.list_raw("Node")
        pairs = [(node_from_object(o), node_subnet(o)) for o in items]
        return sorted(pairs, key=lambda pair: pair[0].name)

    def owned_labels(self, instance: str) -> dict[str, str]:
        """The labels of the objects ``instance`` owns that this adapter reads (a node agent:
        its node's only)."""
        labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, OWNER: instance}
        if self.node is not None:
            labels[NODE_LABEL] = node_label_value(self.node)  # as compile labels them
        return labels

    def list_owned(self, kind: str, instance: str) -> list[KubeObject]:
        """Objects of ``kind`` this instance owns (both ownership labels), managed fields only.

        An absent API (KubeVirt or Multus not installed: 404) means nothing is owned."""
        check_writable_kind(kind)
        selector = ",".join(f"{k}={v}" for k, v in self.owned_labels(instance).items())
        try:
            items, _ = self.list_raw(kind, None, selector)
        except KubeNotFound:
            return []
        objs = [owned_object(kind, o) for o in items]
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
            items, _ = self.list_raw("NetworkPolicy")
        except KubeNotFound:
            return []
        return items

    def network_policies(self) -> list[NetworkPolicy]:
        """:meth:`list_network_policies` as
        :class:`reconciler.core.model.observed.NetworkPolicy`."""
        return sorted(
            (network_policy_from_object(o) for o in self.list_network_policies()),
            key=lambda n: (n.namespace, n.name),
        )

    # ------------------------------------------------------------------ writes

    def create(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> Any:
        """Create ``kind`` from the managed ``body`` (see :mod:`reconciler.core.model.target`):
        a server-side apply as field manager ``osc-gitops`` *without* force, so that an object
        of that name someone else made is never taken over: any field of it another manager
        set to another value is a conflict (409, :class:`KubeConflict` naming the fields).

        Returns the server's answer (the created object, with its resourceVersion) so a cache
        can write it through before the watch event arrives."""
        return self._apply(kind, namespace, name, body, force=False)

    def replace_managed(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> Any:
        """Make the fields we manage equal ``body``: a server-side apply as field manager
        ``osc-gitops`` with force. What it states becomes ours (a field someone changed since,
        drift, is set back and ours again); a field we stated before and no longer state is
        removed unless another manager owns it too; every other field (KubeVirt's
        ``firmware``, ``machine``, ``architecture``, another controller's label, status) is
        left as it is. No read, no resourceVersion: the API server merges.

        Returns the object as the server has it afterwards."""
        return self._apply(kind, namespace, name, body, force=True)

    def _apply(
        self, kind: str, namespace: str, name: str, body: dict[str, Any], *, force: bool
    ) -> Any:
        check_writable_kind(kind)
        k = KINDS[kind]
        meta = body.get("metadata") or {}
        applied = {
            "apiVersion": k.api_version,
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
            },
            "spec": body.get("spec") or {},
        }
        query = {"fieldManager": FIELD_MANAGER, "force": "true" if force else None}
        return self._request(
            "PATCH",
            k.path(namespace, name),
            query=query,
            body=applied,
            content_type=APPLY_PATCH,
        )

    def annotate(
        self, kind: str, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> Any:
        """Set (``None``: remove) these annotations with one merge patch, nothing else; used
        for the rolling update's state (``rollout.osc.io/*``), which is not a managed field.
        Returns the object as the server has it afterwards."""
        check_writable_kind(kind)
        patch = {"metadata": {"annotations": dict(annotations)}}
        return self._request(
            "PATCH",
            KINDS[kind].path(namespace, name),
            body=patch,
            content_type="application/merge-patch+json",
        )

    def restart_vm(self, namespace: str, name: str) -> Any:
        """Restart a VirtualMachine: KubeVirt's ``restart`` subresource, what ``virtctl
        restart`` calls (``PUT /apis/subresources.kubevirt.io/v1/namespaces/NS/virtualmachines/
        NAME/restart``): KubeVirt stops the running instance and starts a new one from the VM's
        current template. A changed template is never applied to a running VM otherwise."""
        path = f"/apis/{VM_SUBRESOURCES}/namespaces/{namespace}/virtualmachines/{name}/restart"
        return self._request("PUT", path, body={})

    def delete(self, kind: str, namespace: str, name: str) -> Any:
        """Delete; an object already gone (404) is fine (returns ``None`` then).

        Otherwise returns the server's answer: the deleted object (still carrying
        ``deletionTimestamp`` when finalizers keep it alive) or a ``Status``."""
        check_writable_kind(kind)
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
            target=close_on_stop, args=(stop, done, current), daemon=True, name="kube-watch-stop"
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
        status = StatusReporter(on_status)
        state = _WatchState(resource_version, backoff[0])
        while not stop.is_set():
            try:
                if state.rv is None:
                    items, state.rv = self.list_raw(kind, None, label_selector)
                    if on_list is not None:
                        on_list(items, state.rv)
                resp = self._request(
                    "GET",
                    path,
                    query={
                        "watch": "true",
                        "allowWatchBookmarks": "true",
                        "resourceVersion": state.rv,
                        "labelSelector": label_selector,
                        "fieldSelector": self.field_selector(kind),
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
                    self._follow(resp, path, state, on_event, stop, backoff[0])
                finally:
                    current.clear()
                    resp.release_conn()
                    status(False)
                state.delay = backoff[0]
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                status(False)
                if stop.is_set():
                    break
                log.warning("watch %s%s broke (%s); resuming", self.server, path, _root_cause(exc))
                stop.wait(state.delay)
                state.delay = min(state.delay * 2, backoff[1])
            except KubeError as exc:
                status(False)
                if stop.is_set():
                    break
                if isinstance(exc, KubeGone):
                    state.rv = None
                    on_event("RELIST", {})
                    continue
                log.warning("watch %s: %s; retrying in %.1fs", path, exc, state.delay)
                stop.wait(state.delay)
                state.delay = min(state.delay * 2, backoff[1])

    def _follow(
        self,
        resp: Any,
        path: str,
        state: _WatchState,
        on_event: Callable[[str, dict[str, Any]], None],
        stop: threading.Event,
        first_delay: float,
    ) -> None:
        """Hand one watch stream's events to ``on_event`` until it ends or ``stop`` is set,
        keeping ``state.rv`` at the last version seen; a 410 (the version was compacted) asks
        for a new list (``RELIST``, ``state.rv = None``). Every event resets the backoff."""
        for event in watch_events(resp):
            etype = event.get("type")
            obj = event.get("object") or {}
            if etype == "ERROR":
                if obj.get("code") == 410:
                    state.rv = None
                    on_event("RELIST", {})
                    return
                raise kube_error(
                    f"Kubernetes API server {self.server}: watch {path} failed: "
                    f"{obj.get('message')}",
                    obj.get("code"),
                )
            new_rv = (obj.get("metadata") or {}).get("resourceVersion")
            if new_rv:
                state.rv = new_rv
            if etype != "BOOKMARK":
                on_event(str(etype), obj)
            state.delay = first_delay
            if stop.is_set():
                return


@dataclass
class _WatchState:
    """Where a watch loop is: the resourceVersion to resume from (``None``: list first) and the
    wait before its next attempt."""

    rv: str | None
    delay: float


def _namespaces(namespaces: Sequence[str] | None) -> list[str | None]:
    if not namespaces:
        return [None]
    return list(dict.fromkeys(namespaces))


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
