"""A hostile writer rewrites a served model.onnx while clients score through `nnsql serve` (two workers,
loopback): in place without truncation (`rsync --inplace`, `dd conv=notrunc`), truncate-then-write
(`cp`), partial writes, and renames over the file. Every answer must be one of the two versions'
(onnxruntime's own result for either file, float32 parity 1e-5), and the version must never be missing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import requests

from tests.serve.conftest import ServeProcess, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
ATOL = 1e-5  # float32 parity: both files are run by the same onnxruntime on the same input
CHUNK = 16 << 10  # bytes per write: a load between two writes reads a mixed file


def shifted(model_bytes: bytes) -> bytes:
    """The model with its last bias shifted: same inputs, same size, other scores."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(model_bytes)
    bias = next(t for t in reversed(model.graph.initializer) if len(t.dims) == 1)
    moved = numpy_helper.to_array(bias) + np.arange(bias.dims[0], dtype=np.float32) * 3
    bias.CopyFrom(numpy_helper.from_array(moved.astype(np.float32), bias.name))
    return model.SerializeToString()


def scores(model_bytes: bytes, row: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: row})[0][0]


def metadata_for(template: dict, model_bytes: bytes) -> bytes:
    return json.dumps(template | {"sha256": hashlib.sha256(model_bytes).hexdigest()}).encode()


def in_chunks(path: Path, data: bytes, mode: str, pause_at: int | None = None) -> None:
    with path.open(mode) as stream:
        for start in range(0, len(data), CHUNK):
            stream.write(data[start : start + CHUNK])
            stream.flush()
            os.fsync(stream.fileno())
            time.sleep(0.2 if start == pause_at else 0.01)


def in_place(path: Path, data: bytes) -> None:
    in_chunks(path, data, "r+b")  # no truncation: old bytes beyond what is written so far


def truncate_then_write(path: Path, data: bytes) -> None:
    in_chunks(path, data, "wb")


def partial(path: Path, data: bytes) -> None:
    in_chunks(path, data, "r+b", pause_at=(len(data) // 2) // CHUNK * CHUNK)  # stops half-way a while


def renamed_over(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_bytes(data)
    temporary.replace(path)


WRITERS: dict[str, Callable[[Path, bytes], None]] = {
    "in place": in_place,
    "truncate then write": truncate_then_write,
    "partial": partial,
    "renamed over": renamed_over,
}


def test_a_rewritten_model_never_answers_wrong_nor_goes_missing(onnx_repo, tmp_path):  # noqa: F811
    repo = tmp_path / "repo"
    version = repo / "mnist" / "1"
    shutil.copytree(onnx_repo / "mnist" / "1", version)
    first = (version / "model.onnx").read_bytes()
    second = shifted(first)
    template = json.loads((version / "metadata.json").read_text())
    row = np.random.default_rng(0).random((1, 784), dtype=np.float32)
    expected = [scores(first, row), scores(second, row)]
    assert not np.allclose(*expected, atol=ATOL)  # the two versions tell apart
    body = {"inputs": [{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": row.tolist()}]}

    server = ServeProcess(repo, "--workers", "2", "--poll-seconds", "0.05", "--no-access-log")
    answers: list[tuple[int, list[float] | str]] = []
    done = threading.Event()

    def client() -> None:
        with requests.Session() as session:
            while not done.is_set():
                answer = session.post(f"{server.url}/v2/models/mnist/versions/1/infer", json=body, timeout=30)
                answers.append(
                    (answer.status_code, answer.json()["outputs"][0]["data"] if answer.ok else answer.text)
                )

    try:
        server.wait_ready()
        server.wait_for_workers(2)
        scorer = threading.Thread(target=client)
        scorer.start()
        try:
            data = [first, second]
            for round_number, (_, write) in enumerate(sorted(WRITERS.items()) * 2):
                new = data[(round_number + 1) % 2]
                steps = [
                    (write, version / "model.onnx", new),
                    (truncate_then_write, version / "metadata.json", metadata_for(template, new)),
                ]
                for step, path, content in steps if round_number % 2 == 0 else steps[::-1]:
                    step(path, content)  # either file may be written first
                    time.sleep(0.3)  # several scans see the two files disagree
                time.sleep(0.5)
        finally:
            done.set()
            scorer.join(timeout=60)
    finally:
        log = server.stop()
    assert_each_answer_from_a_version(answers, expected, 50, log)
    assert np.allclose(answers[-1][1], expected[0], atol=ATOL)  # an even number of rounds: back to the first


def assert_each_answer_from_a_version(
    answers: list[tuple[int, np.ndarray]], expected: list[np.ndarray], minimum: int, log: str
) -> None:
    """More than `minimum` answers, each a 200 whose scores are one version's (within ATOL): none from a
    file caught half-written, none a 404 while a writer works."""
    statuses = [status for status, _ in answers]
    assert statuses.count(200) == len(answers) > minimum, (sorted(set(statuses)), log[-2000:])
    wrong = [data for _, data in answers if not any(np.allclose(data, e, atol=ATOL) for e in expected)]
    assert not wrong, f"{len(wrong)} of {len(answers)} answers are from neither version (a half-written file)"
