"""train.spawn leaves no orphans and no surprises: signals, crashed workers' children, worker bounds,
run ids only, redacted dry runs, one-line interrupts, the recorded namespace, and an AST pre-flight.

The workers here are real processes running small scripts that never import TensorFlow, so each test
takes seconds; the pre-flight accepts them because they call a `make_strategy` of their own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import commands, preflight
from tests.conftest import REPO
from tests.fixtures import wait_for
from tests.train.runs import only_run, run_folders

SLEEPER = """
import os, subprocess, sys, time
def make_strategy():
    return None
strategy = make_strategy()
if os.environ["WORKER_NUMBER"] == sys.argv[1]:
    child = subprocess.Popen(["sleep", "600"])  # a child of the worker, in the worker's process group
    open(sys.argv[2], "w").write(str(child.pid))
    if sys.argv[3] == "crash":
        sys.exit(3)
print("ready", flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"  # a zombie is dead


def spawn_process(tmp_path: Path, *args: str) -> subprocess.Popen:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    command = [
        sys.executable,
        "-m",
        "nnsql.train.spawn",
        "-w",
        "2",
        "--max-restarts",
        "0",
        str(script),
        "--",
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)


def run_folder(tmp_path: Path) -> Path:
    wait_for(lambda: (tmp_path / "runs").is_dir() and any(run_folders(tmp_path / "runs")), 60)
    return run_folders(tmp_path / "runs")[0]


def worker_pids(run_dir: Path) -> list[int]:
    wait_for(lambda: (run_dir / "workers.json").exists(), 60)
    return list(json.loads((run_dir / "workers.json").read_text())["pids"].values())


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_spawn_stops_every_worker_and_is_recorded(tmp_path, number):
    child_file = tmp_path / "child.pid"
    process = spawn_process(tmp_path, "1", str(child_file), "stay")
    run_dir = run_folder(tmp_path)
    pids = worker_pids(run_dir)
    wait_for(
        lambda: all("ready" in (run_dir / "attempt-0" / f"worker-{i}.log").read_text() for i in (0, 1)), 60
    )
    process.send_signal(number)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("stopped by")
    child = int(child_file.read_text())
    wait_for(lambda: not any(alive(pid) for pid in [*pids, child]), 20)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["state"] == "stopped"


def test_a_crashed_workers_children_are_stopped_too(tmp_path):
    child_file = tmp_path / "child.pid"
    process = spawn_process(tmp_path, "1", str(child_file), "crash")
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1 and "worker 1 failed (exit status 3)" in err
    child = int(child_file.read_text())
    wait_for(lambda: not alive(child), 20)


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    return tmp_path / "runs"


def test_more_workers_than_the_bound_are_refused_with_the_memory_they_need(runs, capsys):
    assert spawn.main(["-w", "1000", str(REPO / "train" / "mnist.py")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--force" in err and "GB of memory" in err
    assert not runs.exists()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--cpu", "lots"], "argument --cpu: 'lots' is not a Kubernetes quantity"),
        (["--memory", "4GB"], "argument --memory: '4GB' is not a Kubernetes quantity"),
        (["-p", "99999"], "argument -p/--port: 99999: must be at most 65535"),
        (["--max-restarts", "-3"], "argument --max-restarts: -3: must be at least 0"),
        (["--gpus", "-1"], "argument --gpus: -1: must be at least 0"),
    ],
)
def test_values_a_cluster_would_refuse_are_refused_before_anything_is_made(runs, capsys, option, said):
    """These went into the manifests as they were (--dry-run printed them): the API server refuses them
    only once the run's ConfigMap and Secret exist; --max-restarts -3 was taken as no restart."""
    script = str(REPO / "train" / "mnist.py")
    with pytest.raises(SystemExit) as refused:
        spawn.main(["--backend", "kubernetes", "--dry-run", "-w", "2", *option, script])
    assert refused.value.code == 2
    assert said in capsys.readouterr().err.strip().splitlines()[-1]
    assert not runs.exists()


@pytest.mark.parametrize("name", ["/tmp", "../..", "..", "runs/../x", "a/b"])
def test_delete_accepts_run_ids_only(runs, tmp_path, capsys, name):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "run.json").write_text("{}")
    assert spawn.main(["delete", name]) == 2
    assert "is not a run id" in capsys.readouterr().err and victim.exists()
    assert spawn.main(["delete", str(victim)]) == 2 and victim.exists()


def test_dry_run_redacts_the_secret(runs, capsys, tmp_path):
    env_file = tmp_path / "secrets.env"
    env_file.write_text("AWS_ACCESS_KEY_ID=abc\nAWS_SECRET_ACCESS_KEY='xyz-very-secret'\n")
    args = [
        "--backend",
        "kubernetes",
        "--dry-run",
        "--env-file",
        str(env_file),
        str(REPO / "train" / "mnist.py"),
    ]
    assert spawn.main(args) == 0
    out = capsys.readouterr().out
    assert "xyz-very-secret" not in out
    secret = next(d for d in yaml.safe_load_all(out) if d["kind"] == "Secret")
    assert secret["stringData"] == {"AWS_ACCESS_KEY_ID": "<redacted>", "AWS_SECRET_ACCESS_KEY": "<redacted>"}


