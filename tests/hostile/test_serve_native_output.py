"""What native code in a worker writes on its descriptor 2 (onnxruntime's warnings while it loads a model)
while the log's output takes nothing (a pipe nobody reads): the worker keeps serving. onnxruntime wrote
its warnings (`Removing initializer 'w'. It is not used by any node`, one line per initializer) straight
into the pipe while it held Python's lock: one model that makes it warn, added to the repository, froze
the worker, every model it served and its heartbeat, for good. Its lines also named the model's
initializers as they are, line breaks and terminal escapes included."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.conftest import REPO
from tests.fixtures import free_port
from tests.hostile.test_serve_accesslog import drain, served_repository, stop_draining, wait_ready
from tests.hostile.test_serve_log_output import answered, fill
from tests.serve.test_triton_repository import IRIS_CONFIG

pytestmark = pytest.mark.slow
UNUSED = 2_000  # initializers onnxruntime warns about: about 400 KB of warnings, beyond any pipe's room
FORGED = "ERROR forged by the model"
LOAD_SECONDS = 60  # a rescan and a model load, on a loaded machine


def noisy_model(path: Path, unused_count: int) -> None:
    """iris's interface, and initializers no node uses: onnxruntime warns about each while it loads.
    The first one's name carries a line break and a terminal escape."""
    weights = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], np.linspace(-1, 1, 12).tolist())
    names = [f"unused\n{FORGED}\x1b[2J", *(f"unused_{number}" for number in range(unused_count))]
    unused = [helper.make_tensor(name, TensorProto.FLOAT, [1], [0.0]) for name in names]
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"]),
            helper.make_node("Softmax", ["xw"], ["probs"], axis=1),
        ],
        "noisy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 4])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["rows", 3])],
        initializer=[weights, *unused],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True)
    onnx.save(model, path)


def ready(port: int, model: str) -> bool:
    import requests

    try:
        return requests.get(f"http://127.0.0.1:{port}/v2/models/{model}/ready", timeout=5).ok
    except requests.RequestException:
        return False


def serving(root: Path, port: int) -> tuple[subprocess.Popen, int]:
    """One worker serving iris, its output and errors written into a pipe whose reading end is returned."""
    reader, writer = os.pipe()
    command = [sys.executable, "-m", "nnsql.serve", "--repo", str(served_repository(root))]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--workers", "1", "--poll-seconds", "0.2"],
        cwd=REPO,
        stdout=writer,
        stderr=writer,
    )
    os.close(writer)
    return server, reader


def add_noisy_model(repo: Path, port: int, server: subprocess.Popen, unused_count: int) -> None:
    (repo / "noisy").mkdir()
    config = IRIS_CONFIG.replace('"iris"', '"noisy"').replace('  label_filename: "labels.txt"', "")
    (repo / "noisy" / "config.pbtxt").write_text(config)
    noisy_model(repo / "noisy" / "1" / "model.onnx", unused_count)
    deadline = time.monotonic() + LOAD_SECONDS
    while not ready(port, "noisy"):
        assert server.poll() is None and time.monotonic() < deadline, "the noisy model never loaded"
        time.sleep(0.5)


def test_native_warnings_into_a_blocked_output_stall_no_worker(tmp_path):
    port = free_port()
    server, reader = serving(tmp_path, port)
    try:
        wait_ready(server, port)
        fill(server.pid)
        add_noisy_model(tmp_path / "repository", port, server, UNUSED)
        assert all(answered(port) for _ in range(10)), "the worker stopped answering"
    finally:
        stop_draining(server, reader)


def test_native_warnings_cannot_forge_a_log_line(tmp_path):
    port = free_port()
    server, reader = serving(tmp_path, port)
    draining = drain(reader)
    try:
        wait_ready(server, port)
        add_noisy_model(tmp_path / "repository", port, server, 20)  # fewer lines than the log keeps
    finally:
        server.terminate()
        server.wait(30)
        draining.join(10)
        os.close(reader)
    text = b"".join(draining.kept).decode(errors="replace")  # type: ignore[attr-defined]
    assert "Removing initializer 'unused_1'" in text  # the warnings are still said
    assert not any(line.startswith(FORGED) for line in text.splitlines())
    # a line break in a name still ends onnxruntime's line: the rest is said as the worker's stderr
    marked = r"[worker 0] (stderr) ERROR forged by the model\x1b[2J"
    assert any(line.startswith(marked) for line in text.splitlines())
    assert "\x1b" not in text
