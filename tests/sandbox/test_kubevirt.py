"""KubeVirt behind the API emulator: VMIs, VM status, ``RestartRequired`` and the lifecycle
subresources (``virtctl restart|start|stop``), through the official client and kubectl.

The answers follow KubeVirt's virt-api (``pkg/virt-api/rest/lifecycle.go``) and
virt-controller; the data path's side (a guest that goes down and boots again) is proven with
packets in ``tests/datapath/test_vm_lifecycle.py``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from osc_gitops_sandbox.kubeapi.kubevirt import (
    RESTART_REQUIRED,
    VM_GENERATION,
    KubeVirt,
    restart_path,
)
from osc_gitops_sandbox.kubeapi.server import KubeApiServer

NS = "vnfs"


@pytest.fixture
def kv() -> Iterator[tuple[KubeApiServer, KubeVirt]]:
    server = KubeApiServer()
    kubevirt = KubeVirt(server)
    server.start()
    try:
        yield server, kubevirt
    finally:
        server.stop()


@pytest.fixture
def api(kv: tuple[KubeApiServer, KubeVirt]) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    cfg.host = kv[0].url
    with client.ApiClient(cfg) as api_client:
        yield api_client


def vm(name: str = "fw-n1", strategy: str = "Always", image: str = "fw:1") -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"runStrategy": strategy, "template": {
            "metadata": {"labels": {"osc.io/vnf": "fw"}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"},
                     "domain": {"devices": {}},
                     "volumes": [{"name": "disk", "containerDisk": {"image": image}}]}}},
    }  # fmt: skip


def put(api: client.ApiClient, path: str, body: Any = None) -> int:
    """PUT a subresource as virtctl does; the HTTP status (an error's status too)."""
    try:
        response = api.call_api(path, "PUT", body=body, _preload_content=False)[0]
    except ApiException as exc:
        return int(exc.status)
    assert response.data == b"", "virt-api answers 202 with an empty body"
    return int(response.status)


def error(api: client.ApiClient, path: str, body: Any = None) -> tuple[int, str]:
    with pytest.raises(ApiException) as err:
        api.call_api(path, "PUT", body=body, _preload_content=False)
    return int(err.value.status), json.loads(err.value.body)["message"]


def test_a_running_vm_gets_an_instance_and_kubevirts_status(
    kv: tuple[KubeApiServer, KubeVirt], api: client.ApiClient
) -> None:
    server, kubevirt = kv
    custom = client.CustomObjectsApi(api)
    server.add_objects([{"kind": "Namespace", "metadata": {"name": NS}}])
    created = custom.create_namespaced_custom_object(
        "kubevirt.io", "v1", NS, "virtualmachines", vm()
    )
    kubevirt.wait_settled()
    vmi = custom.get_namespaced_custom_object(
        "kubevirt.io", "v1", NS, "virtualmachineinstances", "fw-n1"
    )
    assert vmi["spec"] == created["spec"]["template"]["spec"]
    # KubeVirt's webhook defaulted the VM at create (osc_gitops_sandbox.kubeapi.kubevirt_webhook)
    domain = created["spec"]["template"]["spec"]["domain"]
    assert set(domain["firmware"]) == {"uuid", "serial"} and domain["machine"] == {"type": "q35"}
    assert vmi["metadata"]["labels"] == {"osc.io/vnf": "fw"}
    assert vmi["metadata"]["annotations"][VM_GENERATION] == "1"
    assert vmi["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert vmi["status"]["phase"] == "Running" and vmi["status"]["nodeName"] == "n1"
    status = custom.get_namespaced_custom_object(
        "kubevirt.io", "v1", NS, "virtualmachines", "fw-n1"
    )["status"]
    assert status["printableStatus"] == "Running" and status["ready"] and status["created"]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Ready", "True")]
    assert status["desiredGeneration"] == status["observedGeneration"] == 1

    # the VMI deleted by hand: a runStrategy Always VM gets a new one
    custom.delete_namespaced_custom_object(
        "kubevirt.io", "v1", NS, "virtualmachineinstances", "fw-n1"
    )
    kubevirt.wait_settled()
    again = server.get_object("VirtualMachineInstance", NS, "fw-n1")
    assert again is not None and again["metadata"]["uid"] != vmi["metadata"]["uid"]

    # Halted: no instance, Stopped; the VM deleted: its instance goes with it
    server.patch(server.resource_type("VirtualMachine"), NS, "fw-n1",
                 "application/merge-patch+json", {"spec": {"runStrategy": "Halted"}})  # fmt: skip
    kubevirt.wait_settled()
    assert server.get_object("VirtualMachineInstance", NS, "fw-n1") is None
    halted = server.get_object("VirtualMachine", NS, "fw-n1")
    assert halted is not None and halted["status"]["printableStatus"] == "Stopped"
    assert not halted["status"]["ready"] and not halted["status"]["created"]
    server.patch(server.resource_type("VirtualMachine"), NS, "fw-n1",
                 "application/merge-patch+json", {"spec": {"runStrategy": "Always"}})  # fmt: skip
    kubevirt.wait_settled()
    assert server.get_object("VirtualMachineInstance", NS, "fw-n1") is not None
    custom.delete_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", "fw-n1")
    kubevirt.wait_settled()
    assert server.objects("VirtualMachineInstance") == []


def test_restart_replaces_the_instance_and_clears_restart_required(
    kv: tuple[KubeApiServer, KubeVirt], api: client.ApiClient
) -> None:
    server, kubevirt = kv
    server.add_objects([vm()])
    kubevirt.wait_settled()
    first = server.get_object("VirtualMachineInstance", NS, "fw-n1")
    assert first is not None

    # a new image while it runs: KubeVirt keeps the old instance and says a restart is needed
    server.patch(server.resource_type("VirtualMachine"), NS, "fw-n1",
                 "application/merge-patch+json", vm(image="fw:2"))  # fmt: skip
    kubevirt.wait_settled()
    live = server.get_object("VirtualMachine", NS, "fw-n1")
    assert live is not None
    conditions = {c["type"]: c for c in live["status"]["conditions"]}
    assert conditions[RESTART_REQUIRED]["status"] == "True"
    assert "non-live-updatable" in conditions[RESTART_REQUIRED]["message"]
    assert (live["status"]["desiredGeneration"], live["status"]["observedGeneration"]) == (2, 1)
    same = server.get_object("VirtualMachineInstance", NS, "fw-n1")
    assert same is not None and same["metadata"]["uid"] == first["metadata"]["uid"]

    assert put(api, restart_path(NS, "fw-n1"), {}) == 202
    kubevirt.wait_settled()
    second = server.get_object("VirtualMachineInstance", NS, "fw-n1")
    assert second is not None and second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["spec"]["volumes"][0]["containerDisk"]["image"] == "fw:2"
    assert second["metadata"]["annotations"][VM_GENERATION] == "2"
    live = server.get_object("VirtualMachine", NS, "fw-n1")
    assert live is not None
    assert [c["type"] for c in live["status"]["conditions"]] == ["Ready"]
    assert live["status"]["observedGeneration"] == 2
    assert "stateChangeRequests" not in live["status"]
    assert live["metadata"]["generation"] == 2, "status writes never bump the generation"


def test_restart_answers_as_virt_api(
    kv: tuple[KubeApiServer, KubeVirt], api: client.ApiClient
) -> None:
    server, kubevirt = kv
    server.add_objects([vm(), vm("halted", strategy="Halted")])
    kubevirt.wait_settled()
    assert error(api, restart_path(NS, "nope")) == (
        404,
        'virtualmachines.kubevirt.io "nope" not found',
    )
    assert error(api, restart_path(NS, "halted")) == (
        409, 'Operation cannot be fulfilled on virtualmachine.kubevirt.io "halted": '
        "RunStategy Halted does not support manual restart requests",
    )  # fmt: skip
    code, message = error(api, restart_path(NS, "fw-n1"), {"gracePeriodSeconds": 30})
    assert code == 400 and "only gracePeriod=0" in message
    assert put(api, restart_path(NS, "fw-n1"), {"dryRun": ["All"]}) == 202
    kubevirt.wait_settled()
    assert "stateChangeRequests" not in server.get_object("VirtualMachine", NS, "fw-n1")["status"]

    # while a restart is pending (the controller held back), a second one is refused
    kubevirt.stop()
    try:
        assert put(api, restart_path(NS, "fw-n1")) == 202
        pending = server.get_object("VirtualMachine", NS, "fw-n1")["status"]
        assert [r["action"] for r in pending["stateChangeRequests"]] == ["Stop", "Start"]
        code, message = error(api, restart_path(NS, "fw-n1"))
        assert code == 500 and "stop/start already underway" in message
    finally:
        kubevirt.start()
    kubevirt.wait_settled()
    assert "stateChangeRequests" not in server.get_object("VirtualMachine", NS, "fw-n1")["status"]

    # virtctl stop / start flip the runStrategy, as for an Always VM
    assert put(api, restart_path(NS, "fw-n1", "stop")) == 202
    kubevirt.wait_settled()
    assert server.get_object("VirtualMachineInstance", NS, "fw-n1") is None
    assert error(api, restart_path(NS, "fw-n1"))[0] == 409
    assert put(api, restart_path(NS, "fw-n1", "start")) == 202
    kubevirt.wait_settled()
    assert server.get_object("VirtualMachineInstance", NS, "fw-n1") is not None
    assert error(api, restart_path(NS, "fw-n1", "start"))[1].endswith(
        "Always does not support manual start requests"
    )


def test_discovery_lists_the_subresources(api: client.ApiClient) -> None:
    doc = json.loads(
        api.call_api("/apis/subresources.kubevirt.io/v1", "GET", _preload_content=False)[0].data
    )
    assert {r["name"] for r in doc["resources"]} == {
        "virtualmachines/restart", "virtualmachines/start", "virtualmachines/stop"
    }  # fmt: skip
    groups = client.ApisApi(api).get_api_versions()
    assert "subresources.kubevirt.io" in {g.name for g in groups.groups}


def test_kubectl_restarts_a_vm_and_lists_its_instance(
    kv: tuple[KubeApiServer, KubeVirt], kubectl: str, tmp_path: Path
) -> None:
    server, kubevirt = kv
    server.add_objects([vm()])
    kubevirt.wait_settled()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    before = server.get_object("VirtualMachineInstance", NS, "fw-n1")
    assert before is not None

    def kubectl_run(*args: str, stdin: str | None = None) -> str:
        proc = subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, "--request-timeout=10s", *args],
            input=stdin, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    # the raw PUT virtctl sends (kubectl replace --raw is PUT to an arbitrary path)
    kubectl_run("replace", "--raw", restart_path(NS, "fw-n1"), "-f", "-", stdin="{}")
    kubevirt.wait_settled()
    listed = json.loads(kubectl_run("get", "vmi", "-n", NS, "-o", "json"))
    (after,) = listed["items"]
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    phase = kubectl_run("get", "vm", "fw-n1", "-n", NS, "-o",
                        "jsonpath={.status.printableStatus}")  # fmt: skip
    assert phase == "Running"
    raw = json.loads(kubectl_run("get", "--raw", "/apis/subresources.kubevirt.io/v1"))
    assert raw["groupVersion"] == "subresources.kubevirt.io/v1"
