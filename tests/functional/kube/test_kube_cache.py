"""``reconciler.adapters.kube.cache.KubeCache`` against the API emulator.

The cache must answer exactly what the live ``KubeCluster`` answers (after other clients changed
things through raw HTTP or kubectl), hand back the same objects while nothing changed, see its
own writes at once, survive a RELIST, and fall back to the live API before it has synced.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from reconciler.adapters.kube.cache import CACHED_KINDS, KubeCache, _Store
from reconciler.adapters.kube.client import KubeCluster, KubeConnectError
from reconciler.core.model.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER
from tests.support.kube import pod

INSTANCE = "osc-gitops"
NAMESPACES = ("default", "shop", "osc")
TIMEOUT = 20.0


def owned_labels(instance: str = INSTANCE, **extra: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, OWNER: instance, **extra}


def vm(name: str, namespace: str = "osc", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": owned_labels() if labels is None else labels,
            "annotations": {"osc.io/resource": "VnfDeployment/fw", "other.io/x": "1"},
        },
        "spec": {"runStrategy": "Always"},
    }


def nad(name: str, namespace: str = "osc", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": owned_labels() if labels is None else labels,
        },
        "spec": {"config": json.dumps({"cniVersion": "0.4.0", "type": "ovs"})},
    }


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


def netpol(name: str, namespace: str = "shop", selector: dict[str, str] | None = None) -> Any:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podSelector": {"matchLabels": selector or {}}},
    }


class Http:
    """Raw HTTP against the emulator: another client, not our adapter."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 409):  # already gone / already there: fine for random ops
                return None
            raise


def path(kind: str, namespace: str | None = None, name: str | None = None) -> str:
    from reconciler.adapters.kube.client import KINDS

    return KINDS[kind].path(namespace, name)


def live_view(cluster: KubeCluster) -> dict[str, list[Any]]:
    return {
        "pods": cluster.list_pods(),
        "nodes": cluster.list_nodes(),
        "netpols": cluster.network_policies(),
        "vms": cluster.list_owned("VirtualMachine", INSTANCE),
        "nads": cluster.list_owned("NetworkAttachmentDefinition", INSTANCE),
    }


def cache_view(cache: KubeCache) -> dict[str, list[Any]]:
    return {
        "pods": list(cache.list_pods()),
        "nodes": list(cache.list_nodes()),
        "netpols": list(cache.network_policies()),
        "vms": list(cache.list_owned("VirtualMachine", INSTANCE)),
        "nads": list(cache.list_owned("NetworkAttachmentDefinition", INSTANCE)),
    }


def converge(cache: KubeCache, cluster: KubeCluster, timeout: float = TIMEOUT) -> None:
    """Poll until the cache answers what the live API answers (fails with the difference)."""
    deadline = time.monotonic() + timeout
    while True:
        live = live_view(cluster)
        cached = cache_view(cache)
        if cached == live:
            # and that answer came from the stores, not from the live fallback
            assert all(cache.serving(kind) for kind in CACHED_KINDS)
            return
        if time.monotonic() > deadline:
            diff = {k: (cached[k], live[k]) for k in live if cached[k] != live[k]}
            pytest.fail(f"the cache did not converge: {diff}")
        time.sleep(0.02)


