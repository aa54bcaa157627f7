"""The metrics/health server faces the network (issue 31, item 5).

On main it had no timeout and no thread cap: 1,500 idle loopback connections made 1,515
threads, ``/healthz`` failed (a liveness restart) and 430 tracebacks (not JSON) reached the
log. Now: at most ``MAX_CONNECTIONS`` threads, idle connections are evicted for new ones, slow
ones are cut, the probes keep answering, and what was refused is counted and logged as JSON.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from reconciler.engine.reporting import metrics as metrics_module
from reconciler.engine.reporting.metrics import Metrics, MetricsServer

MAX_CONNECTIONS = getattr(metrics_module, "MAX_CONNECTIONS", 32)


@pytest.fixture
def server() -> Iterator[tuple[MetricsServer, Metrics]]:
    metrics = Metrics()
    served = MetricsServer("127.0.0.1:0", metrics, lambda: (True, {}), lambda: (True, {}))
    served.start()
    try:
        yield served, metrics
    finally:
        served.stop()


def _healthz(address: str) -> tuple[int, float]:
    started = time.monotonic()
    with urllib.request.urlopen(f"http://{address}/healthz", timeout=3) as response:
        return response.status, time.monotonic() - started


def _connect(address: str, count: int) -> list[socket.socket]:
    host, port = address.rsplit(":", 1)
    return [socket.create_connection((host, int(port)), timeout=5) for _ in range(count)]


def test_idle_connections_cannot_take_the_probes_or_the_threads(
    server: tuple[MetricsServer, Metrics], json_log: io.StringIO, capfd: pytest.CaptureFixture[str]
) -> None:
    served, metrics = server
    before = threading.active_count()
    idle = _connect(served.address, 300)
    try:
        time.sleep(0.5)
        assert threading.active_count() <= before + 2 * MAX_CONNECTIONS  # main: 1 per socket
        code, seconds = _healthz(served.address)
        assert code == 200 and seconds < 1.0
    finally:
        for sock in idle:
            sock.close()
    evicted = metrics.http_refused.labels("evicted-idle")._value.get()
    assert evicted >= 300 - MAX_CONNECTIONS
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    assert lines and all(line["msg"] == "metrics server refused or cut connections"
                         for line in lines)  # fmt: skip
    assert lines[0]["refused"] == {"evicted-idle": 1} and lines[0]["level"] == "warning"
    assert len(lines) <= 2, "a flood is a line per 10 s, not a line per connection"
    assert "Traceback" not in capfd.readouterr().err


def test_a_slow_client_is_cut_at_the_deadline_and_an_idle_one_times_out(
    server: tuple[MetricsServer, Metrics], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, metrics = server
    monkeypatch.setattr(metrics_module, "CONNECTION_DEADLINE", 1.0)
    monkeypatch.setattr(metrics_module._Handler, "timeout", 0.5)
    (idle,) = _connect(served.address, 1)
    started = time.monotonic()
    assert idle.recv(1) == b""  # closed by the server after its idle timeout
    assert time.monotonic() - started < 3
    (slow,) = _connect(served.address, 1)
    slow.sendall(b"GET /metr")
    started = time.monotonic()
    cut = None
    for _ in range(30):  # a byte every 0.2 s: never idle, but past the deadline
        time.sleep(0.2)
        try:
            slow.sendall(b"i")
        except OSError:
            cut = time.monotonic() - started
            break
    assert cut is not None and cut < 4, cut
    assert metrics.http_refused.labels("deadline")._value.get() >= 1
    assert _healthz(served.address)[0] == 200


def test_when_every_connection_is_in_a_request_the_next_one_gets_503(
    server: tuple[MetricsServer, Metrics],
) -> None:
    served, metrics = server
    busy = _connect(served.address, MAX_CONNECTIONS)
    try:
        for sock in busy:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n")  # a request line, headers never end
        time.sleep(0.5)
        (extra,) = _connect(served.address, 1)
        answer = extra.recv(200)
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable")
        assert metrics.http_refused.labels("too-many-connections")._value.get() == 1
    finally:
        for sock in busy:
            sock.close()
