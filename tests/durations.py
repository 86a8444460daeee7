"""The seconds each test file took in a recorded run, so that the longest files start first.

pytest-xdist's `--dist loadfile --no-loadscope-reorder` (make test) hands whole files to the workers in
collection order. Collected by name (or sent by number of tests, xdist's default), the heaviest files
(training runs under tests/train/, a few long tests each) come last, and one worker is still running
them long after the other ran out of files. tests/conftest.py sorts the files by the seconds recorded in
tests/durations.txt, longest first. A file it does not list (new since the record) goes before them all:
its time is unknown, and a long file started last is the run's tail (a new 66-second hostile test, last,
kept one worker busy after the others ran out), while a short one started first costs nothing.

Refresh the record from a run's `--durations` report:

    .venv/bin/python -m pytest -n auto --dist loadfile --durations=0 --durations-min=1 >build/durations.log
    .venv/bin/python -m tests.durations build/durations.log
"""

from __future__ import annotations

import math
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

RECORD = Path(__file__).with_name("durations.txt")
# One line of pytest's --durations report: "12.34s call     tests/export/test_zoo.py::test_x[duckdb]".
REPORTED = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(?:setup|call|teardown)\s+([^:\s]+\.py)::")


def per_file(report: Iterable[str]) -> dict[str, float]:
    """Seconds per test file, summed over the setup, call and teardown lines of a --durations report."""
    seconds: dict[str, float] = defaultdict(float)
    for line in report:
        reported = REPORTED.match(line)
        if reported:
            seconds[reported[2]] += float(reported[1])
    return dict(seconds)


def read(record: Path | None = None) -> dict[str, float]:
    """The recorded seconds per file ("seconds path" lines; RECORD by default); nothing without a record."""
    record = record or RECORD
    if not record.exists():
        return {}
    pairs = (line.split(maxsplit=1) for line in record.read_text().splitlines() if line.strip())
    return {path.strip(): float(seconds) for seconds, path in pairs}


def write(seconds: dict[str, float], record: Path | None = None) -> None:
    """The record (RECORD by default), longest file first."""
    record = record or RECORD
    ranked = sorted(seconds.items(), key=lambda pair: (-pair[1], pair[0]))
    record.write_text("".join(f"{value:.1f} {path}\n" for path, value in ranked))


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(nodeids: list[str], seconds: dict[str, float]) -> list[int]:
    """The positions of `nodeids`: files without a record first, then the files of most recorded seconds.
    The sort is stable: a file's tests keep their order, and files without a record keep theirs."""
    return sorted(range(len(nodeids)), key=lambda i: -seconds.get(file_of(nodeids[i]), math.inf))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.durations REPORT (pytest's --durations=0 output)", file=sys.stderr)
        return 2
    seconds = per_file(Path(argv[0]).read_text().splitlines())
    if not seconds:
        print(f"error: {argv[0]} holds no --durations lines", file=sys.stderr)
        return 1
    write(seconds)
    print(f"{len(seconds)} files recorded in {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
