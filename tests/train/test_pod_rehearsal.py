"""The generated pods, rehearsed (tests/train/pod_rehearsal.py): the exact ConfigMap files, container command
and environment of `nnsql spawn --backend kubernetes --dry-run`, run as 2 pods in network
namespaces of their own, in a Python environment holding only what TensorFlow's image holds.

The user's script is written as TensorFlow's multi-worker Keras tutorial writes it (tf.keras, model.fit,
BackupAndRestore, every worker saving), with spawn's one-line helper for the save path."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import control
from tests.train import pod_rehearsal

pytestmark = pytest.mark.slow

USER_SCRIPT = """
import os
import numpy as np
import tensorflow as tf
from nnsql.train.spawn import output_path

strategy = tf.distribute.MultiWorkerMirroredStrategy()
print("replicas in sync:", strategy.num_replicas_in_sync, flush=True)
rng = np.random.default_rng(int(os.environ["WORKER_NUMBER"]))
x = rng.normal(size=(512, 8)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("float32")
data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).batch(32)
with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
        tf.keras.layers.Dense(1, activation="sigmoid"),
    ])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
backup = tf.keras.callbacks.BackupAndRestore(backup_dir=os.environ["NNSQL_BACKUP_DIR"])
history = model.fit(data, epochs=4, callbacks=[backup], verbose=2)
print("keras:", type(model).__module__.split(".")[0], "accuracy:", history.history["accuracy"][-1])
with open(os.path.join(os.environ["NNSQL_OUTPUT_DIR"], "history.txt"), "a") as log:
    log.write(f"worker {os.environ['WORKER_NUMBER']} done\\n")
path = output_path("model.keras")
model.save(path)
print("saved to", path)
"""


def generated(capsys, tmp_path, *options: str) -> list[dict]:
    script = tmp_path / "train_user.py"
    script.write_text(textwrap.dedent(USER_SCRIPT))
    args = ["--backend", "kubernetes", "--dry-run", "-w", "2", "--pvc", "shared", *options, str(script)]
    assert spawn.main(args) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


@pytest.mark.parametrize(
    ("options", "distribution"), [((), "tensorflow-cpu"), (("--gpus", "1"), "tensorflow")], ids=["cpu", "gpu"]
)
def test_two_pods_of_a_stock_tensorflow_image_train_save_and_hand_back(
    capsys, tmp_path, options, distribution
):
    documents = generated(capsys, tmp_path, *options)
    image = pod_rehearsal.image_environment(distribution)
    pods = pod_rehearsal.rehearse(documents, tmp_path / "cluster", image, pod_rehearsal.wheel_index())
    for pod in pods:
        assert pod.exit_code == 0, pod.log[-3000:]
        assert "replicas in sync: 2" in pod.log and "keras: tf_keras" in pod.log
        assert "not tf-keras, on which --keras 2 runs model.fit: installing tf-keras~=2.21.0" in pod.log
    assert f"has {distribution} 2.21.0" in pods[0].log
    collected = pod_rehearsal.collect(documents, tmp_path / "cluster")
    assert (collected / "model.keras").is_file()  # the chief's; the other worker's went to a temporary path
    assert sorted((collected / "history.txt").read_text().splitlines()) == ["worker 0 done", "worker 1 done"]
    assert pods[1].log.count("saved to /tmp/nnsql-worker-1/model.keras") == 1


def test_a_pod_that_cannot_get_tf_keras_stops_in_one_line_and_is_not_restarted(capsys, tmp_path):
    documents = generated(capsys, tmp_path)
    image = pod_rehearsal.image_environment("tensorflow-cpu")
    empty_index = tmp_path / "no-index"
    empty_index.mkdir()
    pods = pod_rehearsal.rehearse(documents, tmp_path / "cluster", image, empty_index)
    assert all(pod.exit_code in (3, -9) for pod in pods)
    failed = [pod for pod in pods if pod.exit_code == 3]  # the first to fail; the group is then stopped (-9)
    assert failed
    for pod in pods:
        last = pod.log.strip().splitlines()[-1]
        if pod.exit_code == -9 and "installing tf-keras~=2.21.0" in last:
            continue  # stopped with the group while its own pip was still at work (a clean clone's run)
        assert last.startswith("nnsql: error: could not install tf-keras~=2.21.0")
        assert "train/spawn/image/Containerfile" in last and "--keras 3" in last
        assert control.causes(pod.log) == {last}  # the same cause twice in a row ends the run


def test_a_tf_spawner_entrypoint_runs_the_script_at_tf_spawners_path(capsys, tmp_path):
    """TF-Spawner's examples/entrypoint.sh as it ships: it echoes, then runs /script/training-script.py."""
    script = tmp_path / "job.py"
    script.write_text(
        "import json, os, sys\nconfig = json.loads(os.environ['TF_CONFIG'])\n"
        "print('task', config['task']['index'], 'of', os.environ['TOT_WORKERS'], 'from', sys.argv[0])\n"
    )
    entrypoint = tmp_path / "entrypoint.sh"
    entrypoint.write_text(
        'echo "This line is printed by the entrypoint script"\npython /script/training-script.py\n'
    )
    args = [
        "--backend",
        "kubernetes",
        "--dry-run",
        "-w",
        "2",
        "--pvc",
        "s",
        "-c",
        str(entrypoint),
        str(script),
    ]
    assert spawn.main(args) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    image = pod_rehearsal.image_environment("tensorflow-cpu")
    pods = pod_rehearsal.rehearse(documents, tmp_path / "cluster", image, pod_rehearsal.wheel_index())
    for pod in pods:
        assert pod.exit_code == 0, pod.log
        lines = pod.log.splitlines()
        assert "This line is printed by the entrypoint script" in lines
        assert lines[-1].startswith(f"task {pod.index} of 2 from ") and lines[-1].endswith(
            "/training-script.py"
        )
