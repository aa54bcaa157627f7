"""The Kubernetes adapter against the API emulator (fixtures: ``tests.fixtures.kube``)."""

from tests.fixtures.kube import (  # noqa: F401
    api_client,
    cluster,
    core,
    custom,
    kube_server,
    kubeconfig,
    kubectl,
)
