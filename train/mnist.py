"""Train the CERN MNIST reference network: input → Dense(100, sigmoid) → Dense(10, softmax).

Runs alone (one process) or as one of N workers under `nnsql spawn`: with a multi-worker
`TF_CONFIG` in the environment it trains under `MultiWorkerMirroredStrategy`, and only the chief writes
`OUT/model.keras` and `OUT/metadata.json`.

    python -m nnsql.train.mnist --dataset fashion-mnist --out models/fashion
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import nnsql.imagedata as datasets
from nnsql import quiet
from nnsql.train.distributed import is_chief, make_strategy, train_loop

DEFAULT_EPOCHS = {"mnist": 20, "fashion-mnist": 30, "digits": 150}
HIDDEN_UNITS = 100


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m nnsql.train.mnist",
        description="Train the MNIST reference MLP (input → Dense(100, sigmoid) → Dense(10, "
        "softmax)) and write OUT/model.keras plus OUT/metadata.json.",
    )
    parser.add_argument("--dataset", choices=datasets.DATASETS, default="mnist")
    parser.add_argument("--data-dir", help="directory with mnist.npz or the IDX .gz files")
    parser.add_argument(
        "--out",
        type=Path,
        default=os.environ.get("NNSQL_OUTPUT_DIR"),
        help="output directory (default: NNSQL_OUTPUT_DIR, set by nnsql spawn)",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=os.environ.get("NNSQL_MNIST_EPOCHS"),
        help="default: NNSQL_MNIST_EPOCHS, else 20 mnist, 30 fashion-mnist, 150 digits",
    )
    parser.add_argument("--batch-size", type=int, default=128, help="per worker (default 128)")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="Adam, per worker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--backup-dir",
        default=os.environ.get("NNSQL_BACKUP_DIR"),
        help="BackupAndRestore directory, to resume after a failure (default: NNSQL_BACKUP_DIR)",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    args = parser.parse_args(argv)
    if args.out is None:
        parser.error("--out is required (or NNSQL_OUTPUT_DIR)")
    return args


def build_model(n_features: int, n_classes: int, learning_rate: float):
    import keras

    model = keras.Sequential(
        [
            keras.Input((n_features,), name="features"),
            keras.layers.Dense(HIDDEN_UNITS, activation="sigmoid", name="hidden"),
            keras.layers.Dense(n_classes, activation="softmax", name="probabilities"),
        ],
        name="mnist_mlp",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def test_accuracy(model, x, y) -> float:
    """Plain forward passes (no strategy involved), in batches."""
    import numpy as np

    predictions = np.concatenate(
        [np.asarray(model(x[i : i + 2048], training=False)) for i in range(0, len(x), 2048)]
    )
    return float((predictions.argmax(1) == y).mean())


def library_versions() -> dict[str, str]:
    import keras
    import numpy
    import tensorflow as tf

    return {
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "numpy": numpy.__version__,
    }


def write_outputs(model, out: Path, metadata: dict) -> None:
    """The chief writes the real files; other workers write to a scratch directory and drop it."""
    if is_chief():
        out.mkdir(parents=True, exist_ok=True)
        model.save(out / "model.keras")
        (out / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
        return
    with tempfile.TemporaryDirectory() as scratch:
        model.save(Path(scratch) / "model.keras")


def train(args: argparse.Namespace) -> dict:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(args.seed)
    dataset = datasets.load(args.dataset, args.data_dir)
    strategy = make_strategy()
    workers = strategy.num_replicas_in_sync
    global_batch = args.batch_size * workers
    epochs = args.epochs or DEFAULT_EPOCHS[args.dataset]

    train_ds = (
        tf.data.Dataset.from_tensor_slices((dataset.x_train, dataset.y_train))
        .shuffle(len(dataset.x_train), seed=args.seed, reshuffle_each_iteration=True)
        .batch(global_batch)
        .prefetch(tf.data.AUTOTUNE)
    )
    with strategy.scope():
        model = build_model(dataset.n_features, len(dataset.classes), args.learning_rate * workers)
    started = time.perf_counter()
    resumed_from = train_loop(
        strategy,
        model,
        model.optimizer,
        train_ds,
        epochs=epochs,
        global_batch=global_batch,
        backup_dir=args.backup_dir,
        verbose=not args.quiet,
    )
    train_seconds = time.perf_counter() - started
    accuracy = test_accuracy(model, dataset.x_test, dataset.y_test)
    metadata = {
        "model": "mnist_mlp",
        "inputs": [
            {"name": "features", "shape": [dataset.n_features], "dtype": "float32"},
        ],
        "classes": list(dataset.classes),
        "dataset": dataset.name,
        "test_accuracy": round(float(accuracy), 6),
        "test_rows": len(dataset.x_test),
        "train_seconds": round(train_seconds, 2),
        "epochs": epochs,
        "batch_size_per_worker": args.batch_size,
        "workers": workers,
        "resumed_from_epoch": resumed_from,
        "versions": library_versions(),
    }
    write_outputs(model, args.out, metadata)
    return metadata


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        metadata = train(args)
    except datasets.DataUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if is_chief():
        print(
            f"{metadata['dataset']}: test accuracy {metadata['test_accuracy']:.4f} after "
            f"{metadata['epochs']} epochs in {metadata['train_seconds']:.1f}s "
            f"({metadata['workers']} worker(s)) → {args.out / 'model.keras'}"
        )
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
