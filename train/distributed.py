"""The few facts a training script needs about its place in a multi-worker job (from `TF_CONFIG`)."""

from __future__ import annotations

import json
import os
from typing import Any


def tf_config() -> dict[str, Any]:
    raw = os.environ.get("TF_CONFIG", "")
    return json.loads(raw) if raw else {}


def worker_count() -> int:
    return len(tf_config().get("cluster", {}).get("worker", [])) or 1


def is_chief() -> bool:
    """Worker 0 is the chief (no separate 'chief' task is used); a lone process is its own chief."""
    task = tf_config().get("task", {})
    return task.get("type", "worker") in ("worker", "chief") and int(task.get("index", 0)) == 0


def make_strategy() -> Any:
    """MultiWorkerMirroredStrategy under a multi-worker TF_CONFIG, else the default strategy."""
    import tensorflow as tf

    if worker_count() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.get_strategy()
