"""HTTPS: the adapter verifies the server certificate by default."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.kubeapi.server import KubeApiServer
from osc_gitops_sandbox.kubeapi.tls import TestCa, make_test_ca

from reconciler.adapters.kube.client import KubeCluster, KubeConnectError, KubeSettings

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCa:
    return make_test_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def tls_server(ca: TestCa) -> Iterator[KubeApiServer]:
    with KubeApiServer(tls=ca.server_tls) as srv:
        srv.add_objects([{"kind": "Node", "metadata": {"name": "n1"}}])
        yield srv


def test_verified_with_the_ca(tls_server: KubeApiServer, ca: TestCa) -> None:
    assert tls_server.url.startswith("https://")
    kc = KubeCluster(KubeSettings(server=tls_server.url, ca_file=ca.ca_cert))
    assert [n.name for n in kc.list_nodes()] == ["n1"]


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_unknown_ca_is_refused(tls_server: KubeApiServer) -> None:
    kc = KubeCluster(KubeSettings(server=tls_server.url))
    with pytest.raises(KubeConnectError) as err:
        kc.list_nodes()
    assert tls_server.url in str(err.value)
    assert "certificate verification failed" in str(err.value)
    insecure = KubeCluster(KubeSettings(server=tls_server.url, insecure_skip_tls_verify=True))
    assert [n.name for n in insecure.list_nodes()] == ["n1"]


def test_kubeconfig_with_ca(tls_server: KubeApiServer, ca: TestCa, tmp_path: Path) -> None:
    path = tls_server.write_kubeconfig(tmp_path / "kc", ca_file=ca.ca_cert)
    kc = KubeCluster(KubeSettings(kubeconfig=path))
    assert [n.name for n in kc.list_nodes()] == ["n1"]
    kubectl = shutil.which("kubectl")
    if kubectl:
        out = subprocess.run(
            [kubectl, "--kubeconfig", path, "get", "nodes", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["node/n1"]