def wait_until(check: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def seeded(kube_server: KubeApiServer) -> KubeApiServer:
    kube_server.add_objects(
        [
            *[{"kind": "Namespace", "metadata": {"name": ns}} for ns in NAMESPACES],
            pod("web-1", "shop", {"tier": "web"}, "n1"),
            pod("web-2", "shop", {"tier": "web"}, "n2"),
            pod("db-1", "default", {"tier": "db"}, "n1"),
            pod("pending", "default", {"tier": "db"}, None),
            node("n1", {"zone": "a"}),
            node("n2"),
            netpol("deny", "shop", {"tier": "web"}),
            vm("fw-n1"),
            vm("fw-n2"),
            vm("foreign", labels={OWNER: "other"}),
            vm("someone-else", labels=owned_labels("other")),
            nad("fw-n1-in"),
            nad("plain", labels={}),
        ]
    )
    return kube_server


@pytest.fixture
def started(cluster: KubeCluster) -> Iterator[Callable[..., KubeCache]]:
    """Start caches; always stopped and their threads joined at teardown."""
    caches: list[tuple[KubeCache, threading.Event]] = []

    def start(instance: str | None = INSTANCE, sync: bool = True, **attrs: Any) -> KubeCache:
        cache = KubeCache(cluster)
        # a slow reconnect on a loaded machine must not turn a check of the store into one of
        # the live fallback (tests of the fallback set their own value)
        cache.stale_after = 60.0
        for key, value in attrs.items():
            setattr(cache, key, value)
        stop = threading.Event()
        caches.append((cache, stop))
        cache.start(stop, instance)
        if sync:
            assert cache.wait_synced(TIMEOUT)
        return cache

    yield start
    for _, stop in caches:
        stop.set()
    for cache, _ in caches:
        assert cache.join(15), "cache threads did not stop when asked"


# ---------------------------------------------------------------- reads


@pytest.mark.usefixtures("seeded")
def test_synced_cache_answers_like_the_live_api(
    cluster: KubeCluster, started: Callable[..., KubeCache]
) -> None:
    cache = started()
    assert cache.synced
    assert cache_view(cache) == live_view(cluster)
    assert [v.name for v in cache.list_owned("VirtualMachine", INSTANCE)] == ["fw-n1", "fw-n2"]
    assert [p.name for p in cache.list_pods()] == ["db-1", "pending", "web-1", "web-2"]
    # another instance's objects are not cached: answered live, and correctly
    other = cache.list_owned("VirtualMachine", "other")
    assert [v.name for v in other] == ["someone-else"]
    assert list(other) == cluster.list_owned("VirtualMachine", "other")
    # the filtered reads the cache does not serve go to the live API
    assert [p.name for p in cache.list_pods(["shop"])] == ["web-1", "web-2"]
    assert cache.list_pods(label_selector="tier=db") == cluster.list_pods(label_selector="tier=db")


@pytest.mark.usefixtures("seeded")
def test_reads_are_identity_stable(
    kube_server: KubeApiServer, cluster: KubeCluster, started: Callable[..., KubeCache]
) -> None:
    cache = started()
    pods, nodes = cache.list_pods(), cache.list_nodes()
    vms, netpols = cache.list_owned("VirtualMachine", INSTANCE), cache.network_policies()
    assert cache.list_pods() is pods and cache.list_nodes() is nodes
    assert cache.list_owned("VirtualMachine", INSTANCE) is vms
    assert cache.network_policies() is netpols
    http = Http(kube_server.url)
    # a change we do not read (an annotation, the status): same tuple, same objects
    rev = cache.revision
    http(
        "PATCH",
        path("Pod", "shop", "web-1"),
        {"metadata": {"annotations": {"note": "x"}}, "status": {"phase": "Running"}},
        "application/merge-patch+json",
    )
    marker = "default/marker"
    http("POST", path("Pod", "default"), pod("marker", "default"))
    wait_until(lambda: any(f"{p.namespace}/{p.name}" == marker for p in cache.list_pods()), marker)
    after = cache.list_pods()
    assert after is not pods
    assert cache.revision == rev + 1  # only the new pod counted
    assert all(a is b for a, b in zip([p for p in after if p.name != "marker"], pods, strict=True))
    # a relabelled pod is a new object; its neighbours stay the same objects
    http(
        "PATCH",
        path("Pod", "shop", "web-2"),
        {"metadata": {"labels": {"tier": "api"}}},
        "application/merge-patch+json",
    )
    wait_until(lambda: any(p.labels == {"tier": "api"} for p in cache.list_pods()), "relabel")
    again = cache.list_pods()
    changed = [(a.name) for a, b in zip(again, after, strict=True) if a is not b]
    assert changed == ["web-2"]
    assert cache.list_nodes() is nodes and cache.list_owned("VirtualMachine", INSTANCE) is vms
    converge(cache, cluster)


def test_not_started_or_not_synced_falls_back_to_the_live_api(
    seeded: KubeApiServer, cluster: KubeCluster, started: Callable[..., KubeCache]
) -> None:
    cold = KubeCache(cluster)
    assert not cold.synced and not cold.wait_synced(0.01)
    assert list(cold.list_pods()) == cluster.list_pods()
    assert list(cold.list_owned("VirtualMachine", INSTANCE)) == cluster.list_owned(
        "VirtualMachine", INSTANCE
    )
    # every pod list fails for a while: the cache cannot sync, reads still work (live)
    seeded.faults.fail(3, 503, method="GET", path_contains="/pods?")
    cluster.retries = 0
    cache = started(sync=False, error_backoff=(0.3, 0.3))
    assert list(cache.list_nodes()) == cluster.list_nodes()
    assert cache.wait_synced(TIMEOUT)  # the cache thread's list is retried until it works
    assert cache_view(cache) == live_view(cluster)


@pytest.mark.usefixtures("seeded")
def test_api_server_down_makes_reads_fail_like_the_live_api_then_recover(
    kube_server: KubeApiServer, cluster: KubeCluster, started: Callable[..., KubeCache]
) -> None:
    """An outage longer than ``stale_after``: reads go live and fail with the adapter's error,
    instead of serving a store nobody updates; a shorter one is served from memory."""
    quick = started(stale_after=0.3)
    patient = started(stale_after=3600.0)  # an outage "shorter" than its grace period
    held = patient.list_pods()
    assert quick.serving("Pod") and patient.serving("Pod")
    kube_server.stop()
    wait_until(
        lambda: not any(quick.serving(k) for k in ("Pod", "Node", "VirtualMachine")),
        "the quick cache to stop serving its stores",
    )
    with pytest.raises(KubeConnectError) as live:
        cluster.list_pods()
    with pytest.raises(KubeConnectError) as cached:
        quick.list_pods()
    assert str(cached.value) == str(live.value)
    assert "cannot reach Kubernetes API server" in str(cached.value)
    with pytest.raises(KubeConnectError):
        quick.list_owned("VirtualMachine", INSTANCE)
    # within its grace period the other cache still answers from memory (the same tuple)
    assert patient.serving("Pod") and patient.list_pods() is held
    # changes made while the server was down (in-process: no client can reach it) ...
    kube_server.add_objects([pod("while-down", "shop", {"tier": "web"}, "n1")])
    kube_server.start()  # same port
    # ... reach both caches when their watches resume; the quick one serves its store again
    kinds = ("Pod", "Node", "NetworkPolicy", "VirtualMachine", "NetworkAttachmentDefinition")
    wait_until(lambda: all(quick.serving(k) for k in kinds), "the watches to reopen")
    converge(quick, cluster)
    converge(patient, cluster)
    assert any(p.name == "while-down" for p in quick.list_pods())
    assert quick.list_pods() is quick.list_pods()


# ---------------------------------------------------------------- random changes


def random_step(rng: random.Random, http: Http, kubectl_run: Callable[[list[str]], None]) -> str:
    """One change by another client: pods, nodes, policies, owned and foreign objects."""
    ns = rng.choice(("default", "shop"))
    name = f"p{rng.randrange(12)}"
    op = rng.randrange(12)
    if op <= 2:
        labels = {"tier": rng.choice(("web", "db", "api"))}
        http("POST", path("Pod", ns), pod(name, ns, labels, rng.choice(("n1", "n2", None))))
        return f"create pod {ns}/{name}"
    if op <= 4:
        labels = {"tier": rng.choice(("web", "db", "api")), "v": str(rng.randrange(3))}
        http(
            "PATCH",
            path("Pod", ns, name),
            {"metadata": {"labels": labels}},
            "application/merge-patch+json",
        )
        return f"label pod {ns}/{name}"
    if op == 5:
        kubectl_run(["label", "pod", "-n", ns, name, f"k={rng.randrange(3)}", "--overwrite"])
        return f"kubectl label {ns}/{name}"
    if op == 6:
        http("DELETE", path("Pod", ns, name))
        return f"delete pod {ns}/{name}"
    if op == 7:
        kind, make = rng.choice((("VirtualMachine", vm), ("NetworkAttachmentDefinition", nad)))
        obj_name = f"o{rng.randrange(4)}"
        labels = rng.choice((owned_labels(), owned_labels("other"), {OWNER: INSTANCE}))
        if http("POST", path(kind, "osc"), make(obj_name, labels=labels)) is None:
            http(
                "PATCH",
                path(kind, "osc", obj_name),
                {"metadata": {"labels": {**dict.fromkeys(owned_labels()), **labels}}},
                "application/merge-patch+json",
            )
        return f"{kind} {obj_name} labels {labels}"
    if op == 8:
        kind = rng.choice(("VirtualMachine", "NetworkAttachmentDefinition"))
        http("DELETE", path(kind, "osc", f"o{rng.randrange(4)}"))
        return f"delete {kind}"
    if op == 9:
        spec = {"runStrategy": rng.choice(("Always", "Halted"))}
        http(
            "PATCH",
            path("VirtualMachine", "osc", f"o{rng.randrange(4)}"),
            {"spec": spec},
            "application/merge-patch+json",
        )
        return "vm spec"
    if op == 10:
        n = f"n{rng.randrange(4)}"
        if rng.random() < 0.5:
            http("POST", path("Node"), node(n, {"zone": rng.choice("ab")}))
        else:
            http("DELETE", path("Node", None, n))
        return f"node {n}"
    np_name = f"np{rng.randrange(3)}"
    if rng.random() < 0.6:
        http("POST", path("NetworkPolicy", "shop"), netpol(np_name, "shop", {"tier": "web"}))
    else:
        http("DELETE", path("NetworkPolicy", "shop", np_name))
    return f"netpol {np_name}"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_changes_by_other_clients(
    seeded: KubeApiServer,
    cluster: KubeCluster,
    started: Callable[..., KubeCache],
    kubeconfig: str,
    kubectl: str,
    seed: int,
) -> None:
    cache = started()
    http = Http(seeded.url)

    def kubectl_run(args: list[str]) -> None:
        subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, *args], capture_output=True, timeout=30
        )

    rng = random.Random(seed)
    for batch in range(6):
        done = [random_step(rng, http, kubectl_run) for _ in range(rng.randrange(1, 8))]
        try:
            converge(cache, cluster)
        except BaseException:
            print(f"batch {batch}: {done}")
            raise
        # identity: nothing changed since, so the very same tuples come back
        first = cache_view(cache)
        assert all(
            a is b
            for a, b in zip(
                (cache.list_pods(), cache.list_nodes()),
                (cache.list_pods(), cache.list_nodes()),
                strict=True,
            )
        )
        assert first == live_view(cluster)


