"""``reconciler.adapters.kube.client.KubeCluster`` against the emulator: the production path."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from reconciler.adapters.kube.client import (
    KubeCluster,
    KubeConnectError,
    KubeError,
    KubeSettings,
    merge_patch_for,
)
from reconciler.core.model.observed import KubeObject
from reconciler.core.model.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER
from tests.support.kube import pod


def owned_labels(instance: str = "osc-gitops", **extra: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, OWNER: instance, **extra}


def vm_body(node: str, instance: str = "osc-gitops") -> dict[str, Any]:
    return {
        "metadata": {
            "labels": owned_labels(instance, **{"osc.io/node": node}),
            "annotations": {"osc.io/resource": "VnfDeployment/fw"},
        },
        "spec": {
            "runStrategy": "Always",
            "template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": node}}},
        },
    }


def nad_body(port: str) -> dict[str, Any]:
    config = {
        "cniVersion": "0.4.0",
        "type": "ovs",
        "bridge": "br-int",
        "args": {"cni": {"ovnPort": port}},
    }
    return {
        "metadata": {"labels": owned_labels(), "annotations": {}},
        "spec": {"config": json.dumps(config, sort_keys=True)},
    }


@pytest.fixture
def shop(kube_server: KubeApiServer) -> None:
    kube_server.add_objects(
        [
            pod("web-1", "shop", {"tier": "web", "app": "shop"}, "n1"),
            pod("web-2", "shop", {"tier": "web"}, "n2"),
            pod("api-1", "shop", {"tier": "api"}, "n1"),
            pod("db-1", "data", {"tier": "db", "app": "shop"}, "n2"),
            pod("cache", "data", {"tier": "cache"}, None),
            pod("other", "misc", {"app": "blog"}, "n1"),
        ]
    )


# ---------------------------------------------------------------- reads


@pytest.mark.usefixtures("shop")
def test_pods_by_a_set_based_selector(cluster: KubeCluster) -> None:
    pods = cluster.list_pods(None, "tier in (db,web)")
    assert [(p.namespace, p.name) for p in pods] == [
        ("data", "db-1"),
        ("shop", "web-1"),
        ("shop", "web-2"),
    ]
    assert len({p.uid for p in pods}) == 3
    web1 = next(p for p in pods if p.name == "web-1")
    assert web1.node == "n1" and web1.labels == {"tier": "web", "app": "shop"}
    assert web1.lsp_name == "shop_web-1"


@pytest.mark.usefixtures("shop")
def test_pods_by_selector_and_namespaces(cluster: KubeCluster) -> None:
    pods = cluster.list_pods(["data", "misc"], "app in (blog,shop)")
    assert [p.name for p in pods] == ["db-1", "other"]
    assert cluster.list_pods(None, "tier in (nope)") == []
    unscheduled = cluster.list_pods(None, "tier in (cache)")
    assert [(p.name, p.node) for p in unscheduled] == [("cache", None)]


def test_pods_by_selector_paginate(kube_server: KubeApiServer, cluster: KubeCluster) -> None:
    kube_server.add_objects(pod(f"p{i:02d}", f"ns{i % 3}", {"g": str(i % 2)}) for i in range(25))
    cluster.page_size = 4
    before = kube_server.requests
    pods = cluster.list_pods(None, "g in (0,1)")
    assert len(pods) == 25
    assert kube_server.requests - before == 7  # ceil(25 / 4) pages, one selector
    assert [p.name for p in cluster.list_pods(["ns1"])] == sorted(
        f"p{i:02d}" for i in range(25) if i % 3 == 1
    )


def test_list_relists_when_continue_expires(
    kube_server: KubeApiServer, cluster: KubeCluster
) -> None:
    kube_server.add_objects(pod(f"p{i:02d}", "ns") for i in range(10))
    cluster.page_size = 3
    # the second page answers 410 (its snapshot was compacted): the adapter lists again
    kube_server.faults.fail(1, 410, path_contains="continue=", message="continue too old")
    before = kube_server.requests
    pods = cluster.list_pods()
    assert [p.name for p in pods] == [f"p{i:02d}" for i in range(10)]
    assert kube_server.requests - before == 2 + 4  # one page, the 410, then 4 full pages


@pytest.mark.usefixtures("shop")
def test_list_nodes_and_network_policies(kube_server: KubeApiServer, cluster: KubeCluster) -> None:
    kube_server.add_objects(
        [
            {"kind": "Node", "metadata": {"name": "n2", "labels": {"zone": "b"}}},
            {"kind": "Node", "metadata": {"name": "n1"}},
            {
                "kind": "NetworkPolicy",
                "metadata": {"name": "deny", "namespace": "shop"},
                "spec": {"podSelector": {"matchLabels": {"tier": "web"}}},
            },
        ]
    )
    assert [(n.name, n.labels) for n in cluster.list_nodes()] == [("n1", {}), ("n2", {"zone": "b"})]
    policies = cluster.list_network_policies()
    assert [p["metadata"]["name"] for p in policies] == ["deny"]
    typed = cluster.network_policies()
    assert typed[0].namespace == "shop"
    assert typed[0].pod_selector == {"matchLabels": {"tier": "web"}}


def test_a_node_agent_reads_its_own_node_and_pods_only(kube_server: KubeApiServer) -> None:
    """The API server does the filtering (field selectors): a node agent of a 1,000-node
    cluster reads one Node object and its node's pods, not the whole cluster."""
    kube_server.add_objects(
        [{"kind": "Node", "metadata": {"name": f"n{i}"}} for i in range(3)]
        + [pod(f"p{i}", "shop", {}, f"n{i % 3}") for i in range(6)]
    )
    agent = KubeCluster(KubeSettings(server=kube_server.url, timeout=5.0), node="n1")
    try:
        before = kube_server.requests
        assert [n.name for n in agent.list_nodes()] == ["n1"]
        assert [n.name for n, _subnet in agent.list_node_subnets()] == ["n1"]
        assert [p.name for p in agent.list_pods()] == ["p1", "p4"]
        assert kube_server.requests - before == 3  # one page each: filtered by the server
    finally:
        agent.close()


