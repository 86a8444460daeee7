"""nnsql bench spark_dense: its CPU clock and the literal arithmetic it writes."""

from __future__ import annotations

import os
import subprocess
import sys

from nnsql.bench import spark_dense as bench


def test_the_clock_counts_a_child_process_while_it_runs_and_after_it_ends():
    """Spark's Python workers are children of its JVM: their CPU counts, living or reaped."""
    clock = bench.Clock(os.getpid())
    before = clock.cpu()
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    child = subprocess.Popen([sys.executable, "-c", busy + "time.sleep(30)"])
    try:
        while bench.Clock(child.pid).cpu() < 0.3:
            pass
        assert clock.cpu() - before >= 0.3  # a living child
    finally:
        child.kill()
        child.wait()
    assert clock.cpu() - before >= 0.3  # a reaped one


def test_a_balanced_sum_nests_as_deep_as_log2_of_its_terms():
    text = bench.balanced_sum([f"t{i}" for i in range(784)])
    depth = max(text[: i + 1].count("(") - text[: i + 1].count(")") for i in range(len(text)))
    assert depth == 10 and all(f"t{i} " in text or f"t{i})" in text for i in range(784))
