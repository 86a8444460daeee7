"""Image classification data sets, loaded offline where possible: shared by training (train/), the
exporter's parity samples and test-data tables (export/), the demo and the benchmarks.

- `mnist`: Keras's `mnist.npz` (its cache, or a download), or a directory of the four IDX `.gz` files.
- `fashion-mnist`: the same IDX format, found automatically where Debian's `dataset-fashion-mnist` puts it.
- `digits`: scikit-learn's 8×8 digits, shipped with scikit-learn (fast tests).

Features come back flattened to float32 in [0, 1]; labels as int64.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATASETS = ("mnist", "fashion-mnist", "digits")
FASHION_DIRS = (Path("/usr/share/datasets/fashion-mnist"),)
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
FASHION_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
DIGIT_CLASSES = tuple(str(d) for d in range(10))
OFFLINE_CHOICES = (
    "offline choices: --dataset fashion-mnist (Debian package dataset-fashion-mnist), "
    "--dataset digits (ships with scikit-learn), or --data-dir DIR holding mnist.npz "
    "or the four MNIST IDX .gz files"
)


class DataUnavailable(Exception):
    """The data set cannot be loaded here; the message names the offline choices."""


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (optionally gzipped): big-endian header, then unsigned bytes."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        zero, dtype_code, ndim = struct.unpack(">HBB", stream.read(4))
        if zero != 0 or dtype_code != 0x08:
            raise DataUnavailable(f"{path} is not an IDX file of unsigned bytes")
        shape = struct.unpack(f">{ndim}I", stream.read(4 * ndim))
        data = np.frombuffer(stream.read(), dtype=np.uint8)
    if data.size != int(np.prod(shape)):
        raise DataUnavailable(f"{path} is truncated: expected {int(np.prod(shape))} values")
    return data.reshape(shape)


def _find_idx(directory: Path, stem: str) -> Path | None:
    for candidate in (directory / f"{stem}.gz", directory / stem):
        if candidate.exists():
            return candidate
    return None


def load_idx_dir(directory: Path) -> dict[str, np.ndarray] | None:
    """The four arrays from an IDX directory, or None when any file is missing."""
    paths = {key: _find_idx(directory, stem) for key, stem in IDX_FILES.items()}
    if any(path is None for path in paths.values()):
        return None
    return {key: read_idx(path) for key, path in paths.items() if path is not None}


def _from_arrays(name: str, arrays: dict[str, np.ndarray], classes: tuple[str, ...]) -> Dataset:
    def features(images: np.ndarray) -> np.ndarray:
        return (images.reshape(len(images), -1).astype(np.float32)) / np.float32(255.0)

    return Dataset(
        name=name,
        x_train=features(arrays["x_train"]),
        y_train=arrays["y_train"].astype(np.int64),
        x_test=features(arrays["x_test"]),
        y_test=arrays["y_test"].astype(np.int64),
        classes=classes,
    )


def _load_mnist(data_dir: Path | None) -> Dataset:
    directories = [data_dir] if data_dir else []
    directories += [Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "datasets"]
    for directory in directories:
        npz = directory / "mnist.npz"
        if npz.exists():
            with np.load(npz) as archive:
                return _from_arrays("mnist", dict(archive), DIGIT_CLASSES)
        arrays = load_idx_dir(directory)
        if arrays is not None:
            return _from_arrays("mnist", arrays, DIGIT_CLASSES)
    if data_dir:
        raise DataUnavailable(f"no mnist.npz or MNIST IDX files in {data_dir}; {OFFLINE_CHOICES}")
    try:
        import keras

        with contextlib.redirect_stdout(io.StringIO()):  # Keras prints "Downloading data from ..."
            (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
    except Exception as error:
        reason = str(error).split(" -- ")[-1].strip() or type(error).__name__
        raise DataUnavailable(
            f"MNIST is not cached and could not be downloaded ({reason}); {OFFLINE_CHOICES}"
        ) from error
    arrays = {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}
    return _from_arrays("mnist", arrays, DIGIT_CLASSES)


def _load_fashion(data_dir: Path | None) -> Dataset:
    directories = [data_dir] if data_dir else list(FASHION_DIRS)
    for directory in directories:
        arrays = load_idx_dir(directory)
        if arrays is not None:
            return _from_arrays("fashion-mnist", arrays, FASHION_CLASSES)
    where = ", ".join(str(d) for d in directories)
    raise DataUnavailable(
        f"Fashion-MNIST IDX files not found in {where}: "
        "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) "
        "or pass --data-dir"
    )


def _load_digits() -> Dataset:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    return Dataset("digits", x_train, y_train, x_test, y_test, DIGIT_CLASSES)


def load(name: str, data_dir: str | Path | None = None) -> Dataset:
    """Load a data set by name; raises `DataUnavailable` with a one-line reason."""
    directory = Path(data_dir) if data_dir else None
    if name == "mnist":
        return _load_mnist(directory)
    if name == "fashion-mnist":
        return _load_fashion(directory)
    if name == "digits":
        return _load_digits()
    raise DataUnavailable(f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}")


def first_available(names: tuple[str, ...] = ("mnist", "fashion-mnist")) -> Dataset:
    """The first data set of `names` that loads here (the demo's MNIST-else-Fashion rule)."""
    reasons = []
    for name in names:
        try:
            return load(name)
        except DataUnavailable as error:
            reasons.append(str(error))
    raise DataUnavailable(" | ".join(reasons))
