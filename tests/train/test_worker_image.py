"""The worker image recipe (train/spawn/image/): no container engine runs here, so what can be checked is
checked: its pins are the tested ones, the CPU and GPU variants hold the same TensorFlow release, and the
modules a worker imports from the project need nothing beyond what the image installs."""

from __future__ import annotations

import ast
import re
import sys

from tests.conftest import REPO

IMAGE = REPO / "train" / "spawn" / "image"


def pins(path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[\w,-]+\])?==(\S+)", line.strip())
        if match:
            found[match[1].lower()] = match[2]
    return found


def test_the_image_pins_what_the_repository_tests():
    tested = pins(REPO / "requirements.txt")
    common = pins(IMAGE / "requirements-common.txt")
    assert {name: tested[name] for name in common} == common
    cpu, gpu = pins(IMAGE / "requirements-cpu.txt"), pins(IMAGE / "requirements-gpu.txt")
    assert cpu["tensorflow-cpu"] == gpu["tensorflow"] == tested["tensorflow"]
    for variant in ("cpu", "gpu"):
        assert "-r requirements-common.txt" in (IMAGE / f"requirements-{variant}.txt").read_text()


WORKER_MODULES = [
    "data",
    "objectstore",
    "staging",
    "distributed",
    "hep_data",
    "spawn/output",
    "spawn/__init__",
]
# what the image's packages provide, by import name
PROVIDED = {"tensorflow", "tf_keras", "keras", "numpy", "boto3", "botocore", "tqdm", "nnsql"}


def test_worker_modules_import_only_what_the_image_holds():
    imported = set()
    for name in WORKER_MODULES:
        tree = ast.parse((REPO / "train" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    assert imported - PROVIDED - set(sys.stdlib_module_names) == set()


def test_the_containerfile_runs_as_the_user_spawns_pods_run_as():
    from nnsql.train.spawn import manifests

    text = (IMAGE / "Containerfile").read_text()
    assert f"USER {manifests.RUN_AS_USER}" in text and "--uid 1000" in text
    assert "requirements-${VARIANT}.txt" in text and "COPY train/ /opt/nnsql/train/" in text
