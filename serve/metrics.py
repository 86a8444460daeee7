"""Prometheus metrics of one app instance (its own registry, so several apps can live in one process)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "nnsql_requests",
            "Inference requests",
            ["model", "version", "protocol", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "nnsql_request_seconds",
            "Request latency",
            ["protocol"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_rows = Histogram(
            "nnsql_batch_rows",
            "Rows per session.run",
            ["model"],
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "nnsql_queue_depth", "Requests waiting for a batch", ["model"], registry=self.registry
        )
        # Per model version, for the statistics extension (serve/extensions/statistics.py reads them back)
        self.inference_rows = Counter(
            "nnsql_inference_rows",
            "Rows inferred by answered requests",
            ["model", "version"],
            registry=self.registry,
        )
        self.inference_seconds = Counter(
            "nnsql_inference_seconds",
            "Seconds answered requests spent in inference (batching wait and session.run)",
            ["model", "version"],
            registry=self.registry,
        )
        self.failed_seconds = Counter(
            "nnsql_failed_inference_seconds",
            "Seconds requests whose inference failed spent in it",
            ["model", "version"],
            registry=self.registry,
        )
        self.runs = Histogram(
            "nnsql_model_run_seconds",
            "Seconds per session.run (one per batch)",
            ["model", "version"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.last_inference = Gauge(
            "nnsql_last_inference_timestamp_seconds",
            "When the model version last answered a request",
            ["model", "version"],
            multiprocess_mode="max",
            registry=self.registry,
        )

    def observe_batch(self, model: str, rows: int) -> None:
        self.batch_rows.labels(model).observe(rows)

    def observe_run(self, model: str, version: int, seconds: float) -> None:
        self.runs.labels(model, str(version)).observe(seconds)

    def observe_request(
        self, model: str, version: int, protocol: str, ok: bool, seconds: float, rows: int
    ) -> None:
        """One inference request answered (ok) or failed after its tensors were decoded."""
        labels = (model, str(version))
        self.requests.labels(*labels, protocol, "ok" if ok else "error").inc()
        self.latency.labels(protocol).observe(seconds)
        if ok:
            self.inference_rows.labels(*labels).inc(rows)
            self.inference_seconds.labels(*labels).inc(seconds)
            self.last_inference.labels(*labels).set(time.time())
        else:
            self.failed_seconds.labels(*labels).inc(seconds)

    def families(self) -> Iterable[Metric]:
        """The metric families as /metrics renders them (merged over the processes, where several)."""
        return self.registry.collect()

    def render(self, depths: dict[str, int]) -> bytes:
        self.queue_depth.clear()  # models and versions removed since the last scrape leave no stale series
        for model, depth in depths.items():
            self.queue_depth.labels(model).set(depth)
        return generate_latest(self.registry)