# ---------------------------------------------------------------- writes


@pytest.mark.usefixtures("seeded")
def test_writes_are_visible_before_the_watch_delivers_them(
    kube_server: KubeApiServer, cluster: KubeCluster, started: Callable[..., KubeCache]
) -> None:
    cache = started(stale_after=3600.0)  # served from memory while the watch is held back
    # Hold the watches back: drop the streams and delay their resumption, so whatever the
    # cache shows meanwhile it got from its own writes.
    kube_server.faults.delay(3.0, method="GET", path_contains="watch=true")
    kube_server.faults.drop_watches()
    body = {
        "metadata": {"labels": owned_labels(**{"osc.io/node": "n3"}), "annotations": {}},
        "spec": {"runStrategy": "Always"},
    }
    answer = cache.create("VirtualMachine", "osc", "fw-n3", body)
    assert answer["metadata"]["name"] == "fw-n3" and answer["metadata"]["resourceVersion"]
    names = [v.name for v in cache.list_owned("VirtualMachine", INSTANCE)]
    assert names == ["fw-n1", "fw-n2", "fw-n3"]
    body["spec"] = {"runStrategy": "Halted"}
    cache.replace_managed("VirtualMachine", "osc", "fw-n3", body)
    fw3 = cache.list_owned("VirtualMachine", INSTANCE)[-1]
    assert fw3.body["spec"] == {"runStrategy": "Halted"}
    cache.delete("VirtualMachine", "osc", "fw-n1")
    cache.delete("VirtualMachine", "osc", "never-existed")  # 404: fine, nothing changes
    names = [v.name for v in cache.list_owned("VirtualMachine", INSTANCE)]
    assert names == ["fw-n2", "fw-n3"]
    assert cache.serving("VirtualMachine")  # so that answer came from the store
    assert cache_view(cache) == live_view(cluster)
    # when the delayed watch catches up, its (older) events change nothing: a marker made
    # after them arrives last, and it is the only change the cache counts
    rev = cache.revision
    kube_server.faults.clear()
    Http(kube_server.url)("POST", path("VirtualMachine", "osc"), vm("marker"))
    wait_until(lambda: cache.list_owned("VirtualMachine", INSTANCE)[-1].name == "marker", "it")
    assert cache.revision == rev + 1
    converge(cache, cluster)