def test_network_policies_absent_api() -> None:
    from osc_gitops_sandbox.kubeapi.server import RESOURCE_TYPES

    without = [rt for rt in RESOURCE_TYPES if rt.kind not in ("NetworkPolicy", "VirtualMachine")]
    with KubeApiServer(resource_types=without) as srv:
        kc = KubeCluster(KubeSettings(server=srv.url))
        assert kc.list_network_policies() == []
        assert kc.list_owned("VirtualMachine", "osc-gitops") == []


# ---------------------------------------------------------------- owned objects


def test_create_list_owned_replace_delete(kube_server: KubeApiServer, cluster: KubeCluster) -> None:
    kube_server.add_objects([{"kind": "Namespace", "metadata": {"name": "osc"}}])
    cluster.create("VirtualMachine", "osc", "fw-n1", vm_body("n1"))
    cluster.create("VirtualMachine", "osc", "fw-n2", vm_body("n2"))
    cluster.create("VirtualMachine", "osc", "theirs", vm_body("n1", instance="other"))
    cluster.create("NetworkAttachmentDefinition", "osc", "nf-n1-in", nad_body("nf-n1-in"))
    # an unowned VM made by someone else, with the same owner label but no managed-by
    kube_server.add_objects(
        [
            {
                "kind": "VirtualMachine",
                "metadata": {"name": "manual", "namespace": "osc", "labels": {OWNER: "osc-gitops"}},
            }
        ]
    )

    vms = cluster.list_owned("VirtualMachine", "osc-gitops")
    assert [v.name for v in vms] == ["fw-n1", "fw-n2"]
    assert vms[0] == KubeObject("VirtualMachine", "osc", "fw-n1", vm_body("n1"))
    assert [v.name for v in cluster.list_owned("VirtualMachine", "other")] == ["theirs"]
    nads = cluster.list_owned("NetworkAttachmentDefinition", "osc-gitops")
    assert nads == [
        KubeObject("NetworkAttachmentDefinition", "osc", "nf-n1-in", nad_body("nf-n1-in"))
    ]

    # someone else adds status, a foreign annotation and a label; we apply a new managed body
    # that no longer states the template (server-side apply, field manager osc-gitops)
    live = kube_server.get_object("VirtualMachine", "osc", "fw-n1")
    assert live is not None
    kube_server.update(
        kube_server.resource_type("VirtualMachine"),
        "osc",
        "fw-n1",
        {
            **live,
            "status": {"ready": True},
            "metadata": {
                **live["metadata"],
                "annotations": {
                    **live["metadata"]["annotations"],
                    "kubevirt.io/latest-observed-api-version": "v1",
                    "osc.io/stale": "x",
                },
                "labels": {**live["metadata"]["labels"], "extra": "1"},
            },
        },
        manager="someone",
    )
    target = vm_body("n1")
    target["spec"]["runStrategy"] = "Halted"
    del target["spec"]["template"]
    cluster.replace_managed("VirtualMachine", "osc", "fw-n1", target)
    after = kube_server.get_object("VirtualMachine", "osc", "fw-n1")
    assert after is not None
    assert after["spec"] == target["spec"]  # the template only we stated is gone
    # what others set stays theirs, whatever its key
    assert after["metadata"]["labels"] == {**target["metadata"]["labels"], "extra": "1"}
    assert after["metadata"]["annotations"] == {
        "osc.io/resource": "VnfDeployment/fw",
        "kubevirt.io/latest-observed-api-version": "v1",
        "osc.io/stale": "x",
    }
    assert after["status"] == {"ready": True}
    assert after["metadata"]["generation"] == 2
    managers = {(e["manager"], e["operation"]) for e in after["metadata"]["managedFields"]}
    assert managers == {("osc-gitops", "Apply"), ("someone", "Update")}
    # idempotent: nothing to change, no write
    rv = after["metadata"]["resourceVersion"]
    cluster.replace_managed("VirtualMachine", "osc", "fw-n1", target)
    again = kube_server.get_object("VirtualMachine", "osc", "fw-n1")
    assert again is not None and again["metadata"]["resourceVersion"] == rv

    # a create of an object that exists as we would write it is a no-op, not an error; one
    # someone else made is never taken over (tests/sandbox/test_server_side_apply.py)
    cluster.create("VirtualMachine", "osc", "fw-n2", vm_body("n2"))

    cluster.delete("VirtualMachine", "osc", "fw-n2")
    cluster.delete("VirtualMachine", "osc", "fw-n2")  # already gone: fine
    cluster.delete("NetworkAttachmentDefinition", "osc", "nf-n1-in")
    assert [v.name for v in cluster.list_owned("VirtualMachine", "osc-gitops")] == ["fw-n1"]
    assert cluster.list_owned("NetworkAttachmentDefinition", "osc-gitops") == []
    assert cluster.get("VirtualMachine", "osc", "fw-n2") is None
    assert cluster.get("VirtualMachine", "osc", "fw-n1") is not None


