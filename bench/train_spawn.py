"""Benchmark: distributed training throughput and the HEP input pipeline, in one run.

1. samples/s training the MNIST reference MLP on Fashion-MNIST with 1 and with 2 local workers
   (python -m train.spawn); this machine has 2 cores, so 2 workers share them: a report, not a promise.
2. the tf.data pipeline alone (parallel interleave, parallel parse, large read buffer, no cache) reading
   synthetic HEP TFRecords, in MB/s, with 1 and with 2 concurrent reader processes (MB/s per worker).
   CERN fed a P100 at ~125 MB/s per node; goal: ≥ 125 MB/s per worker.
Writes bench/results/train_spawn.json.

    python -m bench.train_spawn [--epochs 3] [--events 4000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
REPO_ROOT = Path(__file__).resolve().parents[1]


def training_rate(workers: int, epochs: int, runs: Path) -> dict:
    from train.spawn import __main__ as spawn

    spawn.RUNS = runs / f"w{workers}"
    script = str(REPO_ROOT / "train" / "mnist.py")
    started = time.perf_counter()
    code = spawn.main(
        ["-w", str(workers), script, "--", "--dataset", "fashion-mnist", "--epochs", str(epochs), "--quiet"]
    )
    wall = time.perf_counter() - started
    if code != 0:
        raise RuntimeError(f"training with {workers} worker(s) failed")
    (run_dir,) = spawn.RUNS.iterdir()
    metadata = json.loads((run_dir / "model" / "metadata.json").read_text())
    samples = 60_000 * epochs
    return {
        "workers": workers,
        "train_seconds": metadata["train_seconds"],
        "samples_per_second": round(samples / metadata["train_seconds"], 1),
        "wall_seconds_with_start_up": round(wall, 1),
        "test_accuracy": metadata["test_accuracy"],
    }


def read_pipeline(pattern: str, queue: multiprocessing.Queue) -> None:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from train import hep_data

    batches = hep_data.dataset(pattern, 256, shuffle=False, cache=False)
    started = time.perf_counter()
    events = sum(int(labels.shape[0]) for _, labels in batches)
    queue.put((events, time.perf_counter() - started))


def pipeline_rate(files: list[Path], readers: int) -> dict:
    """Each reader process reads all files once; MB/s per reader from the bytes on disk."""
    size = sum(path.stat().st_size for path in files)
    pattern = str(files[0].parent / "*.tfrecord")
    queue: multiprocessing.Queue = multiprocessing.Queue()
    processes = [multiprocessing.Process(target=read_pipeline, args=(pattern, queue)) for _ in range(readers)]
    for process in processes:
        process.start()
    results = [queue.get() for _ in processes]
    for process in processes:
        process.join()
    per_reader = [size / seconds / 1e6 for _, seconds in results]
    return {
        "readers": readers,
        "megabytes": round(size / 1e6, 1),
        "events_per_reader": results[0][0],
        "mb_per_second_per_reader": round(min(per_reader), 1),
        "mb_per_second_total": round(sum(per_reader), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.train_spawn", description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--events", type=int, default=4000)
    args = parser.parse_args(argv)
    from train import hep_data

    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        training = [training_rate(workers, args.epochs, directory / "runs") for workers in (1, 2)]
        files = hep_data.write(directory / "hep", args.events, 8, progress=False)
        pipeline = [pipeline_rate(files, readers) for readers in (1, 2)]
    one, two = training
    print(f"training (Fashion-MNIST MLP, {args.epochs} epochs): samples/s")
    for row in training:
        rate, accuracy = row["samples_per_second"], row["test_accuracy"]
        print(f"  {row['workers']} worker(s): {rate:>10,.0f}   accuracy {accuracy:.4f}")
    speedup = two["samples_per_second"] / one["samples_per_second"]
    print(f"  speed-up 2 vs 1 workers: {speedup:.2f}× (2 cores shared)")
    print(f"tf.data HEP pipeline ({pipeline[0]['megabytes']} MB of TFRecords, no cache): MB/s per worker")
    for row in pipeline:
        verdict = "met" if row["mb_per_second_per_reader"] >= 125 else "MISSED"
        print(
            f"  {row['readers']} reader(s): {row['mb_per_second_per_reader']:>8,.1f}  (goal ≥125: {verdict})"
        )
    RESULTS.mkdir(exist_ok=True)
    document = {"training": training, "pipeline": pipeline, "epochs": args.epochs, "events": args.events}
    (RESULTS / "train_spawn.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'train_spawn.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