def test_store_orders_events_by_resource_version() -> None:
    """The rules that let writes and late watch events meet in any order."""
    store = _Store("Pod", lambda o: (o["metadata"]["name"], o["metadata"]["labels"]))

    def obj(name: str, rv: int, **labels: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "resourceVersion": str(rv), "labels": labels}}

    store.replace([obj("a", 5), obj("b", 6)], 6)
    assert store.upsert(obj("a", 10, v="new"))  # written through
    assert not store.upsert(obj("a", 8, v="old"))  # a late event: older, ignored
    assert store.snapshot()[0] == ("a", {"v": "new"})
    assert store.delete(obj("b", 12))
    assert not store.upsert(obj("b", 11, v="late"), event="MODIFIED")  # no resurrection
    assert store.upsert(obj("b", 13, v="again"), event="ADDED")  # re-created later
    assert not store.delete(obj("b", 12))  # the old deletion does not remove the new one
    # a RELIST taken before our write keeps the write; one taken after replaces it
    assert store.delete(obj("a", 20))
    store.replace([obj("a", 10, v="new"), obj("b", 13, v="again")], 15)
    assert [k for k, _ in store.snapshot()] == ["b"]  # deleted after the list was taken
    store.replace([obj("b", 30, v="relisted")], 30)
    assert store.snapshot() == (("b", {"v": "relisted"}),)
    # equal content keeps the identity of the view and its items
    view = store.snapshot()
    assert not store.upsert(obj("b", 31, v="relisted"))
    assert not store.replace([obj("b", 32, v="relisted")], 32)
    assert store.snapshot() is view


