"""``osc-gitops demo --datapath --zones`` tells the two-zone story with packets, in seconds, and
leaves nothing running."""

from __future__ import annotations

import os
import re

import pytest

from tests.support.cli import cli

pytestmark = pytest.mark.datapath


def test_zones_needs_the_data_path() -> None:
    done = cli("demo", "--zones")
    assert done.code == 1 and "add --datapath" in done.err


def test_the_two_zone_story(capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("the data path needs root (network namespaces, veths, ovs-vswitchd)")
    before = set(os.listdir("/run/netns"))
    done = cli("demo", "--datapath", "--zones")
    out = done.out + capsys.readouterr().out
    assert done.code == 0, done.err
    assert re.search(r"zone node-1: NB unix:\S+/zones/node-1/nb\.sock", out)
    steered = re.search(r"client-c -> web-a \(across zones\)\s+3/3 replies, TTL 62\s+through "
                        r"firewall-node-1", out)  # fmt: skip
    assert steered, out
    assert re.search(r"first steered packet \d+ ms after the label change", out)
    assert re.search(r"client-c -> web-a \(fail-close\)\s+0/2 replies\s+dropped", out)
    assert re.search(r"client-c -> other-b \(fail-open\)\s+2/2 replies, TTL 62\s+direct", out)
    assert "--node node-1   -> exit 1: error: cannot connect to OVN NB" in out
    assert "status --all-nodes   -> exit 1: node-1 failed, node-2 ok" in out
    assert "status --all-nodes   -> exit 0: node-1 ok, node-2 ok" in out
    assert re.search(r"other-b -> web-a \(now on node-2\)\s+3/3 replies, TTL 62\s+through "
                     r"firewall-node-2 ", out)  # fmt: skip
    seconds = float(re.findall(r"done in ([\d.]+) s, nothing left running", out)[0])
    print(f"the zones demo took {seconds} s")
    mine = f"osc-dp-{os.getpid()}-"
    assert not {n for n in set(os.listdir("/run/netns")) - before if n.startswith(mine)}
