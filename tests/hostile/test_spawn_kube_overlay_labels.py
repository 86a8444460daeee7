"""The labels a run's NetworkPolicy and Service select its pods by stay on the pods (train/spawn/cli.py).

Found by a hostile pass (dry runs; no cluster here): `--overlay` is deep-merged into the Job, pod
template included, and one that set `nnsql.io/run` (a copied overlay of another run, or a label scheme
of the team's) was accepted: the pods left the NetworkPolicy that admits only the run's own pods, so
their TensorFlow ports, which run code for whoever connects, were open to every pod of the cluster,
and the Service no longer found them. Such an overlay is now refused before anything is created.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.train.test_spawn_network import spawn_env


def dry_run(tmp_path, labels: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text("print('training')\n")
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"spec": {"template": {"metadata": {"labels": labels}}}}))
    command = [sys.executable, "-m", "nnsql.train.spawn", "--backend", "kubernetes", "--dry-run"]
    command += ["--overlay", str(overlay), "-w", "2", "train.py"]
    return subprocess.run(command, cwd=tmp_path, env=spawn_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("label", ["nnsql.io/run", "app.kubernetes.io/managed-by"])
def test_an_overlay_relabelling_the_pods_is_refused(tmp_path, label):
    result = dry_run(tmp_path, {label: "train-20261128-000000-00000"})
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2, result.stdout[-2000:]
    assert errors == [
        f"error: --overlay changes the pods' labels ['{label}'] that the run's NetworkPolicy and Service "
        "select them by: their TensorFlow ports would be open to every pod of the cluster; leave those "
        "labels as spawn sets them"
    ], result.stderr
    assert "Traceback" not in result.stderr and "kind: Job" not in result.stdout


def test_an_overlay_adding_a_label_keeps_the_pods_selected(tmp_path):
    result = dry_run(tmp_path, {"team": "physics"})
    assert result.returncode == 0, result.stderr
    (job,) = [d for d in yaml.safe_load_all(result.stdout) if d and d.get("kind") == "Job"]
    (policy,) = [d for d in yaml.safe_load_all(result.stdout) if d and d.get("kind") == "NetworkPolicy"]
    carried = job["spec"]["template"]["metadata"]["labels"]
    assert carried["team"] == "physics"
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= carried.items()