def test_tombstones_do_not_pile_up() -> None:
    """Deleted names are remembered for a while (``tombstone_ttl``), not forever."""

    def obj(name: str, rv: int) -> dict[str, Any]:
        return {"metadata": {"name": name, "resourceVersion": str(rv), "labels": {}}}

    kept = _Store("Pod", lambda o: o["metadata"]["name"])
    short = _Store("Pod", lambda o: o["metadata"]["name"], tombstone_ttl=-1.0)
    for store in (kept, short):
        store.replace([obj(f"p{i}", i) for i in range(100)], 100)
        for i in range(100):
            assert store.delete(obj(f"p{i}", 101 + i))
        assert store.snapshot() == ()
    assert len(kept.tombstones) == 100
    assert list(short.tombstones) == [("", "p99")]  # only the newest survives
    assert not kept.upsert(obj("p5", 104))  # a late answer does not resurrect p5


# ---------------------------------------------------------------- RELIST, absent APIs


@pytest.mark.usefixtures("seeded")
def test_relist_after_compaction_replaces_the_store(
    kube_server: KubeApiServer, cluster: KubeCluster, started: Callable[..., KubeCache]
) -> None:
    cache = started()
    heard: list[str] = []
    stop = threading.Event()
    listener = threading.Thread(
        target=cache.watch, args=("Pod", lambda t, o: heard.append(t), stop), daemon=True
    )
    listener.start()
    try:
        wait_until(lambda: len(cache._listeners["Pod"]) == 1, "the listener")
        # every kind's watch is open, so the drop below ends them all
        wait_until(lambda: kube_server.watches_started >= 5, "the five watches")
        http = Http(kube_server.url)
        # The watches are dropped and held back (3 s, plenty for the next three requests)
        # while pods change and history is compacted: when they resume, their
        # resourceVersion is gone (410) and they must list again.
        kube_server.faults.delay(3.0, method="GET", path_contains="watch=true")
        kube_server.faults.drop_watches()
        http("DELETE", path("Pod", "shop", "web-1"))
        http("POST", path("Pod", "shop"), pod("web-3", "shop", {"tier": "web"}, "n2"))
        kube_server.compact()
        kube_server.faults.clear()  # the resumed watches already wait out their delay
        converge(cache, cluster)
        wait_until(lambda: "RELIST" in heard, "a RELIST to reach the listener")
        assert [p.name for p in cache.list_pods()] == ["db-1", "pending", "web-2", "web-3"]
        # and the watch goes on from the new list
        http("POST", path("Pod", "shop"), pod("web-4", "shop", {}, "n1"))
        converge(cache, cluster)
    finally:
        stop.set()
        listener.join(10)


@pytest.mark.usefixtures("seeded")
def test_absent_api_is_an_empty_synced_store_until_it_appears(
    kube_server: KubeApiServer, cluster: KubeCluster, started: Callable[..., KubeCache]
) -> None:
    # KubeVirt "not installed" for the first list: the cache syncs with no VMs (as the live
    # adapter answers []), then lists again and finds them once the API is there.
    kube_server.faults.fail(1, 404, method="GET", path_contains="/virtualmachines")
    cache = started(absent_retry=0.3)
    assert cache.synced
    wait_until(lambda: len(cache.list_owned("VirtualMachine", INSTANCE)) == 2, "VMs to appear")
    converge(cache, cluster)


# ---------------------------------------------------------------- watch() for the loop


