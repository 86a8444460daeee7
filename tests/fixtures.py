"""Helpers every test module shares, safe when pytest-xdist runs the suite in several worker processes.

- `free_port()`: a loopback TCP port no other test of this machine was handed in the last minute.
- `locked(path)`: an exclusive lock on a file, for a folder under build/ that workers create once and reuse.
- `made_once(tmp_path_factory, name, make)`: a folder made by one worker of the run and read by all.
- `wait_for(condition)`: returns as soon as a condition holds, instead of sleeping a fixed time.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# The ports handed out on this machine, shared by every worker and every concurrent run: a port is free
# when probed but taken only when its server binds it, and another process probing in between would be
# handed the same one.
PORTS = Path(tempfile.gettempdir()) / f"nnsql-test-ports-{os.getuid()}.json"
PORT_QUARANTINE_SECONDS = 60.0


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the block; waits for any other holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def probe_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_port() -> int:
    """A loopback port that is free now and was not handed to another test process recently."""
    with locked(PORTS.with_suffix(".lock")):
        now = time.time()
        try:
            handed = {int(k): v for k, v in json.loads(PORTS.read_text()).items()}
        except (OSError, ValueError):
            handed = {}
        handed = {port: at for port, at in handed.items() if now - at < PORT_QUARANTINE_SECONDS}
        port = probe_port()
        while port in handed:
            port = probe_port()
        handed[port] = now
        PORTS.write_text(json.dumps(handed))
        return port


def wait_for(
    condition: Callable[[], object], seconds: float = 30.0, every: float = 0.02, *, what: str = ""
) -> None:
    """Return as soon as `condition()` holds; fail after `seconds` (a bound for a broken server, not a
    pause: a test that waits for something to happen waits for it, not for a fixed time), naming `what`
    was awaited."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, (
            f"still not true after {seconds:g} s: {what or condition.__doc__ or condition}"
        )
        time.sleep(every)


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run shares: the parent of the workers' own base folders under
    pytest-xdist, the base folder itself in a run without workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name` of this run, filled by `make(folder)` in whichever worker asks first; the others
    wait for it and read the same files (a model trained once, not once per worker)."""
    root = run_root(tmp_path_factory) / "made-once"
    folder = root / name
    with locked(root / f"{name}.lock"):
        done = root / f"{name}.made"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a worker that failed half-way left
            folder.mkdir(parents=True)
            make(folder)
            done.touch()
    return folder
