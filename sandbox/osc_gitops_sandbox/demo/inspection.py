"""The inspection part of ``osc-gitops demo --datapath``: a real VNF, Suricata 8 inline.

Until here the demo's VNFs are Linux bridges: they prove the steering and inspect nothing. Here
VnfDeployment ``ips`` boots Suricata guests (its image names Suricata:
:mod:`osc_gitops_sandbox.datapath.suricata`), its ``securityManager`` is the sandbox's
(:mod:`osc_gitops_sandbox.datapath.security_manager`), which turns the members the reconciler
notifies into Suricata's ``$SG_WEB``/``$PROTECTED`` address groups and reloads the rules, and
every pod serves HTTP on port 80. The story:

1. an HTTP request with a command injection to a protected pod is dropped (the client gets no
   answer; ``eve.json``'s alert names both addresses and the rule); the same request to an
   unprotected pod passes, and no guest sees a frame of it; a benign one passes;
2. a pod labelled now: its next attack is dropped, timed from the end of ``apply`` (members
   pushed, rules reloaded);
3. a chain ``vnf: [firewall, ips]``: the bridge firewall, then Suricata.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from osc_gitops_sandbox.datapath.security_manager import SecurityManager
from osc_gitops_sandbox.datapath.suricata import SuricataProgram
from osc_gitops_sandbox.datapath.web import ATTACK_PATH, BENIGN_PATH, http_get, serve_http
from osc_gitops_sandbox.datapath.world import (
    SURICATA_IMAGE,
    World,
    binding,
    vnf_deployment,
)

__all__ = ["inspection_stories", "suricata_manifests"]

ATTACK_TIMEOUT = 0.5
"""Seconds the client waits for an answer (a dropped request never gets one)."""
POLL = 0.15
"""The client's wait while polling for the first dropped attack (step 2)."""


def suricata_manifests(base: tuple[str, ...], url: str, *, chain: bool = False) -> tuple[str, ...]:
    """``base`` plus VnfDeployment ``ips`` (Suricata, told by ``url``) and a Binding of group
    ``web`` through it for HTTP towards the pods (order 5, before ``web-firewall``); ``chain``:
    through ``[firewall, ips]``."""
    ips = vnf_deployment("ips", image=SURICATA_IMAGE, security_manager=url)
    web = binding(
        "web-chain" if chain else "web-ips", group="web",
        vnf="[firewall, ips]" if chain else "ips", order=5, redirection="exit-lport",
        protocol="tcp", ports=[80],
    )  # fmt: skip
    return (*base, ips, web)


def _say(text: str = "") -> None:
    print(text, flush=True)


def _program(w: World, node: str) -> SuricataProgram:
    program = w.vnf(node, "ips").program
    assert isinstance(program, SuricataProgram)
    return program


def _frames(w: World) -> dict[str, int]:
    return {k.split("/")[-1]: v.forwarded for k, v in w.dp.vnfs.items()}


def _request(w: World, src: str, dst: str, path: str, label: str) -> bool:
    """One GET, said: answered or dropped, and which guests passed frames of it."""
    before = _frames(w)
    result = http_get(w.pod(src), w.pod(dst).ip, path, timeout=ATTACK_TIMEOUT)
    time.sleep(0.05)  # the connection's last segments
    after = _frames(w)
    crossed = [f"{k} +{after[k] - before.get(k, 0)}" for k in sorted(after)
               if after[k] > before.get(k, 0)]  # fmt: skip
    verdict = f"{result.status} OK" if result.ok else "no answer (dropped)"
    path_text = "through " + ", ".join(crossed) if crossed else "not inspected: no guest saw it"
    _say(f"  {label:<44} {verdict:<20} {path_text}")
    return result.ok


def _alert(w: World, node: str, seen: int) -> int:
    """Say eve.json's new alerts of ``ips`` on ``node``; the count now."""
    alerts = _program(w, node).events("alert")
    for alert in alerts[seen:]:
        rule = alert["alert"]
        _say(
            f"    eve.json (ips-{node}): {rule['action']} {alert['src_ip']}:{alert['src_port']}"
            f" -> {alert['dest_ip']}:{alert['dest_port']}, sid {rule['signature_id']} "
            f'"{rule["signature"]}"'
        )
    return len(alerts)


@contextlib.contextmanager
def _web_servers(w: World) -> Iterator[None]:
    servers = [serve_http(w.pod(p), 80) for p in ("web-a", "other-b", "client-c", "client-d")]
    try:
        yield
    finally:
        for server in servers:
            server.close()


