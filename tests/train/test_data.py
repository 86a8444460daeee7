import gzip
import struct

import numpy as np
import pytest

import nnsql.imagedata as data


def write_idx(path, array: np.ndarray) -> None:
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as stream:
        stream.write(header + array.astype(np.uint8).tobytes())


def make_idx_dir(directory, n_train=12, n_test=5):
    generator = np.random.default_rng(0)
    arrays = {
        "x_train": generator.integers(0, 256, (n_train, 28, 28)),
        "y_train": generator.integers(0, 10, n_train),
        "x_test": generator.integers(0, 256, (n_test, 28, 28)),
        "y_test": generator.integers(0, 10, n_test),
    }
    for key, stem in data.IDX_FILES.items():
        write_idx(directory / f"{stem}.gz", arrays[key])
    return arrays


def test_idx_directory_loads_as_mnist_scaled_to_unit_range(tmp_path):
    arrays = make_idx_dir(tmp_path)
    dataset = data.load("mnist", tmp_path)
    assert dataset.x_train.shape == (12, 784) and dataset.x_test.shape == (5, 784)
    assert dataset.x_train.dtype == np.float32
    np.testing.assert_allclose(dataset.x_test[0], arrays["x_test"][0].ravel() / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(dataset.y_train, arrays["y_train"])


def test_truncated_idx_file_is_reported(tmp_path):
    path = tmp_path / "bad.gz"
    with gzip.open(path, "wb") as stream:
        stream.write(struct.pack(">HBB", 0, 8, 1) + struct.pack(">I", 10) + b"abc")
    with pytest.raises(data.DataUnavailable, match="truncated"):
        data.read_idx(path)


def test_offline_mnist_names_the_offline_choices(tmp_path, monkeypatch):
    import keras

    def offline():
        raise OSError("Name or service not known")  # what the download raises with no network

    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(keras.datasets.mnist, "load_data", offline)
    with pytest.raises(data.DataUnavailable) as caught:
        data.load("mnist")
    message = str(caught.value)
    assert "fashion-mnist" in message and "digits" in message and "--data-dir" in message
    assert "\n" not in message


def test_missing_data_dir_files_are_named(tmp_path):
    with pytest.raises(data.DataUnavailable, match=str(tmp_path)):
        data.load("mnist", tmp_path)


def test_digits_ship_offline():
    dataset = data.load("digits")
    assert dataset.n_features == 64 and len(dataset.x_test) == 450
    assert dataset.x_train.min() >= 0.0 and dataset.x_train.max() <= 1.0


@pytest.mark.skipif(
    data.load_idx_dir(data.FASHION_DIRS[0]) is None,
    reason="Debian package dataset-fashion-mnist is not installed (make setup installs it as root)",
)
def test_fashion_mnist_found_where_debian_installs_it():
    dataset = data.load("fashion-mnist")
    assert dataset.x_train.shape == (60000, 784) and dataset.x_test.shape == (10000, 784)
    assert dataset.classes[9] == "Ankle boot"


def test_unknown_dataset():
    with pytest.raises(data.DataUnavailable, match="choose one of"):
        data.load("cifar")
