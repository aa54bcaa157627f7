"""Suricata 8 inline as the VNF, with real packets on OVN 26.03 (issue 32).

VnfDeployment ``ips`` boots Suricata guests (its image names Suricata): Suricata in IPS mode
between the guest's two NICs (``osc_gitops_sandbox.datapath.suricata``). Its security manager is
the sandbox's (``osc_gitops_sandbox.datapath.security_manager``), which turns the members the
reconciler notifies into the guests' address groups (``$PROTECTED``, ``$SG_WEB``) and reloads
the rules. Only ``osc-gitops apply`` (default flags) writes; every apply tells the manager.

The rules the guests are given: :data:`DEFAULT_RULES` (OVN's health probe passed, a command
injection towards a protected pod dropped) and one rule for the other direction (a protected
pod fetching ``/etc/shadow`` from anywhere: dropped). One world and one set of guests for the
module (a Suricata start costs about a second, OVN's verdict on a new guest about two): the
tests label and relabel, and restore what they break.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest
from osc_gitops_sandbox.datapath.security_manager import SecurityManager
from osc_gitops_sandbox.datapath.suricata import (
    ATTACK_SID,
    DEFAULT_RULES,
    HEALTH_PROBE_PASS,
    SuricataProgram,
)
from osc_gitops_sandbox.datapath.web import ATTACK_PATH, BENIGN_PATH, http_get, serve_http
from osc_gitops_sandbox.datapath.world import (
    ROUTED_TTL,
    SAME_SWITCH_TTL,
    SURICATA_IMAGE,
    VNF_NAMESPACE,
    World,
    binding,
    security_group,
    vnf_deployment,
)

pytestmark = pytest.mark.datapath

IPS1 = f"{VNF_NAMESPACE}/ips-node-1"
IPS2 = f"{VNF_NAMESPACE}/ips-node-2"
OUTBOUND_SID = 1000002
OUTBOUND_PATH = "/backup/etc/shadow"
RULES = DEFAULT_RULES + (
    f'drop http $PROTECTED any -> any any (msg:"OSC sandbox: a protected pod fetches a shadow '
    f'file"; flow:established,to_server; http.uri; content:"/etc/shadow"; sid:{OUTBOUND_SID}; '
    "rev:1;)\n"
)
CLOSED, OPEN = "osc.ips.node_1.fail_close", "osc.ips.node_1.fail_open"
LIMIT = 30.0
"""Seconds any wait here may take before it counts as a failure (OVN's detection with the
default health check is about 4 s; the bound only catches a hang)."""


def manifests(url: str, *extra: str, chain: bool = False) -> tuple[str, ...]:
    """web -> ips (both, fail-close) and api -> ips (fail-open); ``chain``: web through
    ``[firewall, ips]`` instead (the bridge firewall first, then Suricata)."""
    ips = vnf_deployment("ips", image=SURICATA_IMAGE, security_manager=url)
    web = (
        binding("web-ips", group="web", vnf="[firewall, ips]", redirection="exit-lport")
        if chain
        else binding("web-ips", group="web", vnf="ips")
    )
    return (
        security_group("web", ["app=web"]), security_group("api", ["app=api"]),
        vnf_deployment("firewall"), ips, web,
        binding("api-ips", group="api", vnf="ips", failure_policy="fail-open"), *extra,
    )  # fmt: skip


class Ips:
    """The module's world with its security manager and web servers in every pod."""

    def __init__(self, w: World, manager: SecurityManager) -> None:
        self.w = w
        self.manager = manager

    def program(self, node: str = "node-1") -> SuricataProgram:
        program = self.w.vnf(node, "ips").program
        assert isinstance(program, SuricataProgram), "a Suricata guest"
        return program

    def get(self, src: str, dst: str, path: str, timeout: float = 0.5) -> int | None:
        """``GET path`` from pod ``src`` to pod ``dst``: the status, ``None`` if dropped."""
        return http_get(self.w.pod(src), self.w.pod(dst).ip, path, timeout=timeout).status

    def alerts_since(self, count: int, node: str = "node-1") -> list[dict[str, object]]:
        return self.program(node).events("alert")[count:]

    def steer(self, labels: dict[str, str | None], *, chain: bool = False) -> str:
        """Set the pods' ``app`` labels (others unlabelled) and apply (the manager is told)."""
        for pod in ("web-a", "other-b", "client-c", "client-d"):
            self.w.label(pod, labels.get(pod))
        self.w.write_manifests(*manifests(self.manager.url, chain=chain))
        return self.w.apply()


