"""train.spawn for real: local workers, fault recovery, manifests, pre-flight, subcommands."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import envfile, manifests
from nnsql.train.spawn.backend import RunSpec, read_record
from nnsql.train.spawn.control import Settings, run_job
from nnsql.train.spawn.local import LocalBackend
from tests.ci_skips import needs_endpoint
from tests.conftest import REPO
from tests.fixtures import free_port
from tests.train.runs import only_run
from tests.train.test_spawn_safety import alive

MNIST = REPO / "train" / "mnist.py"
# Digits at a learning rate that reaches 0.96 in 20 epochs (150 at the default rate): every step of two
# workers waits for their all-reduce, so the epochs, not the arithmetic, set these tests' length.
QUICK = ("--dataset", "digits", "--learning-rate", "0.01")


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    return tmp_path / "runs"


@pytest.mark.slow
def test_two_local_workers_match_one_worker(runs, tmp_path):
    from nnsql.train import mnist

    options = [*QUICK, "--epochs", "20", "--quiet"]
    assert mnist.main([*options, "--out", str(tmp_path / "one")]) == 0
    assert spawn.main(["-w", "2", str(MNIST), "--", *options]) == 0
    run_dir = only_run(runs)
    record = read_record(run_dir)
    metadata = json.loads((run_dir / "model" / "metadata.json").read_text())
    one_worker = json.loads((tmp_path / "one" / "metadata.json").read_text())["test_accuracy"]
    assert record["state"] == "succeeded" and metadata["workers"] == 2
    assert metadata["test_accuracy"] >= one_worker - 0.01
    assert (run_dir / "model" / "model.keras").exists()
    from nnsql.export.compile import to_ir
    from nnsql.export.frontend.model import load_model

    assert len(to_ir(load_model(run_dir / "model" / "model.keras"), target="duckdb").nodes) == 2


@pytest.mark.slow
def test_killed_worker_restarts_group_from_the_backup(runs, tmp_path):
    run_dir = runs / "fault"
    run_dir.mkdir(parents=True)
    shared = run_dir / "shared"
    env = {"NNSQL_OUTPUT_DIR": str(shared / "output"), "NNSQL_BACKUP_DIR": str(shared / "backup")}
    spec = RunSpec("fault", MNIST, (*QUICK, "--epochs", "30"), 2, run_dir, str(shared), env)
    backend = LocalBackend()

    def kill_worker_one_mid_training() -> None:
        log = run_dir / "attempt-0" / "worker-0.log"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if log.exists() and "epoch 10/30" in log.read_text():
                pids = json.loads((run_dir / "workers.json").read_text())["pids"]
                os.killpg(pids["1"], signal.SIGKILL)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_worker_one_mid_training)
    killer.start()
    result = run_job(backend, spec, Settings(max_restarts=2, poll_seconds=0.2), print)
    killer.join()
    assert result.attempts == 2
    second = (run_dir / "attempt-1" / "worker-0.log").read_text()
    started = int(second.split("training starts at epoch ")[1].split()[0])
    assert started > 10, "the restarted group did not resume from the backup"
    metadata = json.loads((run_dir / "model" / "metadata.json").read_text())
    assert metadata["resumed_from_epoch"] == started - 1 and metadata["test_accuracy"] >= 0.9


@pytest.mark.parametrize(("workers", "gpus"), [(1, 0), (2, 0), (8, 0), (2, 1), (8, 4)])
def test_manifests_are_schema_valid(workers, gpus):
    options = manifests.ClusterOptions(
        namespace="physics",
        gpus=gpus,
        node_selector={"pool": "gpu"} if gpus else {},
        env_file_data={"A": "b"},
    )
    documents = manifests.all_manifests("run-x", MNIST, workers, ("--dataset", "digits"), options)
    for document in documents:
        kubernetes_validate.validate(document, "1.37.0", strict=True)
    job = documents[-1]["spec"]
    assert job["completionMode"] == "Indexed" and job["completions"] == job["parallelism"] == workers
    assert (
        job["podReplacementPolicy"] == "Failed" and "backoffLimit" in job and "ttlSecondsAfterFinished" in job
    )
    assert (
        documents[2]["spec"]["publishNotReadyAddresses"] is True
        and documents[2]["spec"]["clusterIP"] == "None"
    )
    container = job["template"]["spec"]["containers"][0]
    assert {"secretRef": {"name": "run-x-env"}} in container["envFrom"]
    assert not any(e["name"] == "A" for e in container["env"])  # secrets never as plain env
    assert ("nvidia.com/gpu" in container["resources"]["limits"]) == bool(gpus)


def test_bootstrap_builds_tf_config_from_the_completion_index(tmp_path):
    import subprocess

    env = {
        "PATH": os.environ["PATH"],
        "TOT_WORKERS": "3",
        "JOB_COMPLETION_INDEX": "2",
        "NNSQL_JOB": "r-a0",
        "NNSQL_SERVICE": "r-workers",
        "NNSQL_PORT": "2222",
        "NNSQL_SCRIPT_DIR": str(tmp_path),
        "NNSQL_OUTPUT_DIR": str(tmp_path / "shared" / "output"),
        "NNSQL_BACKUP_DIR": str(tmp_path / "shared" / "backup"),
    }
    bootstrap = REPO / "train" / "spawn" / "bootstrap.py"
    shell = f'eval "$({sys.executable} {bootstrap})"; echo "$TF_CONFIG"; echo "$WORKER_NUMBER"'
    out = subprocess.run(["sh", "-c", shell], env=env, capture_output=True, text=True, check=True)
    config, number = out.stdout.strip().splitlines()
    assert json.loads(config) == {
        "cluster": {"worker": ["r-a0-0.r-workers:2222", "r-a0-1.r-workers:2222", "r-a0-2.r-workers:2222"]},
        "task": {"type": "worker", "index": 2},
    }
    assert number == "2" and out.stderr == ""
    assert (tmp_path / "shared" / "output").is_dir() and (tmp_path / "shared" / "backup").is_dir()


def test_collector_pod_is_schema_valid_and_packs_the_outputs(tmp_path):
    import base64
    import io
    import subprocess
    import sys
    import tarfile

    pod = manifests.collector_pod("run-x", manifests.ClusterOptions(pvc="shared"))
    kubernetes_validate.validate(pod, "1.37.0", strict=True)
    output = tmp_path / "output"
    output.mkdir()
    (output / "model.keras").write_bytes(b"weights")
    script = manifests.PACK_OUTPUT.replace(manifests.SHARED_DIR, str(tmp_path))
    packed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(packed)), mode="r:gz") as archive:
        assert archive.extractfile("./model.keras").read() == b"weights"


def test_overlay_is_deep_merged(tmp_path):
    overlay = {"spec": {"template": {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}}}
    job = manifests.job("r", 0, 2, (), manifests.ClusterOptions(overlay=overlay))
    assert job["spec"]["template"]["spec"]["tolerations"][0]["key"] == "gpu"
    assert job["spec"]["template"]["spec"]["containers"][0]["name"] == "worker"
    kubernetes_validate.validate(job, "1.37.0", strict=True)


def test_dry_run_prints_yaml_without_a_cluster(runs, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    env_file = tmp_path / "secrets.env"
    env_file.write_text("# credentials\nAWS_ACCESS_KEY_ID=abc\nAWS_SECRET_ACCESS_KEY='xyz'\n")
    args = ["--backend", "kubernetes", "-w", "4", "--dry-run", "--env-file", str(env_file), str(MNIST)]
    assert spawn.main(args) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in documents] == ["ConfigMap", "Secret", "Service", "NetworkPolicy", "Job"]
    assert documents[1]["stringData"] == {
        "AWS_ACCESS_KEY_ID": "<redacted>",
        "AWS_SECRET_ACCESS_KEY": "<redacted>",
    }
    assert envfile.read(env_file) == {"AWS_ACCESS_KEY_ID": "abc", "AWS_SECRET_ACCESS_KEY": "xyz"}
    assert not runs.exists()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text(text)
    return path


def test_preflight_failure_stops_before_any_worker(runs, tmp_path, capsys):
    assert spawn.main(["-w", "2", str(write(tmp_path, "x = (\n"))]) == 2
    assert "does not compile" in capsys.readouterr().err and not runs.exists()


def test_status_logs_and_delete(runs, capsys):
    run = runs / "r1"
    (run / "attempt-0").mkdir(parents=True)
    (run / "run.json").write_text(
        json.dumps({"run_id": "r1", "backend": "local", "state": "succeeded", "attempt": 1})
    )
    (run / "attempt-0" / "worker-1.log").write_text("hello from worker 1\n")
    assert spawn.main(["status", "r1"]) == 0 and "state: succeeded" in capsys.readouterr().out
    assert (
        spawn.main(["logs", "r1", "--worker", "1"]) == 0 and "hello from worker 1" in capsys.readouterr().out
    )
    assert spawn.main(["delete", "r1"]) == 0 and not run.exists()
    assert spawn.main(["status", "r1"]) == 2


@pytest.mark.k8s
@needs_endpoint("KUBECONFIG", "a Kubernetes cluster")
def test_two_workers_on_kubernetes(runs):
    image = os.environ.get("NNSQL_TEST_IMAGE", manifests.ClusterOptions.image)
    script = REPO / "tests" / "train" / "k8s_smoke.py"
    assert (
        spawn.main(["--backend", "kubernetes", "-w", "2", "--image", image, "--cpu", "500m", str(script)])
        == 0
    )


POD_FILE = """
apiVersion: v1
kind: Pod
metadata: {name: tfspawner-template}
spec:
  tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
  imagePullSecrets: [{name: registry}]
  containers:
  - name: ignored
    image: ignored/image
    env: [{name: EOS_MGM_URL, value: "root://eosuser.cern.ch"}, {name: TOT_WORKERS, value: "99"}]
    volumeMounts: [{name: eos, mountPath: /eos}]
  volumes: [{name: eos, hostPath: {path: /eos}}]
