"""Real data for the benchmark, written as TFRecords the workers read through tf.data.

Images: Fashion-MNIST (Debian's dataset-fashion-mnist, offline) as PNG-encoded examples with ImageNet's
TFRecord keys (`image/encoded`, `image/class/label`), so the workers decode and upscale them the way an
ImageNet pipeline decodes JPEGs. Events: the project's synthetic HEP TFRecords (train.hep_data), the
Inclusive Classifier's schema.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FILES = 8


def image_example(image: np.ndarray, label: int) -> bytes:
    import tensorflow as tf

    encoded = tf.io.encode_png(image[:, :, None]).numpy()
    feature = {
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_images(directory: Path, images: np.ndarray, labels: np.ndarray) -> str:
    """Images as uint8 28 × 28 arrays, spread over FILES files; returns the files' glob."""
    import tensorflow as tf

    directory.mkdir(parents=True, exist_ok=True)
    writers = [tf.io.TFRecordWriter(str(directory / f"part-{i:02d}.tfrecord")) for i in range(FILES)]
    try:
        for index, (image, label) in enumerate(zip(images, labels, strict=True)):
            writers[index % FILES].write(image_example(image, int(label)))
    finally:
        for writer in writers:
            writer.close()
    return str(directory / "*.tfrecord")


def fashion_records(directory: Path, examples: int, eval_examples: int) -> tuple[str, str]:
    """The first `examples` training images and `eval_examples` test images; returns both globs."""
    from nnsql import imagedata

    data = imagedata.load("fashion-mnist")

    def as_images(features: np.ndarray) -> np.ndarray:
        return np.round(features * 255).astype(np.uint8).reshape(-1, 28, 28)

    train = write_images(directory / "train", as_images(data.x_train[:examples]), data.y_train[:examples])
    held_out = as_images(data.x_test[:eval_examples])
    test = write_images(directory / "test", held_out, data.y_test[:eval_examples])
    return train, test


def hep_records(directory: Path, events: int) -> str:
    from nnsql.train import hep_data

    hep_data.write(directory, events, FILES, progress=False)
    return str(directory / "*.tfrecord")
