"""A Triton model's other files are hostile input too, while `nnsql serve` (loopback) serves it: its
label file and config.pbtxt rewritten by truncate-then-write (`cp`), stopping half-way a while, must never
give an answer with a cut or missing label, nor make the model go missing; a newest version that cannot
be loaded (garbage, or half-copied past the settle period) must leave the previous one serving, as
Triton keeps a model whose reload failed, and be served once it is whole."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import requests

from nnsql.serve import coordination
from tests.hostile.test_serve_triton_rewrite import triton_model
from tests.serve.conftest import ServeProcess
from tests.serve.test_triton_repository import IRIS_CONFIG, softmax_model

pytestmark = pytest.mark.slow
SETTLE_SECONDS = getattr(coordination, "SETTLE_SECONDS", 2.0)  # (2.0: to run it on a tree before it)
PAUSE = SETTLE_SECONDS / 2  # the writer's stop half-way: shorter than the settle period, many scans long
POLL = "0.1"  # seconds between scans: many scans see the file half-written
SLACK = 15.0  # seconds beyond the settle period for a load and a commit on a loaded machine
LABELS = "setosa\nversicolor\nvirginica\n"
ROW = [0.5, -1.0, 2.0, 0.25]
TOP3 = {
    "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": ROW}],
    "outputs": [{"name": "probs", "parameters": {"classification": 3}}],
}


def top3(session: requests.Session, url: str) -> tuple[int, str]:
    """The status and the three `score:index:label` strings, or the error."""
    reply = session.post(f"{url}/v2/models/iris/infer", json=TOP3, timeout=30)
    return reply.status_code, str(reply.json()["outputs"][0]["data"]) if reply.ok else reply.text[:200]


def cut_write(path: Path, text: str, at: int) -> None:
    """Truncate, write the first `at` characters, stop PAUSE seconds, write the rest."""
    with path.open("w") as stream:
        stream.write(text[:at])
        stream.flush()
        time.sleep(PAUSE)
        stream.write(text[at:])


def wait_for(server: ServeProcess, wanted: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    with requests.Session() as session:
        while wanted not in top3(session, server.url)[1]:
            assert time.monotonic() < deadline, f"{wanted!r} never served: {server.log()[-2000:]}"
            time.sleep(0.05)


def test_label_and_config_files_rewritten_never_give_a_cut_label_nor_a_missing_model(tmp_path):
    repo = tmp_path / "repo"
    triton_model(repo, "iris", seed=1)
    (repo / "iris" / "labels.txt").write_text(LABELS)
    labels, config = repo / "iris" / "labels.txt", repo / "iris" / "config.pbtxt"
    answers: Counter[tuple[int, str]] = Counter()
    done = threading.Event()
    server = ServeProcess(repo, "--workers", "1", "--poll-seconds", POLL, "--no-access-log")

    def client() -> None:
        with requests.Session() as session:
            while not done.is_set():
                answers[top3(session, server.url)] += 1
                time.sleep(0.01)

    try:
        server.wait_ready()
        server.wait_for_workers(1)
        with requests.Session() as session:
            expected = top3(session, server.url)
        assert expected[0] == 200 and "versicolor" in expected[1], expected
        scorer = threading.Thread(target=client)
        scorer.start()
        try:
            cut_write(labels, LABELS, LABELS.index("versicolor") + 5)  # a label cut: "versi"
            cut_write(config, IRIS_CONFIG, IRIS_CONFIG.index("output"))  # no output: no label file
            cut_write(config, IRIS_CONFIG, IRIS_CONFIG.index('name: "x"') + 4)  # cannot be parsed
            time.sleep(SETTLE_SECONDS + 1)  # the files settled: served again as they are
            renamed = LABELS.replace("versicolor", "versicolour")
            labels.write_text(renamed)  # a change written at once is served once it settled
            wait_for(server, "versicolour", SETTLE_SECONDS + SLACK)
        finally:
            done.set()
            scorer.join(timeout=60)
    finally:
        log = server.stop()
    wrong = {answer: count for answer, count in answers.items() if answer != expected}
    wrong = {a: n for a, n in wrong.items() if a != (200, expected[1].replace("versicolor", "versicolour"))}
    assert not wrong, f"{sum(wrong.values())} of {answers.total()} answers wrong: {wrong}\n{log[-2000:]}"
    assert answers[expected] > 50, answers  # the client scored all along


def test_a_newest_version_that_fails_to_load_leaves_the_previous_one_serving(tmp_path):
    repo = tmp_path / "repo"
    triton_model(repo, "iris", seed=1)  # Triton's default version policy: the latest version served
    newest = repo / "iris" / "2" / "model.onnx"
    server = ServeProcess(repo, "--workers", "2", "--poll-seconds", POLL, "--no-access-log")
    statuses: Counter[tuple[int, str]] = Counter()
    try:
        server.wait_ready()
        server.wait_for_workers(2)
        newest.parent.mkdir()
        newest.write_bytes(b"\x07" * 4096)  # garbage: not an ONNX model
        deadline = time.monotonic() + SETTLE_SECONDS + 5  # settled, planned, failed, committed: many scans
        with requests.Session() as session:
            while time.monotonic() < deadline:
                reply = session.post(f"{server.url}/v2/models/iris/infer", json=TOP3, timeout=30)
                statuses[(reply.status_code, reply.json().get("model_version", reply.text[:100]))] += 1
                time.sleep(0.02)
        assert "cannot load iris version 2" in server.log(), server.log()[-2000:]
        softmax_model(newest.with_name("model.new"), 2, 3)
        newest.with_name("model.new").replace(newest)  # whole now: served once it settled
        deadline = time.monotonic() + SETTLE_SECONDS + SLACK
        with requests.Session() as session:
            while (
                session.post(f"{server.url}/v2/models/iris/infer", json=TOP3, timeout=30)
                .json()
                .get("model_version")
                != "2"
            ):
                assert time.monotonic() < deadline, f"version 2 never served: {server.log()[-2000:]}"
                time.sleep(0.05)
    finally:
        log = server.stop()
    assert set(statuses) == {(200, "1")}, f"{statuses}\n{log[-2000:]}"
