"""From the workers' results to the benchmark's rows, and from rows to the table, CSV, JSON, plot and
comparisons.

Definitions (one row per model, data and worker count):
- a worker's rate is its examples per step × timed steps / the sum of its step times;
- `images_per_second` is the sum of the workers' rates (for the Inclusive Classifier: events);
- `speedup` is that total over the 1-worker total of the same model and data (when the sweep has no
  1-worker run, over the smallest run's total per worker: linear scaling up to it is assumed, and the
  row says so in `baseline_workers`); `efficiency` is speedup / workers;
- step times are pooled over all workers (the steps are synchronous): p50 and p95 in milliseconds;
- `input_mb_per_second` is the record bytes the input pipeline alone reads per second, per worker (mean),
  and `input_images_per_second` the examples it delivers per second, summed over workers: when it is not
  well above `images_per_second`, the input pipeline limits training.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

COLUMNS = (
    "model",
    "data",
    "workers",
    "images_per_second",
    "images_per_second_per_worker",
    "speedup",
    "efficiency",
    "step_ms_p50",
    "step_ms_p95",
    "input_mb_per_second",
    "input_images_per_second",
    "baseline_workers",
    "batch_per_replica",
    "replicas_per_worker",
    "image_size",
    "steps",
    "parameters",
    "data_source",
    "seconds_to_target",
    "target_accuracy",
)


def worker_rate(result: dict) -> float:
    return result["examples_per_step"] * len(result["step_seconds"]) / sum(result["step_seconds"])


def measured_row(run: dict, results: list[dict]) -> dict:
    """One run's row without speedup and efficiency (they need the whole sweep)."""
    rates = [worker_rate(result) for result in results]
    steps_ms = np.concatenate([result["step_seconds"] for result in results]) * 1000
    pipelines = [result["pipeline"] for result in results if result.get("pipeline")]
    target = next((result["target"] for result in results if result.get("target")), None)
    return {
        "model": run["model"],
        "data": run["data"],
        "workers": run["workers"],
        "images_per_second": round(sum(rates), 2),
        "images_per_second_per_worker": round(sum(rates) / len(rates), 2),
        "step_ms_p50": round(float(np.percentile(steps_ms, 50)), 2),
        "step_ms_p95": round(float(np.percentile(steps_ms, 95)), 2),
        "input_mb_per_second": (
            round(float(np.mean([p["mb_per_second"] for p in pipelines])), 2) if pipelines else None
        ),
        "input_images_per_second": (
            round(sum(p["examples_per_second"] for p in pipelines), 2) if pipelines else None
        ),
        "batch_per_replica": run["batch_size"],
        "replicas_per_worker": results[0]["replicas"],
        "image_size": run["image_size"] if run["model"] != "inclusive" else None,
        "steps": len(results[0]["step_seconds"]),
        "parameters": results[0]["parameters"],
        "data_source": run.get("source"),
        "seconds_to_target": target["seconds"] if target else None,
        "target_accuracy": target["target_accuracy"] if target else None,
    }


def with_scaling(rows: list[dict]) -> list[dict]:
    """Speedup and efficiency of every row against the smallest run of its model and data."""
    scaled = []
    for row in rows:
        group = [r for r in rows if (r["model"], r["data"]) == (row["model"], row["data"])]
        base = min(group, key=lambda r: r["workers"])
        per_worker = base["images_per_second"] / base["workers"]
        speedup = row["images_per_second"] / per_worker if per_worker else float("nan")
        scaled.append(
            {
                **row,
                "baseline_workers": base["workers"],
                "speedup": round(speedup, 3),
                "efficiency": round(speedup / row["workers"], 3),
            }
        )
    return [{column: row.get(column) for column in COLUMNS} for row in scaled]


def results_from_log(text: str, mark: str) -> list[dict]:
    return [json.loads(line.split(mark, 1)[1]) for line in text.splitlines() if mark in line]


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def text_table(header: list[str], body: Iterable[list[Any]]) -> str:
    lines = [header, *([cell(value) for value in row] for row in body)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(text.rjust(width) for text, width in zip(line, widths, strict=True)) for line in lines
    )


TABLE = (
    ("model", "model"),
    ("data", "data"),
    ("workers", "workers"),
    ("images_per_second", "img/s total"),
    ("images_per_second_per_worker", "img/s/worker"),
    ("speedup", "speedup"),
    ("efficiency", "efficiency"),
    ("step_ms_p50", "step p50 ms"),
    ("step_ms_p95", "step p95 ms"),
    ("input_images_per_second", "pipeline img/s"),
    ("input_mb_per_second", "pipeline MB/s/worker"),
)


def table(rows: list[dict]) -> str:
    return text_table([title for _, title in TABLE], ([row[key] for key, _ in TABLE] for row in rows))


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict], path: Path, title: str) -> None:
    """Throughput and scaling efficiency against workers: one line per model, solid synthetic, dashed real."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (throughput, efficiency) = plt.subplots(1, 2, figsize=(11, 4.2))
    for model, data in dict.fromkeys((row["model"], row["data"]) for row in rows):
        group = sorted(
            (r for r in rows if (r["model"], r["data"]) == (model, data)), key=lambda r: r["workers"]
        )
        workers = [r["workers"] for r in group]
        style = "-o" if data == "synthetic" else "--s"
        throughput.plot(workers, [r["images_per_second"] for r in group], style, label=f"{model}, {data}")
        efficiency.plot(workers, [r["efficiency"] for r in group], style, label=f"{model}, {data}")
    all_workers = sorted({row["workers"] for row in rows})
    efficiency.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    throughput.set(xlabel="workers", ylabel="images/s (total)", title="Throughput", xticks=all_workers)
    efficiency.set(
        xlabel="workers", ylabel="speedup / workers", title="Scaling efficiency", xticks=all_workers
    )
    efficiency.set_ylim(bottom=0)
    throughput.set_ylim(bottom=0)
    throughput.legend(fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def row_key(row: dict) -> tuple:
    return row["model"], row["data"], row["workers"]


def comparison(documents: list[dict]) -> str:
    """The DEEP study's shape: one column per infrastructure (run), images/s and speedup per row, and
    each later run's ratio to the first."""
    first, *others = documents
    keys = list(dict.fromkeys(row_key(row) for document in documents for row in document["rows"]))
    indexed = [{row_key(row): row for row in document["rows"]} for document in documents]
    header = ["model", "data", "workers"]
    for document in documents:
        header.append(f"{document['label']} img/s (speedup)")
    header += [f"{document['label']} / {first['label']}" for document in others]
    body = []
    for key in keys:
        line: list[Any] = list(key)
        for rows in indexed:
            row = rows.get(key)
            line.append(f"{cell(row['images_per_second'])} (×{row['speedup']:.2f})" if row else "-")
        base = indexed[0].get(key)
        for rows in indexed[1:]:
            row = rows.get(key)
            line.append(
                f"{row['images_per_second'] / base['images_per_second']:.2f}"
                if row and base and base["images_per_second"]
                else "-"
            )
        body.append(line)
    return text_table(header, body)


def load_document(path: Path) -> dict:
    document = json.loads(path.read_text())
    if not isinstance(document, dict) or not isinstance(document.get("rows"), list):
        raise ValueError(f"{path}: not a bench.infra results file (no 'rows' list)")
    document.setdefault("label", path.stem)
    return document
