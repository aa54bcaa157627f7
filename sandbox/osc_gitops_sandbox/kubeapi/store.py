"""The object store of the Kubernetes API emulator: objects by kind, one global
resourceVersion (as etcd), the event history watches read, and the API's verbs on it (create,
update, patch, delete, list with selectors and pagination), without HTTP.

Objects are stored as immutable dicts with their JSON cached (``raw``), so a list of 10,000
pods joins cached bytes. Every change appends an event to the history
(:mod:`osc_gitops_sandbox.kubeapi.watch` streams it); listeners (:meth:`ObjectStore.subscribe`)
are called under the store's lock, which is the one lock of the emulator.
"""

from __future__ import annotations

import base64
import bisect
import copy
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from osc_gitops_sandbox.kubeapi import managed_fields
from osc_gitops_sandbox.kubeapi.faults import Faults
from osc_gitops_sandbox.kubeapi.patch import json_patch, merge_patch, strip_directives
from osc_gitops_sandbox.kubeapi.resources import RESOURCE_TYPES, ResourceType, group_resource
from osc_gitops_sandbox.kubeapi.selectors import FieldSelector, LabelSelector
from osc_gitops_sandbox.kubeapi.status import ApiError, not_found
from osc_gitops_sandbox.kubeapi.validation import validate_metadata

__all__ = [
    "DEFAULT_HISTORY",
    "Event",
    "Listener",
    "Mutator",
    "ObjectStore",
    "Stored",
    "dumps",
    "now",
]

DEFAULT_HISTORY = 10_000
"""Watch events kept for resume; older resourceVersions answer 410 Gone (as etcd compaction)."""

Mutator = Callable[[str, dict[str, Any], dict[str, Any] | None], dict[str, Any]]
"""A mutating admission plugin of one kind: ``mutator(operation, object, old object)``, the
operation ``CREATE`` or ``UPDATE`` (``old`` is ``None`` on create), returns the object to
store. It runs after the request's fields were attributed (:mod:`managed_fields`), so what it
adds belongs to no field manager, as on a real API server."""
DEFAULT_MANAGER = "unknown"

