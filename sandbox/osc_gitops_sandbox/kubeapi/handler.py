"""The HTTP side of the Kubernetes API emulator: routing, encoding, errors, watch streams.

HTTP/1.1 keep-alive; every answer is JSON (a ``kind: Status`` document for errors). The logic
lives in the store (:mod:`osc_gitops_sandbox.kubeapi.store`); this module maps paths and verbs
onto it and applies injected faults first.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from osc_gitops_sandbox.kubeapi import openapi as openapi
from osc_gitops_sandbox.kubeapi import protobuf as protobuf
from osc_gitops_sandbox.kubeapi import tables as tables
from osc_gitops_sandbox.kubeapi.discovery import ApiExtension
from osc_gitops_sandbox.kubeapi.faults import Faults
from osc_gitops_sandbox.kubeapi.managed_fields import check_manager, manager_of
from osc_gitops_sandbox.kubeapi.openapi import check_fields
from osc_gitops_sandbox.kubeapi.resources import ResourceType
from osc_gitops_sandbox.kubeapi.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from osc_gitops_sandbox.kubeapi.status import ApiError
from osc_gitops_sandbox.kubeapi.store import ObjectStore, dumps
from osc_gitops_sandbox.kubeapi.watch import WatchRequest, watch_events

__all__ = ["APPLY_PATCH", "Api", "ApiHTTPServer", "ApiHandler"]

APPLY_PATCH = "application/apply-patch+yaml"
_OPTIONS = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
"""The options kind a write's query parameters belong to (what a refusal names)."""


class Api(Protocol):
    """What the handler asks of the API it serves (``server.KubeApiServer``: the store's verbs,
    discovery, extensions, the token and connection bookkeeping)."""

    types: tuple[ResourceType, ...]
    faults: Faults
    token: str | None
    requests: int

    def track_connection(self, conn: socket.socket, *, open_: bool) -> None: ...

    def discovery(self, path: str) -> dict[str, Any] | None: ...

    def extension(self, group: str, version: str) -> ApiExtension | None: ...

    def resource_for_path(self, group: str, version: str, plural: str) -> ResourceType | None: ...

    def list_raw(
        self, rt: ResourceType, namespace: str | None, labels: LabelSelector,
        fields: FieldSelector, limit: int = 0, cont: str | None = None,
    ) -> bytes: ...  # fmt: skip

    def get_raw(self, rt: ResourceType, namespace: str, name: str) -> bytes: ...

    def create(
        self, rt: ResourceType, namespace: str, body: dict[str, Any], *, dry_run: bool = False,
        manager: str = ...,
    ) -> dict[str, Any]: ...  # fmt: skip

    def update(
        self, rt: ResourceType, namespace: str, name: str, body: dict[str, Any], *,
        dry_run: bool = False, manager: str = ...,
    ) -> dict[str, Any]: ...  # fmt: skip

    def apply(
        self, rt: ResourceType, namespace: str, name: str, applied: dict[str, Any], *,
        manager: str, force: bool = False, dry_run: bool = False,
    ) -> tuple[dict[str, Any], bool]: ...  # fmt: skip

    def replace_status(
        self, rt: ResourceType, namespace: str, name: str, status: Any,
        resource_version: str | None = None,
    ) -> dict[str, Any]: ...  # fmt: skip

    def patch(
        self, rt: ResourceType, namespace: str, name: str, content_type: str, patch: Any, *,
        dry_run: bool = False, check: Callable[[dict[str, Any]], Any] | None = None,
        manager: str = ...,
    ) -> dict[str, Any]: ...  # fmt: skip

    def delete(
        self, rt: ResourceType, namespace: str, name: str, *, dry_run: bool = False
    ) -> dict[str, Any]: ...

    def watch_store(self) -> ObjectStore: ...


