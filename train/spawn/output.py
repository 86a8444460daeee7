"""Where a worker saves its model: TensorFlow's multi-worker pattern in one call.

    from nnsql.train.spawn import output_path
    model.save(output_path("model.keras"))      # on every worker, after model.fit

Under MultiWorkerMirroredStrategy saving is a collective operation: every worker must call `save`, or the
chief waits for the others for ever ("Collective ops is aborted"). TensorFlow's guide has the chief write
the real path and every other worker a temporary one (https://www.tensorflow.org/tutorials/distribute/
multi_worker_with_keras, "Model saving and loading"). `output_path(name)` is that path: the chief's is
under $NNSQL_OUTPUT_DIR (what spawn hands back), another worker's under a temporary directory of its own.

Standard library only: spawn's pod bootstrap puts this file in pods whose image holds no project code.
"""

from __future__ import annotations

import json
import os
import tempfile


def is_chief() -> bool:
    """The task that writes the real outputs: the `chief` task when TF_CONFIG has one, else worker 0;
    a process outside any multi-worker job is its own chief."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = config.get("task") or {}
    kind, index = task.get("type"), int(task.get("index", 0))
    if kind is None:
        return os.environ.get("WORKER_NUMBER", "0") == "0"
    if "chief" in (config.get("cluster") or {}):
        return kind == "chief"
    return kind == "worker" and index == 0


def output_path(name: str) -> str:
    """The path this worker saves `name` to: $NNSQL_OUTPUT_DIR/name on the chief (the current directory
    outside spawn), a private temporary directory on every other worker. Directories are created."""
    if is_chief():
        directory = os.environ.get("NNSQL_OUTPUT_DIR") or os.getcwd()
    else:
        number = os.environ.get("WORKER_NUMBER") or str(os.getpid())
        directory = os.path.join(tempfile.gettempdir(), f"nnsql-worker-{number}")
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, name)