def test_writes_are_server_side_applies_without_a_read(
    kube_server: KubeApiServer, cluster: KubeCluster
) -> None:
    seen: list[tuple[str, str]] = []
    fail = kube_server.faults.take_failure

    def record(method: str, path: str) -> Any:
        seen.append((method, path))
        return fail(method, path)

    kube_server.faults.take_failure = record  # type: ignore[method-assign]
    cluster.create("VirtualMachine", "default", "vm", vm_body("n1"))
    target = vm_body("n2")
    cluster.replace_managed("VirtualMachine", "default", "vm", target)
    live = kube_server.get_object("VirtualMachine", "default", "vm")
    assert live is not None and live["spec"] == target["spec"]
    path = "/apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm"
    assert seen == [
        ("PATCH", f"{path}?fieldManager=osc-gitops"),  # create: no force
        ("PATCH", f"{path}?fieldManager=osc-gitops&force=true"),
    ]


def test_merge_patch_for() -> None:
    live = {"a": 1, "b": {"c": 1, "d": 2}, "e": [1]}
    target = {"b": {"c": 1, "d": 3}, "e": [2], "f": None}
    assert merge_patch_for(live, target) == {"a": None, "b": {"d": 3}, "e": [2], "f": None}
    assert merge_patch_for(live, live) == {}


# ---------------------------------------------------------------- errors


def test_retries_transient_errors(kube_server: KubeApiServer, cluster: KubeCluster) -> None:
    kube_server.add_objects([pod("a")])
    cluster.retry_backoff = 0.01
    kube_server.faults.fail(2, 503)
    kube_server.faults.fail(1, 429, retry_after=0)
    assert [p.name for p in cluster.list_pods()] == ["a"]
    kube_server.faults.fail(10, 500)
    with pytest.raises(KubeError) as err:
        cluster.list_pods()
    assert err.value.status == 500
    assert kube_server.url in str(err.value) and "injected failure" in str(err.value)


