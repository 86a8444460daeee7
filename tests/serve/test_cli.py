"""`nnsql serve` as a user runs it: workers on a real port, whose summed counters only grow."""

from __future__ import annotations

import re
import subprocess
import sys

import requests

from tests.conftest import REPO


def test_server_scores(serve_process):
    server = serve_process()
    answer = requests.post(f"{server.url}/score?model=mnist", json={"features": [0.5] * 784}, timeout=10)
    assert answer.ok and len(answer.json()["probabilities"]) == 10


def request_count(url: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=5).text
    counts = re.findall(r'^nnsql_requests_total\{[^}]*model="mnist"[^}]*\} ([0-9.e+]+)$', text, re.M)
    return sum(float(count) for count in counts)


def test_metrics_never_go_backwards(serve_process):
    """Every scrape sees all requests so far (several server processes would each count alone)."""
    server = serve_process("--threads", "4")
    seen = []
    for _ in range(12):
        requests.post(f"{server.url}/score?model=mnist", json={"features": [0.5] * 784}, timeout=10)
        seen.append(request_count(server.url))
    assert seen == sorted(seen) and seen[-1] - seen[0] == 11


def test_missing_repository_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "nnsql.serve", "--repo", str(tmp_path / "none")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stderr.strip().startswith("error: model repository")


def start_error(*args: str) -> str:
    """Run nnsql serve expecting it to refuse to start: exit 2 and one line on stderr, at once."""
    result = subprocess.run(
        [sys.executable, "-m", "nnsql.serve", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_a_port_in_use_is_one_line(onnx_repo):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        line = start_error("--repo", str(onnx_repo), "--port", str(port))
    assert f"port {port}" in line and "already in use" in line


def test_a_missing_repository_or_key_file_is_one_line(onnx_repo, tmp_path):
    assert "does not exist" in start_error("--repo", str(tmp_path / "none"))
    (tmp_path / "file").write_text("x")
    assert "not a directory" in start_error("--repo", str(tmp_path / "file"))
    assert "No such file" in start_error("--repo", str(onnx_repo), "--api-key-file", str(tmp_path / "nokeys"))
    assert "directory" in start_error("--repo", str(onnx_repo), "--api-key-file", str(tmp_path))


def test_an_address_that_cannot_be_listened_on_is_one_line(onnx_repo):
    assert "cannot listen" in start_error("--repo", str(onnx_repo), "--host", "192.0.2.1", "--port", "0")


def test_numeric_options_out_of_range_are_one_line_at_parse_time(onnx_repo):
    """A port beyond 65535 or below 0 and a NaN body limit gave tracebacks; zero and negative limits
    started a server that refused every request."""
    for option, value, said in [
        ("--port", "70000", "is not a port"),
        ("--port", "-1", "is not a port"),
        ("--grpc-port", "65536", "is not a port"),
        ("--max-body-mb", "nan", "is not a finite number"),
        ("--max-buffered-mb", "0", "must be more than 0"),
        ("--request-timeout", "-3", "must be more than 0"),
        ("--poll-seconds", "inf", "is not a finite number"),
        ("--max-request-rows", "0", "must be at least 1"),
        ("--max-connections", "-5", "must be at least 1"),
        ("--workers", "x", "is not a whole number"),
    ]:
        line = start_error("--repo", str(onnx_repo), f"{option}={value}")
        assert line.startswith(f"error: argument {option}: ") and said in line, line


def test_model_control_needs_an_admin_key_other_than_the_scoring_keys(onnx_repo, tmp_path, monkeypatch):
    keys = tmp_path / "keys"
    keys.write_text("shared-key\n")
    repo = ("--repo", str(onnx_repo), "--api-key-file", str(keys), "--model-control", "explicit")
    assert "--admin-key-env" in start_error(*repo)
    monkeypatch.delenv("NNSQL_CLI_ADMIN", raising=False)
    assert "not set" in start_error(*repo, "--admin-key-env", "NNSQL_CLI_ADMIN")
    monkeypatch.setenv("NNSQL_CLI_ADMIN", "shared-key")
    line = start_error(*repo, "--admin-key-env", "NNSQL_CLI_ADMIN")
    assert "must not be a scoring key" in line and "shared-key" not in line  # the name, never the value
