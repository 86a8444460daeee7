"""The few facts a training script needs about its place in a multi-worker job (from `TF_CONFIG`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any


def tf_config() -> dict[str, Any]:
    raw = os.environ.get("TF_CONFIG", "")
    return json.loads(raw) if raw else {}


def worker_count() -> int:
    return len(tf_config().get("cluster", {}).get("worker", [])) or 1


def worker_index() -> int:
    """This process's index among the workers (0 for a lone process)."""
    return int(tf_config().get("task", {}).get("index", 0))


def is_chief() -> bool:
    """Worker 0 is the chief (no separate 'chief' task is used); a lone process is its own chief."""
    task = tf_config().get("task", {})
    return task.get("type", "worker") in ("worker", "chief") and int(task.get("index", 0)) == 0


def make_strategy() -> Any:
    """MultiWorkerMirroredStrategy under a multi-worker TF_CONFIG, else the default strategy."""
    import tensorflow as tf

    if worker_count() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.get_strategy()


def checkpoint_dir(backup_dir: str) -> str:
    """The chief writes the real backup; other workers write to their own scratch copy (MWMS rule)."""
    if is_chief():
        return backup_dir
    return os.path.join(backup_dir, f".worker-{tf_config()['task']['index']}")


def train_loop(
    strategy: Any,
    model: Any,
    optimizer: Any,
    dataset: Any,
    *,
    epochs: int,
    global_batch: int,
    backup_dir: str | None = None,
    verbose: bool = True,
    loss: Any = None,
    learning_rate: Callable[[int], float] | None = None,
    summary_writer: Any = None,
) -> int:
    """Train with strategy.run in a tf.function: works for one process and for MultiWorkerMirroredStrategy
    (Keras 3's fit does not support the latter). With `backup_dir` it behaves like BackupAndRestore: it
    restores the last finished epoch and saves after every epoch. Returns the epoch it started from."""
    import time

    import keras
    import tensorflow as tf

    with strategy.scope():
        loss_object = loss or keras.losses.SparseCategoricalCrossentropy(reduction="none")
        epoch_var = tf.Variable(0, dtype=tf.int64, trainable=False)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch_var)
    manager = None
    if backup_dir:
        manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir(backup_dir), max_to_keep=1)
        latest = tf.train.latest_checkpoint(backup_dir)  # every worker restores the chief's backup
        if latest:
            checkpoint.restore(latest)
    distributed = strategy.experimental_distribute_dataset(dataset)

    @tf.function
    def train_step(batch: Any) -> Any:
        def step(features: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                predictions = model(features, training=True)
                loss = tf.nn.compute_average_loss(
                    loss_object(labels, predictions), global_batch_size=global_batch
                )
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            return loss

        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=batch), axis=None)

    first = int(epoch_var.numpy())
    if verbose and is_chief():
        print(f"training starts at epoch {first + 1} of {epochs}", flush=True)
    for epoch in range(first, epochs):
        if learning_rate is not None:
            optimizer.learning_rate.assign(learning_rate(epoch))
        started, total, steps = time.perf_counter(), 0.0, 0
        for batch in distributed:
            total += float(train_step(batch))
            steps += 1
        epoch_var.assign(epoch + 1)
        if manager is not None:
            manager.save()
        if summary_writer is not None:
            with summary_writer.as_default():
                tf.summary.scalar("loss", total / max(steps, 1), step=epoch + 1)
        if verbose and is_chief():
            print(
                f"epoch {epoch + 1}/{epochs} - loss {total / max(steps, 1):.4f} - "
                f"{time.perf_counter() - started:.1f}s",
                flush=True,
            )
    return first
