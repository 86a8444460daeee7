"""CERN's Inclusive Classifier for LHC event filtering, trained from TFRecords, alone or under train.spawn.

GRU(50, tanh) over a masked (801, 19) particle list, plus 14 high-level features with dropout 0.2,
concatenated → Dense(25, relu) → Dense(3, softmax). Adam, learning rate × number of workers, step decay
by epoch. TensorBoard logs from the chief.

    python -m nnsql.train.hep_data --out data/hep --events 20000
    nnsql spawn -w 2 train/inclusive_classifier.py -- --data 'data/hep/*.tfrecord'
    nnsql spawn -w 2 --env-file s3.env train/inclusive_classifier.py -- \
        --data 's3://physics/hep/*.tfrecord' --s3-endpoint https://rgw.example.org
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from nnsql import quiet
from nnsql.train import hep_data
from nnsql.train.data import local_files
from nnsql.train.distributed import is_chief, make_strategy, train_loop
from nnsql.train.objectstore import DataError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m nnsql.train.inclusive_classifier", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--data",
        required=True,
        help="TFRecord files: a local glob, or s3://bucket/prefix/*.tfrecord on any S3-compatible store "
        "(credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE; train.spawn --env-file)",
    )
    parser.add_argument(
        "--s3-endpoint", help="S3-compatible endpoint URL (Ceph RGW, MinIO, OCI); default AWS_ENDPOINT_URL"
    )
    parser.add_argument(
        "--shard",
        choices=["file", "data"],
        default="file",
        help="how workers split the data: whole files (default; needs ≥ 1 file per worker) or records",
    )
    parser.add_argument(
        "--out", type=Path, default=os.environ.get("NNSQL_OUTPUT_DIR"), help="output directory"
    )
    parser.add_argument("--backup-dir", default=os.environ.get("NNSQL_BACKUP_DIR"))
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=128, help="per worker")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="per worker; × workers in total")
    parser.add_argument("--decay-every", type=int, default=4, help="halve the learning rate every N epochs")
    parser.add_argument("--tensorboard", help="TensorBoard log directory (chief only)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.out is None:
        parser.error("--out is required (or NNSQL_OUTPUT_DIR)")
    return args


def build_model():
    import keras

    particles = keras.Input((hep_data.PARTICLES, hep_data.PARTICLE_FEATURES), name="GRU_input")
    high_level = keras.Input((hep_data.HLF_FEATURES,), name="HLF_input")
    sequence = keras.layers.Masking(mask_value=0.0, name="mask")(particles)
    sequence = keras.layers.GRU(50, activation="tanh", name="gru")(sequence)
    features = keras.layers.Dropout(0.2, name="hlf_dropout")(high_level)
    merged = keras.layers.Concatenate(name="concat")([sequence, features])
    hidden = keras.layers.Dense(25, activation="relu", name="dense")(merged)
    output = keras.layers.Dense(hep_data.CLASSES, activation="softmax", name="probabilities")(hidden)
    return keras.Model([particles, high_level], output, name="inclusive_classifier")


def step_decay(base: float, every: int):
    return lambda epoch: base * (0.5 ** (epoch // max(every, 1)))


def main(argv: list[str] | None = None) -> int:
    import keras
    import numpy as np
    import tensorflow as tf

    args = parse_args(argv)
    try:  # before the strategy: a worker that cannot read its data stops before its peers wait for it
        files = local_files(args.data, endpoint=args.s3_endpoint, shard=args.shard, progress=not args.quiet)
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    strategy = make_strategy()
    workers = strategy.num_replicas_in_sync
    global_batch = args.batch_size * workers
    train_ds = hep_data.dataset(files, global_batch, shard=args.shard)
    with strategy.scope():
        model = build_model()
        optimizer = keras.optimizers.Adam(args.learning_rate * workers)
    writer = tf.summary.create_file_writer(args.tensorboard) if args.tensorboard and is_chief() else None
    started = time.perf_counter()
    train_loop(
        strategy,
        model,
        optimizer,
        train_ds,
        epochs=args.epochs,
        global_batch=global_batch,
        backup_dir=args.backup_dir,
        verbose=not args.quiet,
        loss=keras.losses.CategoricalCrossentropy(reduction="none"),
        learning_rate=step_decay(args.learning_rate * workers, args.decay_every),
        summary_writer=writer,
    )
    seconds = time.perf_counter() - started
    evaluation = hep_data.dataset(files, 256, shuffle=False, cache=False, shard=args.shard)
    correct = total = 0
    for features, labels in evaluation:
        predicted = np.asarray(model(features, training=False)).argmax(1)
        correct += int((predicted == labels.numpy().argmax(1)).sum())
        total += len(predicted)
    if is_chief():
        args.out.mkdir(parents=True, exist_ok=True)
        model.save(args.out / "model.keras")
        metadata = {
            "model": "inclusive_classifier",
            "classes": list(hep_data.CLASS_NAMES),
            "train_accuracy": round(correct / max(total, 1), 4),
            "train_seconds": round(seconds, 2),
            "workers": workers,
            "epochs": args.epochs,
        }
        (args.out / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
        print(
            f"inclusive classifier: accuracy {metadata['train_accuracy']:.3f} on {total} events, "
            f"{seconds:.1f}s"
        )
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
