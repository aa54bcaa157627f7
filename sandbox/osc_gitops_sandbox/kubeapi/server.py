"""A small, wire-compatible Kubernetes API server for tests, the demo and benchmarks.

No kube-apiserver can run on the build machines (and kind needs privileged Docker), so the
official ``kubernetes`` Python client and ``kubectl`` talk to this emulator instead. It speaks
the same HTTP/JSON as the real server for the subset osc-gitops uses, so the adapter code under
test is the production code path, unchanged:

- discovery (``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>[/<v>]``) in the legacy
  form, which kubectl accepts when its aggregated-discovery ``Accept`` is answered with plain
  ``application/json``; OpenAPI v3 (``/openapi/v3``) with server-side field validation
  (``fieldValidation``), so a plain ``kubectl apply`` validates; ``dryRun=All``;
- request bodies in JSON, YAML and, for ``v1`` Namespaces, protobuf (what ``kubectl create
  namespace`` sends); answers in JSON, or the ``Table`` ``kubectl get`` prints;
- CRUD, merge / strategic-merge / JSON patch (strategic merge is treated as RFC 7386 merge
  patch: we serve no schema with patch strategies, and osc-gitops never relies on list merge
  keys), server-set ``uid``/``resourceVersion``/``creationTimestamp``/``generation``;
- label and field selectors (:mod:`osc_gitops_sandbox.kubeapi.selectors`), ``limit``/``continue``
  pagination, chunked watch with bookmarks, resume and ``410 Gone`` after :meth:`compact`;
- errors as ``kind: Status`` documents with ``reason``/``code``/``message``/``details``;
- :class:`Faults` to inject 5xx/429/403 answers, delays and dropped watch streams.

Deliberate simplifications (documented so nobody mistakes them for Kubernetes behaviour):
deletes are immediate (no finalizers or graceful deletion; deleting a namespace deletes its
objects at once), a ``continue`` token lists the *current* state after the last key (the real
server serves the snapshot of the first page; both expire after compaction), no admission, no
defaulting beyond metadata (and a new pod's ``Pending`` phase), unknown fields are not pruned,
authentication is an optional static bearer token.

Adding a kind is one :class:`ResourceType` line in :data:`RESOURCE_TYPES`.

Where each part lives (one thing per module; this one starts and stops the HTTP server):

- :mod:`~osc_gitops_sandbox.kubeapi.resources` the kinds served,
:mod:`~osc_gitops_sandbox.kubeapi.status`
  the ``kind: Status`` errors, :mod:`~osc_gitops_sandbox.kubeapi.faults` failure injection;
- :mod:`~osc_gitops_sandbox.kubeapi.store` objects, resourceVersions and the verbs,
  :mod:`~osc_gitops_sandbox.kubeapi.watch` watch streams, :mod:`~osc_gitops_sandbox.kubeapi.patch`
  the patch formats, :mod:`~osc_gitops_sandbox.kubeapi.validation` what is validated,
  :mod:`~osc_gitops_sandbox.kubeapi.selectors` label and field selectors;
- :mod:`~osc_gitops_sandbox.kubeapi.discovery` discovery, :mod:`~osc_gitops_sandbox.kubeapi.openapi`
  OpenAPI v3 and field validation, :mod:`~osc_gitops_sandbox.kubeapi.tables` what ``kubectl get``
  prints, :mod:`~osc_gitops_sandbox.kubeapi.protobuf` protobuf bodies,
  :mod:`~osc_gitops_sandbox.kubeapi.handler` the HTTP handler,
  :mod:`~osc_gitops_sandbox.kubeapi.tls` certificates for HTTPS.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from collections.abc import Iterable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.kubeapi.discovery import ApiExtension, discovery
from osc_gitops_sandbox.kubeapi.faults import Faults
from osc_gitops_sandbox.kubeapi.handler import ApiHTTPServer
from osc_gitops_sandbox.kubeapi.patch import json_patch, merge_patch
from osc_gitops_sandbox.kubeapi.resources import RESOURCE_TYPES, ResourceType
from osc_gitops_sandbox.kubeapi.status import ApiError
from osc_gitops_sandbox.kubeapi.store import DEFAULT_HISTORY, Listener, ObjectStore

__all__ = [
    "DEFAULT_HISTORY",
    "RESOURCE_TYPES",
    "ApiError",
    "ApiExtension",
    "Faults",
    "KubeApiServer",
    "Listener",
    "ResourceType",
    "json_patch",
    "merge_patch",
]


class KubeApiServer(ObjectStore):
    """The emulator: the :class:`~osc_gitops_sandbox.kubeapi.store.ObjectStore` served over HTTP.
    Use as a context manager, or :meth:`start` / :meth:`stop`.

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
        super().__init__(
            history=history, bookmark_interval=bookmark_interval, resource_types=resource_types
        )
        self.host = host
        self.port = port
        self.tls = tls
        self.token = token
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._extensions: dict[tuple[str, str], ApiExtension] = {}
        self.requests = 0
        """Number of HTTP requests served (useful to assert pagination or retries happened)."""

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def start(self) -> KubeApiServer:
        httpd = ApiHTTPServer((self.host, self.port), self)
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

    def add_extension(self, extension: ApiExtension) -> None:
        """Serve ``extension``'s group/version (routing and discovery); it is started and
        stopped with this server."""
        with self._lock:
            self._extensions[(extension.group, extension.version)] = extension
        if self._httpd is not None:
            extension.start()

    def extension(self, group: str, version: str) -> ApiExtension | None:
        """The extension serving ``group/version``, if any."""
        return self._extensions.get((group, version))

    def watch_store(self) -> ObjectStore:
        """The store whose changes watch streams follow (this server is one)."""
        return self

    def track_connection(self, conn: socket.socket, *, open_: bool) -> None:
        """Note an HTTP connection opening or closing (:meth:`stop` closes those still open)."""
        with self._conns_lock:
            if open_:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def discovery(self, path: str) -> dict[str, Any] | None:
        """The discovery document at ``path`` (see :mod:`osc_gitops_sandbox.kubeapi.discovery`)."""
        return discovery(path, self.types, self._extensions, f"{self.host}:{self.port}")
