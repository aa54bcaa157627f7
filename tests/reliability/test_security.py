"""TLS everywhere, secrets never printed, hostile input rejected or made harmless."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from osc_gitops_sandbox.kubeapi.server import KubeApiServer
from osc_gitops_sandbox.kubeapi.tls import make_test_ca
from osc_gitops_sandbox.ovn.stack import OvnSandbox, SeedNode, SeedPod, seed_ovn_kubernetes

from reconciler.core.compiling.compile import CompileError, CompileOptions, compile_target
from reconciler.core.model import naming
from reconciler.core.model.observed import (
    Node,
    Observed,
    OvnCapabilities,
    Pod,
    PodPort,
    Switch,
)
from reconciler.errors import ValidationFailed
from reconciler.manifests.load import load_path
from tests.reliability.harness import SET_A, SET_B, cli, record, skip_without_nf
from tests.support.cli import nothing_to_write

# --------------------------------------------------------------------------- TLS + secrets


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _pki(d: Path, name: str) -> dict[str, str]:
    """A CA plus a server and a client certificate signed by it (``ovs-pki``-like layout)."""
    d.mkdir(parents=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", f"/CN={name}-ca", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    for who in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}-{who}",
                 "-keyout", f"{who}.key", "-out", f"{who}.csr", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "1", "-out", f"{who}.pem", cwd=d)  # fmt: skip
    return {p: str(d / p) for p in ("ca.pem", "server.key", "server.pem", "client.key",
                                    "client.pem")}  # fmt: skip


def _key_body(path: str) -> str:
    """The base64 body of a PEM key: what must never be printed."""
    lines = Path(path).read_text().splitlines()
    return "".join(line for line in lines if not line.startswith("-----"))


@pytest.mark.filterwarnings("ignore:ssl.PROTOCOL_TLS is deprecated:DeprecationWarning")
def test_tls_to_nb_and_kubernetes_and_secrets_never_printed(tmp_path: Path) -> None:
    skip_without_nf()
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    good, rogue = _pki(tmp_path / "pki", "osc"), _pki(tmp_path / "rogue", "rogue")
    kube_ca = make_test_ca(tmp_path / "kube-ca")
    token = "bearer-" + os.urandom(12).hex()
    git_token = "ghp_" + os.urandom(12).hex()
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "all.yaml").write_text(SET_A)
    ssl = (good["server.key"], good["server.pem"], good["ca.pem"])
    with OvnSandbox(tmp_path / "ovn", northd=False, nb_schema="26.03", ssl=ssl) as ovn, \
            KubeApiServer(tls=kube_ca.server_tls, token=token) as kube:  # fmt: skip
        seed_ovn_kubernetes(ovn.nb_remote, [SeedNode("node-1", "10.244.1.0/24")],
                            [SeedPod("shop", "web-1", "uid-1", "node-1", "0a:58:0a:f4:01:05",
                                     "10.244.1.5")])  # fmt: skip
        kube.add_objects([
            {"kind": "Namespace", "metadata": {"name": "shop"}},
            {"kind": "Namespace", "metadata": {"name": "osc-vnfs"}},
            {"kind": "Node", "metadata": {"name": "node-1"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "uid-1", "labels": {"app": "web"}},
             "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]}},
        ])  # fmt: skip
        kubeconfig = kube.write_kubeconfig(tmp_path / "kc", ca_file=kube_ca.ca_cert)
        nb = ["--ovn-nb", ovn.nb_ssl_remote, "--ovn-private-key", good["client.key"],
              "--ovn-certificate", good["client.pem"], "--ovn-ca-cert", good["ca.pem"]]  # fmt: skip
        outputs: list[str] = []
        applied = cli("apply", policies, *nb, "--kubeconfig", kubeconfig, "-o", "json")
        outputs += [applied.out, applied.err]
        assert applied.code == 0, applied.err
        assert nothing_to_write(policies, *nb, "--kubeconfig", kubeconfig)
        # an NB whose certificate was signed by a CA we do not trust: refused, exit 1
        bad_nb = [*nb[:-1], rogue["ca.pem"]]
        refused = cli("plan", policies, *bad_nb, "--kubeconfig", kubeconfig, "--ovn-timeout", "2")
        outputs += [refused.out, refused.err]
        assert refused.code == 1 and ovn.nb_ssl_remote in refused.err
        assert "Traceback" not in refused.err
        # an API server certificate from an unknown CA: refused with a clear error, exit 1
        no_ca = kube.write_kubeconfig(tmp_path / "kc-no-ca")
        unknown = cli("plan", policies, *nb, "--kubeconfig", no_ca)
        outputs += [unknown.out, unknown.err]
        assert unknown.code == 1 and "certificate verification failed" in unknown.err
        assert kube.url in unknown.err and "Traceback" not in unknown.err
        # a git token, from the environment, on an unreachable remote
        env = {**os.environ, "OSC_GIT_TOKEN": git_token}
        exe = Path(os.sys.executable).with_name("osc-gitops")
        git = subprocess.run([str(exe), "plan", "--repo", "https://127.0.0.1:9/x/policies.git",
                              "--git-timeout", "5", "--cache-dir", str(tmp_path / "cache"), *nb,
                              "--kubeconfig", kubeconfig],
                             env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        outputs += [git.stdout, git.stderr]
        assert git.returncode == 1 and "127.0.0.1:9" in git.stderr, git.stderr
    everything = "\n".join(outputs)
    for secret in (_key_body(good["client.key"]), token, git_token):
        assert secret not in everything
    for chunk in re.findall(r".{24}", _key_body(good["client.key"])):
        assert chunk not in everything  # not even a piece of the key
    record("security: TLS + secrets", faults=3, converged=True)


# --------------------------------------------------------------------------- injection

HOSTILE = [
    'web"', "web||1", "web && 1", "web$x", "@pg", "web\n", "web\r\nx", "w\u0435b",  # Cyrillic e
    "web\u200b", "web)", "web' || '1", "web\x00", "\u210cweb", "web/../x", "web;",
]  # fmt: skip


@pytest.mark.parametrize("value", HOSTILE, ids=[repr(v) for v in HOSTILE])
@pytest.mark.parametrize("where", ["label-value", "label-key", "name", "namespace", "ports"])
def test_hostile_strings_are_rejected_at_validation(tmp_path: Path, where: str, value: str) -> None:
    spec: dict[str, object] = {"labels": ["app=web"], "namespaces": ["shop"]}
    name = "web"
    binding: dict[str, object] = {"securityGroup": "web", "vnf": "fw", "order": 1}
    if where == "label-value":
        spec["labels"] = [f"app={value}"]
    elif where == "label-key":
        spec["labels"] = [f"{value}=web"]
    elif where == "name":
        name = value
        binding["securityGroup"] = value
    elif where == "namespace":
        spec["namespaces"] = [value]
    else:
        binding["traffic"] = {"protocol": "tcp", "ports": [value]}
    docs = [
        {"apiVersion": "osc.io/v1alpha1", "kind": "SecurityGroup", "metadata": {"name": name},
         "spec": spec},
        {"apiVersion": "osc.io/v1alpha1", "kind": "VnfDeployment", "metadata": {"name": "fw"},
         "spec": {"namespace": "osc-vnfs", "image": "quay.io/x/fw:1"}},
        {"apiVersion": "osc.io/v1alpha1", "kind": "Binding", "metadata": {"name": "b"},
         "spec": binding},
    ]  # fmt: skip
    path = tmp_path / "m.yaml"
    path.write_text("\n---\n".join(json.dumps(d) for d in docs))  # JSON is YAML
    with pytest.raises(ValidationFailed):
        load_path(path)


_SAFE_MATCH = re.compile(r"[A-Za-z0-9_.@$ =!&|(){}<>,:\-/]+")
_NAME_REF = re.compile(r"[@$]([A-Za-z0-9_.]+?)(?:_ip4)?(?=$|[ )])")
_PORT_REF = re.compile(r'"([^"]*)"')
"""A quoted logical port name (``inport == "nf_fw_node-1_out"``): only VNF ports may appear."""
_DNS = r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?"
_hostile_text = st.one_of(
    st.from_regex(rf"\A{_DNS}\Z"),
    st.sampled_from(HOSTILE),
    st.text(min_size=1, max_size=12),
    st.from_regex(rf"\A{_DNS}\Z").map(lambda s: s + "\n"),
)


@st.composite
def observed_states(draw: st.DrawFn) -> Observed:
    nodes = draw(st.lists(_hostile_text, min_size=1, max_size=4, unique=True))
    pods = []
    ports = []
    for i in range(draw(st.integers(0, 8))):
        ns = draw(st.one_of(st.sampled_from(["shop", "shop-backend"]), _hostile_text))
        name = draw(_hostile_text)
        node = draw(st.sampled_from(nodes))
        app = draw(st.sampled_from(["web", "postgres", "cdn-edge", "x"]))
        uid = f"uid-{i}"
        pods.append(Pod(ns, name, uid, node, {"app": app}))
        ports.append(PodPort(f"{ns}_{name}", node, ns, name, uid, "0a:58:00:00:00:01",
                             ("10.0.0.1",)))  # fmt: skip
    return Observed(
        pods=tuple(pods),
        nodes=tuple(Node(n) for n in nodes),
        pod_ports=tuple(ports),
        switches=tuple(Switch(n, "10.244.0.0/24") for n in nodes),
        routers=("ovn_cluster_router",),
        capabilities=OvnCapabilities("7.18.0", network_function=True),
    )


@pytest.fixture(scope="module")
def desired_sets(tmp_path_factory: pytest.TempPathFactory) -> list[object]:
    out = []
    for text in (SET_A, SET_B):
        d = tmp_path_factory.mktemp("set")
        (d / "all.yaml").write_text(text)
        out.append(load_path(d))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(observed=observed_states(), which=st.integers(0, 1),
       steering=st.sampled_from(["network-function", "router-policy"]))  # fmt: skip
def test_fuzz_compile_with_hostile_observed_names(
    desired_sets: list[object], observed: Observed, which: int, steering: str
) -> None:
    try:
        target = compile_target(
            desired_sets[which],
            observed,  # type: ignore[arg-type]
            CompileOptions(steering=steering),
        )  # type: ignore[arg-type]
    except CompileError:
        return  # a clear refusal is fine
    safe_nodes = [n.name for n in observed.nodes
                  if re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", n.name)]  # fmt: skip
    allowed = {naming.port_group("osc-gitops", g, n) for g in ("web", "db") for n in safe_nodes}
    vnf_ports = {naming.vnf_port("fw", n, "out") for n in safe_nodes}
    for res in target:
        match = res.fields.get("match")
        if match is not None:
            for port in _PORT_REF.findall(match):
                assert port in vnf_ports, (port, match)
            assert _SAFE_MATCH.fullmatch(_PORT_REF.sub("P", match)), repr(match)
            for ref in _NAME_REF.findall(match):
                assert ref in allowed, (ref, match)
        name = res.fields.get("name")
        if res.kind in ("Port_Group", "Network_Function", "Network_Function_Group"):
            assert re.fullmatch(r"[A-Za-z_.][A-Za-z0-9_.]*", name or ""), repr(name)


def test_fuzz_loader_with_random_bytes(tmp_path: Path) -> None:
    """atheris-style: mutated real manifests and random bytes, for a bounded time."""
    rng = random.Random(8)
    seeds = [SET_A.encode(), SET_B.encode()]
    path = tmp_path / "fuzz.yaml"
    deadline = time.monotonic() + float(os.environ.get("OSC_FUZZ_SECONDS", "8"))
    runs = rejected = 0
    while time.monotonic() < deadline:
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            op = rng.randrange(4)
            pos = rng.randrange(len(data) + 1)
            if op == 0 and data:
                data[pos % len(data)] = rng.randrange(256)
            elif op == 1:
                data[pos:pos] = rng.choice(
                    [
                        b'"',
                        b"\n",
                        b"||",
                        b"&&",
                        b"$",
                        b"@",
                        b"\x00",
                        b"\xd0\xb5",
                        b"{",
                        b"[",
                        b"*a",
                        b"&a ",
                        b"!!python",
                    ]
                )
            elif op == 2:
                del data[pos : pos + rng.randint(1, 20)]
            else:
                data = bytearray(os.urandom(rng.randint(0, 200)))
        path.write_bytes(bytes(data))
        runs += 1
        try:
            load_path(path)
        except ValidationFailed:
            rejected += 1
    assert runs > 100 and rejected > 0
    record("security: fuzz (loader)", scenarios=runs, faults=runs, converged=True)
