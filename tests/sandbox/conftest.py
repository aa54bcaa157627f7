"""Self-tests of the sandbox: the Kubernetes API emulator (checked against kubectl) and the
local OVN stack. They keep the test doubles honest; the product's tests rely on them."""

from tests.fixtures.kube import (  # noqa: F401
    api_client,
    cluster,
    core,
    custom,
    kube_server,
    kubeconfig,
    kubectl,
)
from tests.fixtures.ovn import nb23, nb26, pods  # noqa: F401
