"""Sane bounds on the number of workers, and what a local run will need.

A local worker is a whole TensorFlow process: about 0.8 GB of memory and, to make progress, a share of a
core. More workers than four per core, or than the memory available, would only thrash the machine; on
Kubernetes more than 512 workers is most likely a typo. `--force` overrides either bound.
"""

from __future__ import annotations

import os

LOCAL_WORKER_GB = 0.8
LOCAL_WORKERS_PER_CORE = 4
CLUSTER_MAX_WORKERS = 512


def available_gb() -> float:
    """MemAvailable from /proc/meminfo (0 when it cannot be read)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024**2
    except OSError:
        pass
    return 0.0


def local_bound() -> int:
    by_cores = LOCAL_WORKERS_PER_CORE * (os.cpu_count() or 1)
    memory = available_gb()
    by_memory = int(memory / LOCAL_WORKER_GB) if memory else by_cores
    return max(1, min(by_cores, by_memory))


def check_workers(workers: int, backend: str, *, force: bool) -> str | None:
    """None when `workers` is acceptable, else the one-line reason."""
    if workers < 1:
        return "--workers must be at least 1"
    bound = local_bound() if backend == "local" else CLUSTER_MAX_WORKERS
    if workers > bound and not force:
        need = f" ({local_memory_note(workers)})" if backend == "local" else ""
        bound_text = f"the {backend} backend's bound of {bound}{need}"
        return f"{workers} workers is more than {bound_text}; --force to insist"
    return None


def local_memory_note(workers: int) -> str:
    need = workers * LOCAL_WORKER_GB
    processes = f"{workers} local TensorFlow processes"
    return f"{processes} need about {need:.1f} GB of memory; {available_gb():.1f} GB is available"
