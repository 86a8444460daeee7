"""Prometheus metrics of the scorer, correct across worker processes.

Under `nnsql serve` the master sets PROMETHEUS_MULTIPROC_DIR for its workers: prometheus-client's
multiprocess mode then keeps every value in a file per process, and a scrape of any worker renders the
sum over all of them (MultiProcessCollector), so counters never go backwards whichever worker answers.
Without the variable (an app made in a test) each Metrics has its own registry, as before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class Families:
    """A collector over a fixed list of metric families (what generate_latest needs)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


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
            "nnsql_queue_depth",
            "Requests waiting for a batch",
            ["model"],
            registry=self.registry,
            multiprocess_mode="livesum",
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
        self.series: dict[tuple, tuple] = {}

    def observe_batch(self, model: str, rows: int) -> None:
        self.batch_rows.labels(model).observe(rows)

    def observe_run(self, model: str, version: int, seconds: float) -> None:
        self.runs.labels(model, str(version)).observe(seconds)

    def observe_request(
        self, model: str, version: int, protocol: str, ok: bool, seconds: float, rows: int
    ) -> None:
        """One inference request answered (ok) or failed after its tensors were decoded. The labelled
        series are looked up once, then remembered: a look-up costs as much as the update."""
        key = (model, str(version), protocol, ok)
        series = self.series.get(key)
        if series is None:
            labels = (model, str(version))
            outcome = (
                (self.inference_rows.labels(*labels), self.inference_seconds.labels(*labels))
                if ok
                else (None, self.failed_seconds.labels(*labels))
            )
            series = self.series[key] = (
                self.requests.labels(*labels, protocol, "ok" if ok else "error"),
                self.latency.labels(protocol),
                *outcome,
                self.last_inference.labels(*labels),
            )
        requests, latency, rows_counter, seconds_counter, last = series
        requests.inc()
        latency.observe(seconds)
        seconds_counter.inc(seconds)
        if rows_counter is not None:
            rows_counter.inc(rows)
            last.set(time.time())

    def queue_changed(self, model: str, change: int) -> None:
        """Requests joined (+) or left (-) a batcher's queue: counted as they go in multiprocess mode,
        where a scrape cannot ask the other workers' batchers."""
        if multiprocess():
            self.queue_depth.labels(model).inc(change)

    def families(self) -> list[Metric]:
        """Every metric family, summed over all worker processes in multiprocess mode."""
        if not multiprocess():
            return list(self.registry.collect())
        from prometheus_client import multiprocess as aggregation

        registry = CollectorRegistry()
        aggregation.MultiProcessCollector(registry)
        return list(registry.collect())

    def render(self, depths: dict[str, int]) -> bytes:
        """The exposition text; `depths`: queue depth per served "model/version" (in multiprocess mode
        only its keys are used: series of versions no longer served are left out)."""
        if not multiprocess():
            self.queue_depth.clear()  # versions removed since the last scrape leave no stale series
            for model, depth in depths.items():
                self.queue_depth.labels(model).set(depth)
            return generate_latest(self.registry)
        families = self.families()
        for family in families:
            if family.name == "nnsql_queue_depth":
                family.samples = [s for s in family.samples if s.labels.get("model") in depths]
        return generate_latest(Families(families))
