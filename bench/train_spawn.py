"""Benchmark: distributed training throughput and the HEP input pipeline, in one run.

1. samples/s training the MNIST reference MLP on Fashion-MNIST with 1 and with 2 local workers
   (nnsql spawn); this machine has 2 cores, so 2 workers share them: a report, not a promise.
2. the tf.data pipeline alone (parallel interleave, parallel parse, large read buffer, no cache) reading
   synthetic HEP TFRecords, in MB/s, with 1 and with 2 concurrent reader processes (MB/s per worker).
   CERN fed a P100 at ~125 MB/s per node; goal: ≥ 125 MB/s per worker.
3. the same TFRecords read from object storage (a test S3 server on loopback, moto) by 2 worker processes,
   each staging its own shard: MB/s per worker for staging alone, the first epoch (staging + read) and
   the cached epochs, next to (2)'s local-disk figure.
Writes bench/results/train_spawn.json.

    nnsql bench train_spawn [--epochs 3] [--events 4000] [--skip-training]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

from nnsql import quiet
from nnsql.files import import_root

RESULTS = Path(__file__).parent / "results"
REPO_ROOT = import_root()


def training_rate(workers: int, epochs: int, runs: Path) -> dict:
    from nnsql.train.spawn import __main__ as spawn

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
    from nnsql.train import hep_data

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


def s3_reader(pattern: str, endpoint: str, index: int, workers: int, cache: str, epochs: int, queue) -> None:
    """Worker `index` of `workers`: stage its shard from the S3 server, then read it `epochs` times through
    the HEP pipeline with tf.data's cache (the first epoch fills it)."""
    import os

    from tests.s3_server import TEST_CREDENTIALS

    cluster = {"worker": [f"localhost:{2000 + i}" for i in range(workers)]}
    os.environ.update(TEST_CREDENTIALS, AWS_ENDPOINT_URL=endpoint, TF_CPP_MIN_LOG_LEVEL="2")
    os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    from nnsql.train import hep_data
    from nnsql.train.data import local_files

    started = time.perf_counter()
    files = local_files(pattern, cache_dir=Path(cache), progress=False)
    staged = time.perf_counter() - started
    batches = hep_data.dataset(files, 256, shuffle=False, cache=True)
    epochs_s = []
    for _ in range(epochs):
        started = time.perf_counter()
        sum(int(labels.shape[0]) for _, labels in batches)
        epochs_s.append(time.perf_counter() - started)
    size = sum(Path(f).stat().st_size for f in files)
    queue.put(
        {"bytes": size, "stage_s": staged, "first_s": staged + epochs_s[0], "cached_s": min(epochs_s[1:])}
    )


def s3_rates(files: list[Path], workers: int, epochs: int, scratch: Path) -> dict:
    """MB/s per worker reading the HEP TFRecords from the test S3 server on loopback (moto)."""
    from tests.s3_server import s3_test_server, upload

    context = multiprocessing.get_context("spawn")
    with s3_test_server() as endpoint:
        upload(endpoint, "bench", "hep", files)
        queue = context.Queue()
        arguments = ("s3://bench/hep/*.tfrecord", endpoint)
        processes = [
            context.Process(
                target=s3_reader, args=(*arguments, i, workers, str(scratch / "cache"), epochs, queue)
            )
            for i in range(workers)
        ]
        for process in processes:
            process.start()
        results = [queue.get() for _ in processes]
        for process in processes:
            process.join()

    def slowest(key: str) -> float:
        return round(min(r["bytes"] / r[key] / 1e6 for r in results), 1)

    return {
        "workers": workers,
        "megabytes_per_worker": round(results[0]["bytes"] / 1e6, 1),
        "staging_mb_per_second": slowest("stage_s"),
        "first_epoch_mb_per_second": slowest("first_s"),
        "cached_epoch_mb_per_second": slowest("cached_s"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnsql bench train_spawn", description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--skip-training", action="store_true", help="measure the data pipelines only")
    args = parser.parse_args(argv)
    from nnsql.train import hep_data

    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        runs = directory / "runs"
        training = [] if args.skip_training else [training_rate(w, args.epochs, runs) for w in (1, 2)]
        files = hep_data.write(directory / "hep", args.events, 8, progress=False)
        pipeline = [pipeline_rate(files, readers) for readers in (1, 2)]
        s3 = s3_rates(files, 2, args.epochs, directory)
    print_training(training, args.epochs)
    print(f"tf.data HEP pipeline ({pipeline[0]['megabytes']} MB of TFRecords, no cache): MB/s per worker")
    for row in pipeline:
        verdict = "met" if row["mb_per_second_per_reader"] >= 125 else "MISSED"
        print(
            f"  {row['readers']} reader(s): {row['mb_per_second_per_reader']:>8,.1f}  (goal ≥125: {verdict})"
        )
    print(
        f"S3 (test server on loopback, {s3['workers']} workers, {s3['megabytes_per_worker']} MB each): "
        "MB/s per worker"
    )
    cached = s3["cached_epoch_mb_per_second"]
    print(f"  staging alone:                 {s3['staging_mb_per_second']:>8,.1f}")
    print(f"  first epoch (staging + read):  {s3['first_epoch_mb_per_second']:>8,.1f}")
    verdict = "met" if cached >= 125 else "MISSED"
    print(f"  cached epochs:                 {cached:>8,.1f}  (goal ≥125: {verdict})")
    RESULTS.mkdir(exist_ok=True)
    document = {
        "training": training,
        "pipeline": pipeline,
        "s3": s3,
        "epochs": args.epochs,
        "events": args.events,
    }
    (RESULTS / "train_spawn.json").write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS / 'train_spawn.json'}")
    return 0


def print_training(training: list[dict], epochs: int) -> None:
    if not training:
        return
    one, two = training
    print(f"training (Fashion-MNIST MLP, {epochs} epochs): samples/s")
    for row in training:
        rate, accuracy = row["samples_per_second"], row["test_accuracy"]
        print(f"  {row['workers']} worker(s): {rate:>10,.0f}   accuracy {accuracy:.4f}")
    speedup = two["samples_per_second"] / one["samples_per_second"]
    print(f"  speed-up 2 vs 1 workers: {speedup:.2f}× (2 cores shared)")


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
