"""Coming from TF-Spawner: its own pod files (pod.yaml, pod-gpu.yaml, with their bare `env:` key), its short
flags, its `-c entrypoint.sh` that replaces the container command and runs /script/training-script.py
itself, its `-d -t TAG` clean-up; and `--command` lines that run with the workers' own Python. The files are
written the way TF-Spawner ships and documents them."""

from __future__ import annotations

import json
import sys

import kubernetes_validate
import pytest
import yaml

from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import manifests
from tests.conftest import REPO
from tests.train.runs import only_run

MNIST = REPO / "train" / "mnist.py"

POD_YAML = """apiVersion: v1
kind: Pod
metadata:
  name: PODNAME
  labels:
    app: APPNAME
    training_attempt: ATTEMPT
spec:
  containers:
    - name: tensorflow
      resources:
        requests:
          memory: "{memory}"
          cpu: "1000m"
{limits}      env:
      volumeMounts:
      - name: script
        mountPath: /script
      command:  ['python', '/script/training-script.py' ]
  volumes:
    - name: script
      configMap:
        name: script
  restartPolicy: Never
"""
POD_GPU_LIMITS = '        limits:\n          nvidia.com/gpu: "1"\n'
ENTRYPOINT = 'echo "This line is printed by the entrypoint script"\npython /script/training-script.py\n'


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    return tmp_path / "runs"


