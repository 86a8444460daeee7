"""The statistics extension: per model version, the requests answered and failed with their cumulative
time, the rows inferred, the model executions and their time, and when the version last answered.

Every figure is read back from the Prometheus metrics (serve/metrics.py), the one record of what the
server did: with several worker processes the metrics registry is the merged view of all of them, so
the statistics are the whole server's, whichever worker answers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from prometheus_client.metrics_core import Metric

from ..repository import LoadedModel

NS = 1_000_000_000
Key = tuple[str, str]  # model name, version


def read_samples(families: Iterable[Metric]) -> dict[str, dict[Key, float]]:
    """Sample name → (model, version) → value; request counts split by status, summed over protocols."""
    wanted = {
        "nnsql_requests_total",
        "nnsql_inference_rows_total",
        "nnsql_inference_seconds_total",
        "nnsql_failed_inference_seconds_total",
        "nnsql_model_run_seconds_count",
        "nnsql_model_run_seconds_sum",
        "nnsql_last_inference_timestamp_seconds",
    }
    values: dict[str, dict[Key, float]] = defaultdict(lambda: defaultdict(float))
    for family in families:
        for sample in family.samples:
            if sample.name not in wanted or "version" not in sample.labels:
                continue
            name = sample.name
            if "status" in sample.labels:
                name = f"{name}:{sample.labels['status']}"
            values[name][(sample.labels["model"], sample.labels["version"])] += sample.value
    return values


def duration(count: float, seconds: float) -> dict[str, int]:
    return {"count": int(count), "ns": round(seconds * NS)}


def version_statistics(values: dict[str, dict[Key, float]], key: Key) -> dict[str, Any]:
    def get(name: str) -> float:
        return values.get(name, {}).get(key, 0.0)

    zero = duration(0, 0)
    runs = get("nnsql_model_run_seconds_count")
    return {
        "name": key[0],
        "version": key[1],
        "last_inference": round(1000 * get("nnsql_last_inference_timestamp_seconds")),
        "inference_count": int(get("nnsql_inference_rows_total")),
        "execution_count": int(runs),
        "inference_stats": {
            "success": duration(get("nnsql_requests_total:ok"), get("nnsql_inference_seconds_total")),
            "fail": duration(get("nnsql_requests_total:error"), get("nnsql_failed_inference_seconds_total")),
            "queue": zero,
            "compute_input": zero,
            "compute_infer": duration(runs, get("nnsql_model_run_seconds_sum")),
            "compute_output": zero,
        },
        "batch_stats": [],
    }


def model_statistics(families: Iterable[Metric], models: list[LoadedModel]) -> dict[str, Any]:
    """Triton's statistics document for these versions."""
    values = read_samples(families)
    return {"model_stats": [version_statistics(values, (model.name, str(model.version))) for model in models]}
