"""What a reader of the docs already has when a page starts, made once per run and copied into each page's
fresh directory:

- `model.keras`: the quick starts' model of their own (6 features, 3 classes, Keras's default input name);
- `train.py`, `my_training.py`: a tf.keras training script that saves its model and TensorBoard logs under
  `$NNSQL_OUTPUT_DIR`, as docs/training.md asks (two epochs unless `--epochs` says otherwise, 512 rows:
  seconds, not minutes);
- `models/fashion/model.keras`: the pages' Fashion-MNIST network (784 features, 10 named classes), and
  `models/ic/model.keras`: CERN's Inclusive Classifier, and `models/particles/model.keras`: a masked GRU
  over any number of particles (`(None, 19)`), and `models/digits/model.keras`: TF-Spawner's CNN over
  28 × 28 × 1 images, all seeded rather than trained, since the pages
  check parity with Keras, not accuracy (`make demo` trains the first).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nnsql.imagedata import FASHION_CLASSES
from tests.fixtures import made_once

TRAINING_SCRIPT = """\
import argparse
import os
import tempfile

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
epochs = parser.parse_args().epochs
strategy = tf.distribute.MultiWorkerMirroredStrategy()
rng = np.random.default_rng(int(os.environ.get("WORKER_NUMBER", "0")))
x = rng.normal(size=(512, 6)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int64") + (x[:, 2] > 1).astype("int64")
with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Input(shape=(6,)),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(3, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
# every worker writes (a chief-only save deadlocks the strategy); the chief's copy is the one kept
chief = os.environ.get("WORKER_NUMBER", "0") == "0"
output = os.environ.get("NNSQL_OUTPUT_DIR", ".") if chief else tempfile.mkdtemp()
os.makedirs(output, exist_ok=True)
logs = tf.keras.callbacks.TensorBoard(os.path.join(output, "logs"))
model.fit(x, y, epochs=epochs, batch_size=64, verbose=2, callbacks=[logs])
model.save(os.path.join(output, "model.keras"))
"""


def make(folder: Path) -> None:
    import keras

    from tests import models

    keras.backend.clear_session()  # a fresh process's layer names: input_layer
    keras.utils.set_random_seed(7)
    inputs = keras.Input(shape=(6,))
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden)).save(folder / "model.keras")
    for name in ("train.py", "my_training.py"):
        (folder / name).write_text(TRAINING_SCRIPT)
    models.save(models.cern_mlp(), folder / "models" / "fashion", list(FASHION_CLASSES))
    # the data set `--load-test-data` loads, named as `python -m nnsql.train.mnist` names it
    metadata = folder / "models" / "fashion" / "metadata.json"
    metadata.write_text(json.dumps({**json.loads(metadata.read_text()), "dataset": "fashion-mnist"}))
    models.save(models.inclusive_classifier(), folder / "models" / "ic", ["W+jet", "QCD", "ttbar"])
    models.save(particle_tagger(), folder / "models" / "particles", ["W+jet", "QCD", "ttbar"])
    models.save(models.tf_spawner_cnn(), folder / "models" / "digits", [str(digit) for digit in range(10)])


def particle_tagger():
    """A masked GRU over particles of 19 features, any number of them (`(None, 19)`), seeded."""
    import keras

    particles = keras.Input(shape=(None, 19), name="particles")
    state = keras.layers.GRU(8)(keras.layers.Masking(0.0)(particles))
    return keras.Model(particles, keras.layers.Dense(3, activation="softmax")(state))


def readers_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return made_once(tmp_path_factory, "docs-readers-files", make)


def fresh_directory(tmp_path: Path, files: Path, page: str) -> Path:
    """An empty directory for `page` holding a copy of the reader's files."""
    directory = tmp_path / page.replace("/", "-").removesuffix(".md")
    shutil.copytree(files, directory)
    return directory