def dry_run(capsys, *args: str) -> list[dict]:
    assert spawn.main(["--backend", "kubernetes", "--dry-run", "--pvc", "shared", *args]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    for document in documents:
        kubernetes_validate.validate(document, "1.37.0", strict=True)
    return documents


@pytest.mark.parametrize(("name", "gpu"), [("pod.yaml", False), ("pod-gpu.yaml", True)])
def test_tf_spawners_own_pod_files_work(runs, capsys, tmp_path, name, gpu):
    pod_file = tmp_path / name
    pod_file.write_text(POD_YAML.format(memory="2Gi" if gpu else "1Gi", limits=POD_GPU_LIMITS if gpu else ""))
    config, _, _, policy, job = dry_run(capsys, "--pod-file", str(pod_file), str(MNIST))
    assert policy["kind"] == "NetworkPolicy"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"].get("nvidia.com/gpu") == ("1" if gpu else None)
    assert container["image"] == (manifests.GPU_IMAGE if gpu else manifests.IMAGE)
    assert {"mountPath": "/script", "name": "script", "readOnly": True} in container["volumeMounts"]
    assert manifests.SCRIPT_NAME in config["data"]  # /script/training-script.py, as TF-Spawner mounts it
    assert container["command"][0] == "sh" and "bootstrap.py" in container["command"][2]


def test_tf_spawners_short_flags(runs, capsys, tmp_path):
    env_file = tmp_path / "envfile.example"
    env_file.write_text("S3_ENDPOINT=\nAWS_LOG_LEVEL=3\nAWS_ACCESS_KEY_ID=\nAWS_SECRET_ACCESS_KEY=\n")
    entrypoint = tmp_path / "entrypoint.sh"
    entrypoint.write_text(ENTRYPOINT)
    args = ["-w", "3", "-n", "physics", "-p", "1999", "-t", "mnist-test", "-r", "-e", str(env_file)]
    args += ["-i", "registry/tf:2.21", "-c", str(entrypoint), str(MNIST)]
    config, secret, service, policy, job = dry_run(capsys, *args)
    assert {d["metadata"]["namespace"] for d in (config, secret, service, policy, job)} == {"physics"}
    assert job["metadata"]["name"].startswith("mnist-test-") and job["spec"]["completions"] == 3
    assert service["spec"]["ports"][0]["port"] == 1999
    assert secret["stringData"] == dict.fromkeys(
        ("S3_ENDPOINT", "AWS_LOG_LEVEL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), "<redacted>"
    )
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry/tf:2.21"
    assert container["command"][:2] == ["/bin/bash", "-c"]
    assert container["command"][2].endswith(ENTRYPOINT)  # the entrypoint replaces the script's command
    assert "exec python" not in container["command"][2]


def test_a_tf_spawner_entrypoint_given_as_command_is_refused_in_one_line(runs, capsys, tmp_path):
    entrypoint = tmp_path / "entrypoint.sh"
    entrypoint.write_text(ENTRYPOINT)
    assert spawn.main(["--command", str(entrypoint), str(MNIST)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {entrypoint} runs the training script itself, as a TF-Spawner entrypoint does: "
        "pass it with -c/--entrypoint (--command lines run before the script)"
    ]


def test_entrypoints_run_in_pods_only(runs, capsys, tmp_path):
    entrypoint = tmp_path / "entrypoint.sh"
    entrypoint.write_text(ENTRYPOINT)
    assert spawn.main(["-c", str(entrypoint), str(MNIST)]) == 2
    assert "--entrypoint runs in pods only" in capsys.readouterr().err


SCRIPT = """
import os, sys
def make_strategy():
    return None
make_strategy()
print("script python:", sys.prefix)
print("command python:", os.environ.get("COMMAND_PYTHON"))
"""


def test_command_lines_run_with_the_workers_python(runs, tmp_path, monkeypatch):
    monkeypatch.setenv(
        "PATH", "/usr/bin:/bin"
    )  # a system python first, as on a machine without the venv on PATH
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    setup = tmp_path / "setup.sh"
    setup.write_text("export COMMAND_PYTHON=\"$(python -c 'import sys; print(sys.prefix)')\"\n")
    assert spawn.main(["-w", "1", "--command", str(setup), str(script)]) == 0
    run_dir = only_run(runs)
    log = (run_dir / "attempt-0" / "worker-0.log").read_text()
    assert f"script python: {sys.prefix}" in log and f"command python: {sys.prefix}" in log


def test_delete_by_tag_removes_the_tagged_runs_only(runs, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))  # no cluster: runs/ only
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for run, tag in (("mnist-test-1", "mnist-test"), ("mnist-test-2", "mnist-test"), ("other-1", "other")):
        (runs / run).mkdir(parents=True)
        (runs / run / "run.json").write_text(json.dumps({"backend": "local", "tag": tag}))
    assert spawn.main(["-d", "-t", "mnist-test"]) == 0
    assert sorted(path.name for path in runs.iterdir()) == ["other-1"]
    assert "note: the cluster was not searched (" in capsys.readouterr().err
    assert spawn.main(["-d"]) == 0 and list(runs.iterdir()) == []


# CERN's pod-cpu.yaml (the blog's workers cache their data in memory: 30Gi, 10 CPU)
POD_CPU_YAML = """apiVersion: v1
kind: Pod
spec:
  containers:
    - name: tensorflow
      resources:
        requests:
          memory: "30Gi"
          cpu: "10"
        limits:
          memory: "30Gi"
          cpu: "10"
      env:
"""


def test_a_pod_files_resources_are_honoured(runs, capsys, tmp_path):
    pod_file = tmp_path / "pod-cpu.yaml"
    pod_file.write_text(POD_CPU_YAML)
    *_, job = dry_run(capsys, "--pod-file", str(pod_file), str(MNIST))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "10", "memory": "30Gi"},
        "limits": {"cpu": "10", "memory": "30Gi"},
    }


def test_cpu_and_memory_flags_replace_a_pod_files_resources_with_a_line_each(runs, capsys, tmp_path):
    pod_file = tmp_path / "pod-cpu.yaml"
    pod_file.write_text(POD_CPU_YAML)
    args = ["--pod-file", str(pod_file), "--cpu", "4", "--memory", "8Gi", str(MNIST)]
    assert spawn.main(["--backend", "kubernetes", "--dry-run", "--pvc", "shared", *args]) == 0
    out, err = capsys.readouterr()
    job = list(yaml.safe_load_all(out))[-1]
    kubernetes_validate.validate(job, "1.37.0", strict=True)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "4", "memory": "8Gi"},
        "limits": {"cpu": "4", "memory": "8Gi"},
    }
    assert "note: --cpu 4 replaces the pod file's cpu 10" in err.splitlines()
    assert "note: --memory 8Gi replaces the pod file's memory 30Gi" in err.splitlines()


def test_without_a_pod_file_the_defaults_and_tf_spawners_port_apply(runs, capsys):
    _, _, service, _, job = dry_run(capsys, str(MNIST))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}
    assert service["spec"]["ports"][0]["port"] == 1999  # TF-Spawner's default port
    assert {"name": "NNSQL_PORT", "value": "1999"} in container["env"]
