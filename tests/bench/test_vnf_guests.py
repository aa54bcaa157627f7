"""Smoke test of ``python -m bench.vnf_guests`` (Suricata against the bridge guest) at a tiny
scale: every path is steered as it should be, every figure is produced, the report renders. No
timing is asserted (the machine is shared)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from bench import vnf_guests

pytestmark = pytest.mark.datapath


def test_every_path_and_figure_is_measured_and_reported(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the data path needs root")
    args = argparse.Namespace(runs=1, seconds=0.2, round_trips=5)
    data = vnf_guests.measure(args, log=lambda message: None)
    assert set(data["runs"]) == set(vnf_guests.PATHS)
    for results in data["runs"].values():
        (result,) = results
        assert result["tcp_rtt_p50_ms"] > 0 and result["icmp_rtt_p50_ms"] > 0
        assert result["mbit_s_1"] > 0 and result["mbit_s_100"] > 0
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\nbefore\n")
    vnf_guests.write_block(vnf_guests.report(data), out)
    vnf_guests.write_block(vnf_guests.report(data), out)  # replaced in place, not appended
    text = out.read_text()
    assert text.count(vnf_guests.BEGIN) == 1 and "before" in text
    assert f"| Suricata {data['suricata']} guest (IPS) |" in text
