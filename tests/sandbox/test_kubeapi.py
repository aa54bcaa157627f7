"""The API emulator, driven by the official ``kubernetes`` client over HTTP."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from tests.support.kube import pod


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def names(items: Any) -> list[str]:
    return sorted(i.metadata.name for i in items)


# ---------------------------------------------------------------- discovery


def test_discovery_documents(api_client: client.ApiClient) -> None:
    version = client.VersionApi(api_client).get_code()
    assert version.major == "1"
    groups = client.ApisApi(api_client).get_api_versions()
    assert {g.name for g in groups.groups} >= {
        "kubevirt.io",
        "k8s.cni.cncf.io",
        "coordination.k8s.io",
        "networking.k8s.io",
    }
    core = client.CoreV1Api(api_client).get_api_resources()
    by_name = {r.name: r for r in core.resources}
    assert by_name["pods"].namespaced and not by_name["nodes"].namespaced
    assert "watch" in by_name["pods"].verbs
    kv = client.CustomObjectsApi(api_client).api_client.call_api(
        "/apis/kubevirt.io/v1", "GET", _preload_content=False
    )[0]
    doc = json.loads(kv.data)
    assert doc["resources"][0]["kind"] == "VirtualMachine"


def test_openapi_is_absent(api_client: client.ApiClient) -> None:
    with pytest.raises(ApiException) as err:
        api_client.call_api("/openapi/v2", "GET", _preload_content=False)
    assert err.value.status == 404


# ---------------------------------------------------------------- CRUD and status codes


def test_pod_crud_and_server_fields(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod("default", pod("a", labels={"app": "web"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None
    assert created.metadata.generation == 1
    got = core.read_namespaced_pod("a", "default")
    assert got.metadata.uid == created.metadata.uid
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("a"))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"
    assert status_of(err.value)["details"] == {"name": "a", "group": "", "kind": "pods"}

    deleted = core.delete_namespaced_pod("a", "default")
    assert deleted is not None
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("a", "default")
    assert err.value.status == 404
    status = status_of(err.value)
    assert status["kind"] == "Status" and status["reason"] == "NotFound"
    assert status["message"] == 'pods "a" not found'
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod("a", "default")
    assert err.value.status == 404


def test_create_in_missing_namespace_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("nowhere", pod("a", namespace="nowhere"))
    assert err.value.status == 404
    assert 'namespaces "nowhere" not found' in status_of(err.value)["message"]


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        ("Bad_Name", {}),
        ("a" * 254, {}),
        ("ok", {"bad key!": "x"}),
        ("ok", {"app": "-starts-with-dash"}),
        ("ok", {"UPPER.example.com/x": "y"}),
        ("ok", {"app": "v" * 64}),
    ],
)
def test_invalid_name_or_label_is_422(
    core: client.CoreV1Api, name: str, labels: dict[str, str]
) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod(name, labels=labels))
    assert err.value.status == 422
    status = status_of(err.value)
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"]
    assert core.list_namespaced_pod("default").items == []


def test_valid_prefixed_labels_accepted(core: client.CoreV1Api) -> None:
    labels = {"app.kubernetes.io/name": "web", "osc.io/owner": "osc-gitops", "empty": ""}
    created = core.create_namespaced_pod("default", pod("p", labels=labels))
    assert created.metadata.labels == labels


def test_namespace_node_and_delete_cascade(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team-a"}})
    with pytest.raises(ApiException) as err:
        core.create_namespace({"metadata": {"name": "has.dot"}})  # namespaces are DNS labels
    assert err.value.status == 422
    core.create_namespaced_pod("team-a", pod("x", namespace="team-a"))
    core.create_node({"metadata": {"name": "node-1", "labels": {"zone": "a"}}})
    assert names(core.list_node().items) == ["node-1"]
    assert core.read_node("node-1").metadata.labels == {"zone": "a"}
    core.delete_namespace("team-a")
    assert core.list_pod_for_all_namespaces().items == []


def test_update_conflict_and_generation(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod("default", pod("a", labels={"v": "1"}))
    stale_rv = created.metadata.resource_version
    body = core.read_namespaced_pod("a", "default")
    body.metadata.labels = {"v": "2"}
    updated = core.replace_namespaced_pod("a", "default", body)
    assert updated.metadata.labels == {"v": "2"}
    assert int(updated.metadata.resource_version) > int(stale_rv)
    assert updated.metadata.generation == 1  # metadata-only change: no generation bump

    body.metadata.resource_version = stale_rv
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod("a", "default", body)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"

    fresh = core.read_namespaced_pod("a", "default")
    fresh.spec.node_name = "node-2"
    bumped = core.replace_namespaced_pod("a", "default", fresh)
    assert bumped.metadata.generation == 2
    assert bumped.metadata.uid == created.metadata.uid


def test_merge_and_json_patch(core: client.CoreV1Api, api_client: client.ApiClient) -> None:
    core.create_namespaced_pod("default", pod("a", labels={"keep": "1", "drop": "1"}))
    patched = core.patch_namespaced_pod(
        "a", "default", {"metadata": {"labels": {"drop": None, "new": "x"}}}
    )  # the client sends strategic-merge-patch for a dict body
    assert patched.metadata.labels == {"keep": "1", "new": "x"}

    jp = core.patch_namespaced_pod(
        "a",
        "default",
        [
            {"op": "test", "path": "/metadata/labels/keep", "value": "1"},
            {"op": "replace", "path": "/metadata/labels/keep", "value": "2"},
            {"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "w"},
            {"op": "remove", "path": "/metadata/labels/new"},
        ],
    )
    assert jp.metadata.labels == {"keep": "2", "app.kubernetes.io/name": "w"}

    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod(
            "a", "default", [{"op": "test", "path": "/spec/nodeName", "value": "other"}]
        )
    assert err.value.status == 422

    merge = api_client.call_api(
        "/api/v1/namespaces/default/pods/a",
        "PATCH",
        header_params={"Content-Type": "application/merge-patch+json"},
        body={"metadata": {"labels": {"keep": None}}, "spec": {"nodeName": "node-9"}},
        _preload_content=False,
    )[0]
    obj = json.loads(merge.data)
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/name": "w"}
    assert obj["spec"]["nodeName"] == "node-9"
    assert obj["metadata"]["generation"] == 2

    with pytest.raises(ApiException) as err:
        api_client.call_api(
            "/api/v1/namespaces/default/pods/a",
            "PATCH",
            header_params={"Content-Type": "application/merge-patch+json"},
            body={"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}},
            _preload_content=False,
        )
    assert err.value.status == 409

    with pytest.raises(ApiException) as err:
        api_client.call_api(
            "/api/v1/namespaces/default/pods/a",
            "PATCH",
            header_params={"Content-Type": "application/apply-patch+yaml"},
            body={"metadata": {"labels": {"x": "y"}}},
            _preload_content=False,
        )
    # server-side apply needs a field manager (tests/sandbox/test_server_side_apply.py)
    assert err.value.status == 400 and b"fieldManager: Required value" in err.value.body


@pytest.mark.parametrize(
    ("manager", "says"),
    [
        ("osc\x1b[2J\n::error::x", "invalid character U+001B (at position 3)"),
        ("m" * 129, "Too long: may not be more than 128 bytes"),
    ],
)
def test_a_field_manager_kube_apiserver_would_refuse_is_refused(
    api_client: client.ApiClient, manager: str, says: str
) -> None:
    """``?fieldManager=`` as kube-apiserver's ValidateFieldManager checks it, on every write
    (an apply too): at most 128 bytes, printable; nothing is written."""
    for method, ctype, options in (
        ("POST", "application/json", "CreateOptions"),
        ("PATCH", "application/apply-patch+yaml", "PatchOptions"),
    ):
        path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
        path += "/m" if method == "PATCH" else ""
        with pytest.raises(ApiException) as err:
            api_client.call_api(
                path, method, query_params=[("fieldManager", manager)],
                header_params={"Content-Type": ctype},
                body={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": "m"}},
                _preload_content=False,
            )  # fmt: skip
        body = json.loads(err.value.body)
        assert err.value.status == 422 and body["reason"] == "Invalid"
        assert body["message"].startswith(f'{options}.meta.k8s.io "" is invalid: ')
        assert says in body["message"]


@pytest.mark.parametrize(
    ("group", "plural", "kind"),
    [
        ("kubevirt.io", "virtualmachines", "VirtualMachine"),
        ("k8s.cni.cncf.io", "network-attachment-definitions", "NetworkAttachmentDefinition"),
        ("coordination.k8s.io", "leases", "Lease"),
        ("networking.k8s.io", "networkpolicies", "NetworkPolicy"),
    ],
)
def test_custom_kinds_crud(
    custom: client.CustomObjectsApi, group: str, plural: str, kind: str
) -> None:
    body = {
        "apiVersion": f"{group}/v1",
        "kind": kind,
        "metadata": {"name": "obj-1", "labels": {"osc.io/owner": "osc-gitops"}},
        "spec": {"a": 1},
    }
    created = custom.create_namespaced_custom_object(group, "v1", "default", plural, body)
    assert created["kind"] == kind and created["metadata"]["generation"] == 1
    listed = custom.list_namespaced_custom_object(group, "v1", "default", plural)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["obj-1"]
    assert listed["kind"] == f"{kind}List"
    everywhere = custom.list_cluster_custom_object(group, "v1", plural)
    assert len(everywhere["items"]) == 1
    patched = custom.patch_namespaced_custom_object(
        group, "v1", "default", plural, "obj-1", {"spec": {"a": 2}}
    )
    assert patched["spec"] == {"a": 2} and patched["metadata"]["generation"] == 2
    custom.delete_namespaced_custom_object(group, "v1", "default", plural, "obj-1")
    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object(group, "v1", "default", plural, "obj-1")
    assert err.value.status == 404
    assert status_of(err.value)["message"] == f'{plural}.{group} "obj-1" not found'


def test_resource_version_is_one_global_counter(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    a = core.create_namespaced_pod("default", pod("a"))
    vm = custom.create_namespaced_custom_object(
        "kubevirt.io",
        "v1",
        "default",
        "virtualmachines",
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "v"}},
    )
    b = core.create_namespaced_pod("default", pod("b"))
    rvs = [
        int(a.metadata.resource_version),
        int(vm["metadata"]["resourceVersion"]),
        int(b.metadata.resource_version),
    ]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


# ---------------------------------------------------------------- selectors


@pytest.fixture
def labelled(kube_server: KubeApiServer) -> None:
    kube_server.add_objects(
        [
            pod("web-1", "shop", {"tier": "web", "app.kubernetes.io/name": "shop"}, "n1"),
            pod("web-2", "shop", {"tier": "web", "canary": "true"}, "n2"),
            pod("api-1", "shop", {"tier": "api"}, "n1"),
            pod("db-1", "data", {"tier": "db", "app.kubernetes.io/name": "pg"}, "n2"),
            pod("bare", "data", {}, "n1"),
        ]
    )


@pytest.mark.usefixtures("labelled")
@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=web", ["web-1", "web-2"]),
        ("tier==web", ["web-1", "web-2"]),
        ("tier!=web", ["api-1", "bare", "db-1"]),  # != also matches pods without the key
        ("tier in (web,api)", ["api-1", "web-1", "web-2"]),
        ("tier notin (web, api)", ["bare", "db-1"]),
        ("canary", ["web-2"]),
        ("!canary", ["api-1", "bare", "db-1", "web-1"]),
        ("tier=web,!canary", ["web-1"]),
        ("tier in (web,api,db),app.kubernetes.io/name", ["db-1", "web-1"]),
        ("app.kubernetes.io/name in (pg)", ["db-1"]),
        ("app.kubernetes.io/name notin (pg),tier", ["api-1", "web-1", "web-2"]),
        ("tier=web,tier=api", []),
        ("", ["api-1", "bare", "db-1", "web-1", "web-2"]),
    ],
)
def test_label_selector_grammar(core: client.CoreV1Api, selector: str, expected: list[str]) -> None:
    assert names(core.list_pod_for_all_namespaces(label_selector=selector).items) == expected


@pytest.mark.usefixtures("labelled")
@pytest.mark.parametrize(
    "selector",
    ["tier in web", "tier in (web", "=web", "tier=web,", "tier ~ web", "a b", "bad key!=x"],
)
def test_bad_label_selector_is_400(core: client.CoreV1Api, selector: str) -> None:
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(label_selector=selector)
    assert err.value.status == 400
    assert status_of(err.value)["reason"] == "BadRequest"


@pytest.mark.usefixtures("labelled")
def test_field_selectors(core: client.CoreV1Api) -> None:
    assert names(core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items) == [
        "api-1",
        "bare",
        "web-1",
    ]
    assert names(
        core.list_pod_for_all_namespaces(
            field_selector="spec.nodeName!=n1,metadata.namespace=shop"
        ).items
    ) == ["web-2"]
    assert names(core.list_namespaced_pod("data", field_selector="metadata.name=db-1").items) == [
        "db-1"
    ]
    assert names(
        core.list_namespaced_pod(
            "shop", label_selector="tier=web", field_selector="spec.nodeName==n2"
        ).items
    ) == ["web-2"]
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(field_selector="spec.bogus=1")
    assert err.value.status == 400


@pytest.mark.usefixtures("labelled")
def test_lists_follow_pods_that_come_and_go(
    kube_server: KubeApiServer, core: client.CoreV1Api
) -> None:
    """Pages of an unfiltered list come from the kind's keys kept in order between changes:
    a pod created or deleted shows in the next list."""

    def every(limit: int) -> list[str]:
        got, cont = [], None
        while True:
            page = core.list_pod_for_all_namespaces(limit=limit, _continue=cont)
            got += [p.metadata.name for p in page.items]
            if not page.metadata._continue:
                return got
            assert page.metadata.remaining_item_count == 5 - len(got)
            cont = page.metadata._continue

    assert every(2) == ["bare", "db-1", "api-1", "web-1", "web-2"]
    kube_server.add_objects([pod("aa", "data", {}, "n1")])
    core.delete_namespaced_pod("web-1", "shop")
    assert every(2) == ["aa", "bare", "db-1", "api-1", "web-2"]
    assert every(10) == every(1)


@pytest.mark.usefixtures("labelled")
def test_a_nodes_pods_follow_moves_and_deletes(
    core: client.CoreV1Api, api_client: client.ApiClient
) -> None:
    """A node's pods are served from an index (as the real server's watch cache): a pod moved
    to another node and a deleted pod leave its list; paging through it still works."""

    def on(node: str, limit: int | None = None) -> list[str]:
        return names(core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}",
                                                      limit=limit).items)  # fmt: skip

    api_client.call_api(
        "/api/v1/namespaces/shop/pods/api-1", "PATCH",
        header_params={"Content-Type": "application/merge-patch+json"},
        body={"spec": {"nodeName": "n2"}}, _preload_content=False,
    )  # fmt: skip
    core.delete_namespaced_pod("bare", "data")
    assert on("n1") == ["web-1"]
    assert on("n2") == ["api-1", "db-1", "web-2"]
    assert on("n3") == []
    first = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n2", limit=2)
    rest = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n2", limit=2,
                                            _continue=first.metadata._continue)  # fmt: skip
    assert len(first.items) == 2 and len(rest.items) == 1
    assert sorted(names(first.items) + names(rest.items)) == ["api-1", "db-1", "web-2"]


# ---------------------------------------------------------------- pagination


def test_pagination_limit_continue(kube_server: KubeApiServer, core: client.CoreV1Api) -> None:
    kube_server.add_objects(pod(f"p{i:02d}", "ns", {"n": str(i)}) for i in range(25))
    seen: list[str] = []
    pages = 0
    cont = None
    while True:
        page = core.list_namespaced_pod("ns", limit=10, _continue=cont)
        pages += 1
        seen += [p.metadata.name for p in page.items]
        cont = page.metadata._continue
        if not cont:
            break
        assert page.metadata.remaining_item_count == 25 - len(seen)
    assert pages == 3
    assert seen == [f"p{i:02d}" for i in range(25)]


def test_expired_continue_is_410(kube_server: KubeApiServer, core: client.CoreV1Api) -> None:
    kube_server.add_objects(pod(f"p{i:02d}", "ns") for i in range(25))
    page = core.list_namespaced_pod("ns", limit=10)
    core.create_namespaced_pod("ns", pod("late", "ns"))
    kube_server.compact()
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("ns", limit=10, _continue=page.metadata._continue)
    assert err.value.status == 410
    assert status_of(err.value)["reason"] == "Expired"


# ---------------------------------------------------------------- watch


def collect(core: client.CoreV1Api, **kwargs: Any) -> list[tuple[str, str]]:
    w = watch.Watch()
    out = []
    for ev in w.stream(core.list_namespaced_pod, "default", **kwargs):
        out.append((ev["type"], ev["raw_object"]["metadata"].get("name", "")))
    return out


def test_watch_resume_and_timeout(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("a", labels={"app": "x"}))
    core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"app": "y"}}})
    core.create_namespaced_pod("default", pod("b", labels={"app": "x"}))
    core.delete_namespaced_pod("a", "default")
    # resume from an old resourceVersion: the history is replayed, then timeoutSeconds ends it
    events = collect(core, resource_version=start, timeout_seconds=1)
    assert events == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    # label selectors apply to watch as well
    events = collect(core, resource_version=start, timeout_seconds=1, label_selector="app=x")
    assert events == [("ADDED", "a"), ("ADDED", "b")]
    # no resourceVersion: the current state as synthetic ADDED events
    assert collect(core, timeout_seconds=1) == [("ADDED", "b")]


def test_watch_live_events_and_bookmarks(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_pod("default").metadata.resource_version
    got: list[tuple[str, str]] = []
    done = threading.Event()

    def run() -> None:
        w = watch.Watch()
        for ev in w.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=3,
        ):
            got.append((ev["type"], ev["raw_object"]["metadata"].get("name", "")))
            if ev["type"] == "BOOKMARK" and any(t == "ADDED" for t, _ in got):
                w.stop()
        done.set()

    t = threading.Thread(target=run)
    t.start()
    core.create_namespaced_pod("default", pod("live"))
    t.join(timeout=10)
    assert done.is_set()
    assert ("ADDED", "live") in got
    assert got[-1][0] == "BOOKMARK"


def test_watch_after_compaction_is_410(kube_server: KubeApiServer, core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("a"))
    kube_server.compact()
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        # timeout_seconds disables the client's own single retry, so the ERROR surfaces
        for _ in w.stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=1
        ):
            pass
    assert err.value.status == 410


def test_history_is_bounded() -> None:
    with KubeApiServer(history=100) as small:
        small.add_objects(pod(f"p{i}") for i in range(450))
        assert len(small._events) <= 200
        assert small._compacted_rv > 0


# ---------------------------------------------------------------- seeding and faults


def test_seed_from_list_and_multidoc_yaml(
    kube_server: KubeApiServer, tmp_path: Any, core: client.CoreV1Api
) -> None:
    as_list = tmp_path / "list.yaml"
    as_list.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, namespace: x, resourceVersion: '9'}\n"
        "- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n"
    )
    multi = tmp_path / "multi.yaml"
    multi.write_text(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: vm, namespace: x}\n"
        "spec: {runStrategy: Always}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: y}\n"
    )
    assert kube_server.seed_from_file(as_list) == 2
    assert kube_server.seed_from_file(multi) == 2
    assert names(core.list_pod_for_all_namespaces().items) == ["a", "b"]
    assert {n.metadata.name for n in core.list_namespace().items} >= {"default", "x", "y"}
    assert kube_server.get_object("VirtualMachine", "x", "vm") is not None


def test_fault_injection(kube_server: KubeApiServer) -> None:
    cfg = client.Configuration()
    cfg.host = kube_server.url
    cfg.retries = 0  # urllib3 would otherwise honour Retry-After itself and hide the 429
    core = client.CoreV1Api(client.ApiClient(cfg))
    kube_server.faults.fail(1, 429, retry_after=1, path_contains="/pods")
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces()
    assert err.value.status == 429
    assert err.value.headers["Retry-After"] == "1"
    assert core.list_pod_for_all_namespaces().items == []  # only one injected
    kube_server.faults.fail(2, 500, method="POST")
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod("default", pod("a"))
        assert err.value.status == 500
    core.create_namespaced_pod("default", pod("a"))
    kube_server.faults.fail(1, 403)
    with pytest.raises(ApiException) as err:
        core.list_node()
    assert err.value.status == 403
    assert 'cannot list resource "nodes"' in status_of(err.value)["message"]


def test_token_auth(tmp_path: Any) -> None:
    with KubeApiServer(token="s3cret") as srv:
        cfg = client.Configuration()
        cfg.host = srv.url
        with client.ApiClient(cfg) as anon:
            with pytest.raises(ApiException) as err:
                client.CoreV1Api(anon).list_node()
            assert err.value.status == 401
        cfg.api_key = {"authorization": "Bearer s3cret"}
        with client.ApiClient(cfg) as authed:
            assert client.CoreV1Api(authed).list_node().items == []
