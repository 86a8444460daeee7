"""Benchmark of the test suite itself: the CPU seconds (user + sys) and wall seconds of pytest runs, one
per test file, every process a run starts included: the commands the tests run, and the daemons they start
(PostgreSQL's pg_ctl detaches the server from its parent, so a plain `time` would miss its backends).

This process makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a detached descendant becomes
its child when its parent exits, and is reaped here, so that the rusage of its children counts it. CPU
seconds, not wall time, are what to compare between two versions of the tests on a shared machine: wall
time varies with what else runs, a test's work does not. Each file runs in one process (`-n 0`).

    python -m bench.suite_cpu tests/export/test_targets.py tests/serve/test_grpc.py [-- pytest options]

Prints one line a file ("cpu  wall  path") and writes them to build/suite_cpu.txt, each run's output to
build/suite_cpu/<file>.log.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
RECORD = Path("build") / "suite_cpu.txt"
LOGS = Path("build") / "suite_cpu"


def become_subreaper() -> None:
    """Orphaned descendants (a daemonised server) are re-parented to this process, not to init."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_all() -> None:
    """Wait for every child, adopted ones included, until none is left."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(path: str, options: list[str]) -> tuple[float, float, int]:
    """CPU and wall seconds of pytest on one file, and its exit status."""
    before, started = children_cpu(), time.monotonic()
    command = [sys.executable, "-m", "pytest", path, "-n", "0", "-q", "-p", "no:cacheprovider", *options]
    LOGS.mkdir(parents=True, exist_ok=True)
    with (LOGS / f"{path.replace('/', '_')}.log").open("wb") as log:
        status = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT).wait()
    reap_all()
    return children_cpu() - before, time.monotonic() - started, status


def main(argv: list[str]) -> int:
    paths, options = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    become_subreaper()
    lines = []
    for path in paths:
        cpu, wall, status = measure(path, options)
        lines.append(f"{cpu:8.1f} {wall:8.1f} {path}" + ("" if status == 0 else f"  (exit {status})"))
        print(lines[-1], flush=True)
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text("    cpu     wall path\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
