"""Fixtures for the Kubernetes side: a fresh API emulator per test (stopped even on failure)
and the official client / our adapter pointed at it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from osc_gitops_sandbox.kubeapi import KubeApiServer

from reconciler.adapters.kube.client import KubeCluster, KubeSettings


@pytest.fixture
def kube_server() -> Iterator[KubeApiServer]:
    server = KubeApiServer(bookmark_interval=0.2).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def api_client(kube_server: KubeApiServer) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    cfg.host = kube_server.url
    api = client.ApiClient(cfg)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def cluster(kube_server: KubeApiServer) -> Iterator[KubeCluster]:
    kc = KubeCluster(KubeSettings(server=kube_server.url, timeout=5.0))
    try:
        yield kc
    finally:
        kc.close()


@pytest.fixture
def kubeconfig(kube_server: KubeApiServer, tmp_path: Path) -> str:
    return kube_server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed (the independent client check needs it)")
    return path