Listener = Callable[[str, str, dict[str, Any]], None]
"""``listener(event type, kind, object)``, called after each stored change (see
:meth:`ObjectStore.subscribe`)."""


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes, as the real server sends them."""
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(slots=True)
class Stored:
    """An object as stored: the dict is never mutated after storing (updates replace it), so
    lists and watches can share it, and ``raw`` (its JSON) is reused for every list."""

    obj: dict[str, Any]
    raw: bytes
    labels: dict[str, str]


@dataclass(slots=True)
class Event:
    """One stored change, as the watch history keeps it."""

    rv: int
    rt: ResourceType
    type: str
    stored: Stored

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


class ObjectStore:
    """The emulator's state and verbs (see the module docstring); :class:`KubeApiServer`
    serves it over HTTP. ``history``: watch events kept in memory; ``bookmark_interval``: how
    often an idle watch with ``allowWatchBookmarks`` gets a BOOKMARK (the real server: about a
    minute; short here so tests see them)."""

    def __init__(
        self,
        *,
        history: int = DEFAULT_HISTORY,
        bookmark_interval: float = 1.0,
        resource_types: Iterable[ResourceType] = RESOURCE_TYPES,
    ) -> None:
        self.history = history
        self.bookmark_interval = bookmark_interval
        self.faults = Faults(on_drop=self.wake_watchers)
        self.types: tuple[ResourceType, ...] = tuple(resource_types)
        self._by_path: dict[tuple[str, str, str], ResourceType] = {
            (rt.group, rt.version, rt.plural): rt for rt in self.types
        }
        self._by_kind: dict[str, ResourceType] = {rt.kind: rt for rt in self.types}
        self._lock = threading.Condition(threading.RLock())
        self._mutators: dict[str, list[Mutator]] = {}
        self._store: dict[str, dict[tuple[str, str], Stored]] = {rt.kind: {} for rt in self.types}
        self._pods_on: dict[str, set[tuple[str, str]]] = {}
        """Pod keys by ``spec.nodeName``: a real API server serves a node's pods (the kubelet's
        and a node agent's ``fieldSelector=spec.nodeName=...``) from an index of its watch
        cache, not by scanning every pod."""
        self._sorted_keys: dict[str, list[tuple[str, str]]] = {}
        """Each kind's keys in list order, kept until a key comes or goes: a paged list of
        50,000 pods is 100 requests, and sorting every key for each of them cost the emulator
        ~30 ms a page (a real API server does not re-sort its cache per page either)."""
        self._rv = 0
        self._events: list[Event] = []
        self._compacted_rv = 0  # requests for an older resourceVersion get 410
        self._lost_rv = 0  # events up to here are gone from memory
        self._watch_pos: dict[int, int] = {}  # live watch -> last resourceVersion it consumed
        self._stopping = False
        self._listeners: list[tuple[frozenset[str], Listener]] = []
        self.add_objects([{"kind": "Namespace", "metadata": {"name": "default"}}])
        self.watches_started = 0
        """Watches that reached their starting point (events after it will be delivered);
        tests wait on it instead of sleeping."""

    def resource_for_path(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The resource served at ``/apis/<group>/<version>/<plural>`` (or ``/api/v1/...``)."""
        return self._by_path.get((group, version, plural))

    def resource_type(self, kind_or_plural: str) -> ResourceType:
        """The :class:`ResourceType` for a kind (``Pod``) or plural (``pods``)."""
        if kind_or_plural in self._by_kind:
            return self._by_kind[kind_or_plural]
        for rt in self.types:
            if kind_or_plural in (rt.plural, group_resource(rt)):
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

    def add_mutator(self, kind: str, mutator: Mutator) -> None:
        """Run ``mutator`` on every create and update of ``kind`` (see :data:`Mutator`)."""
        with self._lock:
            self._mutators.setdefault(kind, []).append(mutator)

    def _admit(
        self, rt: ResourceType, operation: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> dict[str, Any]:
        for mutator in self._mutators.get(rt.kind, ()):
            obj = mutator(operation, copy.deepcopy(obj), old)
        return obj

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling ``listener`` (no error if it was not subscribed)."""
        with self._lock:
            self._listeners = [(k, fn) for k, fn in self._listeners if fn != listener]

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
            return self._replace(rt, current, body, admit=False)

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _store_obj(self, rt: ResourceType, obj: dict[str, Any], event: str | None) -> Stored:
        meta = obj["metadata"]
        stored = Stored(obj, dumps(obj), dict(meta.get("labels") or {}))
        key = (meta.get("namespace", ""), meta["name"])
        if rt.kind == "Pod":
            old = self._store[rt.kind].get(key)
            if old is not None:
                self._pods_on.get(_node_of(old.obj), set()).discard(key)
            if event != "DELETED":
                self._pods_on.setdefault(_node_of(obj), set()).add(key)
        store = self._store[rt.kind]
        if event == "DELETED" or key not in store:
            self._sorted_keys.pop(rt.kind, None)
        if event == "DELETED":
            store.pop(key, None)
        else:
            store[key] = stored
        if event is not None:
            self._events.append(Event(int(meta["resourceVersion"]), rt, event, stored))
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
        meta.setdefault("creationTimestamp", now())
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

    def _check_namespace(self, rt: ResourceType, namespace: str) -> None:
        if rt.namespaced and ("", namespace) not in self._store.get("Namespace", {}):
            raise ApiError(
                404,
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )

    def create(
        self, rt: ResourceType, namespace: str, body: dict[str, Any], *, dry_run: bool = False,
        manager: str = DEFAULT_MANAGER,
    ) -> dict[str, Any]:  # fmt: skip
        """POST semantics; ``dry_run`` (``?dryRun=All``): validate and answer the object that
        would be created, without storing it (no resourceVersion, as the real server).
        ``manager``: the field manager the fields it sets are attributed to."""
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
        if rt.kind == "Pod":  # the real server's PrepareForCreate (kept if the client sent one)
            body.setdefault("status", {"phase": "Pending"})
        validate_metadata(rt, body)
        with self._lock:
            self._check_namespace(rt, namespace)
            store_key = (namespace if rt.namespaced else "", meta["name"])
            if store_key in self._store[rt.kind]:
                raise ApiError(
                    409,
                    f'{group_resource(rt)} "{meta["name"]}" already exists',
                    reason="AlreadyExists",
                    details={"name": meta["name"], "group": rt.group, "kind": rt.plural},
                )
            return self._insert(rt, body, dry_run=dry_run, manager=manager)

    def _insert(
        self, rt: ResourceType, body: dict[str, Any], *, dry_run: bool,
        manager: str = DEFAULT_MANAGER, entries: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Store a new object (the lock held, its metadata valid, its namespace there): the
        server's metadata, ``managedFields`` (``entries``, else ``manager`` owning all of it),
        admission, then a resourceVersion and an ADDED event unless ``dry_run``."""
        obj = self._new_metadata(rt, body, 0)
        obj["metadata"]["managedFields"] = (
            entries if entries is not None
            else managed_fields.update_entries(None, obj, manager, now())
        )  # fmt: skip
        obj = self._admit(rt, "CREATE", obj, None)
        if dry_run:
            obj["metadata"].pop("resourceVersion")
            return obj
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        return self._store_obj(rt, obj, "ADDED").obj

    def _current(self, rt: ResourceType, namespace: str, name: str) -> Stored:
        stored = self._store[rt.kind].get((namespace if rt.namespaced else "", name))
        if stored is None:
            raise not_found(rt, name)
        return stored

    def get_raw(self, rt: ResourceType, namespace: str, name: str) -> bytes:
        """The stored JSON of one object (404 when it does not exist)."""
        with self._lock:
            return self._current(rt, namespace, name).raw

    def update(
        self, rt: ResourceType, namespace: str, name: str, body: dict[str, Any], *,
        dry_run: bool = False, manager: str = DEFAULT_MANAGER,
    ) -> dict[str, Any]:  # fmt: skip
        """PUT semantics: replace the object; a stale ``resourceVersion`` is a 409 Conflict."""
        with self._lock:
            current = self._current(rt, namespace, name)
            return self._replace(rt, current, body, dry_run=dry_run, manager=manager)

    def apply(
        self, rt: ResourceType, namespace: str, name: str, applied: dict[str, Any], *,
        manager: str, force: bool = False, dry_run: bool = False,
    ) -> tuple[dict[str, Any], bool]:  # fmt: skip
        """Server-side apply (:func:`managed_fields.apply`): the object afterwards, and whether
        it was created."""
        meta = applied.get("metadata") or {}
        if meta.get("name", name) != name:
            raise ApiError(
                400,
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})",
            )
        with self._lock:
            stored = self._store[rt.kind].get((namespace if rt.namespaced else "", name))
            if stored is None:
                obj, entries = managed_fields.apply(None, applied, manager, force=force, time=now())
                obj.setdefault("metadata", {})["name"] = name
                created = self._create_applied(rt, namespace, obj, entries, dry_run=dry_run)
                return created, True
            obj, entries = managed_fields.apply(
                stored.obj, applied, manager, force=force, time=now()
            )
            return self._replace(rt, stored, obj, dry_run=dry_run, entries=entries), False

    def _create_applied(
        self, rt: ResourceType, namespace: str, body: dict[str, Any],
        entries: list[dict[str, Any]], *, dry_run: bool,
    ) -> dict[str, Any]:  # fmt: skip
        meta = dict(body.get("metadata") or {})
        if rt.namespaced:
            meta["namespace"] = namespace
        body = {**body, "metadata": meta}
        validate_metadata(rt, body)
        self._check_namespace(rt, namespace)
        return self._insert(rt, body, dry_run=dry_run, entries=entries)

    def _replace(
        self, rt: ResourceType, current: Stored, body: dict[str, Any], *, dry_run: bool = False,
        manager: str = DEFAULT_MANAGER, entries: list[dict[str, Any]] | None = None,
        admit: bool = True,
    ) -> dict[str, Any]:  # fmt: skip
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
                f'Operation cannot be fulfilled on {group_resource(rt)} "{name}": the object '
                "has been modified; please apply your changes to the latest version and try again",
                details={"name": name, "group": rt.group, "kind": rt.plural},
            )
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = old_meta["namespace"]
        meta["uid"] = old_meta["uid"]
        meta["creationTimestamp"] = old_meta["creationTimestamp"]
        generation = int(old_meta.get("generation", 1))
        meta["generation"] = generation
        meta.pop("managedFields", None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        obj = {**body, "metadata": meta, "apiVersion": rt.api_version, "kind": rt.kind}
        validate_metadata(rt, obj)
        if entries is None:
            entries = managed_fields.update_entries(current.obj, obj, manager, now())
        meta["managedFields"] = entries
        if admit:  # not for the status subresource (webhooks register for the resource)
            obj = self._admit(rt, "UPDATE", obj, current.obj)
        if obj.get("spec") != current.obj.get("spec"):  # as the strategy: after admission
            obj["metadata"]["generation"] = generation + 1
        unchanged = _without_managed(obj) == _without_managed(current.obj)
        if unchanged or dry_run:
            return obj if dry_run else current.obj  # no-op: no new resourceVersion, no event
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        return self._store_obj(rt, obj, "MODIFIED").obj

    def patch(
        self, rt: ResourceType, namespace: str, name: str, content_type: str, patch: Any, *,
        dry_run: bool = False, check: Callable[[dict[str, Any]], Any] | None = None,
        manager: str = DEFAULT_MANAGER,
    ) -> dict[str, Any]:  # fmt: skip
        """PATCH semantics (JSON, merge and strategic merge patch, see
        :mod:`~osc_gitops_sandbox.kubeapi.patch`); ``check`` sees the patched object first."""
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
                    patch = strip_directives(patch)
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
            if check is not None:
                check(new)
            return self._replace(rt, current, new, dry_run=dry_run, manager=manager)

    def delete(
        self, rt: ResourceType, namespace: str, name: str, *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Immediate deletion (a namespace takes its objects with it); ``dry_run`` answers the
        object as it is, deleting nothing."""
        with self._lock:
            current = self._current(rt, namespace, name)
            if dry_run:
                return current.obj
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
            if node is not None:
                keys = sorted(self._pods_on.get(node, ()))
            else:
                keys = self._sorted_keys.get(rt.kind) or []
                if len(keys) != len(items):
                    keys = self._sorted_keys[rt.kind] = sorted(items)
            if start_key is not None:
                keys = keys[bisect.bisect_right(keys, start_key) :]
            chunks: list[bytes] = []
            next_key: tuple[str, str] | None = None
            remaining = 0
            if namespace is None and labels.empty and not fields.requirements and limit:
                # nothing to filter: the page is a slice, the rest is counted, not scanned
                page, remaining = keys[:limit], max(0, len(keys) - limit)
                chunks = [items[key].raw for key in page]
                next_key = page[-1] if page else None
                keys = []
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
                    dumps({"rv": rv, "start": list(next_key)})
                ).decode()
                meta["remainingItemCount"] = remaining
        head = dumps({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(chunks) + b"]}"

    def wake_watchers(self) -> None:
        """Wake waiting watches (after a fault injection, so drops happen at once)."""
        with self._lock:
            self._lock.notify_all()


def _without_managed(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without ``metadata.managedFields`` (whose times change with every write)."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}
