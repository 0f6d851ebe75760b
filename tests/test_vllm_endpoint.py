"""`acceptance fit http://host:port/metrics`: the counters are read from a live endpoint, here
a local HTTP server on 127.0.0.1 that the test starts; it answers a bounded number of requests
and then closes by itself."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from specsim.errors import SpecError
from specsim.measurement.vllm_metrics import fetch_metrics, read_metrics
from tests.test_bounded_inputs import serve  # the one loopback server of the tests
from tests.test_cli import run
from tests.test_cli_speculation import METRICS


def _metrics(handler: BaseHTTPRequestHandler) -> None:
    if handler.path != "/metrics":
        handler.send_error(404)
        return
    body = METRICS.encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/plain; version=0.0.4")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_acceptance_fit_from_a_live_endpoint(tmp_path: Path) -> None:
    out = tmp_path / "live.yaml"
    with serve(_metrics) as base:
        result = run("acceptance", "fit", f"{base}/metrics", "--out", str(out))
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(out.read_text())
    assert data["acceptance"]["alpha"] == pytest.approx([160 / 200, 100 / 160, 40 / 100])


def test_fetch_reports_http_errors_and_refused_connections() -> None:
    with serve(_metrics) as base, pytest.raises(SpecError, match=r"/nothing: HTTP 404"):
        fetch_metrics(f"{base}/nothing", timeout_s=5)
    url = f"http://127.0.0.1:{_closed_port()}/metrics"
    with pytest.raises(SpecError, match=rf"^{url}: cannot connect"):
        fetch_metrics(url, timeout_s=5)


def test_cli_connection_failure_is_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/metrics"
    result = run("acceptance", "fit", url, "--out", str(tmp_path / "x.yaml"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"specsim: error: {url}: cannot connect")


def test_read_metrics_from_a_file(tmp_path: Path) -> None:
    page = tmp_path / "saved.txt"
    page.write_text(METRICS)
    assert read_metrics(str(page)) == (METRICS, "saved")