@pytest.mark.usefixtures("seeded")
def test_watch_listeners_run_after_the_store_has_the_change(
    kube_server: KubeApiServer, started: Callable[..., KubeCache]
) -> None:
    cache = started()
    seen: list[tuple[str, str, bool]] = []
    vm_events: list[str] = []

    def on_pod(etype: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        seen.append((etype, name, any(p.name == name for p in cache.list_pods())))

    stop = threading.Event()
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{OWNER}={INSTANCE}"
    threads = [
        threading.Thread(target=cache.watch, args=("Pod", on_pod, stop), daemon=True),
        threading.Thread(
            target=cache.watch,
            args=("VirtualMachine", lambda t, o: vm_events.append(o["metadata"]["name"]), stop),
            kwargs={"label_selector": selector},
            daemon=True,
        ),
    ]
    for t in threads:
        t.start()
    try:
        listening = cache._listeners
        wait_until(lambda: len(listening["Pod"]) == len(listening["VirtualMachine"]) == 1, "both")
        http = Http(kube_server.url)
        http("POST", path("Pod", "shop"), pod("new", "shop", {}, "n1"))
        http("DELETE", path("Pod", "shop", "new"))
        http("POST", path("VirtualMachine", "osc"), vm("not-ours", labels={OWNER: "x"}))
        http("POST", path("VirtualMachine", "osc"), vm("ours"))
        wait_until(lambda: len(seen) == 2 and vm_events == ["ours"], "events")
        assert seen == [("ADDED", "new", True), ("DELETED", "new", False)]
    finally:
        stop.set()
        for t in threads:
            t.join(10)
            assert not t.is_alive()


@pytest.mark.usefixtures("seeded")
def test_watch_listener_error_propagates_and_falls_back_when_not_cached(
    kube_server: KubeApiServer, cluster: KubeCluster, started: Callable[..., KubeCache]
) -> None:
    cache = started(instance=None)  # owned kinds not followed: VM watches go live

    def boom(etype: str, obj: dict[str, Any]) -> None:
        raise RuntimeError(f"callback failed on {etype}")

    errors: list[BaseException] = []

    def run() -> None:
        try:
            cache.watch("Pod", boom, threading.Event())
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_until(lambda: len(cache._listeners["Pod"]) == 1, "the listener")
    Http(kube_server.url)("POST", path("Pod", "shop"), pod("x", "shop"))
    t.join(10)
    assert [str(e) for e in errors] == ["callback failed on ADDED"]
    assert cache._listeners["Pod"] == []
    # VirtualMachines are not cached here: the live watch answers (and raises the same way)
    with pytest.raises(RuntimeError, match="callback failed on ADDED"):
        cache.watch("VirtualMachine", boom, threading.Event(), resource_version="1")


def test_cache_threads_stop_with_the_event(cluster: KubeCluster, tmp_path: Path) -> None:
    cache = KubeCache(cluster)
    stop = threading.Event()
    cache.start(stop, INSTANCE)
    assert cache.wait_synced(TIMEOUT)
    with pytest.raises(RuntimeError, match="already"):
        cache.start(stop, INSTANCE)
    stop.set()
    assert cache.join(15)


def test_live_watch_reports_when_its_stream_opens_and_closes(
    kube_server: KubeApiServer, cluster: KubeCluster
) -> None:
    """``KubeCluster.watch(on_status=...)``: what the cache's staleness rule is built on."""
    states: list[bool] = []
    stop = threading.Event()
    watcher = threading.Thread(
        target=cluster.watch,
        args=("Pod", lambda t, o: None, stop),
        kwargs={"on_status": states.append, "backoff": (0.05, 0.2)},
        daemon=True,
    )
    watcher.start()
    try:
        wait_until(lambda: states == [True] and kube_server.watches_started == 1, "the stream")
        kube_server.faults.drop_watches()
        wait_until(lambda: states[1:3] == [False, True], "a dropped stream to reopen")
        kube_server.stop()
        wait_until(lambda: len(states) > 3 and states[-1] is False, "the outage to be seen")
        with pytest.raises(KubeConnectError):
            cluster.list_pods()  # the server is really gone, and the watch says so
        assert states[-1] is False
        assert all(a is not b for a, b in itertools.pairwise(states))  # changes only
        kube_server.start()
        wait_until(lambda: states[-1] is True, "the stream to reopen after the outage")
    finally:
        stop.set()
        watcher.join(10)
    assert not watcher.is_alive()
    assert states[-1] is False  # stopping closes the stream too
