"""A self-contained MultiWorkerMirroredStrategy script for the live Kubernetes test (no repo imports)."""

import json
import os

import keras
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    variable_sum = sum(float(np.sum(w)) for w in model.get_weights())
callbacks = [keras.callbacks.BackupAndRestore(os.environ.get("NNSQL_BACKUP_DIR", "/tmp/backup"))]
task = json.loads(os.environ["TF_CONFIG"])["task"]
print(f"worker {task['index']} of {strategy.num_replicas_in_sync} ready ({len(callbacks)} callback)")
