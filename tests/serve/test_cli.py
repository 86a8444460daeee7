"""`python -m serve` as a user runs it: waitress on a real port, one process whose counters only grow."""

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
        [sys.executable, "-m", "serve", "--repo", str(tmp_path / "none")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stderr.strip().startswith("error: model repository")
