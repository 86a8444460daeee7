"""TF_CONFIG and the TF-Spawner variables, built the same way for local processes and for pods."""

from __future__ import annotations

import json


def tf_config(addresses: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}})


def worker_env(addresses: list[str], index: int) -> dict[str, str]:
    """TF_CONFIG plus WORKER_NUMBER and TOT_WORKERS, so TF-Spawner scripts run unchanged."""
    return {
        "TF_CONFIG": tf_config(addresses, index),
        "WORKER_NUMBER": str(index),
        "TOT_WORKERS": str(len(addresses)),
    }