"""


@pytest.mark.parametrize("keras", ["2", "3"])
def test_tf_spawner_options_reach_the_manifests(runs, capsys, tmp_path, keras):
    (tmp_path / "pod.yaml").write_text(POD_FILE)
    (tmp_path / "setup.sh").write_text("pip install --user pandas\n")
    args = ["--backend", "kubernetes", "-w", "3", "--dry-run", "--keras", keras, "--tag", "Physics Run"]
    args += [
        "--port",
        "3333",
        "--pod-file",
        str(tmp_path / "pod.yaml"),
        "--command",
        str(tmp_path / "setup.sh"),
    ]
    assert spawn.main([*args, str(MNIST)]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    for document in documents:
        kubernetes_validate.validate(document, "1.37.0", strict=True)
        assert document["metadata"]["name"].startswith("physics-run-")
    config, job = documents[0], documents[-1]
    assert config["data"]["command.sh"] == "pip install --user pandas\n"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["TF_USE_LEGACY_KERAS"] == ("1" if keras == "2" else "0")
    assert env["NNSQL_PORT"] == "3333" and container["ports"] == [{"name": "grpc", "containerPort": 3333}]
    assert (
        env["TOT_WORKERS"] == "3" and env["EOS_MGM_URL"] == "root://eosuser.cern.ch"
    )  # ours win, theirs kept
    assert container["image"] == manifests.ClusterOptions.image and container["name"] == "worker"
    assert pod["tolerations"][0]["value"] == "ml" and pod["imagePullSecrets"] == [{"name": "registry"}]
    assert {v["name"] for v in pod["volumes"]} == {"eos", "script", "shared", "packages"}
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/eos", manifests.SCRIPT_DIR}
    assert '. "$NNSQL_SCRIPT_DIR/command.sh"' in container["command"][2]


def test_command_file_runs_in_each_local_worker_before_the_script(runs, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import os\ndef make_strategy():\n    return None\nmake_strategy()\n"
        "print('prepared' if os.environ.get('PREPARED') == os.environ['WORKER_NUMBER'] else 'not prepared')\n"
    )
    (tmp_path / "setup.sh").write_text('export PREPARED="$WORKER_NUMBER"\necho "setting up"\n')
    assert spawn.main(["-w", "2", "--command", str(tmp_path / "setup.sh"), str(script)]) == 0
    run_dir = only_run(runs)
    for index in range(2):
        log = (run_dir / "attempt-0" / f"worker-{index}.log").read_text()
        assert log.splitlines() == ["setting up", "prepared"]
    assert read_record(run_dir)["keras"] == "2"


def descendants(pid: int) -> set[int]:
    """Every process started by `pid`, at any depth (from /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:  # the thread (or process) ended since the listing: it has none
            continue
        for child in children:
            found |= {int(child), *descendants(int(child))}
    return found


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
def test_tensorboard_serves_a_runs_logs_and_leaves_nothing_when_stopped(runs, tmp_path, number):
    import subprocess

    import requests
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    run_dir = runs / "r-tb"
    logs = run_dir / "model" / "logs" / "train"
    logs.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"backend": "local", "state": "succeeded"}))
    writer = EventFileWriter(str(logs))
    for step in range(3):
        value = summary_pb2.Summary.Value(tag="epoch_loss", simple_value=1.0 / (step + 1))
        writer.add_event(
            event_pb2.Event(step=step, wall_time=time.time(), summary=summary_pb2.Summary(value=[value]))
        )
    writer.close()
    port = free_port()
    command = [sys.executable, "-m", "nnsql.train.spawn", "tensorboard", "r-tb", "--port", str(port)]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    # Its own process group, so that the end of the test reaches TensorBoard even when the listing of
    # its children failed or a child was started after it.
    server = subprocess.Popen(command, cwd=runs.parent, env=environment, start_new_session=True)
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                answer = requests.get(f"http://127.0.0.1:{port}/data/runs", timeout=2)
                if answer.ok and answer.json():
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "TensorBoard did not come up"
            time.sleep(0.5)
        assert answer.json() == ["logs/train"]
        started = descendants(server.pid)
        assert started, "TensorBoard runs as a child of the command"
        server.send_signal(number)
        assert server.wait(timeout=30) == 0
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in started if alive(pid)], "a process outlived `tensorboard`"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        for pid in started:  # never leave one behind, even when the test fails
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


