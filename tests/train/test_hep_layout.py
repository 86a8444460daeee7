"""`python -m nnsql.train.hep_data --layout cern` writes CERN's folders, so the Inclusive Classifier's worker
code finds and parses its files unchanged (its list_files pattern and its decode function, as published)."""

from __future__ import annotations

import tensorflow as tf

from nnsql.train import hep_data

PATH_EVENTS, FILES = 40, 3


# CERN's worker code, as its notebook and TF-Spawner example read the data set
def decode(serialized_example):
    deser_features = tf.io.parse_single_example(
        serialized_example,
        features={
            "HLF_input": tf.io.FixedLenFeature((14), tf.float32),
            "GRU_input": tf.io.FixedLenFeature((801, 19), tf.float32),
            "encoded_label": tf.io.FixedLenFeature((3), tf.float32),
        },
    )
    return (deser_features["GRU_input"], deser_features["HLF_input"]), deser_features["encoded_label"]


def cern_events(path: str, split: str) -> list:
    files = tf.data.Dataset.list_files(path + f"{split}Undersampled.tfrecord/part-r*", shuffle=False)
    return list(tf.data.TFRecordDataset(files).map(decode))


def test_cern_worker_code_reads_the_cern_layout_unchanged(tmp_path):
    assert hep_data.main(["--out", str(tmp_path), "--events", str(PATH_EVENTS), "--files", str(FILES)]) == 0
    assert hep_data.main(["--out", str(tmp_path / "cern"), "--events", str(PATH_EVENTS), "--files",
                          str(FILES), "--layout", "cern"]) == 0  # fmt: skip
    train, test = cern_events(f"{tmp_path}/cern/", "train"), cern_events(f"{tmp_path}/cern/", "test")
    assert len(train) == PATH_EVENTS and len(test) == PATH_EVENTS // 4
    names = sorted(p.name for p in (tmp_path / "cern" / "trainUndersampled.tfrecord").iterdir())
    assert names == [f"part-r-{i:05d}" for i in range(FILES)]
    (particles, hlf), label = train[0]
    assert particles.shape == (801, 19) and hlf.shape == (14,) and float(tf.reduce_sum(label)) == 1.0
    assert not (tmp_path / "trainUndersampled.tfrecord").exists()  # the plain layout stays as it was
    assert len(list(tmp_path.glob("part-*.tfrecord"))) == FILES
