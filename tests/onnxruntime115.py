"""A separate virtual environment holding onnxruntime 1.15.1, the ONNX Runtime that Oracle 23ai/26ai run
inside the database: `--engine onnx` files are scored in it (tests/export/test_oracle_onnx.py).

build/onnxruntime-1.15.1/ is made from requirements-ort115.txt (exact pins) once and made again only when
that file changes (its hash is stamped), so CI can cache the folder keyed by the file. `make test` runs
`python -m tests.onnxruntime115` before pytest; the test fixture calls `ensure()` too, for pytest alone.
A lock file serialises two runs that would create it at once.
"""

from __future__ import annotations

import atexit
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
# Scores models on saved inputs inside that environment (it holds numpy and onnxruntime only): one request
# a line on stdin (model, inputs and outputs files, tab-separated), one JSON answer a line on stdout. One
# process serves a whole test process: starting Python and importing onnxruntime costs half a second of
# CPU, which one process per scored model paid again for each of the forty models of the zoos.
RUNNER = """
import json, sys
import numpy as np, onnxruntime
for line in sys.stdin:
    model, inputs, outputs = line.rstrip("\\n").split("\\t")
    try:
        session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        with np.load(inputs) as saved:
            results = session.run(None, {name: saved[name] for name in saved.files})
        np.savez(outputs, *results)
        answer = {"version": onnxruntime.__version__, "outputs": [o.name for o in session.get_outputs()]}
    except Exception as error:
        answer = {"error": f"{type(error).__name__}: {error}"}
    print(json.dumps(answer), flush=True)
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


class Runner:
    """The environment's scoring process, started on first use and kept for the test process. Its
    warnings share stdout with its answers (a pipe left unread could fill and block it): a line that is
    not an answer is kept, to name what went wrong if the process ends."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None

    def score(self, model: Path, inputs: Path, outputs: Path) -> dict:
        if self.process is None or self.process.poll() is not None:
            command = [str(ensure()), "-c", RUNNER]
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{model}\t{inputs}\t{outputs}\n")
        self.process.stdin.flush()
        said: list[str] = []
        while not (line := self.process.stdout.readline()).startswith("{"):
            if not line:  # the process ended: its own last words
                self.process.wait()
                raise RuntimeError(f"onnxruntime {VERSION} failed: {''.join(said).strip()[-2000:]}")
            said.append(line)
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"onnxruntime {VERSION} failed: {answer['error']}")
        return answer

    def close(self) -> None:
        """End the process (no process outlives the tests)."""
        if self.process is not None:
            self.process.communicate()  # stdin closed: its loop ends
            self.process = None


RUNNING = Runner()
atexit.register(RUNNING.close)


def run(model: Path, feeds: dict[str, np.ndarray]) -> tuple[str, list[np.ndarray]]:
    """onnxruntime 1.15.1's version string and outputs for `feeds` (scored by the environment's process)."""
    with tempfile.TemporaryDirectory() as scratch:
        inputs, outputs = Path(scratch) / "inputs.npz", Path(scratch) / "outputs.npz"
        np.savez(inputs, **feeds)
        answer = RUNNING.score(model, inputs, outputs)
        with np.load(outputs) as saved:
            results = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    return answer["version"], results


if __name__ == "__main__":
    print(f"onnxruntime {VERSION}: {ensure()}")
