"""One benchmark run, executed by every worker under `nnsql.train.spawn` (a script file shipped to the
workers).

Each worker trains the chosen network with MultiWorkerMirroredStrategy for `--warmup` untimed steps and
then `--steps` timed ones, timing every step to its end (the loss is read back, so the step really
finished). With `--data synthetic` the batch is generated once on each replica's device and fed again at
every step: there is no input pipeline, as in tf_cnn_benchmarks' synthetic mode. With `--data real` the
batch comes through tf.data from TFRecord files (ImageNet's keys `image/encoded` and `image/class/label`
for the image networks; the Inclusive Classifier's schema for `inclusive`), and the pipeline is also timed
alone first, so its capacity can be set beside the training rate.

Each worker prints one line `NNSQL_BENCH_RESULT {json}`; `nnsql bench infra` reads them from the
worker logs. The file depends on TensorFlow only (plus the project's `nnsql.train.data` for `s3://` sources),
so it runs in a stock TensorFlow image.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from nnsql import quiet

RESULT_MARK = "NNSQL_BENCH_RESULT "
CLASSES = 10
PARTICLES, PARTICLE_FEATURES, HLF_FEATURES, HEP_CLASSES = 801, 19, 14, 3


def make_strategy() -> Any:
    """Every run uses MultiWorkerMirroredStrategy, one worker included, so that 1 and N compare fairly."""
    import tensorflow as tf

    return tf.distribute.MultiWorkerMirroredStrategy()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["resnet50", "alexnet", "inclusive"], required=True)
    parser.add_argument("--data", choices=["synthetic", "real"], required=True)
    parser.add_argument("--records", help="TFRecord files for --data real: a local glob or s3://")
    parser.add_argument("--eval-records", help="held-out TFRecords for --target-accuracy")
    parser.add_argument("--s3-endpoint")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16, help="per replica (a GPU, or a CPU worker)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--target-accuracy", type=float)
    parser.add_argument("--max-train-steps", type=int, default=2000)
    parser.add_argument("--eval-every", type=int, default=50)
    args = parser.parse_args(argv)
    if args.data == "real" and not args.records:
        parser.error("--data real needs --records")
    return args


def tf_config() -> dict:
    return json.loads(os.environ.get("TF_CONFIG") or "{}")


def task_index() -> int:
    return int(tf_config().get("task", {}).get("index", 0))


def worker_count() -> int:
    return len(tf_config().get("cluster", {}).get("worker", [])) or 1


def local_files(pattern: str, endpoint: str | None) -> list[str]:
    """This worker's copy of the files: s3:// objects are staged by the project's train.data."""
    if pattern.startswith("s3://"):
        from nnsql.train.data import local_files as staged

        return staged(pattern, endpoint=endpoint, shard="data")
    import glob

    files = sorted(glob.glob(pattern))
    if not files:
        raise SystemExit(f"error: no TFRecord files match {pattern}")
    return files


# ---- networks --------------------------------------------------------------------------------------


def alexnet(keras: Any, size: int) -> Any:
    """AlexNet's shape (five convolutions, three pools, two 4096-unit layers), padded so small images fit."""
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input((size, size, 3)),
            layers.Conv2D(64, 11, strides=4, padding="same", activation="relu"),
            layers.MaxPooling2D(3, 2, padding="same"),
            layers.Conv2D(192, 5, padding="same", activation="relu"),
            layers.MaxPooling2D(3, 2, padding="same"),
            layers.Conv2D(384, 3, padding="same", activation="relu"),
            layers.Conv2D(256, 3, padding="same", activation="relu"),
            layers.Conv2D(256, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(3, 2, padding="same"),
            layers.Flatten(),
            layers.Dense(4096, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(4096, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(CLASSES),
        ],
        name="alexnet",
    )


def inclusive(keras: Any) -> Any:
    """CERN's Inclusive Classifier: masked GRU(50) over 801 × 19 particles + 14 features, 3 logits."""
    layers = keras.layers
    particles = keras.Input((PARTICLES, PARTICLE_FEATURES), name="GRU_input")
    high_level = keras.Input((HLF_FEATURES,), name="HLF_input")
    sequence = layers.GRU(50, activation="tanh")(layers.Masking(mask_value=0.0)(particles))
    merged = layers.Concatenate()([sequence, layers.Dropout(0.2)(high_level)])
    hidden = layers.Dense(25, activation="relu")(merged)
    return keras.Model([particles, high_level], layers.Dense(HEP_CLASSES)(hidden), name="inclusive")


def network(name: str, size: int) -> Any:
    from tensorflow import keras

    if name == "resnet50":
        return keras.applications.ResNet50(
            weights=None, input_shape=(size, size, 3), classes=CLASSES, classifier_activation=None
        )
    if name == "alexnet":
        return alexnet(keras, size)
    return inclusive(keras)


# ---- data ------------------------------------------------------------------------------------------


def synthetic_batch(model: str, size: int, batch: int) -> tuple[Any, Any]:
    """One random batch, created where it is called (on the replica's device)."""
    import tensorflow as tf

    if model == "inclusive":
        features = {
            "GRU_input": tf.random.uniform((batch, PARTICLES, PARTICLE_FEATURES)),
            "HLF_input": tf.random.uniform((batch, HLF_FEATURES)),
        }
        return features, tf.random.uniform((batch,), maxval=HEP_CLASSES, dtype=tf.int32)
    images = tf.random.uniform((batch, size, size, 3))
    return images, tf.random.uniform((batch,), maxval=CLASSES, dtype=tf.int32)


def parse_image(size: int) -> Any:
    import tensorflow as tf

    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record: Any) -> tuple[Any, Any, Any]:
        example = tf.io.parse_single_example(record, spec)
        image = tf.io.decode_image(example["image/encoded"], channels=3, expand_animations=False)
        image = tf.image.resize(tf.cast(image, tf.float32) / 255.0, (size, size))
        return image, tf.cast(example["image/class/label"], tf.int32), tf.strings.length(record)

    return parse


