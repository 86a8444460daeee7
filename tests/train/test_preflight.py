"""The pre-flight check never refuses a script that runs, and never recommends what deadlocks TensorFlow.

Scripts are written the way Keras' distribution guide and TensorFlow's tutorials write them: a
MirroredStrategy script (the guide's first example), OneDeviceStrategy, the default strategy, the
tf.distribute.experimental spellings, and TensorFlow's multi-worker save pattern.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import preflight
from tests.conftest import REPO
from tests.train.runs import only_run


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(text))
    return path


MIRRORED = """
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
print("Number of devices:", strategy.num_replicas_in_sync)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="adam")
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
model.fit(x, x.sum(axis=1), epochs=2, batch_size=16, verbose=2)
print("trained on", strategy.num_replicas_in_sync, "device(s)")
"""


@pytest.mark.parametrize(
    ("strategy", "one_machine"),
    [
        ("tf.distribute.MirroredStrategy()", True),
        ('tf.distribute.OneDeviceStrategy("/cpu:0")', True),
        ("tf.distribute.get_strategy()", True),
        ("tf.distribute.experimental.CentralStorageStrategy()", True),
        ("tf.distribute.experimental.MultiWorkerMirroredStrategy()", False),
        ("tf.distribute.MultiWorkerMirroredStrategy()", False),
    ],
)
def test_valid_strategies_are_never_refused(tmp_path, strategy, one_machine):
    script = write(tmp_path, MIRRORED.replace("tf.distribute.MirroredStrategy()", strategy))
    report = preflight.check(script)
    assert report.errors == []
    assert any("each worker will train on its own" in note for note in report.notes) == one_machine


def test_a_script_without_any_strategy_runs_with_a_note(tmp_path):
    report = preflight.check(write(tmp_path, "import keras\nkeras.Sequential([])\n"))
    assert report.errors == [] and any("no multi-worker strategy" in note for note in report.notes)


def test_only_a_script_that_cannot_run_is_refused(tmp_path):
    assert "does not compile" in preflight.check(write(tmp_path, "def f(:\n")).errors[0]
    assert "no such file" in preflight.check(tmp_path / "missing.py").errors[0]


def test_a_model_built_in_a_function_above_the_strategy_is_not_refused(tmp_path):
    script = write(
        tmp_path,
        """
        import tensorflow as tf
        def build_and_compile_cnn_model():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            model.compile(loss="mse")
            return model
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            multi_worker_model = build_and_compile_cnn_model()
        """,
    )
    assert preflight.check(script).errors == []
    early = write(
        tmp_path,
        "import keras, tensorflow as tf\nm = keras.Sequential([])\n"
        "s = tf.distribute.MultiWorkerMirroredStrategy()\n",
    )
    report = preflight.check(early)
    assert report.errors == [] and any("built before the strategy" in w for w in report.warnings)


CHIEF_ONLY = """
import json, os
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(loss="mse")
model.fit([[1.0]], [[1.0]], epochs=1, callbacks=[tf.keras.callbacks.BackupAndRestore("/tmp/b")])
task = json.loads(os.environ["TF_CONFIG"])["task"]
if task["index"] == 0:
    model.save("model.keras")
"""


def test_a_chief_only_save_is_warned_with_tensorflows_pattern(tmp_path):
    report = preflight.check(write(tmp_path, CHIEF_ONLY))
    (warning,) = [w for w in report.warnings if "saves on the chief only" in w]
    assert "every worker must call save" in warning and "output_path('model.keras')" in warning
    every = CHIEF_ONLY.replace('if task["index"] == 0:\n    model.save', "model.save")
    notes = preflight.check(write(tmp_path, every)).notes
    assert any("every worker saves to the same path" in note and "output_path" in note for note in notes)


@pytest.mark.parametrize("script", [CHIEF_ONLY, MIRRORED, "import keras\n"])
def test_no_report_recommends_saving_from_the_chief_alone(tmp_path, script):
    report = preflight.check(write(tmp_path, script))
    for line in report.errors + report.warnings + report.notes:
        assert "from the chief" not in line and "chief (worker 0) only" not in line


def test_no_preflight_turns_the_check_off(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    script = write(tmp_path, MIRRORED)
    args = ["--backend", "kubernetes", "--dry-run", "--pvc", "shared", str(script)]
    assert spawn.main(args) == 0
    assert "note:" in capsys.readouterr().err
    assert spawn.main(["--no-preflight", *args]) == 0
    assert "note:" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_mirrored_strategy_script_runs_through_spawn(tmp_path, monkeypatch, capsys):
    """The Keras distribution guide's first example, one worker: spawn runs it (it was refused, exit 2)."""
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    assert spawn.main(["-w", "1", str(write(tmp_path, MIRRORED))]) == 0
    run_dir = only_run(tmp_path / "runs")
    log = (run_dir / "attempt-0" / "worker-0.log").read_text()
    assert "trained on 1 device(s)" in log
    assert "a strategy of one machine" in capsys.readouterr().err


S3_READERS = """
import tensorflow as tf
DATA = "s3://physics/hep/train.tfrecord"
{line}
"""


@pytest.mark.parametrize(
    "line",
    [
        'records = tf.data.TFRecordDataset("s3://physics/hep/part-0.tfrecord")',
        "records = tf.data.TFRecordDataset([DATA])",
        'files = tf.data.Dataset.list_files(f"s3://physics/hep/*.tfrecord")',
        "files = tf.io.gfile.glob(DATA + '*')",
    ],
)
def test_an_s3_path_in_tf_data_names_the_fix(tmp_path, line):
    script = write(tmp_path, S3_READERS.format(line=line))
    (warning,) = [w for w in preflight.check(script).warnings if "s3://" in w]
    assert warning.startswith(f"{script}:4: ") and "TensorFlow 2.21 has no S3 file system" in warning
    assert "from nnsql.train.data import tfrecords" in warning


def test_s3_read_through_nnsql_data_is_not_warned(tmp_path):
    script = write(
        tmp_path,
        """
        from nnsql.train.data import tfrecords
        records = tfrecords("s3://physics/hep/*.tfrecord")
        local = __import__("tensorflow").data.TFRecordDataset("/data/part-0.tfrecord")
        """,
    )
    assert not [w for w in preflight.check(script).warnings if "s3://" in w]
