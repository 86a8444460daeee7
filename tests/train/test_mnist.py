import json

import keras
import numpy as np
import pytest

import nnsql.imagedata as data
from nnsql.train import mnist


@pytest.mark.slow
def test_digits_reference_model_reaches_target_and_writes_metadata(digits_model):
    metadata = json.loads((digits_model.parent / "metadata.json").read_text())
    assert metadata["dataset"] == "digits" and metadata["test_accuracy"] >= 0.95
    assert metadata["inputs"] == [{"name": "features", "shape": [64], "dtype": "float32"}]
    assert metadata["classes"] == [str(d) for d in range(10)] and metadata["workers"] == 1
    assert {"tensorflow", "keras", "python", "numpy"} <= set(metadata["versions"])
    model = keras.saving.load_model(digits_model)
    assert [type(layer).__name__ for layer in model.layers] == ["Dense", "Dense"]
    assert model.layers[0].units == 100 and model.layers[0].get_config()["activation"] == "sigmoid"
    dataset = data.load("digits")
    accuracy = (model.predict(dataset.x_test, verbose=0).argmax(1) == dataset.y_test).mean()
    assert np.isclose(accuracy, metadata["test_accuracy"], atol=1e-6)


def test_offline_mnist_exits_with_one_line(tmp_path, monkeypatch, capsys):
    def unavailable(name, data_dir=None):
        raise data.DataUnavailable("MNIST is not cached; offline choices: --dataset digits")

    monkeypatch.setattr(data, "load", unavailable)
    assert mnist.main(["--dataset", "mnist", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: MNIST is not cached; offline choices: --dataset digits"
    )


def test_the_environment_sets_the_epochs_and_the_flag_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("NNSQL_MNIST_EPOCHS", "1")
    assert mnist.parse_args(["--out", str(tmp_path)]).epochs == 1
    assert mnist.parse_args(["--out", str(tmp_path), "--epochs", "3"]).epochs == 3
