"""Synthetic but learnable HEP events as TFRecords with CERN's Inclusive Classifier schema, and the
tf.data pipeline that reads them.

Schema (one tf.train.Example per event):
    GRU_input      float, 801 × 19 particles × features (zero-padded: the model masks zeros)
    HLF_input      float, 14 high-level features
    encoded_label  float, 3 (one-hot: W+jets, QCD, ttbar)

The classes differ in particle multiplicity, in the momentum-like features and in a few high-level
features, with noise, so a GRU + dense network learns them but not trivially.

    python -m nnsql.train.hep_data --out data/hep --events 20000 --files 8
    python -m nnsql.train.hep_data --out data/hep --layout cern   # CERN's folders, for its worker code

`--layout cern` writes what CERN's Inclusive Classifier workers read unchanged: Spark's part files
`trainUndersampled.tfrecord/part-r-00000`... and `testUndersampled.tfrecord/part-r-...` (a quarter as many
test events), found by their `list_files(PATH + "trainUndersampled.tfrecord/part-r*")`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from nnsql import quiet

PARTICLES, PARTICLE_FEATURES, HLF_FEATURES, CLASSES = 801, 19, 14, 3
CLASS_NAMES = ("W+jets", "QCD", "ttbar")


def synthetic_event(generator: np.random.Generator, label: int) -> tuple[np.ndarray, np.ndarray]:
    particles = np.zeros((PARTICLES, PARTICLE_FEATURES), dtype=np.float32)
    count = int(np.clip(generator.normal((40, 90, 140)[label], 20), 5, PARTICLES))
    scale = (1.0, 0.6, 1.4)[label]
    particles[:count] = generator.normal(0.0, 1.0, (count, PARTICLE_FEATURES)).astype(np.float32)
    particles[:count, 0] = generator.exponential(scale, count)  # a momentum-like feature
    particles[:count, 1] += (0.5, -0.5, 0.0)[label]
    hlf = generator.normal(0.0, 1.0, HLF_FEATURES).astype(np.float32)
    hlf[:3] += np.eye(CLASSES, dtype=np.float32)[label] * 1.5
    hlf[3] = count / 100.0
    return particles, hlf


def example(particles: np.ndarray, hlf: np.ndarray, label: int) -> bytes:
    import tensorflow as tf

    def floats(values: np.ndarray) -> tf.train.Feature:
        return tf.train.Feature(float_list=tf.train.FloatList(value=values.ravel()))

    one_hot = np.eye(CLASSES, dtype=np.float32)[label]
    features = {"GRU_input": floats(particles), "HLF_input": floats(hlf), "encoded_label": floats(one_hot)}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


PLAIN_NAME = "part-{index:05d}.tfrecord"
SPARK_NAME = "part-r-{index:05d}"  # Spark's TFRecord writer, as CERN's data set was made
CERN_SPLITS = {"trainUndersampled.tfrecord": 1.0, "testUndersampled.tfrecord": 0.25}


def write(
    out: Path, events: int, files: int, seed: int = 0, progress: bool = True, name: str = PLAIN_NAME
) -> list[Path]:
    import tensorflow as tf
    from tqdm import tqdm

    out.mkdir(parents=True, exist_ok=True)
    generator = np.random.default_rng(seed)
    paths = [out / name.format(index=i) for i in range(files)]
    writers = [tf.io.TFRecordWriter(str(p)) for p in paths]
    try:
        for i in tqdm(range(events), desc="events", unit="event", disable=not progress):
            label = int(generator.integers(CLASSES))
            writers[i % files].write(example(*synthetic_event(generator, label), label))
    finally:
        for writer in writers:
            writer.close()
    return paths


def write_cern(out: Path, events: int, files: int, seed: int = 0, progress: bool = True) -> list[Path]:
    """CERN's layout: train and test folders of Spark part files (the test set a quarter of `events`)."""
    paths = []
    for offset, (folder, share) in enumerate(CERN_SPLITS.items()):
        count = max(1, int(events * share))
        paths += write(out / folder, count, files, seed + offset, progress, name=SPARK_NAME)
    return paths


def parse(record):
    import tensorflow as tf

    spec = {
        "GRU_input": tf.io.FixedLenFeature([PARTICLES, PARTICLE_FEATURES], tf.float32),
        "HLF_input": tf.io.FixedLenFeature([HLF_FEATURES], tf.float32),
        "encoded_label": tf.io.FixedLenFeature([CLASSES], tf.float32),
    }
    parsed = tf.io.parse_single_example(record, spec)
    return {"GRU_input": parsed["GRU_input"], "HLF_input": parsed["HLF_input"]}, parsed["encoded_label"]


def dataset(
    source: str | list[str],
    batch_size: int,
    *,
    shuffle: bool = True,
    cache: bool = True,
    seed: int = 0,
    endpoint: str | None = None,
    shard: str = "file",
):
    """This worker's events: files in parallel, parallel parse, cache, shuffle, batch, prefetch.
    `source` is a local glob or an s3:// pattern (train/data.py: sharding, staging, endpoints), or the
    local files `nnsql.train.data.local_files` already chose."""
    import tensorflow as tf

    from nnsql.train.data import local_files, read_records

    files = local_files(source, endpoint=endpoint, shard=shard) if isinstance(source, str) else source
    records = read_records(files, shard=shard, shuffle_files=shuffle, seed=seed)
    events = records.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    if cache:
        events = events.cache()
    if shuffle:
        events = events.shuffle(4096, seed=seed, reshuffle_each_iteration=True)
    return events.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nnsql.train.hep_data", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--layout",
        choices=["plain", "cern"],
        default="plain",
        help="plain: part-NNNNN.tfrecord in --out; cern: CERN's trainUndersampled.tfrecord/part-r-NNNNN "
        "and testUndersampled.tfrecord/ folders",
    )
    args = parser.parse_args(argv)
    writer = write_cern if args.layout == "cern" else write
    paths = writer(args.out, args.events, args.files, args.seed)
    print(f"wrote {len(paths)} files to {args.out}")
    return 0


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
