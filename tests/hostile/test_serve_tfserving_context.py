"""TF Serving's :classify shares its `context` with every example: each `{}` of `examples` (3 bytes of the
body, 2 JSON values of its budget) stood for a whole row of the context's values.

Found by a hostile pass, by anyone on an open server (any key holder on a keyed one): 40,000
empty examples and one context row of 784 values, a 120 KB body, were read into a 40,000-row tensor
(31 million values, as float64 then float32) before the row limit (1,024) refused it: the worker grew
by 393 MiB and spent 1.2-1.35 s of CPU (load 1-2) on one request, whose answer was a 413. Rows are now counted
before any tensor is built (serve/handling.py `check_rows`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from tests.hostile.test_serve_grpc_frames import peak_mib
from tests.serve.conftest import ServeProcess, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
EXAMPLES = 40_000  # empty examples: 40 times the row limit, a 120 KB body
# A request refused on its row count needs no tensor: the parse of a 120 KB body and a few lists of
# references, some MiB. Measured with the check: +3 MiB; on the code before, +393 MiB (load 1-2).
GROWTH_MIB = 64


def cpu_seconds(pid: int) -> float:
    """The process's user and system time, from /proc (ticks of 1/100 s)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def test_empty_examples_sharing_one_context_are_refused_before_any_tensor(onnx_repo):  # noqa: F811
    body = {"examples": [{}] * EXAMPLES, "context": {"features": [0.5] * 784}}
    raw = json.dumps(body, separators=(",", ":")).encode()
    with ServeProcess.running(onnx_repo) as server:
        (worker,) = server.worker_pids()
        url = f"{server.url}/v1/models/mnist:classify"
        small = {"examples": [{}, {}], "context": body["context"]}
        answer = requests.post(url, json=small, timeout=60)  # warm: the context serves every example
        assert answer.status_code == 200 and len(answer.json()["result"]) == 2, answer.text
        before, spent = peak_mib(worker), cpu_seconds(worker)
        refused = requests.post(url, data=raw, headers={"Content-Type": "application/json"}, timeout=120)
        grown, spent = peak_mib(worker) - before, cpu_seconds(worker) - spent
    print(f"{len(raw)} bytes: the worker grew by {grown:.0f} MiB, {spent:.2f} s of CPU")
    assert refused.status_code == 413, refused.text
    assert refused.json()["error"] == f"{EXAMPLES} rows exceed the limit of 1024 rows per request"
    assert grown < GROWTH_MIB, f"the worker grew by {grown:.0f} MiB for a request refused on its rows"