def test_a_kubernetes_run_records_its_namespace(runs, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    args = ["--backend", "kubernetes", "--namespace", "physics", str(REPO / "train" / "mnist.py")]
    assert spawn.main(args) == 2
    assert len(capsys.readouterr().err.strip().splitlines()[-1:]) == 1
    run_dir = only_run(runs)
    assert json.loads((run_dir / "run.json").read_text())["namespace"] == "physics"


def test_delete_uses_the_recorded_namespace(tmp_path, monkeypatch):
    """Unit test of `delete` with a fake Kubernetes backend (named so): no cluster can run here."""
    deleted = []

    class FakeKubernetesBackend:
        def __init__(self, options):
            self.namespace = options.namespace

        def delete_run(self, run_id):
            deleted.append((self.namespace, run_id))

    monkeypatch.setattr("nnsql.train.spawn.kube.KubernetesBackend", FakeKubernetesBackend)
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    commands.delete(run_dir, {"backend": "kubernetes", "namespace": "physics"})
    assert deleted == [("physics", "r1")] and not run_dir.exists()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text(text)
    return path


FIT_SCRIPT = """
import argparse, tensorflow as tf
parser = argparse.ArgumentParser()
parser.add_argument("--x", help="no BackupAndRestore here, only in a help text")
strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(loss="mse")
model.fit([[1.0]], [[1.0]], epochs=1)
"""


def test_preflight_reads_the_code_not_its_text(tmp_path):
    only_text = preflight.check(write(tmp_path, FIT_SCRIPT))
    assert any("BackupAndRestore" in warning for warning in only_text.warnings)
    resumes = FIT_SCRIPT.replace(
        "epochs=1)", "epochs=1, callbacks=[tf.keras.callbacks.BackupAndRestore('/tmp/b')])"
    )
    assert not any("BackupAndRestore" in w for w in preflight.check(write(tmp_path, resumes)).warnings)
    custom_loop = preflight.check(REPO / "train" / "inclusive_classifier.py")
    assert not any("BackupAndRestore" in warning for warning in custom_loop.warnings)


def test_preflight_says_which_keras_runs_model_fit(tmp_path):
    legacy = preflight.check(write(tmp_path, FIT_SCRIPT), "2")
    assert any("model.fit" in note and "tf-keras" in note for note in legacy.notes) and not legacy.errors
    keras3 = preflight.check(write(tmp_path, FIT_SCRIPT), "3")
    assert any("keras-team/keras#20585" in warning for warning in keras3.warnings)
    direct = preflight.check(write(tmp_path, "import keras\n" + FIT_SCRIPT), "2")
    assert any("imports keras (Keras 3) directly" in warning for warning in direct.warnings)


def test_workers_do_not_outlive_a_spawn_that_is_killed(tmp_path):
    """SIGKILL (the OOM killer, a killed notebook kernel) gives spawn no chance to stop its workers: they
    used to train on as orphans. They now die with it."""
    process = spawn_process(tmp_path, "none", str(tmp_path / "child.pid"), "stay")
    run_dir = run_folder(tmp_path)
    pids = worker_pids(run_dir)
    wait_for(
        lambda: all("ready" in (run_dir / "attempt-0" / f"worker-{i}.log").read_text() for i in (0, 1)), 60
    )
    process.kill()
    process.communicate(timeout=30)
    try:
        wait_for(lambda: not any(alive(pid) for pid in pids), 10)
    finally:
        for pid in pids:  # on the old code: not left behind by the test
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_run_that_saves_no_model_says_how_to_hand_one_back(tmp_path):
    """The Keras guide's script saves to a path of its own and never prints it: spawn ended with 'the chief
    wrote no model to collect' and no word on how to make it collect one."""
    script = tmp_path / "no_model.py"
    script.write_text("def make_strategy():\n    return None\n\n\nmake_strategy()\nprint('trained')\n")
    last, _ = spawned_with_one_worker(tmp_path, script)
    assert "no model to collect (save it with model.save(output_path('model.keras'))" in last


def test_a_saved_model_directory_under_the_output_dir_is_the_model(tmp_path):
    """TensorFlow's multi-worker guide saves with `model.save(path)` and no suffix: tf.keras writes a
    SavedModel directory. Spawn copied it into runs/<run>/model/, then said 'the chief wrote no model to
    collect': the run named no model to export. It now names the model and the command to export it."""
    script = tmp_path / "saved_model.py"
    script.write_text(
        "import os\n"
        "folder = os.path.join(os.environ['NNSQL_OUTPUT_DIR'], 'keras-model')\n"
        "os.makedirs(os.path.join(folder, 'variables'), exist_ok=True)\n"
        "open(os.path.join(folder, 'saved_model.pb'), 'wb').close()\n"
    )
    last, stdout = spawned_with_one_worker(tmp_path, script, "--no-preflight")
    assert re.search(r"; model: \S+/model/keras-model$", last), last
    model = last.split("; model: ")[1]
    assert f"next: nnsql export duckdb --model {model} --db scores.duckdb --name mymodel" in stdout


def test_worker_ports_are_outside_the_range_outgoing_connections_take():
    """Ports found by binding to 0 are ephemeral: any connection on the machine could take one before
    the worker binds it, and TensorFlow then stops with "Could not start gRPC server" (seen in CI)."""
    import socket

    from nnsql.train.spawn.local import ephemeral_range, free_ports

    low, high = ephemeral_range()
    ports = free_ports(8)
    assert len(set(ports)) == 8 and not any(low <= port <= high for port in ports)
    for port in ports:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))


def spawned_with_one_worker(folder: Path, script: Path, *options: str) -> tuple[str, str]:
    """`nnsql.train.spawn -w 1 SCRIPT` run from `folder`, as a user runs it: its 'succeeded in' line
    and its standard output."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "nnsql.train.spawn", "-w", "1", *options, str(script)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (last,) = [line for line in (done.stdout + done.stderr).splitlines() if "succeeded in" in line]
    return last, done.stdout
