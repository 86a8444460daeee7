"""Telling a worker that is alive (serving, or busy loading a large model) from one that is stopped
(SIGSTOP, a debugger) or hung, so the master can replace the latter: a worker that does not answer
would otherwise hold back every new version, load and unload (serve/coordination.py waits for every
live worker's acknowledgement) and the requests on its connections.

- The worker's heartbeat: a thread writes `workers/<pid>.json` {"at": CLOCK_MONOTONIC, "ready": …}
  in the run directory every second, from the worker's first moment (before its imports and model
  loads) on. `ready` turns true once it serves.
- The master's watch: a worker whose heartbeat is older than the timeout is unresponsive only if it
  also used no CPU over that time, or is stopped. A thread that holds Python's lock while it works (a
  model being parsed) delays the heartbeat but keeps using CPU: that worker is busy, and is left be.
Like the rest of the master's side, no heavy imports.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .coordination import read_json, write_json

BEAT_SECONDS = 1.0
TICKS = os.sysconf("SC_CLK_TCK")


def beat_path(run_dir: Path, pid: int) -> Path:
    return run_dir / "workers" / f"{pid}.json"


class Heartbeat:
    """The worker's side: a daemon thread that says every second that this process runs. It also
    calls `orphaned` if the master (pid `master`) ends before this worker serves: the worker's own
    check runs only once it serves, and a worker waiting for the master's first commit would wait long."""

    def __init__(self, run_dir: Path, master: int, orphaned: Callable[[], None]) -> None:
        self.path = beat_path(run_dir, os.getpid())
        self.master = master
        self.orphaned = orphaned
        self.ready = False
        self.thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self.thread.start()
        return self

    def serving(self) -> None:
        """Ready: said at once, so the master knows before this worker could die."""
        self.ready = True
        self.write()

    def write(self) -> None:
        with contextlib.suppress(OSError):  # the run directory is gone: the master ended, so will this
            write_json(self.path, {"at": time.monotonic(), "ready": self.ready})

    def _beat(self) -> None:
        while True:
            self.write()
            time.sleep(BEAT_SECONDS)
            if not self.ready and os.getppid() != self.master:
                self.orphaned()


def read_beat(path: Path) -> tuple[float, bool] | None:
    document = read_json(path)
    try:
        return float(document["at"]), bool(document["ready"])
    except (TypeError, KeyError, ValueError):
        return None


def process_state(pid: int) -> tuple[str, float] | None:
    """The process's state letter (R, S, D, T for stopped, …) and its CPU seconds, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class Watch:
    """The master's view of one worker process."""

    pid: int
    path: Path
    since: float = field(default_factory=time.monotonic)  # start: counts as the first sign of life
    beat: float = 0.0
    ready: bool = False
    cpu: float = -1.0
    cpu_moved: float = 0.0
    busy_said: bool = False

    def __post_init__(self) -> None:
        self.beat = self.cpu_moved = self.since

    def look(self) -> None:
        """Read the heartbeat and the CPU time."""
        beat = read_beat(self.path)
        if beat is not None:
            self.beat = max(self.beat, beat[0])
            self.ready = self.ready or beat[1]
        state = process_state(self.pid)
        if state is not None and state[1] != self.cpu:
            self.cpu, self.cpu_moved = state[1], time.monotonic()

    def verdict(self, timeout: float) -> str:
        """'ok', 'busy' (silent, but using CPU) or 'unresponsive' (silent, and stopped or idle)."""
        self.look()
        now = time.monotonic()
        if now - self.beat <= timeout:
            self.busy_said = False
            return "ok"
        state = process_state(self.pid)
        stopped = state is not None and state[0] in "Tt"
        if stopped or now - self.cpu_moved > timeout:
            return "unresponsive"
        return "busy"

    def silent_for(self) -> float:
        return time.monotonic() - self.beat

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)
