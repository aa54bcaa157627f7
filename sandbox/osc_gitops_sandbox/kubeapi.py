"""A small, wire-compatible Kubernetes API server for tests, the demo and benchmarks.

No kube-apiserver can run on the build machines (and kind needs privileged Docker), so the
official ``kubernetes`` Python client and ``kubectl`` talk to this emulator instead. It speaks
the same HTTP/JSON as the real server for the subset osc-gitops uses, so the adapter code under
test is the production code path, unchanged:

- discovery (``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>[/<v>]``) in the legacy
  form, which kubectl accepts when its aggregated-discovery ``Accept`` is answered with plain
  ``application/json``; ``/openapi/*`` answers 404 (kubectl then skips client-side validation
  when given ``--validate=false``);
- CRUD, merge / strategic-merge / JSON patch (strategic merge is treated as RFC 7386 merge
  patch: we serve no schema with patch strategies, and osc-gitops never relies on list merge
  keys), server-set ``uid``/``resourceVersion``/``creationTimestamp``/``generation``;
- label and field selectors (:mod:`osc_gitops_sandbox.kube_selectors`), ``limit``/``continue``
  pagination, chunked watch with bookmarks, resume and ``410 Gone`` after :meth:`compact`;
- errors as ``kind: Status`` documents with ``reason``/``code``/``message``/``details``;
- :class:`Faults` to inject 5xx/429/403 answers, delays and dropped watch streams.

Deliberate simplifications (documented so nobody mistakes them for Kubernetes behaviour):
deletes are immediate (no finalizers or graceful deletion; deleting a namespace deletes its
objects at once), a ``continue`` token lists the *current* state after the last key (the real
server serves the snapshot of the first page; both expire after compaction), no admission, no
defaulting beyond metadata, authentication is an optional static bearer token.

Adding a kind is one :class:`ResourceType` line in :data:`RESOURCE_TYPES`.

Why one long module: it is a test double, not product code, and its parts (the versioned
store, watch history, selectors applied to it, the HTTP handler that maps verbs onto it) share
one lock and one event history; split across files they would have to expose that lock and
history to each other. Selectors and TLS already live in their own modules.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from osc_gitops_sandbox.kube_selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    label_value_errors,
    parse_field_selector,
    parse_label_selector,
)

__all__ = [
    "RESOURCE_TYPES",
    "ApiError",
    "ApiExtension",
    "Faults",
    "KubeApiServer",
    "ResourceType",
]


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource: everything discovery, routing and validation need."""

    group: str  # "" = core
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    fields: frozenset[str] = frozenset()
    """Extra field-selector fields beyond ``metadata.name``/``metadata.namespace``."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def field_selectors(self) -> frozenset[str]:
        return self.fields | {"metadata.name", "metadata.namespace"}


_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("ns",), frozenset({"status.phase"})),
    ResourceType(
        "", "v1", "pods", "Pod", True, ("po",), frozenset({"spec.nodeName", "status.phase"})
    ),
    ResourceType("", "v1", "nodes", "Node", False, ("no",)),
    ResourceType("kubevirt.io", "v1", "virtualmachines", "VirtualMachine", True, ("vm", "vms")),
    ResourceType(
        "kubevirt.io",
        "v1",
        "virtualmachineinstances",
        "VirtualMachineInstance",
        True,
        ("vmi", "vmis"),
        frozenset({"status.phase", "status.nodeName"}),
    ),
    ResourceType(
        "k8s.cni.cncf.io",
        "v1",
        "network-attachment-definitions",
        "NetworkAttachmentDefinition",
        True,
        ("net-attach-def",),
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, ("netpol",)),
)

DEFAULT_HISTORY = 10_000
"""Watch events kept for resume; older resourceVersions answer 410 Gone (as etcd compaction)."""

Listener = Callable[[str, str, dict[str, Any]], None]
"""``listener(event type, kind, object)``, called after each stored change (see
:meth:`KubeApiServer.subscribe`)."""


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


class Faults:
    """Failure injection for reliability tests; thread-safe, shared by all requests.

    - :meth:`fail` — the next ``count`` matching requests get ``status`` (500, 503, 429 with
      ``Retry-After``, 403 with a real-looking Forbidden message, ...) instead of being served;
    - :meth:`delay` — matching requests sleep ``seconds`` before being served (``count`` times,
      or forever when ``count`` is ``None``);
    - :meth:`drop_watches` — every open watch stream is closed abruptly (no terminating chunk),
      as when a load balancer or the apiserver dies mid-stream;
    - :meth:`clear` — forget all injected faults.

    A request matches when ``method`` (if given) equals its HTTP method and ``path_contains``
    (if given) is a substring of its path (query string included).
    """

    def __init__(self, on_drop: Callable[[], None] | None = None) -> None:
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self._failures: list[dict[str, Any]] = []
        self._delays: list[dict[str, Any]] = []
        self._drop_generation = 0

    def fail(
        self,
        count: int = 1,
        status: int = 500,
        *,
        retry_after: int | None = None,
        method: str | None = None,
        path_contains: str | None = None,
        message: str | None = None,
    ) -> None:
        with self._lock:
            self._failures.append(
                {
                    "count": count,
                    "status": status,
                    "retry_after": retry_after,
                    "method": method,
                    "path": path_contains,
                    "message": message,
                }
            )

    def delay(
        self,
        seconds: float,
        *,
        count: int | None = None,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        with self._lock:
            self._delays.append(
                {"seconds": seconds, "count": count, "method": method, "path": path_contains}
            )

    def drop_watches(self) -> None:
        with self._lock:
            self._drop_generation += 1
        if self._on_drop is not None:
            self._on_drop()  # wake idle watches so they drop now, not at their next poll

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
            self._delays.clear()

    @property
    def drop_generation(self) -> int:
        return self._drop_generation

    @staticmethod
    def _matches(rule: dict[str, Any], method: str, path: str) -> bool:
        if rule["method"] and rule["method"].upper() != method:
            return False
        return not (rule["path"] and rule["path"] not in path)

    def take_failure(self, method: str, path: str) -> dict[str, Any] | None:
        with self._lock:
            for rule in self._failures:
                if rule["count"] > 0 and self._matches(rule, method, path):
                    rule["count"] -= 1
                    return dict(rule)
            self._failures = [r for r in self._failures if r["count"] > 0]
        return None

    def take_delay(self, method: str, path: str) -> float:
        with self._lock:
            for rule in self._delays:
                if (rule["count"] is None or rule["count"] > 0) and self._matches(
                    rule, method, path
                ):
                    if rule["count"] is not None:
                        rule["count"] -= 1
                    return float(rule["seconds"])
        return 0.0


class ApiError(Exception):
    """An error answered as a ``kind: Status`` document."""

    REASONS = {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        410: "Gone",
        415: "UnsupportedMediaType",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
    }

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or self.REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _group_resource(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def _not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        404,
        f'{_group_resource(rt)} "{name}" not found',
        details={"name": name, "group": rt.group, "kind": rt.plural},
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class _Stored:
    """An object as stored: the dict is never mutated after storing (updates replace it), so
    lists and watches can share it, and ``raw`` (its JSON) is reused for every list."""

    obj: dict[str, Any]
    raw: bytes
    labels: dict[str, str]


@dataclass(slots=True)
class _Event:
    rv: int
    rt: ResourceType
    type: str
    stored: _Stored

    @property
    def namespace(self) -> str:
        return str(self.stored.obj["metadata"].get("namespace", ""))


def _node_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("nodeName") or "")


def _node_selected(rt: ResourceType, fields: FieldSelector) -> str | None:
    """The node a pod list selects with ``spec.nodeName=<node>`` (``None``: no such term)."""
    if rt.kind != "Pod":
        return None
    for req in fields.requirements:
        if req.field == "spec.nodeName" and not req.negate:
            return req.value
    return None


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value, never mutates ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _strip_directives(patch: Any) -> Any:
    """Drop strategic-merge directives (``$setElementOrder/...``, ``$patch``, ``$retainKeys``,
    ``$deleteFromPrimitiveList/...``) that ``kubectl apply`` sends: we apply strategic merge
    patches as plain merge patches (lists replaced whole), which is enough for our kinds."""
    if isinstance(patch, dict):
        return {k: _strip_directives(v) for k, v in patch.items() if not k.startswith("$")}
    if isinstance(patch, list):
        return [_strip_directives(v) for v in patch]
    return patch


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test) on a deep copy of ``doc``."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations")
    doc = copy.deepcopy(doc)

    def parent(path: str) -> tuple[Any, str]:
        parts = _pointer(path)
        if not parts:
            raise ApiError(422, "cannot operate on the document root")
        cur = doc
        for part in parts[:-1]:
            try:
                cur = cur[int(part)] if isinstance(cur, list) else cur[part]
            except (KeyError, IndexError, ValueError) as exc:
                raise ApiError(422, f"path {path!r} does not exist") from exc
        return cur, parts[-1]

    def get(path: str) -> Any:
        cont, key = parent(path)
        try:
            return cont[int(key)] if isinstance(cont, list) else cont[key]
        except (KeyError, IndexError, ValueError) as exc:
            raise ApiError(422, f"path {path!r} does not exist") from exc

    def remove(path: str) -> Any:
        cont, key = parent(path)
        try:
            return cont.pop(int(key)) if isinstance(cont, list) else cont.pop(key)
        except (KeyError, IndexError, ValueError) as exc:
            raise ApiError(422, f"unable to remove nonexistent key {path!r}") from exc

    def add(path: str, value: Any) -> None:
        cont, key = parent(path)
        if isinstance(cont, list):
            if key == "-":
                cont.append(value)
            else:
                cont.insert(int(key), value)
        elif isinstance(cont, dict):
            cont[key] = value
        else:
            raise ApiError(422, f"path {path!r} does not exist")

    for op in ops:
        kind = op.get("op")
        path = op.get("path", "")
        if kind == "add":
            add(path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            remove(path)
        elif kind == "replace":
            remove(path)
            add(path, copy.deepcopy(op.get("value")))
        elif kind == "move":
            add(path, remove(op["from"]))
        elif kind == "copy":
            add(path, copy.deepcopy(get(op["from"])))
        elif kind == "test":
            if get(path) != op.get("value"):
                raise ApiError(422, f"the server rejected our request: test failed at {path!r}")
        else:
            raise ApiError(400, f"unknown json patch operation {kind!r}")
    return doc


class KubeApiServer:
    """The emulator. Use as a context manager, or :meth:`start` / :meth:`stop`.

    ``port=0`` picks a free port; ``tls=(cert_file, key_file)`` serves HTTPS; ``token`` makes
    every request require ``Authorization: Bearer <token>`` (401 otherwise).
    ``bookmark_interval`` is how often an idle watch with ``allowWatchBookmarks`` gets a
    BOOKMARK (the real server: about a minute; short here so tests see them).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        tls: tuple[str, str] | None = None,
        token: str | None = None,
        history: int = DEFAULT_HISTORY,
        bookmark_interval: float = 1.0,
        resource_types: Iterable[ResourceType] = RESOURCE_TYPES,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.token = token
        self.history = history
        self.bookmark_interval = bookmark_interval
        self.faults = Faults(on_drop=self.wake_watchers)
        self.types: tuple[ResourceType, ...] = tuple(resource_types)
        self._by_path: dict[tuple[str, str, str], ResourceType] = {
            (rt.group, rt.version, rt.plural): rt for rt in self.types
        }
        self._by_kind: dict[str, ResourceType] = {rt.kind: rt for rt in self.types}
        self._lock = threading.Condition(threading.RLock())
        self._store: dict[str, dict[tuple[str, str], _Stored]] = {rt.kind: {} for rt in self.types}
        self._pods_on: dict[str, set[tuple[str, str]]] = {}
        """Pod keys by ``spec.nodeName``: a real API server serves a node's pods (the kubelet's
        and a node agent's ``fieldSelector=spec.nodeName=...``) from an index of its watch
        cache, not by scanning every pod."""
        self._rv = 0
        self._events: list[_Event] = []
        self._compacted_rv = 0  # requests for an older resourceVersion get 410
        self._lost_rv = 0  # events up to here are gone from memory
        self._watch_pos: dict[int, int] = {}  # live watch -> last resourceVersion it consumed
        self._stopping = False
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._listeners: list[tuple[frozenset[str], Listener]] = []
        self._extensions: dict[tuple[str, str], ApiExtension] = {}
        self.add_objects([{"kind": "Namespace", "metadata": {"name": "default"}}])
        self.requests = 0
        """Number of HTTP requests served (useful to assert pagination or retries happened)."""
        self.watches_started = 0
        """Watches that reached their starting point (events after it will be delivered);
        tests wait on it instead of sleeping."""

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def start(self) -> KubeApiServer:
        server = self

        class Handler(_Handler):
            api = server

        httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        httpd.daemon_threads = True
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.tls[0], self.tls[1])
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._stopping = False
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            daemon=True,
            name=f"kubeapi:{self.port}",
        )
        self._thread.start()
        for extension in self._extensions.values():
            extension.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection (watches included)."""
        for extension in self._extensions.values():
            extension.stop()
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        with self._conns_lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def write_kubeconfig(
        self,
        path: str | Path,
        context: str = "sandbox",
        *,
        ca_file: str | None = None,
        token: str | None = None,
    ) -> str:
        """Write a kubeconfig pointing at this server (``ca_file`` for TLS) and return its path."""
        cluster: dict[str, Any] = {"server": self.url}
        if ca_file:
            cluster["certificate-authority"] = str(ca_file)
        # Always a token: with an empty user, kubectl over HTTPS prompts for a username.
        user: dict[str, Any] = {"token": token or self.token or "sandbox"}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": user}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "preferences": {},
        }
        Path(path).write_text(json.dumps(config, indent=2))
        return str(path)

    # ------------------------------------------------------------------ store (no HTTP)

    def resource_type(self, kind_or_plural: str) -> ResourceType:
        """The :class:`ResourceType` for a kind (``Pod``) or plural (``pods``)."""
        if kind_or_plural in self._by_kind:
            return self._by_kind[kind_or_plural]
        for rt in self.types:
            if kind_or_plural in (rt.plural, _group_resource(rt)):
                return rt
        raise KeyError(f"unknown kind {kind_or_plural!r}")

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion (one counter for all kinds, as etcd)."""
        return self._rv

    def subscribe(self, kinds: Iterable[str], listener: Listener) -> None:
        """Call ``listener(event type, kind, object)`` after every stored change of ``kinds``
        (HTTP and in-process writes alike), with the store's lock held: a listener must only
        note the change and wake its own thread (what a controller's informer does), never
        write back from inside the call."""
        with self._lock:
            self._listeners.append((frozenset(kinds), listener))

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling ``listener`` (no error if it was not subscribed)."""
        with self._lock:
            self._listeners = [(k, fn) for k, fn in self._listeners if fn != listener]

    def add_extension(self, extension: ApiExtension) -> None:
        """Serve ``extension``'s group/version (routing and discovery); it is started and
        stopped with this server."""
        with self._lock:
            self._extensions[(extension.group, extension.version)] = extension
        if self._httpd is not None:
            extension.start()

    def wait_for_change(self, resource_version: int, timeout: float) -> int:
        """Block until the global resourceVersion passes ``resource_version`` (or ``timeout``
        seconds, or :meth:`stop`); returns the current one."""
        with self._lock:
            self._lock.wait_for(
                lambda: self._rv > resource_version or self._stopping, timeout=timeout
            )
            return self._rv

    def replace_status(
        self, rt: ResourceType, namespace: str, name: str, status: Any,
        resource_version: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Replace the object's ``status`` only (the ``/status`` subresource), guarded by
        ``resource_version`` when given; no new resourceVersion when nothing changed."""
        with self._lock:
            current = self._current(rt, namespace, name)
            body = {
                **current.obj,
                "status": status,
                "metadata": {**current.obj["metadata"], "resourceVersion": resource_version},
            }
            if status is None:
                body.pop("status")
            return self._replace(rt, current, body)

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _store_obj(self, rt: ResourceType, obj: dict[str, Any], event: str | None) -> _Stored:
        meta = obj["metadata"]
        stored = _Stored(obj, _dumps(obj), dict(meta.get("labels") or {}))
        key = (meta.get("namespace", ""), meta["name"])
        if rt.kind == "Pod":
            old = self._store[rt.kind].get(key)
            if old is not None:
                self._pods_on.get(_node_of(old.obj), set()).discard(key)
            if event != "DELETED":
                self._pods_on.setdefault(_node_of(obj), set()).add(key)
        if event == "DELETED":
            self._store[rt.kind].pop(key, None)
        else:
            self._store[rt.kind][key] = stored
        if event is not None:
            self._events.append(_Event(int(meta["resourceVersion"]), rt, event, stored))
            if len(self._events) > self.history * 2:
                self._trim(self.history)
            self._lock.notify_all()
            for kinds, listener in self._listeners:
                if rt.kind in kinds:
                    listener(event, rt.kind, obj)
        return stored

    def _trim(self, keep: int) -> None:
        """Hard memory bound: drop all but the last ``keep`` events. A live watch that had
        not consumed a dropped event gets 410 (as a real server ends a too-slow watcher)."""
        drop = len(self._events) - keep
        if drop > 0:
            self._lost_rv = self._events[drop - 1].rv
            self._compacted_rv = max(self._compacted_rv, self._lost_rv)
            del self._events[:drop]

    def compact(self, keep: int = 0) -> None:
        """Like etcd compaction: watches and continue tokens *requested* with an older
        resourceVersion than the last ``keep`` events answer 410 Gone / Expired.

        Watches already running are not disturbed (the real apiserver feeds them from its
        watch cache): events they have not consumed yet are kept for them."""
        with self._lock:
            if keep == 0 or keep >= len(self._events):
                boundary = self._rv if keep == 0 else self._compacted_rv
            else:
                boundary = self._events[-keep - 1].rv
            self._compacted_rv = max(self._compacted_rv, boundary)
            floor = min([boundary, *self._watch_pos.values()])
            drop = bisect.bisect_right(self._events, floor, key=lambda e: e.rv)
            if drop:
                self._lost_rv = max(self._lost_rv, self._events[drop - 1].rv)
                del self._events[:drop]

    def _new_metadata(self, rt: ResourceType, obj: dict[str, Any], rv: int) -> dict[str, Any]:
        obj = dict(obj)
        meta = dict(obj.get("metadata") or {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = str(rv)
        meta["generation"] = 1
        meta.pop("managedFields", None)
        if not rt.namespaced:
            meta.pop("namespace", None)
        obj["metadata"] = meta
        if rt.kind == "Namespace":
            obj.setdefault("status", {"phase": "Active"})
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        return obj

    def add_objects(self, objects: Iterable[Mapping[str, Any]]) -> int:
        """Bulk-insert objects without HTTP or validation (10,000 pods in well under a second).

        ``kind`` picks the resource type; missing namespaces are created. One ADDED event per
        object is recorded so watches see them. Returns how many objects were added.
        """
        count = 0
        with self._lock:
            ns_store = self._store.get("Namespace")
            for raw in objects:
                rt = self.resource_type(str(raw["kind"]))
                meta = raw.get("metadata") or {}
                if rt.namespaced:
                    namespace = meta.get("namespace") or "default"
                    if ns_store is not None and ("", namespace) not in ns_store:
                        ns = self._new_metadata(
                            self._by_kind["Namespace"],
                            {"metadata": {"name": namespace}, "status": {"phase": "Active"}},
                            self._next_rv(),
                        )
                        self._store_obj(self._by_kind["Namespace"], ns, "ADDED")
                    if meta.get("namespace") != namespace:
                        raw = {**raw, "metadata": {**meta, "namespace": namespace}}
                obj = self._new_metadata(rt, dict(raw), self._next_rv())
                self._store_obj(rt, obj, "ADDED")
                count += 1
        return count

    def seed(self, objects: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> int:
        """Seed from ``kubectl get -o yaml``-style data: a ``kind: List`` (``items``), one
        object, or an iterable of either. Server-set fields in the input are replaced."""
        if isinstance(objects, Mapping):
            objects = [objects]
        flat: list[Mapping[str, Any]] = []
        for obj in objects:
            if obj is None:
                continue
            if str(obj.get("kind", "")).endswith("List") and "items" in obj:
                kind = str(obj.get("kind"))
                for item in obj.get("items") or []:
                    if "kind" not in item and kind != "List":
                        item = {**item, "kind": kind[: -len("List")]}
                    flat.append(item)
            else:
                flat.append(obj)
        cleaned = []
        for obj in flat:
            meta = {
                k: v
                for k, v in (obj.get("metadata") or {}).items()
                if k not in ("resourceVersion", "managedFields", "generation")
            }
            cleaned.append({**obj, "metadata": meta})
        return self.add_objects(cleaned)

    def seed_from_file(self, path: str | Path) -> int:
        """Seed from a YAML or JSON file (multi-document YAML or a ``kind: List``)."""
        from ruamel.yaml import YAML

        text = Path(path).read_text()
        yaml = YAML(typ="safe", pure=True)
        docs = [d for d in yaml.load_all(text) if d is not None]
        return self.seed(docs)

    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Deep copies of the stored objects of ``kind`` (for assertions in tests)."""
        rt = self.resource_type(kind)
        with self._lock:
            return [
                copy.deepcopy(s.obj)
                for (ns, _), s in sorted(self._store[rt.kind].items())
                if namespace is None or ns == namespace
            ]

    def get_object(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        rt = self.resource_type(kind)
        with self._lock:
            stored = self._store[rt.kind].get((namespace or "", name))
            return copy.deepcopy(stored.obj) if stored else None

    # ------------------------------------------------------------------ API operations

    def _validate(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        causes: list[dict[str, str]] = []
        if not name:
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: name or generateName is required",
                    "field": "metadata.name",
                }
            )
        else:
            errs = (
                dns1123_label_errors(name)
                if rt.kind == "Namespace"
                else (dns1123_subdomain_errors(name))
            )
            causes += [
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {name!r}: {e}",
                    "field": "metadata.name",
                }
                for e in errs
            ]
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": "labels must be a map",
                    "field": "metadata.labels",
                }
            )
            labels = {}
        for key, value in labels.items():
            for e in label_key_errors(str(key)):
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {key!r}: {e}",
                        "field": "metadata.labels",
                    }
                )
            if not isinstance(value, str):
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {value!r}: must be a string",
                        "field": f"metadata.labels[{key}]",
                    }
                )
                continue
            for e in label_value_errors(value):
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {value!r}: {e}",
                        "field": f"metadata.labels[{key}]",
                    }
                )
        if causes:
            summary = "; ".join(f"{c['field']}: {c['message']}" for c in causes)
            raise ApiError(
                422,
                f'{rt.kind} "{name}" is invalid: {summary}',
                details={"name": name, "group": rt.group, "kind": rt.kind, "causes": causes},
            )

    def _check_namespace(self, rt: ResourceType, namespace: str) -> None:
        if rt.namespaced and ("", namespace) not in self._store.get("Namespace", {}):
            raise ApiError(
                404,
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )

    def create(self, rt: ResourceType, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        meta = dict(body.get("metadata") or {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request",
                )
            meta["namespace"] = namespace
        for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            meta.pop(key, None)
        body = {**body, "metadata": meta}
        self._validate(rt, body)
        with self._lock:
            self._check_namespace(rt, namespace)
            store_key = (namespace if rt.namespaced else "", meta["name"])
            if store_key in self._store[rt.kind]:
                raise ApiError(
                    409,
                    f'{_group_resource(rt)} "{meta["name"]}" already exists',
                    reason="AlreadyExists",
                    details={"name": meta["name"], "group": rt.group, "kind": rt.plural},
                )
            obj = self._new_metadata(rt, body, self._next_rv())
            return self._store_obj(rt, obj, "ADDED").obj

    def _current(self, rt: ResourceType, namespace: str, name: str) -> _Stored:
        stored = self._store[rt.kind].get((namespace if rt.namespaced else "", name))
        if stored is None:
            raise _not_found(rt, name)
        return stored

    def update(
        self, rt: ResourceType, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """PUT semantics: replace the object; a stale ``resourceVersion`` is a 409 Conflict."""
        with self._lock:
            current = self._current(rt, namespace, name)
            return self._replace(rt, current, body)

    def _replace(self, rt: ResourceType, current: _Stored, body: dict[str, Any]) -> dict[str, Any]:
        old_meta = current.obj["metadata"]
        meta = dict(body.get("metadata") or {})
        name = old_meta["name"]
        if meta.get("name", name) != name:
            raise ApiError(
                400,
                f"the name of the object ({meta.get('name')}) does not match the "
                f"name on the URL ({name})",
            )
        sent_rv = meta.get("resourceVersion")
        if sent_rv not in (None, "") and str(sent_rv) != old_meta["resourceVersion"]:
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on {_group_resource(rt)} "{name}": the object '
                "has been modified; please apply your changes to the latest version and try again",
                details={"name": name, "group": rt.group, "kind": rt.plural},
            )
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = old_meta["namespace"]
        meta["uid"] = old_meta["uid"]
        meta["creationTimestamp"] = old_meta["creationTimestamp"]
        generation = int(old_meta.get("generation", 1))
        if body.get("spec") != current.obj.get("spec"):
            generation += 1
        meta["generation"] = generation
        meta.pop("managedFields", None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        obj = {**body, "metadata": meta, "apiVersion": rt.api_version, "kind": rt.kind}
        self._validate(rt, obj)
        if obj == current.obj:
            return current.obj  # no-op update: no new resourceVersion, no event (as upstream)
        meta["resourceVersion"] = str(self._next_rv())
        return self._store_obj(rt, obj, "MODIFIED").obj

    def patch(
        self, rt: ResourceType, namespace: str, name: str, content_type: str, patch: Any
    ) -> dict[str, Any]:
        with self._lock:
            current = self._current(rt, namespace, name)
            if content_type == "application/json-patch+json":
                new = json_patch(current.obj, patch)
            elif content_type in (
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ):
                if not isinstance(patch, dict):
                    raise ApiError(400, "merge patch body must be a JSON object")
                if content_type == "application/strategic-merge-patch+json":
                    patch = _strip_directives(patch)
                new = merge_patch(current.obj, patch)
            else:
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: application/json-patch+json, application/merge-patch+json, "
                    f"application/strategic-merge-patch+json (got {content_type})",
                )
            if not isinstance(new, dict):
                raise ApiError(422, "patch result is not an object")
            return self._replace(rt, current, new)

    def delete(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self._lock:
            current = self._current(rt, namespace, name)
            if rt.kind == "Namespace":
                for other in self.types:
                    if not other.namespaced:
                        continue
                    for (ns, child), _ in list(self._store[other.kind].items()):
                        if ns == name:
                            self.delete(other, ns, child)
            meta = {**current.obj["metadata"], "resourceVersion": str(self._next_rv())}
            obj = {**current.obj, "metadata": meta}
            return self._store_obj(rt, obj, "DELETED").obj

    def list_raw(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int = 0,
        cont: str | None = None,
    ) -> bytes:
        """A ``<Kind>List`` as bytes, built by joining each object's cached JSON."""
        start_key: tuple[str, str] | None = None
        if cont:
            try:
                token = json.loads(base64.urlsafe_b64decode(cont.encode()))
                token_rv = int(token["rv"])
                start_key = (str(token["start"][0]), str(token["start"][1]))
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise ApiError(400, f"continue key is not valid: {exc}") from exc
        with self._lock:
            if cont and token_rv < self._compacted_rv:
                raise ApiError(
                    410,
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                    reason="Expired",
                )
            rv = token_rv if cont else self._rv
            items = self._store[rt.kind]
            node = _node_selected(rt, fields)
            keys = sorted(items if node is None else self._pods_on.get(node, ()))
            if start_key is not None:
                keys = keys[bisect.bisect_right(keys, start_key) :]
            chunks: list[bytes] = []
            next_key: tuple[str, str] | None = None
            remaining = 0
            for key in keys:
                if namespace is not None and key[0] != namespace:
                    continue
                stored = items[key]
                if not labels.empty and not labels.matches(stored.labels):
                    continue
                if fields.requirements and not fields.matches(stored.obj):
                    continue
                if limit and len(chunks) >= limit:
                    remaining += 1
                    continue
                chunks.append(stored.raw)
                next_key = key
            meta: dict[str, Any] = {"resourceVersion": str(rv)}
            if limit and remaining:
                assert next_key is not None
                meta["continue"] = base64.urlsafe_b64encode(
                    _dumps({"rv": rv, "start": list(next_key)})
                ).decode()
                meta["remainingItemCount"] = remaining
        head = _dumps({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(chunks) + b"]}"

    # ------------------------------------------------------------------ watch

    def watch_events(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: str | None,
        timeout: float,
        bookmarks: bool,
    ) -> Iterator[bytes]:
        """Yield watch event lines until ``timeout``, a dropped-stream fault or :meth:`stop`.

        Argument errors raise :class:`ApiError` here, before any header is sent; a dropped
        stream raises :class:`ConnectionAbortedError` from the generator so the handler closes
        the socket without the terminating chunk.
        """
        if resource_version not in (None, "", "0"):
            try:
                int(str(resource_version))
            except ValueError:
                raise ApiError(400, f"invalid resourceVersion {resource_version!r}") from None
        return self._watch_gen(rt, namespace, labels, fields, resource_version, timeout, bookmarks)

    def _watch_gen(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: str | None,
        timeout: float,
        bookmarks: bool,
    ) -> Iterator[bytes]:
        deadline = time.monotonic() + timeout
        drop_gen = self.faults.drop_generation

        def wanted(stored: _Stored) -> bool:
            if namespace is not None and stored.obj["metadata"].get("namespace") != namespace:
                return False
            if not labels.empty and not labels.matches(stored.labels):
                return False
            return not (fields.requirements and not fields.matches(stored.obj))

        def line(type_: str, raw: bytes) -> bytes:
            return b'{"type":"' + type_.encode() + b'","object":' + raw + b"}\n"

        with self._lock:
            gone: ApiError | None = None
            initial: list[bytes] = []
            if resource_version in (None, "", "0"):
                # No resourceVersion: synthetic ADDED for the current state, then changes.
                initial = [
                    line("ADDED", s.raw)
                    for _, s in sorted(self._store[rt.kind].items())
                    if wanted(s)
                ]
                last = self._rv
            else:
                last = int(str(resource_version))
                if last < self._compacted_rv:
                    gone = ApiError(
                        410,
                        f"too old resource version: {last} ({self._compacted_rv + 1})",
                        reason="Expired",
                    )
            if gone is None:
                self.watches_started += 1
                token = object()
                self._watch_pos[id(token)] = last
        if gone is not None:
            yield line("ERROR", _dumps(gone.status()))
            return
        try:
            yield from initial
            last_bookmark = time.monotonic()
            while True:
                batch: list[bytes] = []
                end = False
                with self._lock:
                    while True:
                        if self._stopping:
                            return
                        if self.faults.drop_generation != drop_gen:
                            raise ConnectionAbortedError("watch dropped by fault injection")
                        if last < self._lost_rv:
                            gone = ApiError(
                                410, f"too old resource version: {last}", reason="Expired"
                            )
                            batch.append(line("ERROR", _dumps(gone.status())))
                            end = True
                            break
                        idx = bisect.bisect_right(self._events, last, key=lambda e: e.rv)
                        if idx < len(self._events):
                            for ev in self._events[idx:]:
                                if ev.rt is rt and wanted(ev.stored):
                                    batch.append(line(ev.type, ev.stored.raw))
                            last = self._events[-1].rv
                            self._watch_pos[id(token)] = last
                            if batch:
                                break
                        now = time.monotonic()
                        if now >= deadline:
                            return
                        if bookmarks and now - last_bookmark >= self.bookmark_interval:
                            last = max(last, self._rv)
                            self._watch_pos[id(token)] = last
                            mark = {
                                "kind": rt.kind,
                                "apiVersion": rt.api_version,
                                "metadata": {"resourceVersion": str(last)},
                            }
                            batch.append(line("BOOKMARK", _dumps(mark)))
                            last_bookmark = now
                            break
                        wait = deadline - now
                        if bookmarks:
                            wait = min(wait, self.bookmark_interval - (now - last_bookmark))
                        self._lock.wait(timeout=max(0.01, min(wait, 0.25)))
                yield b"".join(batch)  # outside the lock: a slow client blocks nobody
                if end:
                    return
        finally:
            with self._lock:
                self._watch_pos.pop(id(token), None)

    def wake_watchers(self) -> None:
        """Wake waiting watches (after a fault injection, so drops happen at once)."""
        with self._lock:
            self._lock.notify_all()

    # ------------------------------------------------------------------ discovery

    def discovery(self, path: str) -> dict[str, Any] | None:
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
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}
                ],
            }
        if path == "/api/v1":
            return self._resource_list("", "v1")
        groups: dict[str, list[str]] = {}
        for group, version in [*((rt.group, rt.version) for rt in self.types), *self._extensions]:
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
            return self._resource_list(parts[1], parts[2])
        return None

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources = [
            {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": _VERBS,
                "shortNames": list(rt.short_names),
            }
            for rt in self.types
            if rt.group == group and rt.version == version
        ]
        extension = self._extensions.get((group, version))
        if extension is not None:
            resources += extension.resources()
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler; routing and encoding only, logic lives in the server."""

    api: KubeApiServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every small response waits ~40 ms for a delayed ACK
    server_version = "osc-kubeapi/0.1"

    def setup(self) -> None:
        super().setup()
        with self.api._conns_lock:
            self.api._conns.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.api._conns_lock:
                self.api._conns.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests and the demo print their own diagnostics

    # -- plumbing

    def _send(
        self,
        code: int,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, code: int, obj: Any) -> None:
        self._send(code, _dumps(obj))

    def _send_error(self, err: ApiError) -> None:
        self._send(err.code, _dumps(err.status()), headers=err.headers)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        if not data:
            raise ApiError(400, "request body is empty")
        try:
            return json.loads(data)
        except ValueError:
            pass
        try:  # kubectl may send YAML for some verbs; accept it like the real server does
            from ruamel.yaml import YAML

            return YAML(typ="safe", pure=True).load(data.decode())
        except Exception as exc:
            raise ApiError(400, f"unable to decode request body: {exc}") from exc

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        api = self.api
        api.requests += 1
        try:
            if api.token is not None and (
                self.headers.get("Authorization") != f"Bearer {api.token}"
            ):
                self._drain()
                raise ApiError(401, "Unauthorized")
            delay = api.faults.take_delay(method, self.path)
            if delay:
                time.sleep(delay)
            failure = api.faults.take_failure(method, self.path)
            if failure is not None:
                self._drain()
                raise self._injected(failure, method)
            self._route(method)
        except ApiError as err:
            self._send_error(err)
        except (ConnectionError, BrokenPipeError, TimeoutError):
            self.close_connection = True
        except Exception as exc:  # a bug in the emulator: answer 500, keep serving
            self._send_error(ApiError(500, f"emulator error: {type(exc).__name__}: {exc}"))

    def _drain(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    def _injected(self, failure: dict[str, Any], method: str) -> ApiError:
        status = int(failure["status"])
        headers = {}
        if failure["retry_after"] is not None:
            headers["Retry-After"] = str(failure["retry_after"])
        message = failure["message"]
        if message is None:
            if status == 403:
                verb = {
                    "GET": "list" if "watch" not in self.path else "watch",
                    "POST": "create",
                    "PUT": "update",
                    "PATCH": "patch",
                    "DELETE": "delete",
                }[method]
                path = urlsplit(self.path).path.strip("/").split("/")
                resource = path[-1] if path else ""
                message = (
                    f'{resource} is forbidden: User "system:serviceaccount:osc:osc-gitops" '
                    f'cannot {verb} resource "{resource}" at the cluster scope'
                )
            elif status == 429:
                message = "Too many requests, please try again later."
            else:
                message = f"injected failure ({status})"
        return ApiError(status, message, headers=headers)

    def _route(self, method: str) -> None:
        api = self.api
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        if path.startswith("/openapi") or path in ("/", "/healthz", "/livez", "/readyz"):
            if path in ("/healthz", "/livez", "/readyz"):
                self._send(200, b"ok", content_type="text/plain")
                return
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        if method == "GET":
            doc = api.discovery(path)
            if doc is not None:
                self._send_json(200, doc)
                return
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        extension = api._extensions.get((group, version))
        if extension is not None:
            self._extension(extension, method, rest)
            return
        namespace: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and (group, version, rest[2]) in api._by_path
            and api._by_path[(group, version, rest[2])].namespaced
        ):
            namespace, rest = rest[1], rest[2:]
        rt = api._by_path.get((group, version, rest[0]))
        if rt is None or len(rest) > 3:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub not in (None, "status"):
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        if rt.namespaced and name is not None and namespace is None:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        ns = namespace or ""

        if method == "GET" and name is None:
            try:
                labels = parse_label_selector(query.get("labelSelector"))
                fields = parse_field_selector(query.get("fieldSelector"), rt.field_selectors)
            except SelectorError as exc:
                raise ApiError(400, str(exc)) from exc
            if (query.get("watch") or "").lower() in ("true", "1"):
                self._watch(rt, namespace, labels, fields, query)
                return
            limit = int(query.get("limit") or 0)
            raw = api.list_raw(rt, namespace, labels, fields, limit, query.get("continue"))
            self._send(200, raw)
        elif method == "GET":
            assert name is not None
            with api._lock:
                stored = api._current(rt, ns, name)
            self._send(200, stored.raw)
        elif method == "POST" and name is None:
            body = self._body()
            if rt.namespaced and namespace is None:
                raise ApiError(405, f"create {rt.plural} needs a namespace in the URL")
            self._check_kind(rt, body)
            self._send_json(201, api.create(rt, ns, body))
        elif method == "PUT" and name is not None:
            body = self._body()
            self._check_kind(rt, body)
            if sub == "status":
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
                self._send_json(200, api.replace_status(rt, ns, name, body.get("status"), sent_rv))
                return
            self._send_json(200, api.update(rt, ns, name, body))
        elif method == "PATCH" and name is not None:
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype == "application/apply-patch+yaml":
                self._drain()
                raise ApiError(
                    415,
                    "server-side apply is not supported by the osc-gitops "
                    "sandbox API server; use a merge or JSON patch",
                )
            self._send_json(200, api.patch(rt, ns, name, ctype, self._body()))
        elif method == "DELETE" and name is not None:
            self._drain()
            self._send_json(200, api.delete(rt, ns, name))
        else:
            self._drain()
            raise ApiError(
                405, f"method {method} is not supported on {path}", reason="MethodNotAllowed"
            )

    def _extension(self, extension: ApiExtension, method: str, rest: list[str]) -> None:
        namespace: str | None = None
        if len(rest) >= 2 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        length = int(self.headers.get("Content-Length") or 0)
        body = self._body() if length else None
        code, doc = extension.handle(method, namespace, rest, body)
        self._send(code, b"" if doc is None else _dumps(doc))

    @staticmethod
    def _check_kind(rt: ResourceType, body: Any) -> None:
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        kind = body.get("kind")
        if kind not in (None, rt.kind):
            raise ApiError(400, f"kind {kind!r} does not match the URL's resource {rt.plural}")

    def _watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        query: dict[str, str],
    ) -> None:
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = (query.get("allowWatchBookmarks") or "").lower() in ("true", "1")
        events = self.api.watch_events(
            rt, namespace, labels, fields, query.get("resourceVersion"), timeout, bookmarks
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            for chunk in events:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except ConnectionAbortedError:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
