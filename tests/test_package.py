"""`pip install` of the wheel, used as a user would: outside the checkout, in a working directory holding a
`train.py`, an `export/` package and a `serve.py` of the user's own, on a model of theirs.

The fresh virtual environment is made once per lock (build/package/venv-<hash of the requirements and
pyproject.toml>); the wheel is rebuilt and reinstalled every run. Third-party packages come from the
project's .venv through a `.pth` line (the tested lock, no download here); the test checks that the lock
satisfies every range the wheel declares. A real `pip install nnsql[...]` from PyPI on 3.11, 3.12 and
3.13 is the manual check in docs/install.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.fixtures import locked

BUILD = REPO / "build" / "package"
LOCK_FILES = ("requirements.txt", "requirements-dev.txt", "pyproject.toml")
NOISE = ("E0000", "oneDNN", "cuda", "absl::InitializeLog")


def lock_key() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for name in LOCK_FILES:
        digest.update((REPO / name).read_bytes())
    return digest.hexdigest()[:12]


def build_wheel() -> Path:
    wheels = BUILD / "wheel"
    for old in wheels.glob("*.whl"):
        old.unlink()
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        wheels,
        REPO,
    ]
    subprocess.run([str(part) for part in command], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("nnsql-*.whl")
    return wheel


def fresh_venv() -> Path:
    """A virtual environment without the checkout, whose third-party packages are the project's lock."""
    venv = BUILD / f"venv-{lock_key()}"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True)
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        (Path(purelib) / "zz_lock.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return venv


@pytest.fixture(scope="module")
def installed() -> Path:
    with locked(BUILD.with_name("package.lock")):  # one worker builds and installs at a time
        wheel, venv = build_wheel(), fresh_venv()
        install = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
        subprocess.run(
            [*install, "--no-deps", "--no-index", "--force-reinstall", str(wheel)], check=True, timeout=300
        )
    return venv


@pytest.fixture
def users_directory(tmp_path: Path) -> Path:
    """A notebook's or a shell's working directory with modules named like the project's folders."""
    for shadow in ("train.py", "serve.py", "export/__init__.py", "nnsql_probe.py"):
        (tmp_path / shadow).parent.mkdir(exist_ok=True)
        (tmp_path / shadow).write_text("raise RuntimeError('the user\\'s own module was imported')\n")
    return tmp_path


def run(venv: Path, cwd: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "NNSQL_VERBOSE")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(list(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_lock_satisfies_every_range_the_wheel_declares(installed, users_directory):
    check = (
        "import importlib.metadata as m, json\n"
        "from packaging.requirements import Requirement\n"
        "bad = []\n"
        "for text in m.requires('nnsql'):\n"
        "    r = Requirement(text.split(';')[0])\n"
        "    if r.name == 'nnsql':\n"
        "        continue\n"
        "    try:\n"
        "        v = m.version(r.name)\n"
        "    except m.PackageNotFoundError:\n"
        "        v = None\n"
        "    if v is None or not r.specifier.contains(v, prereleases=True):\n"
        "        bad.append(f'{r} (lock: {v})')\n"
        "print(json.dumps(bad))\n"
    )
    result = run(installed, users_directory, str(installed / "bin" / "python"), "-c", check)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_installed_nnsql_is_the_wheel_not_the_checkout_nor_the_users_modules(installed, users_directory):
    probe = (
        "import nnsql, nnsql.export, nnsql.train, nnsql.serve; print(nnsql.__file__, nnsql.source_checkout())"
    )
    result = run(installed, users_directory, str(installed / "bin" / "python"), "-c", probe)
    assert result.returncode == 0, result.stderr
    location, checkout = result.stdout.split()
    assert Path(location).is_relative_to(installed) and checkout == "None"
    help_text = run(installed, users_directory, "nnsql", "--help")
    assert help_text.returncode == 0 and "nnsql export duckdb --model" in help_text.stdout


@pytest.mark.slow
def test_nnsql_export_duckdb_on_the_users_own_model(installed, users_directory, tmp_path_factory):
    """The whole path a new user takes: their model (outside the checkout, input named as Keras names it),
    `nnsql export duckdb`, then SQL on the file; no TensorFlow start-up lines in the output."""
    import duckdb
    import keras
    import numpy as np

    model_dir = tmp_path_factory.mktemp("their_models")
    keras.utils.set_random_seed(3)
    inputs = keras.Input(shape=(6,))
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden))
    model.save(model_dir / "churn.keras")
    db = users_directory / "scores.duckdb"
    args = [
        "--model",
        str(model_dir / "churn.keras"),
        "--db",
        str(db),
        "--name",
        "churn",
        "--sample-rows",
        "50",
    ]
    result = run(installed, users_directory, "nnsql", "export", "duckdb", *args)
    assert result.returncode == 0, result.stderr
    assert "published churn version 1" in result.stdout
    assert not [line for line in result.stderr.splitlines() if any(word in line for word in NOISE)]
    rows = np.random.default_rng(0).random((4, 6), dtype=np.float32)
    with duckdb.connect(str(db), read_only=True) as con:
        scored = [con.execute("SELECT churn.score(?::FLOAT[])", [row.tolist()]).fetchone()[0] for row in rows]
    assert scored == model.predict(rows, verbose=0).argmax(axis=1).tolist()
