"""The reference scripts: HEP TFRecords, the Inclusive Classifier and the TF-Spawner-style CNN, alone and
through train.spawn."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from nnsql.train import hep_data, inclusive_classifier
from nnsql.train.spawn import __main__ as spawn
from tests.conftest import REPO
from tests.train.runs import only_run


@pytest.fixture(scope="module")
def hep_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hep")
    hep_data.write(directory, events=192, files=4, progress=False)
    return directory


def test_tfrecords_follow_cerns_schema(hep_files):
    features, labels = next(iter(hep_data.dataset(str(hep_files / "*.tfrecord"), 8, shuffle=False)))
    assert features["GRU_input"].shape == (8, 801, 19) and features["HLF_input"].shape == (8, 14)
    assert labels.shape == (8, 3) and np.allclose(labels.numpy().sum(1), 1)
    record = next(iter(tf.data.TFRecordDataset(sorted(hep_files.glob("*.tfrecord"))[0])))
    example = tf.train.Example.FromString(record.numpy())
    assert set(example.features.feature) == {"GRU_input", "HLF_input", "encoded_label"}
    padded = features["GRU_input"].numpy()[:, -1, :]
    assert np.all(padded == 0)  # zero padding that the Masking layer skips


def test_inclusive_classifier_architecture():
    model = inclusive_classifier.build_model()
    kinds = [type(layer).__name__ for layer in model.layers]
    assert {"Masking", "GRU", "Dropout", "Concatenate", "Dense"} <= set(kinds)
    assert model.get_layer("gru").units == 50 and model.get_layer("dense").units == 25
    assert [tuple(t.shape[1:]) for t in model.inputs] == [(801, 19), (14,)]
    assert inclusive_classifier.step_decay(0.004, 2)(5) == 0.001


@pytest.mark.slow
def test_inclusive_classifier_trains_through_spawn(hep_files, tmp_path, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    script = REPO / "train" / "inclusive_classifier.py"
    data = str(hep_files / "*.tfrecord")
    args = ["-w", "2", str(script), "--", "--data", data, "--epochs", "4", "--batch-size", "16", "--quiet"]
    assert spawn.main(args) == 0
    run_dir = only_run(tmp_path / "runs")
    metadata = json.loads((run_dir / "model" / "metadata.json").read_text())
    assert metadata["workers"] == 2
    assert metadata["train_accuracy"] >= 0.6  # three balanced classes: chance is 1/3