def parse_event(record: Any) -> tuple[Any, Any, Any]:
    import tensorflow as tf

    spec = {
        "GRU_input": tf.io.FixedLenFeature([PARTICLES, PARTICLE_FEATURES], tf.float32),
        "HLF_input": tf.io.FixedLenFeature([HLF_FEATURES], tf.float32),
        "encoded_label": tf.io.FixedLenFeature([HEP_CLASSES], tf.float32),
    }
    event = tf.io.parse_single_example(record, spec)
    features = {"GRU_input": event["GRU_input"], "HLF_input": event["HLF_input"]}
    return features, tf.argmax(event["encoded_label"], output_type=tf.int32), tf.strings.length(record)


def record_pipeline(files: list[str], args: argparse.Namespace, shard: tuple[int, int], repeat: bool) -> Any:
    """Records → parsed (features, label, record bytes), this worker's shard, batched per replica."""
    import tensorflow as tf

    count, index = shard
    names = tf.data.Dataset.from_tensor_slices(files)
    if len(files) >= count:
        names = names.shard(count, index)
    records = names.interleave(
        tf.data.TFRecordDataset, cycle_length=tf.data.AUTOTUNE, num_parallel_calls=tf.data.AUTOTUNE
    )
    if len(files) < count:
        records = records.shard(count, index)
    if repeat:
        records = records.shuffle(1024, seed=index).repeat()
    parse = parse_event if args.model == "inclusive" else parse_image(args.image_size)
    return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(args.batch_size).prefetch(2)


def pipeline_rate(files: list[str], args: argparse.Namespace, shard: tuple[int, int]) -> dict:
    """The input pipeline alone on this worker: examples/s and MB/s of records read, after one batch."""
    batches = iter(record_pipeline(files, args, shard, repeat=True))
    next(batches)
    started, examples, read = time.perf_counter(), 0, 0
    for _ in range(args.steps):
        _, labels, sizes = next(batches)
        examples += int(labels.shape[0])
        read += int(sizes.numpy().sum())
    seconds = time.perf_counter() - started
    return {"examples_per_second": examples / seconds, "mb_per_second": read / seconds / 1e6}


# ---- training --------------------------------------------------------------------------------------


def drop_sizes(features: Any, labels: Any, _sizes: Any) -> tuple[Any, Any]:
    return features, labels


