"""A separate virtual environment holding onnxruntime 1.15.1, the ONNX Runtime that Oracle 23ai/26ai run
inside the database: `--engine onnx` files are scored in it (tests/export/test_oracle_onnx.py).

build/onnxruntime-1.15.1/ is made from requirements-ort115.txt (exact pins) once and made again only when
that file changes (its hash is stamped), so CI can cache the folder keyed by the file. `make test` runs
`python -m tests.onnxruntime115` before pytest; the test fixture calls `ensure()` too, for pytest alone.
A lock file serialises two runs that would create it at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
VERSION = "1.15.1"
REQUIREMENTS = REPO / "requirements-ort115.txt"
VENV = REPO / "build" / f"onnxruntime-{VERSION}"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".installed"
# Scores one model on saved inputs inside that environment (it holds numpy and onnxruntime only).
RUNNER = """
import json, sys
import numpy as np, onnxruntime
model, inputs, outputs = sys.argv[1:4]
session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
with np.load(inputs) as saved:
    results = session.run(None, {name: saved[name] for name in saved.files})
np.savez(outputs, *results)
print(json.dumps({"version": onnxruntime.__version__, "outputs": [o.name for o in session.get_outputs()]}))
"""


def digest() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def ensure() -> Path:
    """The environment's python, creating the environment if it is missing or out of date."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f"onnxruntime-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if STAMP.exists() and STAMP.read_text() == digest() and PYTHON.exists():
            return PYTHON
        shutil.rmtree(VENV, ignore_errors=True)
        create()
        STAMP.write_text(digest())
    return PYTHON


def create() -> None:
    """The environment from requirements-ort115.txt, wheels only: with uv where `make setup` installed it
    beside this Python (an environment without pip, made and filled in seconds), else with venv and pip."""
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        subprocess.run([str(uv), "venv", "--quiet", "--python", sys.executable, str(VENV)], check=True)
        install = [str(uv), "pip", "install", "--quiet", "--python", str(PYTHON)]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        install = [str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*install, "--only-binary=:all:", "-r", str(REQUIREMENTS)], check=True)


def run(model: Path, feeds: dict[str, np.ndarray]) -> tuple[str, list[np.ndarray]]:
    """onnxruntime 1.15.1's version string and outputs for `feeds` (a subprocess in its environment)."""
    python = ensure()
    with tempfile.TemporaryDirectory() as scratch:
        inputs, outputs = Path(scratch) / "inputs.npz", Path(scratch) / "outputs.npz"
        np.savez(inputs, **feeds)
        done = subprocess.run(
            [str(python), "-c", RUNNER, str(model), str(inputs), str(outputs)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"onnxruntime {VERSION} failed: {done.stderr.strip()[-2000:]}")
        with np.load(outputs) as saved:
            results = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    return json.loads(done.stdout.strip().splitlines()[-1])["version"], results


if __name__ == "__main__":
    print(f"onnxruntime {VERSION}: {ensure()}")