@pytest.fixture(scope="module")
def ips(nf_world: World) -> Iterator[Ips]:
    w = nf_world
    w.dp.suricata.rules["ips"] = RULES
    servers = []
    with SecurityManager(w.dp.suricata) as manager:
        try:
            servers = [serve_http(w.pod(p), 80) for p in ("web-a", "other-b", "client-c",
                                                            "client-d")]  # fmt: skip
            state = Ips(w, manager)
            state.steer({"web-a": "web"})
            yield state
        finally:
            for server in servers:
                server.close()
            w.dp.suricata.rules.pop("ips", None)
            w.write_manifests()
            for pod in ("web-a", "other-b", "client-c", "client-d"):
                w.label(pod, None)
            w.apply(wait=False)


@pytest.fixture
def steered(ips: Ips) -> Ips:
    """``web-a`` (node-1) protected through ``ips``, every Suricata guest running."""
    ips.steer({"web-a": "web"})
    for vnf in ips.w.dp.vnfs.values():
        if vnf.program is not None and not vnf.program.running:
            ips.w.dp.set_forwarding(vnf, True)
    ips.w.wait_all_active(LIMIT)
    ips.w.dp.wait_hv()
    return ips


def wait_for(condition: Callable[[], bool], what: str, limit: float = LIMIT) -> None:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < limit, f"{what}: not within {limit} s"
        time.sleep(0.05)


def test_a_suricata_guest_forwards_between_its_nics_and_passes_ovns_probe(steered: Ips):
    w = steered.w
    program = steered.program()
    assert program.running and program.ready() and program.failure is None
    assert w.active_functions()[CLOSED] == "osc.ips.node_1", "OVN's health probe crossed it"
    assert w.vnf("node-1", "ips").health_probes > 0
    assert HEALTH_PROBE_PASS in program.rules
    web, other, client = w.pod("web-a"), w.pod("other-b"), w.pod("client-c")
    routed = w.dp.probe(client, web)
    assert (routed.replies, routed.ttl, routed.through) == (3, ROUTED_TTL, [IPS1])
    assert routed.forwarded[IPS1] == 6, "each echo and reply crosses once"
    same = w.dp.probe(other, web)
    assert (same.replies, same.ttl, same.through) == (3, SAME_SWITCH_TTL, [IPS1])
    with web.listen_tcp(8080):
        tcp = w.dp.tcp_probe(client, web.ip, 8080, count=3)
    assert tcp.replies == 3 and tcp.through == [IPS1], "checksum offload off on every veth"
    assert w.dp.controller_errors() == []


def test_members_reach_the_guests_as_address_groups(steered: Ips):
    w, manager = steered.w, steered.manager
    assert manager.members("web-ips", "ips", "node-1") == ["shop/web-a"]
    assert manager.members("web-ips", "ips", "node-2") == []
    groups = steered.program().groups
    assert groups["SG_WEB"] == [w.pod("web-a").ip] and groups.get("SG_API", []) == []
    assert steered.program("node-2").groups.get("SG_WEB", []) == []


@pytest.mark.parametrize("src", ["client-c", "other-b"], ids=["routed", "same-switch"])
def test_an_attack_on_a_protected_pod_is_dropped_and_alerted_a_benign_request_passes(
    steered: Ips, src: str
):
    w = steered.w
    seen = len(steered.program().events("alert"))
    assert steered.get(src, "web-a", BENIGN_PATH) == 200
    assert steered.get(src, "web-a", ATTACK_PATH) is None, "the client sees it fail"
    (alert,) = steered.alerts_since(seen)
    assert (alert["src_ip"], alert["dest_ip"]) == (w.pod(src).ip, w.pod("web-a").ip)
    assert alert["alert"]["signature_id"] == ATTACK_SID  # type: ignore[index]
    assert alert["alert"]["action"] == "blocked"  # type: ignore[index]
    assert steered.get(src, "web-a", BENIGN_PATH) == 200, "the next connection is fine"


@pytest.mark.parametrize("dst", ["client-c", "other-b"], ids=["routed", "same-switch"])
def test_the_protected_pods_own_requests_are_inspected_too(steered: Ips, dst: str):
    seen = len(steered.program().events("alert"))
    assert steered.get("web-a", dst, BENIGN_PATH) == 200
    assert steered.get("web-a", dst, OUTBOUND_PATH) is None
    (alert,) = steered.alerts_since(seen)
    assert alert["alert"]["signature_id"] == OUTBOUND_SID  # type: ignore[index]
    assert alert["src_ip"] == steered.w.pod("web-a").ip