def distributed_inputs(strategy: Any, files: list[str], args: argparse.Namespace) -> Any:
    """An iterator of per-replica batches: real records through tf.data, or one synthetic batch forever."""
    import itertools

    if args.data == "synthetic":
        batch = strategy.experimental_distribute_values_from_function(
            lambda _: synthetic_batch(args.model, args.image_size, args.batch_size)
        )
        return itertools.repeat(batch)

    def per_worker(context: Any) -> Any:
        shard = (context.num_input_pipelines, context.input_pipeline_id)
        return record_pipeline(files, args, shard, repeat=True).map(drop_sizes)

    return iter(strategy.distribute_datasets_from_function(per_worker))


def train_step_function(strategy: Any, model: Any, optimizer: Any, global_batch: int) -> Any:
    import tensorflow as tf

    with strategy.scope():
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    @tf.function
    def train_step(batch: Any) -> Any:
        def step(features: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                logits = model(features, training=True)
                loss = tf.nn.compute_average_loss(loss_object(labels, logits), global_batch_size=global_batch)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            return loss

        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=batch), axis=None)

    return train_step


def accuracy(strategy: Any, model: Any, files: list[str], args: argparse.Namespace) -> float:
    """Accuracy on the whole held-out set, averaged over workers so every worker takes the same decision."""
    import numpy as np
    import tensorflow as tf

    correct = total = 0
    for features, labels, _ in record_pipeline(files, args, (1, 0), repeat=False):
        predicted = np.asarray(model(features, training=False)).argmax(-1)
        correct += int((predicted == labels.numpy()).sum())
        total += len(predicted)
    local = correct / max(total, 1)
    mean = strategy.reduce(
        tf.distribute.ReduceOp.MEAN,
        strategy.experimental_distribute_values_from_function(lambda _: tf.constant(local)),
        axis=None,
    )
    return float(mean)


def time_to_target(strategy: Any, model: Any, run: Any, inputs: Any, args: argparse.Namespace) -> dict:
    """Train on until the held-out accuracy reaches the target (or the step budget ends)."""
    eval_files = local_files(args.eval_records, args.s3_endpoint)
    started, steps, reached = time.perf_counter(), 0, None
    score = 0.0
    while steps < args.max_train_steps:
        for _ in range(args.eval_every):
            float(run(next(inputs)))
            steps += 1
        score = accuracy(strategy, model, eval_files, args)
        if score >= args.target_accuracy:
            reached = time.perf_counter() - started
            break
    return {"target_accuracy": args.target_accuracy, "accuracy": score, "steps": steps, "seconds": reached}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    files = local_files(args.records, args.s3_endpoint) if args.data == "real" else []
    strategy = make_strategy()  # before any other TensorFlow operation, as MultiWorkerMirroredStrategy needs
    import tensorflow as tf

    workers = worker_count()
    replicas = strategy.num_replicas_in_sync
    local_replicas = max(1, replicas // max(workers, 1))
    global_batch = args.batch_size * replicas
    pipeline = pipeline_rate(files, args, (workers, task_index())) if files else None
    with strategy.scope():
        model = network(args.model, args.image_size)
        optimizer = tf.keras.optimizers.SGD(0.01, momentum=0.9)
    run = train_step_function(strategy, model, optimizer, global_batch)
    inputs = distributed_inputs(strategy, files, args)
    for _ in range(args.warmup):
        float(run(next(inputs)))
    step_seconds = []
    for _ in range(args.steps):
        started = time.perf_counter()
        float(run(next(inputs)))
        step_seconds.append(time.perf_counter() - started)
    result = {
        "worker": task_index(),
        "workers": workers,
        "replicas": local_replicas,
        "examples_per_step": args.batch_size * local_replicas,
        "step_seconds": step_seconds,
        "pipeline": pipeline,
        "parameters": int(model.count_params()),
        "devices": [
            device.name for device in tf.config.list_logical_devices() if device.device_type != "CPU"
        ],
    }
    if args.target_accuracy is not None and args.data == "real" and args.eval_records:
        result["target"] = time_to_target(strategy, model, run, inputs, args)
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