def test_forbidden_names_verb_and_resource(
    kube_server: KubeApiServer, cluster: KubeCluster
) -> None:
    kube_server.faults.fail(1, 403)
    with pytest.raises(KubeError) as err:
        cluster.list_nodes()
    msg = str(err.value)
    assert err.value.status == 403
    assert kube_server.url in msg
    assert 'cannot list resource "nodes"' in msg and "RBAC" in msg


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    kc = KubeCluster(KubeSettings(server=url, timeout=2.0))
    with pytest.raises(KubeConnectError) as err:
        kc.list_pods()
    assert url in str(err.value)
    assert "connection refused" in str(err.value)
    assert "Traceback" not in str(err.value)


def test_settings_kubeconfig_and_token_file(tmp_path: Path) -> None:
    with KubeApiServer(token="tok") as srv:
        srv.add_objects([{"kind": "Node", "metadata": {"name": "n1"}}])
        kubeconfig = srv.write_kubeconfig(tmp_path / "kc", context="lab")
        kc = KubeCluster(KubeSettings(kubeconfig=kubeconfig, context="lab"))
        assert kc.server == srv.url
        assert [n.name for n in kc.list_nodes()] == ["n1"]
        token_file = tmp_path / "token"
        token_file.write_text("tok\n")
        by_file = KubeCluster(KubeSettings(server=srv.url, token_file=str(token_file)))
        assert [n.name for n in by_file.list_nodes()] == ["n1"]
        anon = KubeCluster(KubeSettings(server=srv.url))
        with pytest.raises(KubeError) as err:
            anon.list_nodes()
        assert err.value.status == 401 and srv.url in str(err.value)


def test_bad_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(KubeConnectError) as err:
        KubeCluster(KubeSettings(kubeconfig=str(missing)))
    assert str(missing) in str(err.value)
    with KubeApiServer() as srv:
        kc = srv.write_kubeconfig(tmp_path / "kc")
        with pytest.raises(KubeConnectError) as err:
            KubeCluster(KubeSettings(kubeconfig=kc, context="absent"))
        assert "absent" in str(err.value)


# ---------------------------------------------------------------- watch


