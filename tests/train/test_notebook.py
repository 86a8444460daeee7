"""A notebook drives train.spawn, executed by nbclient on a real IPython kernel: `run` starts 2 local workers
training a tf.keras model.fit script, `wait()` shows a tqdm widget and returns the model, `logs`, `status`,
`tensorboard()` answer, and interrupting the kernel during `wait()` stops every worker of a run."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import REPO
from tests.train.test_spawn_safety import alive

pytestmark = pytest.mark.slow

FIT = """
import os
import numpy as np
import tensorflow as tf
from nnsql.train.spawn import output_path

strategy = tf.distribute.MultiWorkerMirroredStrategy()
print("replicas in sync:", strategy.num_replicas_in_sync)
x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="softmax", input_shape=(4,))])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
logs = os.path.join(os.environ["NNSQL_OUTPUT_DIR"], "logs")
model.fit(x, (x[:, 0] > 0).astype("int64"), epochs=3, batch_size=32, verbose=2,
          callbacks=[tf.keras.callbacks.TensorBoard(log_dir=logs)])
model.save(output_path("model.keras"))
"""

SLEEPER = """
import os, time
def make_strategy():
    return None
make_strategy()
print("ready", os.getpid(), flush=True)
time.sleep(600)
"""

CELLS = [
    "import os, sys\nsys.path.insert(0, {repo!r})\nos.chdir({work!r})\nfrom nnsql.train.spawn import run",
    "job = run('fit.py', workers=2)\njob",
    "model = job.wait()\nprint('model:', model.name, job.status)",
    "print('worker 1 says:', job.logs(1).count('replicas in sync: 2'))",
    "import requests\nurl = job.tensorboard()\n"
    "print('tensorboard runs:', requests.get(url + 'data/runs').json())",
    "job.stop()\nsleeper = run('sleeper.py', workers=2, max_restarts=0)",
    "sleeper.wait()",
    "print('after the interrupt:', sleeper.status)",
]


def text_of(cell) -> str:
    return "".join(output.get("text", "") for output in cell.outputs if output["output_type"] == "stream")


def interrupt_when_ready(client: NotebookClient, work: Path) -> None:
    """Interrupt the kernel once both workers of the sleeper run say they are ready."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for run in (work / "runs").glob("sleeper-*"):
            logs = [run / "attempt-0" / f"worker-{i}.log" for i in (0, 1)]
            if all(log.exists() and "ready" in log.read_text() for log in logs):
                time.sleep(0.5)
                os.kill(client.km.provisioner.pid, signal.SIGINT)  # what the notebook's stop button sends
                return
        time.sleep(0.2)


def test_a_notebook_drives_a_run_and_an_interrupt_stops_it(tmp_path):
    (tmp_path / "fit.py").write_text(textwrap.dedent(FIT))
    (tmp_path / "sleeper.py").write_text(textwrap.dedent(SLEEPER))
    source = [cell.format(repo=str(REPO), work=str(tmp_path)) for cell in CELLS]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(text) for text in source])
    client = NotebookClient(notebook, kernel_name="python3", timeout=300, allow_errors=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with client.setup_kernel(cwd=str(tmp_path)):
        for index, cell in enumerate(notebook.cells):
            interrupter = None
            if cell.source == "sleeper.wait()":
                interrupter = threading.Thread(target=interrupt_when_ready, args=(client, tmp_path))
                interrupter.start()
            client.execute_cell(cell, index)
            if interrupter:
                interrupter.join()
    cells = notebook.cells
    assert "model: model.keras succeeded" in text_of(cells[2]), cells[2].outputs
    widgets = [o for o in cells[2].outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, "wait() shows tqdm's notebook widget"
    assert "worker 1 says: 1" in text_of(cells[3])
    assert "'logs/train'" in text_of(cells[4])  # the fit's TensorBoard callback, served
    assert [o.get("ename") for o in cells[6].outputs if o["output_type"] == "error"] == ["KeyboardInterrupt"]
    assert "after the interrupt: stopped" in text_of(cells[7])
    (run_dir,) = (tmp_path / "runs").glob("sleeper-*")
    pids = json.loads((run_dir / "workers.json").read_text())["pids"].values()
    assert not [pid for pid in pids if alive(pid)], "a worker outlived the interrupt"
