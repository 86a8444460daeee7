"""Who may reach a training run's TensorFlow workers. Each worker of `nnsql spawn` runs TensorFlow's gRPC
server (the cluster of TF_CONFIG), which has no authentication of any kind: whoever connects runs a graph
of TensorFlow ops in the worker, as the user who trained, `io.read_file` and `io.write_file` included.
Found by the fifth hostile pass of issue 32:
- on Kubernetes nothing kept other pods out: the manifests held no NetworkPolicy, so any pod of the
  cluster that resolves `<run>-workers` could read a worker's mounted secrets and data, or write the model
  the run hands back. Now each run gets a NetworkPolicy that admits only its own pods;
- locally, TensorFlow listens on every interface (`0.0.0.0`/`[::]`, hard-coded in its server), so a
  client on the network, with this machine's address and the port, read a file of mode 0600 and wrote
  another beside the script. Now the workers of a run share a network namespace of their own
  (train/spawn/netns.py): the port is not there on any address of this machine, loopback included;
  `--network host` opens it again, with a warning.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate
import pytest

from nnsql.train.spawn import manifests
from tests.conftest import REPO

MNIST = REPO / "train" / "mnist.py"
BOUND = 110  # seconds: two TensorFlow workers start (about 20 s of CPU each), the attack, the run's end


def test_a_kubernetes_run_admits_only_its_own_pods():
    options = manifests.ClusterOptions(namespace="physics", env_file_data={"A": "b"})
    documents = manifests.all_manifests("run-x", MNIST, 3, (), options)
    kinds = [document["kind"] for document in documents]
    assert "NetworkPolicy" in kinds, f"nothing keeps other pods from the workers' gRPC ports: {kinds}"
    assert kinds.index("NetworkPolicy") < kinds.index("Job")  # holds before any worker listens
    policy = documents[kinds.index("NetworkPolicy")]
    kubernetes_validate.validate(policy, "1.37.0", strict=True)
    pods = documents[kinds.index("Job")]["spec"]["template"]["metadata"]["labels"]
    selected = policy["spec"]["podSelector"]["matchLabels"]
    assert selected.items() <= pods.items() and selected  # every worker (and only this run's pods)
    assert "matchExpressions" not in policy["spec"]["podSelector"]
    assert "Ingress" in policy["spec"]["policyTypes"]
    for rule in policy["spec"]["ingress"]:
        assert "ports" not in rule or rule["ports"]  # an empty list would admit every port
        for peer in rule["from"]:  # no rule without `from`: that would admit everyone
            assert set(peer) == {"podSelector"}, peer  # no ipBlock, no namespaceSelector
            assert peer["podSelector"] == {"matchLabels": manifests.labels("run-x")}


def outside_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (the one a route outward leaves from)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: the kernel only picks a route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


TRAINING = """
import os, time
import tensorflow as tf
tf.distribute.MultiWorkerMirroredStrategy()
print("cluster ready", os.environ["TF_CONFIG"], flush=True)
time.sleep(40)
"""
ATTACK = """
import sys
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
target, secret, planted = sys.argv[1:]
with tf.device("/job:worker/replica:0/task:0/device:CPU:0"):
    read = tf.io.read_file(secret)
    write = tf.io.write_file(planted, tf.constant("written by a graph of someone else's"))
with tf.compat.v1.Session(target, config=tf.compat.v1.ConfigProto(operation_timeout_in_ms=20000)) as s:
    print("READ", s.run(read).decode().strip())
    s.run(write)
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["the network", "loopback"])
def test_local_workers_cannot_be_reached_from_the_network(tmp_path, where):
    """From this machine's outward address (another host) and from its loopback (another local user)."""
    address = outside_address() if where == "the network" else "127.0.0.1"
    if address is None:
        pytest.skip("this machine has no address but loopback")
    attack, planted, _ = attacked_run(tmp_path, address)
    assert "READ the trainer's own secret" not in attack.stdout
    assert not planted.exists()


def attacked_run(tmp_path, address: str, *options: str) -> tuple[subprocess.CompletedProcess, Path, str]:
    """A two-worker local run of TRAINING (spawn's `options` first) attacked through its first worker's
    port at `address`: (the attack, the file it tries to plant, what spawn wrote on stderr). The attack
    prints what it read of a 0600 file of the trainer's."""
    (tmp_path / "train.py").write_text(TRAINING)
    secret, planted = tmp_path / "secret.txt", tmp_path / "planted.txt"
    secret.write_text("the trainer's own secret\n")
    secret.chmod(0o600)
    env = os.environ | {"PYTHONPATH": str(REPO), "CI": "true", "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-m", "nnsql.train.spawn", *options, "-w", "2", "train.py"]
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as run:
        try:
            port = worker_port(run)
            attack = subprocess.run(
                [sys.executable, "-c", ATTACK, f"grpc://{address}:{port}", str(secret), str(planted)],
                env=env,
                capture_output=True,
                text=True,
                timeout=BOUND / 2,
            )
        finally:
            run.terminate()
            _, errors = run.communicate(timeout=30)
    return attack, planted, errors


def worker_port(run: subprocess.Popen) -> int:
    """The first worker's port, from the TF_CONFIG the run prints, once the cluster is up."""
    assert run.stdout is not None
    deadline, port = time.monotonic() + BOUND / 2, None
    for line in run.stdout:
        if port is None and '"127.0.0.1:' in line:
            port = int(line.split('"127.0.0.1:', 1)[1].split('"', 1)[0])
        if "cluster ready" in line and port is not None:
            return port
        assert time.monotonic() < deadline, "the workers did not start"
    raise AssertionError("the run ended before its cluster was up")
