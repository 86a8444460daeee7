"""Parameter-server training (`--strategy parameter-server --ps N`): TF_CONFIG with chief, worker and ps
roles, the same on both backends, and a real local rehearsal with tf.distribute.ParameterServerStrategy."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest
import yaml

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import bootstrap, manifests, tfconfig
from tests.conftest import REPO
from tests.train.runs import only_run

PS_SCRIPT = """
import json, os, sys
import numpy as np
import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if resolver.task_type in ("worker", "ps"):
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol=resolver.rpc_layer or "grpc")
    server.join()

strategy = tf.distribute.ParameterServerStrategy(resolver)
print("cluster:", json.dumps(resolver.cluster_spec().as_dict()), flush=True)
rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 8)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int64")

def dataset_fn(input_context):
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).repeat().batch(64)
    return data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
                                 tf.keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", steps_per_execution=5)
creator = tf.keras.utils.experimental.DatasetCreator(dataset_fn)
history = model.fit(creator, epochs=4, steps_per_epoch=20, verbose=2)
print("losses:", json.dumps(history.history["loss"]), flush=True)
path = os.path.join(sys.argv[1], "ps_model.h5")
model.save(path, save_format="h5")
print("model saved to", path, flush=True)
"""


def test_roles_put_the_chief_first_and_the_ps_last():
    addresses = [f"h:{port}" for port in range(5)]
    config = json.loads(tfconfig.tf_config(addresses, 4, ps=2))
    assert config == {
        "cluster": {"chief": ["h:0"], "worker": ["h:1", "h:2"], "ps": ["h:3", "h:4"]},
        "task": {"type": "ps", "index": 1},
    }
    assert json.loads(tfconfig.tf_config(addresses[:2], 1))["task"] == {"type": "worker", "index": 1}


@pytest.mark.parametrize("position", range(5))
def test_pod_bootstrap_builds_the_same_tf_config(position):
    env = {"TOT_WORKERS": "2", "NNSQL_PS": "2", "JOB_COMPLETION_INDEX": str(position)}
    env |= {"NNSQL_JOB": "r-a0", "NNSQL_SERVICE": "r-w", "NNSQL_PORT": "2222"}
    addresses = [f"r-a0-{i}.r-w:2222" for i in range(5)]
    assert json.loads(bootstrap.tf_config(env)) == json.loads(tfconfig.tf_config(addresses, position, ps=2))


def test_parameter_server_manifests_are_schema_valid():
    options = manifests.ClusterOptions(ps=2)
    job = manifests.job("r", 0, 3, (), options)
    kubernetes_validate.validate(job, "1.37.0", strict=True)
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 6  # chief + 3 workers + 2 ps
    assert job["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NNSQL_PS"] == "2" and env["TOT_WORKERS"] == "3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ps", "2"], "--ps needs --strategy parameter-server"),
        (["--strategy", "parameter-server", "--ps", "0"], "--ps 1 or more"),
    ],
)
def test_inconsistent_strategy_options_are_one_line(tmp_path, capsys, args, message):
    assert spawn.main([*args, str(REPO / "train" / "mnist.py")]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_parameter_server_rehearsal_trains_locally(tmp_path, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    script, out = tmp_path / "ps_job.py", tmp_path / "out"
    script.write_text(PS_SCRIPT)
    out.mkdir()
    args = ["-w", "2", "--strategy", "parameter-server", "--ps", "1", str(script), "--", str(out)]
    assert spawn.main(args) == 0
    run_dir = only_run(tmp_path / "runs")
    chief = (run_dir / "attempt-0" / "worker-0.log").read_text()
    cluster = json.loads(re.search(r"cluster: (\{.*\})", chief).group(1))
    assert {kind: len(tasks) for kind, tasks in cluster.items()} == {"chief": 1, "worker": 2, "ps": 1}
    losses = json.loads(re.search(r"losses: (\[.*\])", chief).group(1))
    assert losses[-1] < losses[0]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["state"] == "succeeded" and record["ps"] == 1 and record["model"].endswith("ps_model.h5")


def test_a_parameter_server_script_gets_its_roles_without_strategy_flags(tmp_path, capsys):
    script = tmp_path / "ps_job.py"
    script.write_text(PS_SCRIPT)
    args = ["--backend", "kubernetes", "--dry-run", "--pvc", "s", "-w", "2", str(script)]
    assert spawn.main(args) == 0
    out, err = capsys.readouterr()
    job = list(yaml.safe_load_all(out))[-1]
    kubernetes_validate.validate(job, "1.37.0", strict=True)
    assert job["spec"]["completions"] == 4 and job["spec"]["successPolicy"]  # chief + 2 workers + 1 ps
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NNSQL_PS"] == "1" and env["TOT_WORKERS"] == "2"
    line = PS_SCRIPT.splitlines().index("strategy = tf.distribute.ParameterServerStrategy(resolver)") + 1
    assert (
        f"note: {script}:{line}: creates ParameterServerStrategy: runs as --strategy parameter-server, "
        "the chief (task 0), 2 worker(s) and 1 ps in TF_CONFIG"
    ) in err.splitlines()


def test_multi_worker_asked_for_a_parameter_server_script_is_refused_in_one_line(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    script = tmp_path / "ps_job.py"
    script.write_text(PS_SCRIPT)
    assert spawn.main(["--strategy", "multi-worker", "-w", "2", str(script)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "would wait in server.join() for ever" in errors[0]
    assert "use --strategy parameter-server" in errors[0] and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_parameter_server_script_trains_locally_as_it_is(tmp_path, monkeypatch):
    """Without --strategy: two workers used to wait in server.join() until killed."""
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    script, out = tmp_path / "ps_job.py", tmp_path / "out"
    script.write_text(PS_SCRIPT)
    out.mkdir()
    assert spawn.main(["-w", "2", "--start-timeout", "120", str(script), "--", str(out)]) == 0
    chief = (only_run(tmp_path / "runs") / "attempt-0" / "worker-0.log").read_text()
    cluster = json.loads(re.search(r"cluster: (\{.*\})", chief).group(1))
    assert {kind: len(tasks) for kind, tasks in cluster.items()} == {"chief": 1, "worker": 2, "ps": 1}
