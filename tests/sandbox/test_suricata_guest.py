"""The Suricata guest on its own (``osc_gitops_sandbox.datapath.suricata``), without OVN: a
client and a server namespace joined through a guest namespace whose two NICs only Suricata
connects (af-packet IPS). What the VNF guest of the packet tests is made of, checked alone:
the root's version, forwarding, an attack dropped with its eve.json alert, address groups
reloaded without a restart, and the failures a guest reports (bad rules at start, a reload
that does not take, a crash)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from osc_gitops_sandbox.datapath import suricata
from osc_gitops_sandbox.datapath.netns import (
    NETNS_PREFIX,
    Endpoint,
    create_netns,
    delete_netns,
    disable_tx_checksum_offload,
    ip,
)
from osc_gitops_sandbox.datapath.suricata import (
    ATTACK_SID,
    DEFAULT_RULES,
    SuricataError,
    SuricataProgram,
    SuricataRoot,
)
from osc_gitops_sandbox.datapath.web import ATTACK_PATH, BENIGN_PATH, http_get, serve_http

pytestmark = pytest.mark.datapath

CLIENT, SERVER = "10.9.0.1", "10.9.0.2"


def test_the_root_holds_suricata_8_0_and_refuses_another_series(tmp_path: Path):
    root = suricata.root()
    reason = root.unavailable_reason()
    assert reason is None, reason  # `make setup` builds it: missing is a failure, not a skip
    assert root.version().startswith(f"{suricata.SERIES}.")
    assert root.verify().startswith(f"Suricata {suricata.SERIES}.")
    stamp = (root.root / suricata.STAMP_FILE).read_text()
    assert "recipe: variant=essential packages=suricata" in stamp
    assert SuricataRoot(tmp_path).unavailable_reason() is not None, "an empty folder: make setup"


def test_which_images_boot_suricata_and_how_groups_are_named():
    assert suricata.is_suricata_image("quay.io/example/vnf-suricata:8.0.7")
    assert suricata.is_suricata_image("docker.io/jasonish/suricata@sha256:abc")
    assert not suricata.is_suricata_image("quay.io/example/vnf-firewall:1.4.2")
    assert not suricata.is_suricata_image("registry.example/suricata-tools/firewall:1")
    assert suricata.group_variable("web") == "SG_WEB"
    assert suricata.group_variable("shop.db-1") == "SG_SHOP_DB_1"
    text = suricata.render_config(Path("/w"), Path("/etc/suricata"), {"SG_WEB": []})
    assert f'SG_WEB: "[{suricata.NO_MEMBER}]"' in text, "an empty group holds no pod"
    assert f'PROTECTED: "[{suricata.NO_MEMBER}]"' in text


class Wire:
    """client (eth0) -- (eth0) guest (eth1) -- (eth0) server, offload off on every veth."""

    def __init__(self, tmp: Path) -> None:
        token = f"{NETNS_PREFIX}{os.getpid()}-sg{time.monotonic_ns() % 100000}"
        self.client_ns, self.guest, self.server_ns = (f"{token}-{n}" for n in "cgs")
        for name in (self.client_ns, self.guest, self.server_ns):
            create_netns(name)
        ip("-n", self.client_ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0",
           "netns", self.guest)  # fmt: skip
        ip("-n", self.server_ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
           "netns", self.guest)  # fmt: skip
        for ns, dev, address in ((self.client_ns, "eth0", CLIENT), (self.server_ns, "eth0", SERVER),
                                 (self.guest, "eth0", ""), (self.guest, "eth1", "")):  # fmt: skip
            disable_tx_checksum_offload(ns, dev)
            if address:
                ip("-n", ns, "addr", "add", f"{address}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        self.client = Endpoint(self.client_ns, "", "client", "", CLIENT, 24, "", "n")
        self.server = Endpoint(self.server_ns, "", "server", "", SERVER, 24, "", "n")
        self.tmp = tmp

    def program(self, rules: str = DEFAULT_RULES, groups: dict[str, list[str]] | None = None
                ) -> SuricataProgram:  # fmt: skip
        return SuricataProgram(
            suricata.root(), self.guest, self.tmp / "g", vnf="ips", node="n", vm="vnfs/ips-n",
            rules=rules, groups=groups if groups is not None else {"SG_WEB": [SERVER]},
        )  # fmt: skip

    def get(self, path: str) -> int | None:
        return http_get(self.client, SERVER, path, timeout=0.5).status

    def close(self) -> None:
        for ns in (self.client_ns, self.guest, self.server_ns):
            delete_netns(ns)


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[Wire]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    w = Wire(tmp_path)
    server = serve_http(w.server, 80)
    try:
        yield w
    finally:
        server.close()
        w.close()


def test_nothing_passes_until_suricata_runs_then_it_inspects_and_reloads(wire: Wire):
    program = wire.program()
    program.start(forward=False)  # a booting guest: its NICs are up, nothing copies
    try:
        assert wire.get(BENIGN_PATH) is None and not program.running
        program.forward(True)
        program.wait_ready()
        assert wire.client.ping(SERVER).ok
        assert wire.get(BENIGN_PATH) == 200
        assert wire.get(ATTACK_PATH) is None
        (alert,) = program.events("alert")
        assert (alert["src_ip"], alert["dest_ip"]) == (CLIENT, SERVER)
        assert alert["alert"]["signature_id"] == ATTACK_SID and alert["in_iface"] == "eth0"
        pid = program.pid

        program.reload(groups={"SG_WEB": []})  # the server left the group: not protected
        assert program.pid == pid and program.reloads == 1, "reloaded, not restarted"
        assert wire.get(ATTACK_PATH) == 200
        program.reload(groups={"SG_WEB": [SERVER]})
        assert wire.get(ATTACK_PATH) is None

        program.forward(False)
        assert wire.get(BENIGN_PATH) is None, "stopped: nothing is forwarded"
        assert program.failure is None, "stopped on purpose is no failure"
    finally:
        program.close()


def test_a_reload_that_does_not_take_stops_suricata_and_is_reported(wire: Wire):
    changes: list[str | None] = []
    program = wire.program()
    program.on_change = lambda p: changes.append(p.failure)
    program.start(forward=True)
    try:
        program.wait_ready()
        with pytest.raises(SuricataError, match="did not reload"):
            program.reload(
                rules=DEFAULT_RULES + 'drop http any any -> any any (content:";"; sid:7;)\n'
            )
        assert not program.running and "reload failed" in str(program.failure)
        assert changes and "reload failed" in str(changes[-1])
        assert wire.get(BENIGN_PATH) is None
    finally:
        program.close()


def test_bad_rules_at_start_and_a_crash_are_reported(wire: Wire):
    program = wire.program(rules="drop http any any -> any any (nonsense;)\n")
    program.start(forward=True)
    try:
        with pytest.raises(SuricataError, match="does not run"):
            program.wait_ready()
        assert "Loading signatures failed" in str(program.failure) or "error parsing" in str(
            program.failure
        )
        program.rules = DEFAULT_RULES
        program.forward(True)
        program.wait_ready()
        assert program.failure is None
        assert program.pid is not None
        os.kill(program.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while program.failure is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "exited with code -9" in str(program.failure)
    finally:
        program.close()