LINGERER = (
    "import signal, sys, time\n"
    "for number in (signal.SIGTERM, signal.SIGHUP): signal.signal(number, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


def test_tensorboard_that_ignores_the_stop_is_killed_after_the_grace(tmp_path):
    """A TensorBoard that ignores or lingers on SIGTERM/SIGHUP held `nnsql spawn tensorboard` for good:
    the command waited for it before the grace period began. Now the command ends within the grace."""
    import subprocess

    serving = f"from nnsql.train.spawn.tensorboard import serve; serve([sys.executable, '-c', {LINGERER!r}])"
    command = [sys.executable, "-c", f"import sys; {serving}"]
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    started: set[int] = set()
    try:
        assert server.stdout is not None and server.stdout.readline() == "ready\n"
        started = descendants(server.pid)
        server.send_signal(signal.SIGHUP)
        assert server.wait(timeout=40) == 0  # the grace is 10 s; the rest is room for a loaded machine
        assert not [pid for pid in started if alive(pid)], "the lingering process outlived the command"
    finally:
        server.kill()
        server.wait()
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_tensorboard_without_logs_says_what_to_do(runs, capsys):
    (runs / "r-empty").mkdir(parents=True)
    (runs / "r-empty" / "run.json").write_text("{}")
    assert spawn.main(["tensorboard", "r-empty"]) == 2
    assert "NNSQL_OUTPUT_DIR" in capsys.readouterr().err


def test_output_and_backup_directories_exist_before_a_local_script_starts(runs, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import os\ndef make_strategy():\n    return None\nmake_strategy()\n"
        "assert os.path.isdir(os.environ['NNSQL_BACKUP_DIR'])\n"
        "open(os.path.join(os.environ['NNSQL_OUTPUT_DIR'], 'model.keras'), 'w').write('weights')\n"
    )
    assert spawn.main(["-w", "2", str(script)]) == 0
    run_dir = only_run(runs)
    assert (run_dir / "model" / "model.keras").read_text() == "weights"
