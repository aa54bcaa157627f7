"""Scale: 10,000 pods through the production adapter. Numbers are printed (run with ``-s``)
and recorded as junit properties; correctness is asserted, time is not (shared CI runners)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from osc_gitops_sandbox.kubeapi.server import KubeApiServer

from reconciler.adapters.kube.client import KubeCluster
from tests.support.kube import pod

N_PODS = 10_000
N_NODES = 50


def realistic_pod(i: int) -> dict[str, Any]:
    body = pod(
        f"app-{i:05d}",
        f"team-{i % 40:02d}",
        {
            "app": f"svc-{i % 400}",
            "tier": ("web", "api", "db", "batch")[i % 4],
            "pod-template-hash": f"{i * 7919 % 100000:05d}",
        },
        f"node-{i % N_NODES:02d}",
    )
    a, b = i // 250, i % 250
    networks = {
        "default": {
            "ip_addresses": [f"10.244.{a}.{b}/24"],
            "mac_address": f"0a:58:0a:f4:{a:02x}:{b:02x}",
        }
    }
    body["metadata"]["annotations"] = {"k8s.ovn.org/pod-networks": json.dumps(networks)}
    body["status"] = {"phase": "Running", "podIP": f"10.244.{i // 250}.{i % 250}"}
    return body


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def test_ten_thousand_pods(
    kube_server: KubeApiServer, cluster: KubeCluster, record_property: Callable[[str, object], None]
) -> None:
    _, seed_s = timed(lambda: kube_server.add_objects(realistic_pod(i) for i in range(N_PODS)))
    pods, list_s = timed(cluster.list_pods)
    assert len(pods) == N_PODS
    assert len({p.uid for p in pods}) == N_PODS
    assert pods[0].namespace == "team-00" and pods[0].node is not None

    # svc-0 ... svc-399 each label 25 pods: three values -> 75 pods, one set-based selector
    selected, select_s = timed(lambda: cluster.list_pods(None, "app in (svc-7,svc-8,svc-9)"))
    assert len(selected) == 75
    assert {p.labels["app"] for p in selected} == {"svc-7", "svc-8", "svc-9"}

    numbers = {"seed_10k_s": seed_s, "list_pods_10k_s": list_s, "selector_75_s": select_s}
    for key, value in numbers.items():
        record_property(key, round(value, 3))
    print("\n" + ", ".join(f"{k}={v:.3f}" for k, v in numbers.items()))
