"""A Triton model's model.onnx carries no sha256: a hostile writer overwrites it in place (no truncation,
as `rsync --inplace` or `dd conv=notrunc` write) with a retrained copy of the same network, stopping
half-way a while, while a client scores through `nnsql serve` (two workers, loopback). Every answer must
be the old model's or, once the file settled, the new one's: never the half-written file's (a model
that is neither), never a 404. A Triton model dropped into the running server is served within the
settle period and a few scans."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import requests

from nnsql.serve import coordination
from tests.hostile.test_serve_model_files import assert_each_answer_from_a_version
from tests.serve.conftest import ServeProcess
from tests.serve.test_triton_repository import IRIS_CONFIG, softmax_model

pytestmark = pytest.mark.slow
SETTLE_SECONDS = getattr(coordination, "SETTLE_SECONDS", 2.0)  # (2.0: to run it on a tree before it)
ATOL = 1e-5  # float32 parity: every file is run by the same onnxruntime on the same input
PAUSE = SETTLE_SECONDS / 2  # the writer's stop half-way: shorter than the settle period, many scans long
POLL = 0.1  # seconds between scans: a scan during the pause sees the file changed
SLACK = 15.0  # seconds beyond the settle period for a load and a commit on a loaded machine
ROW = np.array([[0.5, -1.0, 2.0, 0.25]], dtype=np.float32)
BODY = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": ROW[0].tolist()}]}


def scores(model: bytes) -> np.ndarray:
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": ROW})[0][0]


def triton_model(repo: Path, name: str, seed: int) -> bytes:
    (repo / name).mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(IRIS_CONFIG.replace('"iris"', f'"{name}"'))
    (repo / name / "labels.txt").write_text("a\nb\nc\n")
    softmax_model(repo / name / "1" / "model.onnx", seed, 3)
    return (repo / name / "1" / "model.onnx").read_bytes()


def answer(session: requests.Session, url: str, name: str) -> tuple[int, list[float] | str]:
    reply = session.post(f"{url}/v2/models/{name}/infer", json=BODY, timeout=30)
    return reply.status_code, (reply.json()["outputs"][0]["data"] if reply.ok else reply.text)


def test_a_triton_model_rewritten_in_place_never_answers_wrong_nor_goes_missing(tmp_path):
    repo = tmp_path / "repo"
    old = triton_model(repo, "iris", seed=1)
    new_path = tmp_path / "retrained"
    new = triton_model(new_path, "iris", seed=2)
    assert len(new) == len(old)  # the same network retrained: the same size
    half = len(old) // 2
    mixed = new[:half] + old[half:]  # what the file holds while the writer stops half-way
    expected = [scores(old), scores(new)]
    assert not np.allclose(*expected, atol=ATOL)
    assert not any(np.allclose(scores(mixed), e, atol=ATOL) for e in expected)  # a third model
    model_file = repo / "iris" / "1" / "model.onnx"

    server = ServeProcess(repo, "--workers", "2", "--poll-seconds", str(POLL), "--no-access-log")
    answers: list[tuple[int, list[float] | str]] = []
    done = threading.Event()

    def client() -> None:
        with requests.Session() as session:
            while not done.is_set():
                answers.append(answer(session, server.url, "iris"))
                time.sleep(0.02)

    try:
        server.wait_ready()
        with requests.Session() as session:  # files written just before the start: served at once
            assert answer(session, server.url, "iris")[0] == 200, server.log()[-2000:]
        server.wait_for_workers(2)
        scorer = threading.Thread(target=client)
        scorer.start()
        try:
            with model_file.open("r+b") as stream:  # in place, without truncation
                for start, end in ((0, half), (half, len(new))):
                    stream.write(new[start:end])
                    stream.flush()
                    os.fsync(stream.fileno())
                    if start == 0:
                        time.sleep(PAUSE)
            deadline = time.monotonic() + SETTLE_SECONDS + SLACK
            while not (answers and np.allclose(answers[-1][1], expected[1], atol=ATOL)):
                assert time.monotonic() < deadline, (
                    f"the rewritten model is not served: {server.log()[-2000:]}"
                )
                time.sleep(0.1)
            shutil.copytree(new_path / "iris", repo / "dropped")  # a Triton model dropped in, written at once
            (repo / "dropped" / "config.pbtxt").write_text(IRIS_CONFIG.replace('"iris"', '"dropped"'))
            dropped = time.monotonic()
            with requests.Session() as session:
                while answer(session, server.url, "dropped")[0] != 200:
                    assert time.monotonic() < dropped + SETTLE_SECONDS + SLACK, server.log()[-2000:]
                    time.sleep(0.05)
            print(f"a dropped-in Triton model served after {time.monotonic() - dropped:.2f} s")
        finally:
            done.set()
            scorer.join(timeout=60)
    finally:
        log = server.stop()
    assert_each_answer_from_a_version(answers, expected, 20, log)
