"""runs/<id>/run.json is written by the run's supervisor while the user's session reads it (a notebook's
`wait()`, `status`) or writes it (`stop()`). Written in place (truncate, then write), a reader caught it
empty or half-written: a notebook's `sleeper.wait()` raised JSONDecodeError instead of the interrupt it
waited for, once in a full suite. Two real processes here: one merges fields as fast as it can, the
other reads and merges its own; every read parses and no field merged by either is lost."""

from __future__ import annotations

import subprocess
import sys

from nnsql.train.spawn.backend import read_record, write_record
from tests.conftest import REPO

WRITER = """
import sys
from pathlib import Path
from nnsql.train.spawn.backend import write_record
for i in range(int(sys.argv[2])):
    write_record(Path(sys.argv[1]), writer=i, padding="x" * 20000)
"""

ROUNDS = 400


def test_a_record_written_by_another_process_always_reads_whole(tmp_path):
    write_record(tmp_path, state="running")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(ROUNDS)], cwd=REPO)
    try:
        reads = 0
        while writer.poll() is None:
            read_record(tmp_path)  # raised JSONDecodeError on a half-written file
            write_record(tmp_path, reader=reads)
            reads += 1
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == 0
    record = read_record(tmp_path)
    assert record["writer"] == ROUNDS - 1, "the writer's last merge was lost"
    assert record["reader"] == reads - 1, "the reader's last merge was lost"
    assert record["state"] == "running"
