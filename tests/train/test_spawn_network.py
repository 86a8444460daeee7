"""The network local workers run in (train/spawn/netns.py): `--network host` opens their TensorFlow ports
again and says so; where no private network can be made, spawn refuses before any worker starts, in one
line naming the cause and the option, and never falls back to open ports. That the ports are closed by
default is tests/hostile/test_serve_spawn_worker_ports.py's test; the attack below is its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.hostile.test_serve_spawn_worker_ports import TRAINING, attacked_run, outside_address

REFUSAL = "error: cannot keep the workers off the network: "


def spawn_env() -> dict[str, str]:
    return os.environ | {"PYTHONPATH": str(REPO), "CI": "true", "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.mark.slow
def test_host_network_warns_and_opens_the_ports(tmp_path):
    """The same attack as the hostile test's, against `--network host`: it reads and writes as the
    trainer, which shows both that the option works and what it costs (the warning says it)."""
    address = outside_address() or "127.0.0.1"
    attack, planted, errors = attacked_run(tmp_path, address, "--network", "host")
    assert "READ the trainer's own secret" in attack.stdout, attack.stderr[-2000:]
    assert planted.exists()
    warnings = [line for line in errors.splitlines() if "--network host" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: "), errors
    assert "open to every host that can reach this machine" in warnings[0]


def refused(tmp_path, wrap: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(TRAINING)
    command = [*wrap, sys.executable, "-m", "nnsql.train.spawn", "-w", "2", "train.py"]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def assert_refused(result: subprocess.CompletedProcess, cause: str, tmp_path) -> None:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2, result.stderr
    assert errors == [
        f"{REFUSAL}{cause}; --network host runs them anyway, with their TensorFlow ports open "
        "to every host that can reach this machine"
    ], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()  # refused before the run's folder, and any worker, exists


def test_refused_where_user_namespaces_are_disabled(tmp_path):
    """As on a machine whose user.max_user_namespaces is 0: set so inside a user namespace of the test's
    own (the limit holds for the namespaces made inside it), so nothing of this machine changes."""
    if subprocess.run(["unshare", "--user", "--map-root-user", "true"], check=False).returncode != 0:
        pytest.skip("this machine makes no user namespace: the refusal is the same, but not this set-up")
    wrap = ["unshare", "--user", "--map-root-user", "sh", "-c",
            'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', "limited"]  # fmt: skip
    result = refused(tmp_path, wrap, spawn_env())
    assert_refused(
        result, "user namespaces are disabled here (user.max_user_namespaces is 0, or used up)", tmp_path
    )


def test_refused_without_nsenter(tmp_path):
    """A PATH holding Python but not util-linux's nsenter."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    assert shutil.which("nsenter", path=str(bin_dir)) is None
    result = refused(tmp_path, [], spawn_env() | {"PATH": str(bin_dir)})
    assert_refused(result, "nsenter (util-linux) is not installed", tmp_path)


def test_network_is_an_option_of_local_workers_only(tmp_path):
    command = [sys.executable, "-m", "nnsql.train.spawn", "--backend", "kubernetes", "--network", "host"]
    result = subprocess.run([*command, "--dry-run", "train.py"], cwd=tmp_path, env=spawn_env(),
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --network applies to local workers (a Kubernetes run's NetworkPolicy admits only its pods)"
    ]