def inspection_stories(
    w: World, base: tuple[str, ...], number: int, apply: Any, label: Any, *,
    web_servers: bool = True, manager: SecurityManager | None = None,
) -> int:  # fmt: skip
    """Steps ``number``, ``number + 1`` and ``number + 2`` (see the module docstring); ``base``:
    the manifests so far, ``apply(w)``/``label(w, pod, value)``: the demo's narrated ones;
    ``web_servers``: start a web server on port 80 of every pod (``False``: they serve already);
    ``manager``: the security manager of the world's Suricata guests, if one runs already.
    Returns the next step number."""
    servers = _web_servers(w) if web_servers else contextlib.nullcontext()
    own = SecurityManager(w.dp.suricata) if manager is None else contextlib.nullcontext(manager)
    with own as manager, servers:
        _inspect(w, base, number, manager, apply)
        _newly_labelled(w, number + 1, manager, apply, label)
        _chain(w, base, number + 2, manager, apply)
    return number + 3


def _inspect(
    w: World, base: tuple[str, ...], number: int, manager: SecurityManager, apply: Any
) -> None:
    _say()
    _say(f"=== {number}. A real VNF: Suricata 8 inline inspects HTTP towards the web pods")
    _say(f"(manifests: VnfDeployment ips, image {SURICATA_IMAGE}, securityManager "
         f"{manager.url} (the sandbox's); Binding web-ips: group web, tcp/80 towards its "
         "pods, order 5, before web-firewall)")  # fmt: skip
    w.write_manifests(*suricata_manifests(base, manager.url))
    apply(w)
    program = _program(w, "node-1")
    version = w.dp.suricata.suricata.version()
    ports = " and ".join(e.lsp for e in w.vnf("node-1", "ips").endpoints)
    rules = sum(1 for ln in program.rules.splitlines() if ln and not ln.startswith("#"))
    _say(f"  VM osc-vnfs/ips-node-1: Suricata {version} inline (af-packet IPS) between {ports}, "
         f"{rules} rules; it passes OVN's health probe (a pass rule)")  # fmt: skip
    applied = manager.wait_applied(lambda a: a.binding == "web-ips" and a.node == "node-1")
    held = ", ".join(manager.members("web-ips", "ips", "node-1"))
    how = (f"reloaded in {applied.reload_seconds * 1000:.0f} ms" if applied.reload_seconds
           else "given to the guest at its start")  # fmt: skip
    _say(f"  security manager: web-ips on node-1 holds {held} -> Suricata address group "
         f"$SG_WEB = [{', '.join(applied.groups.get('SG_WEB', []))}], {how}")  # fmt: skip
    seen = len(program.events("alert"))
    _request(w, "client-c", "web-a", BENIGN_PATH, "client-c -> web-a (benign)")
    _request(w, "client-c", "web-a", ATTACK_PATH, "client-c -> web-a (attack)")
    seen = _alert(w, "node-1", seen)
    _request(w, "other-b", "web-a", ATTACK_PATH, "other-b -> web-a (attack, same switch)")
    seen = _alert(w, "node-1", seen)
    _request(w, "client-c", "client-d", ATTACK_PATH, "client-c -> client-d (attack, unlabelled)")


def _newly_labelled(
    w: World, number: int, manager: SecurityManager, apply: Any, label: Any
) -> None:
    _say()
    _say(f"=== {number}. A pod gets the label: its next attack is dropped")
    client, target = w.pod("client-c"), w.pod("client-d")
    label(w, "client-d", "web")
    finished = apply(w, wait=False)
    wall = time.time() - (time.perf_counter() - finished)

    def dropped() -> bool:
        return http_get(client, target.ip, ATTACK_PATH, timeout=POLL).status is None

    start = time.perf_counter()
    while not dropped():
        if time.perf_counter() - start > 10:
            _say("  ! the attack on client-d still passes 10 s after apply")
            return
    took = time.perf_counter() - finished
    applied = manager.wait_applied(lambda a: a.node == "node-2" and target.ip in
                                   a.groups.get("SG_WEB", []))  # fmt: skip
    pushed = (applied.at - wall) * 1000
    _say(f"  members pushed to the manager and Suricata on node-2 reloaded "
         f"{max(pushed, 0):.0f} ms after apply returned (reload {applied.reload_seconds * 1000:.0f}"
         f" ms); the next attack on client-d was dropped {took * 1000:.0f} ms after apply "
         "returned")  # fmt: skip
    _alert(w, "node-2", len(_program(w, "node-2").events("alert")) - 1)
    label(w, "client-d", None)
    apply(w, wait=False)


def _chain(
    w: World, base: tuple[str, ...], number: int, manager: SecurityManager, apply: Any
) -> None:
    _say()
    _say(f"=== {number}. A chain: the bridge firewall, then Suricata (vnf: [firewall, ips])")
    _say("(manifests: Binding web-chain instead of web-ips: tcp/80 towards the web pods "
         "crosses the firewall, then the IPS; OVN sees one function, wired through VLAN child "
         "ports)")  # fmt: skip
    w.write_manifests(*suricata_manifests(base, manager.url, chain=True))
    apply(w)
    seen = len(_program(w, "node-1").events("alert"))
    _request(w, "client-c", "web-a", BENIGN_PATH, "client-c -> web-a (benign)")
    _request(w, "client-c", "web-a", ATTACK_PATH, "client-c -> web-a (attack)")
    _alert(w, "node-1", seen)