class Recorder:
    """Collects watch callbacks and lets the test wait for a condition (no timing asserts)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._cond = threading.Condition()

    def __call__(self, etype: str, obj: dict[str, Any]) -> None:
        with self._cond:
            self.events.append((etype, (obj.get("metadata") or {}).get("name", "")))
            self._cond.notify_all()

    def wait_for(self, item: tuple[str, str], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while item not in self.events:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


def wait_watches(server: KubeApiServer, count: int, timeout: float = 10.0) -> None:
    """Wait until ``count`` watches have been established on the server (no sleeps to tune)."""
    deadline = time.monotonic() + timeout
    while server.watches_started < count:
        assert time.monotonic() < deadline, f"only {server.watches_started} watches started"
        time.sleep(0.005)


@pytest.fixture
def watching(cluster: KubeCluster) -> Any:
    """Start ``cluster.watch`` in a thread; always stopped and joined at teardown."""
    started: list[tuple[threading.Thread, threading.Event]] = []

    def start(kind: str = "Pod", **kwargs: Any) -> Recorder:
        rec = Recorder()
        stop = threading.Event()
        t = threading.Thread(
            target=cluster.watch,
            args=(kind, rec, stop),
            kwargs={"backoff": (0.02, 0.2), **kwargs},
            daemon=True,
        )
        t.start()
        started.append((t, stop))
        return rec

    yield start
    for t, stop in started:
        stop.set()
        t.join(timeout=10)
        assert not t.is_alive(), "watch did not stop when asked"


def test_watch_add_modify_delete(
    cluster: KubeCluster, kube_server: KubeApiServer, watching: Any
) -> None:
    rec = watching("Pod", label_selector="app=web", timeout_seconds=30)
    wait_watches(kube_server, 1)  # established: later changes reach it as events
    core_rt = kube_server.resource_type("Pod")
    kube_server.create(core_rt, "default", pod("w", labels={"app": "web"}))
    kube_server.create(core_rt, "default", pod("ignored", labels={"app": "db"}))
    kube_server.patch(
        core_rt,
        "default",
        "w",
        "application/merge-patch+json",
        {"metadata": {"labels": {"v": "2"}}},
    )
    kube_server.delete(core_rt, "default", "w")
    assert rec.wait_for(("DELETED", "w"))
    assert rec.events == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


def test_watch_survives_dropped_stream(kube_server: KubeApiServer, watching: Any) -> None:
    rt = kube_server.resource_type("VirtualMachine")
    rv = str(kube_server.resource_version)
    rec = watching("VirtualMachine", resource_version=rv, timeout_seconds=30)
    kube_server.create(rt, "default", {"metadata": {"name": "vm-1"}})
    assert rec.wait_for(("ADDED", "vm-1"))
    kube_server.faults.drop_watches()
    kube_server.create(rt, "default", {"metadata": {"name": "vm-2"}})
    assert rec.wait_for(("ADDED", "vm-2"))
    # resumed from the last resourceVersion: nothing replayed twice, nothing lost, no RELIST
    assert rec.events == [("ADDED", "vm-1"), ("ADDED", "vm-2")]


def test_watch_relists_after_compaction(kube_server: KubeApiServer, watching: Any) -> None:
    rt = kube_server.resource_type("Pod")
    rv = str(kube_server.resource_version)
    kube_server.create(rt, "default", pod("before"))
    kube_server.compact()
    rec = watching("Pod", resource_version=rv, timeout_seconds=30)
    assert rec.wait_for(("RELIST", ""))
    wait_watches(kube_server, 1)  # the 410 one never started; the one after RELIST did
    # after the re-list the watch continues from the fresh resourceVersion
    kube_server.create(rt, "default", pod("after"))
    assert rec.wait_for(("ADDED", "after"))
    assert ("ADDED", "before") not in rec.events


def test_watch_resumes_after_server_timeout(kube_server: KubeApiServer, watching: Any) -> None:
    rt = kube_server.resource_type("Pod")
    rec = watching("Pod", timeout_seconds=1)
    wait_watches(kube_server, 1)
    kube_server.create(rt, "default", pod("one"))
    assert rec.wait_for(("ADDED", "one"))
    # the 1 s server-side timeout ends the stream; the adapter watches again from its rv
    wait_watches(kube_server, 2)
    kube_server.create(rt, "default", pod("two"))
    assert rec.wait_for(("ADDED", "two"))
    assert rec.events == [("ADDED", "one"), ("ADDED", "two")]


def test_watch_bookmarks_move_the_resume_point(kube_server: KubeApiServer, watching: Any) -> None:
    """Only non-matching pods change, then history is compacted: without bookmarks the
    adapter would resume from its stale starting rv and need a RELIST (410)."""
    rt = kube_server.resource_type("Pod")
    rec = watching("Pod", label_selector="app=x", timeout_seconds=1)
    wait_watches(kube_server, 1)
    kube_server.create(rt, "default", pod("noise", labels={"app": "y"}))
    kube_server.compact()
    # bookmarks come every 0.2 s (conftest); the stream ends after 1 s and is resumed
    wait_watches(kube_server, 2)
    kube_server.create(rt, "default", pod("wanted", labels={"app": "x"}))
    assert rec.wait_for(("ADDED", "wanted"))
    assert rec.events == [("ADDED", "wanted")]


def test_watch_detects_a_stalled_stream(kube_server: KubeApiServer, watching: Any) -> None:
    """The first watch request hangs (no headers, no bookmarks): the client-side read timeout
    gives up on it and the adapter watches again, losing nothing."""
    rt = kube_server.resource_type("Pod")
    rv = str(kube_server.resource_version)
    kube_server.faults.delay(3.0, count=1, path_contains="watch=")
    rec = watching("Pod", resource_version=rv, timeout_seconds=30, read_timeout=0.3)
    kube_server.create(rt, "default", pod("late"))
    assert rec.wait_for(("ADDED", "late"))
    assert rec.events == [("ADDED", "late")]


def test_request_timeout_is_a_clear_error(kube_server: KubeApiServer) -> None:
    kube_server.faults.delay(1.0, count=1, path_contains="/nodes")
    kc = KubeCluster(KubeSettings(server=kube_server.url, timeout=0.2))
    with pytest.raises(KubeConnectError) as err:
        kc.list_nodes()
    assert kube_server.url in str(err.value) and "timed out" in str(err.value)


def test_watch_callback_error_propagates(kube_server: KubeApiServer, cluster: KubeCluster) -> None:
    kube_server.add_objects([pod("a")])
    stop = threading.Event()

    def boom(etype: str, obj: dict[str, Any]) -> None:
        raise RuntimeError(f"callback failed on {etype}")

    with pytest.raises(RuntimeError, match="callback failed on ADDED"):
        cluster.watch("Pod", boom, stop, resource_version="1", timeout_seconds=5)


def test_watch_rejects_unsupported_kind(cluster: KubeCluster) -> None:
    with pytest.raises(ValueError, match="Lease"):
        cluster.watch("Lease", lambda *_: None, threading.Event())