class ApiHTTPServer(ThreadingHTTPServer):
    """The HTTP server of one emulator: its handlers find the API they serve here."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: Api) -> None:
        self.api = api
        super().__init__(address, ApiHandler)


NO_CONTAINERS = (
    "the osc-gitops sandbox runs no containers, so there is nothing to exec into; run a command "
    "in the pod's network namespace instead: osc-gitops sandbox exec {pod} -- CMD (the sandbox "
    "must be up with --datapath)"
)
"""What ``kubectl exec`` and ``kubectl attach`` get (instead of a bare NotFound)."""


class ApiHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler; routing and encoding only, logic lives in the server."""

    server: ApiHTTPServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every small response waits ~40 ms for a delayed ACK
    server_version = "osc-kubeapi/0.1"

    @property
    def api(self) -> Api:
        return self.server.api

    def setup(self) -> None:
        super().setup()
        self.api.track_connection(self.connection, open_=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.api.track_connection(self.connection, open_=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests and the demo print their own diagnostics

    # -- plumbing

    def _send(
        self,
        code: int,
        body: bytes,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        content_type: str = "application/json",
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in headers.items() if isinstance(headers, Mapping) else headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, code: int, obj: Any, warnings: Sequence[str] = ()) -> None:
        """``obj`` as JSON; each warning as a ``Warning: 299`` header (kubectl prints them)."""
        headers = [("Warning", f"299 - {json.dumps(w)}") for w in warnings]
        self._send(code, dumps(obj), headers)

    def _send_error(self, err: ApiError) -> None:
        self._send(err.code, dumps(err.status()), headers=err.headers)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        if not data:
            raise ApiError(400, "request body is empty")
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype == protobuf.MEDIA_TYPE:
            return protobuf.decode_object(data)
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
            doc = self._openapi(path) if method == "GET" else None
            if doc is None:
                raise ApiError(404, f"the server could not find the requested resource ({path})")
            self._send_json(200, doc)
            return
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
        extension = api.extension(group, version)
        if extension is not None:
            self._extension(extension, method, rest)
            return
        namespace: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and (inner := api.resource_for_path(group, version, rest[2])) is not None
            and inner.namespaced
        ):
            namespace, rest = rest[1], rest[2:]
        rt = api.resource_for_path(group, version, rest[0])
        if rt is None or len(rest) > 3:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub in ("exec", "attach") and rt.plural == "pods":
            raise ApiError(400, NO_CONTAINERS.format(pod=f"{namespace}/{name}"))
        if sub not in (None, "status"):
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        if rt.namespaced and name is not None and namespace is None:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        ns = namespace or ""
        table_version = tables.wants_table(self.headers.get("Accept") or "")

        if method == "GET" and name is None:
            try:
                labels = parse_label_selector(query.get("labelSelector"))
                fields = parse_field_selector(query.get("fieldSelector"), rt.field_selectors)
            except SelectorError as exc:
                raise ApiError(400, str(exc)) from exc
            if (query.get("watch") or "").lower() in ("true", "1"):
                self._watch(rt, namespace, labels, fields, query, table_version)
                return
            limit = int(query.get("limit") or 0)
            raw = api.list_raw(rt, namespace, labels, fields, limit, query.get("continue"))
            if table_version is not None:
                listed = json.loads(raw)
                doc = tables.table(
                    rt,
                    listed["items"],
                    listed["metadata"],
                    version=table_version,
                    include_object=query.get("includeObject") or "Metadata",
                )
                self._send_json(200, doc)  # fmt: skip
                return
            self._send(200, raw)
        elif method == "GET":
            assert name is not None
            raw = api.get_raw(rt, ns, name)
            if table_version is not None and sub is None:
                obj = json.loads(raw)
                meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
                self._send_json(
                    200,
                    tables.table(
                        rt,
                        [obj],
                        meta,
                        version=table_version,
                        include_object=query.get("includeObject") or "Metadata",
                    ),
                )
                return  # fmt: skip
            self._send(200, raw)
        elif method == "POST" and name is None:
            body = self._body()
            if rt.namespaced and namespace is None:
                raise ApiError(405, f"create {rt.plural} needs a namespace in the URL")
            self._check_kind(rt, body)
            warnings = check_fields(rt, body, query.get("fieldValidation"))
            created = api.create(
                rt, ns, body, dry_run=self._dry_run(query), manager=self._manager(query)
            )
            self._send_json(201, created, warnings)
        elif method == "PUT" and name is not None:
            body = self._body()
            self._check_kind(rt, body)
            if sub == "status":
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
                self._send_json(200, api.replace_status(rt, ns, name, body.get("status"), sent_rv))
                return
            warnings = check_fields(rt, body, query.get("fieldValidation"))
            updated = api.update(
                rt, ns, name, body, dry_run=self._dry_run(query), manager=self._manager(query)
            )
            self._send_json(200, updated, warnings)
        elif method == "PATCH" and name is not None:
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype == APPLY_PATCH:
                self._apply(rt, ns, name, query)
                return
            noted: list[str] = []
            patched = api.patch(
                rt, ns, name, ctype, self._body(), dry_run=self._dry_run(query),
                check=lambda new: noted.extend(
                    check_fields(rt, new, query.get("fieldValidation"))),
                manager=self._manager(query),
            )  # fmt: skip
            self._send_json(200, patched, noted)
        elif method == "DELETE" and name is not None:
            options = self._body() if int(self.headers.get("Content-Length") or 0) else {}
            dry_run = self._dry_run(query) or "All" in ((options or {}).get("dryRun") or [])
            self._send_json(200, api.delete(rt, ns, name, dry_run=dry_run))
        else:
            self._drain()
            raise ApiError(
                405, f"method {method} is not supported on {path}", reason="MethodNotAllowed"
            )

    def _manager(self, query: Mapping[str, str]) -> str:
        """The request's field manager (``?fieldManager=``, checked as kube-apiserver checks
        it, else its User-Agent's product)."""
        given = query.get("fieldManager")
        if given:
            check_manager(given, _OPTIONS.get(self.command, "PatchOptions"))
        return manager_of(given, self.headers.get("User-Agent"))

    def _apply(self, rt: ResourceType, ns: str, name: str, query: Mapping[str, str]) -> None:
        """Server-side apply (``application/apply-patch+yaml``), as kube-apiserver: a field
        manager is required, ``force=true`` takes conflicting fields over, a missing object is
        created (201)."""
        body = self._body()
        manager = query.get("fieldManager")
        if not manager:
            raise ApiError(
                400,
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch",
            )
        check_manager(manager, "PatchOptions")
        if not isinstance(body, dict):
            raise ApiError(400, "apply patch body must be an object")
        self._check_kind(rt, body)
        force = query.get("force", "false").lower() == "true"
        warnings = check_fields(rt, body, query.get("fieldValidation"))
        obj, created = self.api.apply(
            rt, ns, name, body, manager=manager, force=force, dry_run=self._dry_run(query)
        )
        self._send_json(201 if created else 200, obj, warnings)

    def _extension(self, extension: ApiExtension, method: str, rest: list[str]) -> None:
        namespace: str | None = None
        if len(rest) >= 2 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        length = int(self.headers.get("Content-Length") or 0)
        body = self._body() if length else None
        code, doc = extension.handle(method, namespace, rest, body)
        self._send(code, b"" if doc is None else dumps(doc))

    @staticmethod
    def _dry_run(query: Mapping[str, str]) -> bool:
        value = query.get("dryRun")
        if value not in (None, "", "All"):
            raise ApiError(400, f'dryRun: Unsupported value: {value!r}: supported values: "All"')
        return value == "All"

    def _openapi(self, path: str) -> dict[str, Any] | None:
        """``/openapi/v3`` and its group/version documents (see
        :mod:`~osc_gitops_sandbox.kubeapi.openapi`); ``None`` for anything else
        (``/openapi/v2``)."""
        if path == "/openapi/v3":
            return openapi.index(self.api.types)
        if not path.startswith("/openapi/v3/"):
            return None
        parts = path[len("/openapi/v3/") :].split("/")
        if parts[0] == "api" and len(parts) == 2:
            return openapi.document(self.api.types, "", parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return openapi.document(self.api.types, parts[1], parts[2])
        return None

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
        table_version: str | None = None,
    ) -> None:
        """A chunked watch stream; with ``table_version`` each object is a one-row ``Table``
        (column definitions in the first event only, as the real server sends them)."""
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = (query.get("allowWatchBookmarks") or "").lower() in ("true", "1")
        version = query.get("resourceVersion")
        request = WatchRequest(rt, namespace, labels, fields, version, timeout, bookmarks)
        events = watch_events(self.api.watch_store(), request)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        if table_version is not None:
            events = self._as_tables(rt, events, table_version, query.get("includeObject"))
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

    @staticmethod
    def _as_tables(
        rt: ResourceType, events: Iterator[bytes], version: str, include: str | None
    ) -> Iterator[bytes]:
        headers = True
        for chunk in events:
            lines = []
            for line in chunk.splitlines():
                event = json.loads(line)
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    obj = event["object"]
                    meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
                    event["object"] = tables.table(
                        rt, [obj], meta, version=version, include_object=include or "Metadata",
                        headers=headers,
                    )  # fmt: skip
                    headers = False
                lines.append(dumps(event) + b"\n")
            yield b"".join(lines)
