"""TF_CONFIG and the TF-Spawner variables, built the same way for local processes and for pods.

A run's tasks are numbered in one list: with MultiWorkerMirroredStrategy every task is a worker; with
parameter-server training task 0 is the chief (the coordinator that runs the training loop), then the
workers, then the parameter servers. The manifests' bootstrap builds the same TF_CONFIG from a pod's
completion index (a test holds the two together).
"""

from __future__ import annotations

import json


def roles(workers: int, ps: int) -> list[tuple[str, int]]:
    """(task type, index within the type) for every task, in task order."""
    if ps == 0:
        return [("worker", i) for i in range(workers)]
    return [("chief", 0), *(("worker", i) for i in range(workers)), *(("ps", i) for i in range(ps))]


def tf_config(addresses: list[str], position: int, ps: int = 0) -> str:
    """TF_CONFIG for the task at `position`, given every task's address in task order."""
    tasks = roles(len(addresses) - (1 + ps if ps else 0), ps)
    cluster: dict[str, list[str]] = {}
    for (kind, _), address in zip(tasks, addresses, strict=True):
        cluster.setdefault(kind, []).append(address)
    kind, index = tasks[position]
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


def worker_env(addresses: list[str], position: int, ps: int = 0) -> dict[str, str]:
    """TF_CONFIG plus WORKER_NUMBER (the task's position) and TOT_WORKERS (the number of workers), so
    TF-Spawner scripts run unchanged."""
    workers = len(addresses) - (1 + ps if ps else 0)
    return {
        "TF_CONFIG": tf_config(addresses, position, ps),
        "WORKER_NUMBER": str(position),
        "TOT_WORKERS": str(workers),
    }
