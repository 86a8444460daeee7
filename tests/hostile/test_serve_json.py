"""JSON fields that are echoed or kept (the request's "id", parameters) count against what a request may
cost, as its tensors do: a huge "id" for a model that takes large bodies made a worker grow by a GB."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from tests.serve.conftest import ServeProcess, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
ID_BYTES = 28 << 20  # within the body limit of 2,048 rows of 784 values (38.5 MB)
GROWTH_MIB = 200  # the body itself is 28 MiB: a few copies of it at most


def peak_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024


@pytest.mark.parametrize(
    "field",
    [
        b'"id": "' + b"\\u00e9" * (ID_BYTES // 6) + b'"',
        b'"id": "' + b"i" * ID_BYTES + b'"',
        b'"parameters": {"note": "' + b"p" * ID_BYTES + b'"}',
    ],
    ids=["escaped id", "plain id", "parameter"],
)
def test_a_huge_echoed_field_is_refused_without_the_worker_growing(onnx_repo, field):  # noqa: F811
    server = ServeProcess(onnx_repo, "--workers", "1", "--max-request-rows", "2048", "--no-access-log")
    try:
        server.wait_ready()
        server.wait_for_workers(1)
        (worker,) = server.worker_pids()
        before = peak_mib(worker)
        tensor = b'{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": [' + b"0.5," * 783
        body = b"{" + field + b', "inputs": [' + tensor + b"0.5]}]}"
        answer = requests.post(
            f"{server.url}/v2/models/mnist/infer",
            data=body,
            headers={"Content-Type": "application/json"},
            timeout=120,
        )
        grown = peak_mib(worker) - before
    finally:
        server.stop()
    assert 400 <= answer.status_code < 500, answer.text[:200]
    assert "\n" not in answer.json()["error"] and len(answer.content) < 1000
    assert grown < GROWTH_MIB, f"the worker grew by {grown:.0f} MiB"