def test_the_same_attack_on_an_unlabelled_pod_passes_uninspected(steered: Ips):
    w = steered.w
    seen = len(steered.program().events("alert"))
    before = {k: v.forwarded for k, v in w.dp.vnfs.items()}
    assert steered.get("client-c", "client-d", ATTACK_PATH) == 200
    assert steered.get("other-b", "client-d", ATTACK_PATH) == 200
    after = {k: v.forwarded for k, v in w.dp.vnfs.items()}
    assert after == before, "no guest saw a frame of it"
    assert steered.alerts_since(seen) == []


def test_a_newly_labelled_pods_next_attack_is_dropped(steered: Ips):
    assert steered.get("client-c", "other-b", ATTACK_PATH) == 200, "not protected yet"
    steered.steer({"web-a": "web", "other-b": "web"})
    assert sorted(steered.manager.members("web-ips", "ips", "node-1")) == [
        "shop/other-b", "shop/web-a",
    ]  # fmt: skip
    assert steered.program().reloads >= 1, "reloaded, not restarted"
    assert steered.get("client-c", "other-b", ATTACK_PATH) is None
    assert steered.get("client-c", "other-b", BENIGN_PATH) == 200
    steered.steer({"web-a": "web"})
    assert steered.get("client-c", "other-b", ATTACK_PATH) == 200, "unlabelled: passes again"


def test_a_stopped_suricata_forwards_nothing_and_the_failure_policy_acts(steered: Ips):
    w = steered.w
    steered.steer({"web-a": "web", "other-b": "api"})
    program = steered.program()
    assert program.pid is not None
    os.kill(program.pid, signal.SIGKILL)  # Suricata crashes
    wait_for(lambda: program.failure is not None, "the guest reports it")
    assert "exited" in str(program.failure)
    assert any(r["failure"] for r in steered.manager.reports), "its manager heard it"
    wait_for(lambda: w.active_functions()[CLOSED] is None, "OVN marks the guest offline")
    client, web, other = w.pod("client-c"), w.pod("web-a"), w.pod("other-b")
    wait_for(lambda: w.dp.probe(client, other, count=1, timeout=0.3).replies == 1,
             "fail-open traffic bypasses the dead guest")  # fmt: skip
    assert w.dp.probe(client, other).through == []
    assert w.dp.probe(client, web, count=2, timeout=0.3).replies == 0, "fail-close: dropped"

    w.dp.set_forwarding(w.vnf("node-1", "ips"), True)  # Suricata starts again
    wait_for(lambda: w.active_functions()[CLOSED] is not None, "OVN sees it forward again")
    w.dp.wait_hv()
    assert w.dp.probe(client, web).through == [IPS1]


def test_a_rule_file_that_does_not_load_fails_the_guest_and_its_health_check(steered: Ips):
    """A reload that fails stops Suricata (the guest reports it, the manager answers 500 and
    the reconciler retries), OVN's health check fails and fail-close drops; a guest that
    cannot start with its rules stays dead to OVN."""
    w = steered.w
    program = steered.program()
    broken = RULES + 'drop http any any -> $PROTECTED any (msg:"bad"; content:";"; sid:9;)\n'
    program.rules = broken  # what the next reload loads
    steered.w.label("other-b", "web")
    w.write_manifests(*manifests(steered.manager.url))
    w.apply(wait=False)  # the manager's reload fails: apply warns, OVN is written all the same
    assert not program.running and "reload failed" in str(program.failure)
    assert "did not reload" in str(program.failure)
    wait_for(lambda: w.active_functions()[CLOSED] is None, "OVN marks the guest offline")
    client, web = w.pod("client-c"), w.pod("web-a")
    assert w.dp.probe(client, web, count=2, timeout=0.3).replies == 0

    w.dp.suricata.rules["ips"] = broken  # and the same rules at start: it never forwards
    w.restart_vm("node-1", "ips")
    w.dp.sync_vnfs()
    restarted = steered.program()
    wait_for(lambda: restarted.failure is not None, "the restarted guest reports it")
    assert "Loading signatures failed" in str(restarted.failure) or "error parsing" in str(
        restarted.failure
    )
    assert w.active_functions()[CLOSED] is None

    w.dp.suricata.rules["ips"] = RULES
    w.restart_vm("node-1", "ips")
    w.dp.sync_vnfs()
    w.wait_all_active(LIMIT)


