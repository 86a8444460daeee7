"""A TF-Spawner-style MNIST CNN: the kind of script CERN ran with TF-Spawner, runnable alone or with
`nnsql spawn` unchanged. It reads WORKER_NUMBER and TOT_WORKERS like TF-Spawner scripts do.

    nnsql spawn -w 2 train/mnist_cnn.py -- --dataset fashion-mnist --epochs 2
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import nnsql.imagedata as datasets
from nnsql import quiet
from nnsql.train.distributed import make_strategy, train_loop


def main(argv: list[str] | None = None) -> int:
    import keras
    import numpy as np
    import tensorflow as tf

    parser = argparse.ArgumentParser(
        prog="python -m nnsql.train.mnist_cnn", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--dataset", choices=datasets.DATASETS, default="mnist")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=os.environ.get("NNSQL_OUTPUT_DIR", "cnn-out"))
    parser.add_argument("--backup-dir", default=os.environ.get("NNSQL_BACKUP_DIR"))
    args = parser.parse_args(argv)
    worker, workers = int(os.environ.get("WORKER_NUMBER", 0)), int(os.environ.get("TOT_WORKERS", 1))
    print(f"worker {worker} of {workers}", flush=True)
    dataset = datasets.load(args.dataset)
    side = int(np.sqrt(dataset.n_features))
    images = dataset.x_train.reshape(-1, side, side, 1)
    strategy = make_strategy()
    global_batch = 64 * strategy.num_replicas_in_sync
    train_ds = (
        tf.data.Dataset.from_tensor_slices((images, dataset.y_train)).shuffle(10_000).batch(global_batch)
    )
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((side, side, 1), name="image"),
                keras.layers.Conv2D(32, 3, activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Conv2D(64, 3, activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Flatten(),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(len(dataset.classes), activation="softmax"),
            ]
        )
        optimizer = keras.optimizers.Adam(1e-3 * workers)
    train_loop(
        strategy,
        model,
        optimizer,
        train_ds,
        epochs=args.epochs,
        global_batch=global_batch,
        backup_dir=args.backup_dir,
    )
    predictions = np.asarray(model(dataset.x_test.reshape(-1, side, side, 1), training=False))
    accuracy = float((predictions.argmax(1) == dataset.y_test).mean())
    if worker == 0:  # the chief saves; TF-Spawner scripts check WORKER_NUMBER the same way
        Path(args.out).mkdir(parents=True, exist_ok=True)
        model.save(Path(args.out) / "model.keras")
        print(f"cnn: test accuracy {accuracy:.4f}")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