def test_without_a_pass_rule_a_catch_all_drop_kills_ovns_probe(steered: Ips):
    """Which rules let OVN's health probe through: ``pass`` for it before anything that drops
    ICMP. A guest started with rules that drop all ICMP but pass the probe forwards the probes
    and stays healthy (pods' pings dropped); started without the pass rule it drops them and
    OVN counts it dead. (A started guest keeps passing a probe flow it passed before: Suricata
    decides a flow's pass once, so the rules are given at a start.)"""
    w = steered.w
    vnf = w.vnf("node-1", "ips")
    program = steered.program()
    deny_icmp = 'drop icmp any any -> any any (msg:"no ICMP"; sid:1000100; rev:1;)\n'

    def start_with(rules: str) -> int:
        w.dp.set_forwarding(vnf, False)
        program.reload(rules=rules)  # not running: kept for the start
        w.dp.set_forwarding(vnf, True)
        program.wait_ready()
        return vnf.health_probes

    probes = start_with(RULES + deny_icmp)
    wait_for(lambda: vnf.health_probes >= probes + 2, "probes forwarded")
    wait_for(lambda: w.active_functions()[CLOSED] is not None, "healthy")
    w.dp.wait_hv()
    client, web = w.pod("client-c"), w.pod("web-a")
    assert w.dp.probe(client, web, count=2, timeout=0.3).replies == 0, "pods' ICMP dropped"

    probes = start_with(RULES.replace(HEALTH_PROBE_PASS, "") + deny_icmp)
    wait_for(lambda: w.active_functions()[CLOSED] is None, "OVN counts the guest dead")
    assert vnf.health_probes == probes, "no probe crossed it"
    assert program.running and program.failure is None, "although Suricata runs"

    start_with(RULES)
    wait_for(lambda: w.active_functions()[CLOSED] is not None, "healthy again")


def test_a_chain_bridge_firewall_then_suricata(ips: Ips):
    """``vnf: [firewall, ips]``: requests towards the protected pod cross the bridge firewall,
    then Suricata (802.1Q-tagged between them: Suricata's af-packet copies the tag); Suricata
    drops the attack, the firewall saw it first."""
    w = ips.w
    ips.steer({"web-a": "web"}, chain=True)
    firewall = w.vnf("node-1", "firewall")
    seen = len(ips.program().events("alert"))
    for src in ("client-c", "other-b"):
        before = (firewall.forwarded, w.vnf("node-1", "ips").forwarded)
        assert ips.get(src, "web-a", BENIGN_PATH) == 200
        after = (firewall.forwarded, w.vnf("node-1", "ips").forwarded)
        assert after[0] > before[0] and after[1] > before[1], (src, before, after)
        assert ips.get(src, "web-a", ATTACK_PATH) is None
    alerts = ips.alerts_since(seen)
    assert [a["alert"]["signature_id"] for a in alerts] == [ATTACK_SID] * 2  # type: ignore[index]


def test_the_demo_tells_the_inspection_story(ips: Ips, capsys: pytest.CaptureFixture[str]):
    """``osc-gitops demo --datapath``'s Suricata steps (``demo.inspection``) on this world:
    what a user watching must see, line by line."""
    from osc_gitops_sandbox.demo.datapath import _apply, label
    from osc_gitops_sandbox.demo.inspection import inspection_stories

    w = ips.w
    base = (security_group("web", ["app=web"]), vnf_deployment("firewall"))
    w.label("web-a", "web")
    for pod in ("other-b", "client-c", "client-d"):
        w.label(pod, None)
    assert (
        inspection_stories(w, base, 6, _apply, label, web_servers=False, manager=ips.manager) == 9
    )
    out = capsys.readouterr().out
    web, client, other = w.pod("web-a").ip, w.pod("client-c").ip, w.pod("other-b").ip
    lines = out.splitlines()

    def line(start: str) -> str:
        return next(ln for ln in lines if ln.strip().startswith(start))

    assert "200 OK" in line("client-c -> web-a (benign)")
    assert "no answer (dropped)" in line("client-c -> web-a (attack)")
    alert = next(ln for ln in lines if "eve.json (ips-node-1): blocked" in ln)
    assert f"{client}:" in alert and f"-> {web}:80" in alert and f"sid {ATTACK_SID}" in alert
    assert "command injection" in alert
    assert any(f"blocked {other}:" in ln for ln in lines), "same switch"
    assert "200 OK" in line("client-c -> client-d (attack, unlabelled)")
    assert "not inspected: no guest saw it" in line("client-c -> client-d (attack, unlabelled)")
    assert "the next attack on client-d was dropped" in out
    assert "eve.json (ips-node-2): blocked" in out
    chain = out.split("=== 8. A chain", 1)[1]
    assert "firewall-node-1 +" in chain and "ips-node-1 +" in chain and "dropped" in chain
